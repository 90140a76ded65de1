"""Scoring-pillar figures: meta-evaluation CIs, per-timestep profiles, PMI, token heat maps, positional and
directional bias, the profile analyses (quality tiers, learned timestep weights)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report.figures.base import (
    _figure,
    _groups,
    _legend,
    _need,
    _num,
    _title,
    colors_for,
)


def is_diffscore_row(df: pd.DataFrame) -> pd.Series:
    """The rows of a meta-evaluation ``results`` table that are DiffScore (zero-shot or fine-tuned), chosen by
    their role (the ``family`` column: ``diffscore`` / ``ft``), else by label."""
    if "family" in df.columns:
        return df["family"].astype(str).str.lower().isin(("diffscore", "ft"))
    return df["label"].astype(str).str.lower().str.startswith("diffscore")


def meta_eval_ci(results: pd.DataFrame, *, max_metrics: int = 12) -> Any:
    """Primary-protocol correlation of every metric with its bootstrap CI, one panel per benchmark dimension
    (``results`` table of a ``meta-eval`` run). Each panel keeps every DiffScore row (red) and fills up to
    ``max_metrics`` rows with the other metrics of highest correlation; labels are shown in full."""
    df = _need(results, ["benchmark", "dimension", "label", "value"], "meta-evaluation CI plot")
    if "primary" in df.columns:
        df = df[df["primary"].astype(bool)]
    panels = _groups(df, ["benchmark", "dimension_tag" if "dimension_tag" in df.columns else "dimension"])
    chosen = []
    for key, g in panels:
        g = g.drop_duplicates("label")
        ds = is_diffscore_row(g)
        others = (
            g[~ds].assign(_v=_num(g.loc[~ds, "value"])).sort_values("_v", ascending=False, na_position="last")
        )
        keep = pd.concat([g[ds], others.drop(columns="_v").head(max(0, max_metrics - int(ds.sum())))])
        chosen.append((key, keep, len(g)))
    n_rows = max((len(k) for _, k, _ in chosen), default=1)
    longest = max((len(str(lab)) for _, k, _ in chosen for lab in k["label"]), default=10)
    fig, axes = _figure(
        len(chosen), ncols=min(len(chosen), 2), w=2.6 + 0.055 * longest, h=0.22 * n_rows + 1.0
    )
    for ax, (key, g, total) in zip(axes, chosen):
        y = np.arange(len(g))[::-1]
        v = _num(g["value"])
        ds = is_diffscore_row(g).to_numpy()
        colors = np.where(ds, "#d62728", "#1f77b4")
        if "ci_lo" in g.columns and "ci_hi" in g.columns:
            lo, hi = _num(g["ci_lo"]), _num(g["ci_hi"])
            ok = np.isfinite(lo) & np.isfinite(hi)
            ax.hlines(y[ok], lo[ok], hi[ok], color="#999999", linewidth=1.2)
        ax.scatter(v, y, c=list(colors), s=14, zorder=3)
        ax.set_yticks(y)
        ax.set_yticklabels([str(s) for s in g["label"]], fontsize=6.5)
        for tick, red in zip(ax.get_yticklabels(), ds):
            if red:
                tick.set_color("#d62728")
        proto = str(g["protocol_label"].iat[0]) if "protocol_label" in g.columns else "correlation"
        ax.set_xlabel(proto, fontsize=7)
        more = f" ({len(g)} of {total} metrics)" if total > len(g) else ""
        ax.set_title(_title(key) + more, fontsize=8)
    return fig


def profile_correlation(df: pd.DataFrame) -> Any:
    """Per-timestep correlation profiles: correlation of the per-rate score S(t) with the human judgements, one
    line per quality dimension, one panel per benchmark (table ``profile_correlation``)."""
    df = _need(df, ["benchmark", "dimension", "rate", "value"], "per-timestep correlation profile")
    panels = _groups(
        df, ["benchmark"] + (["metric"] if "metric" in df.columns and df["metric"].nunique() > 1 else [])
    )
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        cmap = colors_for(g["dimension"])
        for dim, h in g.groupby("dimension", sort=False):
            h = h.sort_values("rate")
            ax.plot(_num(h["rate"]), _num(h["value"]), marker="o", ms=3, color=cmap[dim], label=str(dim))
            if "ci_lo" in h.columns and "ci_hi" in h.columns:
                ax.fill_between(
                    _num(h["rate"]), _num(h["ci_lo"]), _num(h["ci_hi"]), color=cmap[dim], alpha=0.12
                )
        ax.axhline(0, color="#555555", linewidth=0.6)
        ax.set_xlabel("masking rate t", fontsize=8)
        proto = str(g["protocol"].iat[0]) if "protocol" in g.columns else "correlation"
        ax.set_ylabel(f"correlation of S(t) ({proto})", fontsize=7)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def pmi_scatter(items: pd.DataFrame) -> Any:
    """The PMI decomposition: conditional against marginal score per item, coloured by condition (original,
    fluent-irrelevant, disfluent-relevant), one panel per model; the dashed line is PMI = 0."""
    df = _need(items, ["model", "condition", "cond", "mar"], "PMI scatter")
    panels = _groups(df, ["model"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        cmap = colors_for(g["condition"])
        for cond, h in g.groupby("condition", sort=False):
            ax.scatter(_num(h["mar"]), _num(h["cond"]), s=12, alpha=0.8, color=cmap[cond], label=str(cond))
        both = np.concatenate([_num(g["mar"]), _num(g["cond"])])
        both = both[np.isfinite(both)]
        if both.size:
            lo, hi = float(both.min()), float(both.max())
            ax.plot([lo, hi], [lo, hi], "--", color="#555555", linewidth=0.8)
        ax.set_xlabel("marginal (mean log p)", fontsize=8)
        ax.set_ylabel("conditional (mean log p)", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def plot_token_heatmap(
    df: pd.DataFrame,
    item: int | str = 0,
    *,
    direction: str | None = None,
    path: str | Path | None = None,
    ax=None,
    max_tokens: int = 80,
):
    """Heat map of one item of a scored frame (:class:`~dlmeval.scoring.DiffScorer` with ``token_scores=True``): tokens on the x axis, masking rates on the y axis, colour = mean log p of the token
    over the masks at that rate that hid it (white where none did). ``item`` is a row position or an item id.
    Returns the matplotlib Figure (saved to ``path`` when given)."""
    from matplotlib.figure import Figure

    from dlmeval.scoring.diagnostics import _token_suffixes

    sfx = _token_suffixes(df)
    if not sfx:
        raise InputError("no token scores in this frame; score with token_scores=True")
    s = ""
    if direction is not None:
        s = f"_{direction}"
        if s not in sfx:
            raise InputError(
                f"no token scores for direction {direction!r}; have {[x.lstrip('_') for x in sfx]}"
            )
    elif "" not in sfx:
        s = sfx[0]
    if isinstance(item, str):
        hits = np.flatnonzero(df["item_id"].to_numpy() == item)
        if not len(hits):
            raise InputError(f"no item {item!r} in the frame")
        row = df.iloc[int(hits[0])]
    else:
        row = df.iloc[int(item)]
    toks = list(row[f"tokens{s}"])[:max_tokens]
    mat = np.asarray(row[f"token_rate_logprob{s}"], dtype=float)
    if mat.size == 0:
        mat = np.asarray([row[f"token_logprob{s}"]], dtype=float)
        ylabels = ["all"]
    else:
        ylabels = [f"{t:.2g}" for t in df.attrs.get("rates", range(1, mat.shape[0] + 1))]
    mat = mat[:, : len(toks)]
    fig = ax.figure if ax is not None else Figure(figsize=(max(4.0, 0.35 * len(toks) + 1.5), 3.2))
    ax = ax or fig.add_subplot(1, 1, 1)
    im = ax.imshow(np.ma.masked_invalid(mat), aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xticks(range(len(toks)))
    ax.set_xticklabels(toks, rotation=90, fontsize=7)
    ax.set_yticks(range(len(ylabels)))
    ax.set_yticklabels(ylabels, fontsize=7)
    ax.set_ylabel("masking rate t")
    ax.set_title(f"{row['item_id']} ({row['config']}{s}): score {row['score']:.3f}", fontsize=9)
    fig.colorbar(im, ax=ax, label="mean log p")
    fig.tight_layout()
    if path is not None:
        fig.savefig(str(path), dpi=120)
    return fig


def token_heatmap(
    record: dict, *, rates: Sequence[float] | None = None, item_id: str = "", direction: str | None = None
):
    """Token x masking-rate heat map of one stored DiffScore item (a result scored with ``token_scores=True``);
    drawn by :func:`plot_token_heatmap`."""
    keys = [k for k in record if k.startswith("tokens")]
    if not keys:
        raise InputError("token heat map: the item has no token scores (score with token_scores=True)")
    row = {k: v for k, v in record.items()}
    row.setdefault("item_id", item_id or "item")
    row.setdefault("config", row.get("config", ""))
    row.setdefault("score", float("nan"))
    frame = pd.DataFrame([row])
    if rates:
        frame.attrs["rates"] = list(rates)
    return plot_token_heatmap(frame, 0, direction=direction)


def positional_curves(df: pd.DataFrame) -> Any:
    """Positional bias: mean token score by position (band: +- 1 SD across texts) and the SD by position, one
    line per scorer (DiffScore against AR)."""
    df = _need(df, ["model", "position", "mean"], "positional-bias curves")
    has_std = "std" in df.columns
    fig, axes = _figure(2 if has_std else 1)
    cmap = colors_for(df["model"])
    for model, g in df.groupby("model", sort=False):
        g = g.sort_values("position")
        x, m = _num(g["position"]), _num(g["mean"])
        axes[0].plot(x, m, color=cmap[model], label=str(model), linewidth=1.2)
        if has_std:
            s = _num(g["std"])
            axes[0].fill_between(x, m - s, m + s, color=cmap[model], alpha=0.12)
            axes[1].plot(x, s, color=cmap[model], label=str(model), linewidth=1.2)
    axes[0].set_xlabel("token position in the candidate", fontsize=8)
    axes[0].set_ylabel("mean token log p", fontsize=8)
    axes[0].set_title("mean score by position", fontsize=8)
    _legend(axes[0])
    if has_std:
        axes[1].set_xlabel("token position in the candidate", fontsize=8)
        axes[1].set_ylabel("SD across texts", fontsize=8)
        axes[1].set_title("spread by position", fontsize=8)
    return fig


def directional_scatter(pairs: pd.DataFrame) -> Any:
    """Directional consistency: forward against reverse score per sentence pair, one panel per scorer."""
    scorers = [
        c[: -len("_forward")]
        for c in pairs.columns
        if str(c).endswith("_forward") and f"{c[:-8]}_reverse" in pairs.columns
    ]
    if not scorers:
        raise InputError("directional scatter: the table has no <scorer>_forward / <scorer>_reverse columns")
    fig, axes = _figure(len(scorers))
    for ax, s in zip(axes, scorers):
        f, r = _num(pairs[f"{s}_forward"]), _num(pairs[f"{s}_reverse"])
        ax.scatter(f, r, s=10, alpha=0.7, color=colors_for([s])[s])
        both = np.concatenate([f, r])
        both = both[np.isfinite(both)]
        if both.size:
            ax.plot([both.min(), both.max()], [both.min(), both.max()], "--", color="#555555", linewidth=0.8)
        ax.set_xlabel("forward sentence (mean log p)", fontsize=8)
        ax.set_ylabel("reversed sentence (mean log p)", fontsize=8)
        ax.set_title({"dlm": "DiffScore", "ar": "AR"}.get(s, s), fontsize=8)
    return fig


def tier_curves(df: pd.DataFrame) -> Any:
    """Mean S(t) per human-score tier against the masking rate (band: +- 1 SEM), one panel per benchmark and
    configuration (table ``tier_profiles``)."""
    df = _need(df, ["config", "tier", "rate", "mean"], "quality-tier profile curves")
    panels = _groups(df, ["benchmark", "config"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        label_col = "tier_label" if "tier_label" in g.columns else "tier"
        cmap = colors_for(g[label_col].drop_duplicates())
        for lab, h in g.sort_values("tier").groupby(label_col, sort=False):
            h = h.sort_values("rate")
            x, y = _num(h["rate"]), _num(h["mean"])
            ax.plot(x, y, marker="o", ms=3, color=cmap[lab], label=str(lab))
            if "sem" in h.columns:
                s = np.nan_to_num(_num(h["sem"]))
                ax.fill_between(x, y - s, y + s, color=cmap[lab], alpha=0.15)
        ax.set_xlabel("masking rate t", fontsize=8)
        ax.set_ylabel("mean S(t) (mean log p)", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig


def weight_bars(df: pd.DataFrame) -> Any:
    """Learned timestep weights (mean over folds, error bar: SD), one panel per benchmark, one bar group per
    dimension (table ``learned_weights_by_rate``)."""
    df = _need(df, ["dimension_tag", "rate", "weight_mean"], "learned timestep weights")
    panels = _groups(df, ["benchmark"])
    fig, axes = _figure(len(panels))
    for ax, (key, g) in zip(axes, panels):
        dims = list(dict.fromkeys(g["dimension_tag"]))
        cmap = colors_for(dims)
        rates = sorted(set(_num(g["rate"])))
        width = 0.8 / max(1, len(dims))
        pos = np.arange(len(rates))
        for j, d in enumerate(dims):
            h = g[g["dimension_tag"] == d].set_index("rate").reindex(rates)
            err = np.nan_to_num(_num(h["weight_sd"])) if "weight_sd" in h.columns else None
            ax.bar(pos + j * width, _num(h["weight_mean"]), width, yerr=err, color=cmap[d], label=str(d))
        ax.set_xticks(pos + 0.4 - width / 2, [f"{t:.2g}" for t in rates], fontsize=7)
        ax.set_xlabel("masking rate t", fontsize=8)
        ax.set_ylabel("share of the weight", fontsize=8)
        ax.set_title(_title(key), fontsize=8)
        _legend(ax)
    return fig
