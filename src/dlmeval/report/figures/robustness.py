"""Robustness-pillar figures: accuracy and RDI against perturbation rate, reliability diagrams, IPM, D-GCG,
linear probes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report.figures.base import (
    MAX_PANELS,
    _figure,
    _groups,
    _legend,
    _need,
    _num,
    _panel_keys,
    _title,
    colors_for,
    grouped_bars,
    legend_outside,
)


def _type_col(df: pd.DataFrame) -> str:
    for c in ("type", "type_key", "perturbation"):
        if c in df.columns:
            return c
    raise InputError("the table has no perturbation type column (type / type_key)")


def accuracy_vs_rate(conditions: pd.DataFrame, clean: pd.DataFrame | None = None) -> Any:
    """Accuracy against perturbation rate, one panel per perturbation type, one line per model (and task);
    rate 0 is the clean accuracy when ``clean`` (model, clean_accuracy) is given. Merge task / mode into the model
    label first when the table mixes them."""
    df = _need(conditions, ["model", "rate", "accuracy"], "accuracy-vs-rate curves")
    tcol = _type_col(df)
    types = list(dict.fromkeys(df[tcol]))[:MAX_PANELS]
    fig, axes = _figure(len(types), sharey=True, w=3.0, h=2.4)
    cmap = colors_for(df["model"])
    for ax, t in zip(axes, types):
        sub = df[df[tcol] == t]
        for model, h in sub.groupby("model", sort=False):
            h = h.groupby("rate", as_index=False)["accuracy"].mean().sort_values("rate")
            x, y = list(_num(h["rate"])), list(_num(h["accuracy"]))
            if clean is not None and {"model", "clean_accuracy"} <= set(clean.columns):
                c = clean[clean["model"] == model]
                if len(c):
                    x, y = [0.0, *x], [float(c["clean_accuracy"].iat[0]), *y]
            ax.plot(x, y, marker="o", ms=3, color=cmap[model], label=str(model))
        ax.set_title(str(t), fontsize=8)
        ax.set_xlabel("perturbation rate r", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
    legend_outside(fig, axes)
    return fig


def rdi_heatmap(conditions: pd.DataFrame) -> Any:
    """RDI per perturbation type (rows) and rate (columns), one panel per model (and task); 0 = no degradation,
    red = accuracy lost, blue = accuracy gained."""
    df = _need(conditions, ["model", "rate", "rdi"], "RDI heat map")
    tcol = _type_col(df)
    panels = _groups(df, _panel_keys(df))
    rates = sorted({round(float(r), 6) for r in _num(df["rate"]) if np.isfinite(r)})
    types = list(dict.fromkeys(df[tcol]))
    fig, axes = _figure(len(panels), w=0.55 * len(rates) + 2.4, h=0.28 * len(types) + 1.2)
    v = _num(df["rdi"])
    lim = max(0.05, float(np.nanmax(np.abs(v))) if np.isfinite(v).any() else 1.0)
    im = None
    for ax, (key, g) in zip(axes, panels):
        mat = np.full((len(types), len(rates)), np.nan)
        for r in g.itertuples(index=False):
            d = r._asdict()
            i = types.index(d[tcol])
            j = rates.index(round(float(d["rate"]), 6))
            mat[i, j] = float(d["rdi"])
        im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        for i in range(len(types)):
            for j in range(len(rates)):
                if np.isfinite(mat[i, j]):
                    ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=6, color="black")
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{r:g}" for r in rates], fontsize=7)
        ax.set_yticks(range(len(types)))
        ax.set_yticklabels([str(t) for t in types], fontsize=7)
        ax.set_xlabel("rate r", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        ax.grid(False)
    if im is not None:
        fig.colorbar(im, ax=axes, label="RDI", shrink=0.8)
    return fig


def reliability_diagram(bins: pd.DataFrame) -> Any:
    """Reliability diagrams: accuracy against mean confidence per bin (marker area ~ items), one panel per model
    (and task), one line per condition; the diagonal is perfect calibration."""
    df = _need(bins, ["model", "confidence", "accuracy"], "reliability diagram")
    panels = _groups(df, _panel_keys(df))
    fig, axes = _figure(len(panels), w=3.0, h=2.9)
    for ax, (key, g) in zip(axes, panels):
        cond = g["condition"] if "condition" in g.columns else pd.Series(["all"] * len(g), index=g.index)
        cmap = colors_for(cond)
        for c, h in g.groupby(cond, sort=False):
            h = h[np.isfinite(_num(h["confidence"])) & np.isfinite(_num(h["accuracy"]))]
            if "count" in h.columns:
                h = h[_num(h["count"]) > 0]
            h = h.sort_values("confidence")
            size = (
                8 + 60 * _num(h["count"]) / max(float(np.nansum(_num(h["count"]))), 1)
                if "count" in h.columns
                else 12
            )
            ax.plot(_num(h["confidence"]), _num(h["accuracy"]), "-", color=cmap[c], linewidth=1, alpha=0.8)
            ax.scatter(
                _num(h["confidence"]), _num(h["accuracy"]), s=size, color=cmap[c], label=str(c), zorder=3
            )
        ax.plot([0, 1], [0, 1], "--", color="#555555", linewidth=0.8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def ipm_comparison(ipm: pd.DataFrame, *, baseline: str | None = None) -> Any:
    """Input prompt masking: accuracy of every IPM variant per condition (bars), the noisy baseline as a dashed
    line (variant named ``noisy`` / ``none`` / ``baseline``, or ``baseline``)."""
    df = _need(ipm, ["variant", "accuracy"], "IPM comparison")
    cond_col = "condition" if "condition" in df.columns else None
    panels = _groups(df, _panel_keys(df))
    fig, axes = _figure(len(panels), w=4.2, h=2.8)
    base_names = [baseline] if baseline else ["noisy", "none", "baseline", "noisy baseline"]
    for ax, (key, g) in zip(axes, panels):
        conds = list(dict.fromkeys(g[cond_col])) if cond_col else ["all"]
        is_base = g["variant"].astype(str).str.lower().isin([b.lower() for b in base_names])
        variants = list(dict.fromkeys(g.loc[~is_base, "variant"]))
        cmap = colors_for(variants)
        width = 0.8 / max(len(variants), 1)
        for vi, var in enumerate(variants):
            ys = []
            for c in conds:
                h = g[(g["variant"] == var) & ((g[cond_col] == c) if cond_col else True)]
                ys.append(float(_num(h["accuracy"]).mean()) if len(h) else np.nan)
            ax.bar(
                np.arange(len(conds)) + (vi - (len(variants) - 1) / 2) * width,
                ys,
                width,
                color=cmap[var],
                label=str(var),
            )
        for ci, c in enumerate(conds):
            h = g[is_base & ((g[cond_col] == c) if cond_col else True)]
            if len(h):
                ax.hlines(
                    float(_num(h["accuracy"]).mean()),
                    ci - 0.45,
                    ci + 0.45,
                    colors="#111111",
                    linestyles="--",
                    linewidth=1.0,
                    label="noisy baseline" if ci == 0 else None,
                )
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels([str(c) for c in conds], fontsize=7, rotation=20)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def dgcg_trajectories(df: pd.DataFrame) -> Any:
    """D-GCG / GCG loss across optimization steps: mean over items (band: +- 1 SD), one line per model, one
    panel per suffix length."""
    df = _need(df, ["model", "step", "loss"], "D-GCG loss trajectories")
    panels = _groups(df, ["suffix_length"] if "suffix_length" in df.columns else [])
    fig, axes = _figure(len(panels))
    cmap = colors_for(df["model"])
    for ax, (key, g) in zip(axes, panels):
        for model, h in g.groupby("model", sort=False):
            agg = h.groupby("step")["loss"].agg(["mean", "std"]).reset_index().sort_values("step")
            x, m, s = _num(agg["step"]), _num(agg["mean"]), _num(agg["std"])
            ax.plot(x, m, color=cmap[model], label=str(model), linewidth=1.2)
            if np.isfinite(s).any():
                ax.fill_between(x, m - np.nan_to_num(s), m + np.nan_to_num(s), color=cmap[model], alpha=0.12)
        ax.set_xlabel("optimization step", fontsize=8)
        ax.set_ylabel("target loss", fontsize=8)
        ax.set_title(f"suffix length {key[0]}" if key else "", fontsize=8)
        _legend(ax)
    return fig


def _seq(v: Any) -> list | None:
    """A per-layer sequence stored as a list or as a space-separated string (the robust ``probes`` table)."""
    if isinstance(v, list | tuple | np.ndarray):
        return list(v)
    if isinstance(v, str) and v.strip():
        try:
            return [float(x) for x in v.split()]
        except ValueError:
            return None
    return None


def probe_long(probes: pd.DataFrame) -> pd.DataFrame:
    """Long (model, task, condition, layer, accuracy, auroc) rows from a probe table: one row per layer already,
    or one row per (model, condition) with per-layer ``layers`` and ``accuracy`` / ``accuracy_by_layer`` (lists,
    or space-separated strings as the robustness protocol stores them)."""
    if probes is None or "layer" in probes.columns:
        return probes
    rows = []
    for r in probes.to_dict("records"):
        layers = _seq(r.get("layers"))
        acc = _seq(r.get("accuracy_by_layer", r.get("accuracy")))
        if layers is None or acc is None or len(layers) != len(acc):
            continue
        auc = _seq(r.get("auroc_by_layer", r.get("auroc"))) or [np.nan] * len(layers)
        if len(auc) != len(layers):
            auc = [np.nan] * len(layers)
        for la, a, u in zip(layers, acc, auc):
            rec = {"model": r.get("model", "?"), "condition": r.get("condition", r.get("type", "all"))}
            if "task" in r:
                rec["task"] = r["task"]
            rec.update({"layer": int(la), "accuracy": float(a), "auroc": float(u)})
            rows.append(rec)
    cols = [
        "model",
        *(["task"] if "task" in probes.columns else []),
        "condition",
        "layer",
        "accuracy",
        "auroc",
    ]
    return pd.DataFrame(rows, columns=cols)


def probe_layers(df: pd.DataFrame) -> Any:
    """Linear-probe accuracy (clean vs perturbed hidden states) by layer, one line per model, one panel per
    condition."""
    df = _need(probe_long(df), ["model", "layer", "accuracy"], "probe accuracy by layer")
    panels = _groups(df, _panel_keys(df, base=("condition",), extra=("task",)))
    fig, axes = _figure(len(panels), sharey=True)
    cmap = colors_for(df["model"])
    for ax, (key, g) in zip(axes, panels):
        for model, h in g.groupby("model", sort=False):
            h = h.groupby("layer", as_index=False)["accuracy"].mean().sort_values("layer")
            ax.plot(
                _num(h["layer"]), _num(h["accuracy"]), marker="o", ms=3, color=cmap[model], label=str(model)
            )
        ax.axhline(0.5, color="#555555", linewidth=0.7, linestyle=":")
        ax.set_xlabel("layer (0 = embeddings)", fontsize=8)
        ax.set_ylabel("probe accuracy", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


# ------------------------------------------------------------------------------------ the paper's summary figures
def rdi_advantage(comparison: pd.DataFrame) -> Any:
    """Mean RDI advantage (AR - DLM) per task, one bar per model pair, with the paired bootstrap CI (robustness
    paper Fig. 2; table ``comparison``). A value the chance guard blanked (``n/m``) is a zero bar."""
    df = _need(comparison, ["task", "pair", "mean_adv", "ci_lo", "ci_hi"], "RDI advantage")
    fig, axes = _figure(1, w=5.6, h=3.4)
    ax = axes[0]
    grouped_bars(ax, df, x="task", group="pair", value="mean_adv", lo="ci_lo", hi="ci_hi", nan_as_zero=True)
    ax.axhline(0, color="#555555", linewidth=0.8)
    ax.set_ylabel("mean RDI advantage (AR - DLM)", fontsize=8)
    ax.set_title("RDI advantage over the conditions (n/m bars are 0)", fontsize=8)
    _legend(ax)
    return fig


def clean_accuracy_ece(summary: pd.DataFrame, clean_calibration: pd.DataFrame) -> Any:
    """Clean accuracy (``summary.acc_clean``) and clean ECE (``calibration`` rows of the clean split) per task, one
    bar per model (robustness paper Fig. 4)."""
    s = _need(summary, ["task", "model", "acc_clean"], "clean accuracy")
    c = _need(clean_calibration, ["task", "model", "ece"], "clean ECE")
    fig, axes = _figure(2, ncols=2, w=3.8, h=3.0)
    for ax, (frame, col, label) in zip(axes, ((s, "acc_clean", "clean accuracy"), (c, "ece", "clean ECE"))):
        grouped_bars(ax, frame, x="task", group="model", value=col, colors=colors_for(s["model"]))
        ax.set_ylabel(label, fontsize=8)
    legend_outside(fig, axes)
    return fig


def calibration_vs_rate(calibration: pd.DataFrame) -> Any:
    """ECE and selective AUROC against perturbation rate (mean over perturbation types), one line per model; rate
    0 is the clean split (robustness paper Fig. 5; ``calibration`` rows of one task, splits ``clean`` and
    ``<type>@<rate>``)."""
    df = _need(calibration, ["model", "split", "ece", "auroc"], "calibration vs rate")
    per = df[~df["split"].isin(["clean", "noisy"])].copy()
    if per.empty:
        raise InputError("calibration vs rate: no per-condition split (<type>@<rate>) in the table")
    per["rate"] = [float(str(s).rsplit("@", 1)[1]) for s in per["split"]]
    fig, axes = _figure(2, ncols=2, w=3.8, h=2.8)
    cmap = colors_for(df["model"])
    for model, gm in df.groupby("model", sort=False):
        clean = gm[gm["split"] == "clean"]
        pm = per[per["model"] == model].groupby("rate")[["ece", "auroc"]].mean().reset_index()
        for ax, col in zip(axes, ("ece", "auroc")):
            x = [0.0, *_num(pm["rate"])]
            y = [float(_num(clean[col])[0]) if len(clean) else np.nan, *_num(pm[col])]
            ax.plot(x, y, marker="o", ms=3, color=cmap[model], label=str(model))
            ax.set_xlabel("rate r (mean over types)", fontsize=8)
            ax.set_ylabel(col.upper(), fontsize=8)
    legend_outside(fig, axes)
    return fig


def dgcg_summary(dgcg: pd.DataFrame) -> Any:
    """D-GCG of one task in four panels (robustness paper Fig. 6A-D): degradation against suffix length per model
    (the dotted line: 0.2), gradient norm at the longest suffix, transfer of DLM suffixes to the AR models, and the
    loss trajectory at the longest suffix (table ``dgcg``)."""
    g = _need(dgcg, ["model", "suffix_length", "degradation", "mean_grad_norm", "loss_trajectory"], "D-GCG")
    fig, axes = _figure(4, ncols=4, w=3.1, h=2.8)
    models = list(dict.fromkeys(g["model"]))
    cmap = colors_for(models)
    for i, (model, gm) in enumerate(g.groupby("model", sort=False)):
        first = gm.drop_duplicates("suffix_length").sort_values("suffix_length")
        axes[0].plot(
            _num(first["suffix_length"]),
            _num(first["degradation"]),
            marker="o",
            color=cmap[model],
            label=model,
        )
        axes[1].bar(i, float(_num(first["mean_grad_norm"])[-1]), color=cmap[model])
        if "transfer_from" in gm:
            for src, tr in gm[gm["transfer_from"].notna()].groupby("transfer_from", sort=False):
                axes[2].plot(
                    _num(tr["suffix_length"]),
                    _num(tr["transfer_degradation"]),
                    marker="s",
                    color=cmap[model],
                    label=f"{src} -> {model}",
                )
        traj = _seq(first["loss_trajectory"].iloc[-1]) or []
        axes[3].plot(range(1, len(traj) + 1), traj, color=cmap[model], label=model)
    axes[0].axhline(0.2, color="#555555", linestyle=":", linewidth=0.8)
    axes[0].set(xlabel="suffix length", ylabel="degradation", title="A: degradation vs length")
    axes[1].set(title="B: gradient norm (longest suffix)", xticks=range(len(models)))
    axes[1].set_xticklabels(models, rotation=20, fontsize=6)
    axes[2].set(xlabel="suffix length", ylabel="degradation", title="C: transfer DLM -> AR")
    axes[3].set(xlabel="step", ylabel="loss", title="D: loss trajectory (longest suffix)")
    for ax in axes:
        ax.title.set_fontsize(8)
    legend_outside(fig, [axes[0], axes[2]])
    return fig


def mechanism(trajectory: pd.DataFrame | None, attention: pd.DataFrame | None) -> Any:
    """The mechanism (robustness paper Fig. 8A-B): mean DLM trajectory divergence per model and task, and the AR
    attention ratio (corrupted / uniform; the dotted line: 1) per model and condition. Either table may be
    absent."""
    have_t = trajectory is not None and len(trajectory) > 0
    have_a = attention is not None and len(attention) > 0
    if not (have_t or have_a):
        raise InputError("mechanism figure: neither a trajectory nor an attention table")
    fig, axes = _figure(2, ncols=2, w=4.0, h=3.0)
    if have_t:
        t = _need(trajectory, ["model", "task", "id_divergence"], "trajectory divergence")
        m = t.groupby(["model", "task"], sort=False)["id_divergence"].mean().reset_index()
        grouped_bars(axes[0], m, x="model", group="task", value="id_divergence")
        axes[0].set(ylabel="ID divergence", title="A: DLM trajectory divergence by task")
        _legend(axes[0])
    if have_a:
        a = _need(attention, ["model", "condition", "mean_ratio"], "attention ratio")
        m = a.groupby(["model", "condition"], sort=False)["mean_ratio"].mean().reset_index()
        grouped_bars(axes[1], m, x="model", group="condition", value="mean_ratio")
        axes[1].axhline(1.0, color="#555555", linestyle=":", linewidth=0.8)
        axes[1].set(ylabel="attention on corrupted / uniform", title="B: AR attention re-routing")
        _legend(axes[1])
    for ax in axes:
        ax.title.set_fontsize(8)
    return fig


def pair_summary(comparison: pd.DataFrame, clean_calibration: pd.DataFrame | None = None) -> Any:
    """One DLM / AR pair (robustness paper Figs. 15 / 16): per task, the mean RDI advantage, the DLM win rate over
    the conditions (dotted: 0.5), and the calibration gap DLM ECE - AR ECE on the clean split (rows of one pair
    of the ``comparison`` table; ``clean_calibration``: the clean ``calibration`` rows). ``n/m`` is a zero bar."""
    g = _need(comparison, ["task", "dlm", "ar", "mean_adv", "adv_rate"], "pair summary")
    fig, axes = _figure(3, ncols=3, w=3.2, h=2.8)
    tasks = [str(t) for t in g["task"]]
    pos = np.arange(len(tasks))
    gap = []
    for r in g.to_dict("records"):
        e = pd.Series(dtype=float)
        if clean_calibration is not None and len(clean_calibration):
            e = clean_calibration[clean_calibration["task"] == r["task"]].set_index("model")["ece"]
        gap.append(float(e.get(r["dlm"], np.nan) - e.get(r["ar"], np.nan)))
    panels = (
        (_num(g["mean_adv"]), "#1f77b4", "RDI advantage (AR - DLM)"),
        (_num(g["adv_rate"]), "#ff7f0e", "DLM win rate over conditions"),
        (np.asarray(gap, dtype=float), "#d62728", "calibration gap (DLM ECE - AR ECE)"),
    )
    for ax, (y, color, title) in zip(axes, panels):
        ax.bar(pos, np.nan_to_num(y), color=color)
        ax.set_xticks(pos, tasks, fontsize=7)
        ax.set_title(title, fontsize=8)
    axes[1].axhline(0.5, color="#555555", linestyle=":", linewidth=0.8)
    axes[1].set_ylim(0, 1)
    return fig
