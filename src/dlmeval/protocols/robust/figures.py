"""The paper's figures, each a pure function of the tables (so of the stored records), drawn into the output
directory as PNG. A figure whose table is absent (or empty) is skipped; :func:`draw_figures` returns what it drew.

=============================  ===============================================  =============================
file                           what                                             the paper
=============================  ===============================================  =============================
``rdi_advantage.png``          mean RDI advantage (AR - DLM) per task and pair,  Fig. 2
                               with the paired bootstrap CI
``accuracy_vs_rate_<task>``    accuracy vs perturbation rate, one panel per       Figs. 3, 9, 10, 13
                               type, one line per model
``rdi_heatmap_<task>``         RDI per model (rows) and condition (columns)      Figs. 11, 12, 14
``clean_accuracy_ece.png``     clean accuracy and clean ECE per task and model   Fig. 4
``ece_auroc_vs_rate_<task>``   ECE and AUROC vs perturbation rate per model      Fig. 5
``reliability_<task>_<mode>``  reliability diagrams, clean and noisy             (App. I)
``dgcg_<task>.png``            degradation vs suffix length, gradient norm,      Fig. 6A-D
                               transfer, loss trajectory
``probes_by_layer.png``        linear-probe accuracy by layer                    Fig. 7
``mechanism.png``              DLM trajectory divergence by task, AR attention   Fig. 8A-B
                               ratio by condition
``pair_summary_<n>.png``       per pair: RDI advantage, win rate, calibration    Figs. 15, 16
                               gap (DLM ECE - AR ECE) per task
``ipm_variants.png``           IPM variant accuracy against the noisy baseline   Fig. 17
=============================  ===============================================  =============================
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(df) -> bool:
    return df is not None and not df.empty


def _save(fig, path: Path, out: list[Path]) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    out.append(path)


def _gen_first(df: pd.DataFrame) -> pd.DataFrame:
    """The generation rows where a task has them (the paper's numbers), else the likelihood rows."""
    keep = []
    for _, g in df.groupby("task", sort=False):
        keep.append(g[g["mode"] == "generation"] if (g["mode"] == "generation").any() else g)
    return pd.concat(keep) if keep else df


def fig_rdi_advantage(t, d: Path, out: list[Path]) -> None:
    comp = t.get("comparison")
    if not _ok(comp) or "mean_adv" not in comp:
        return
    c = _gen_first(comp)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    tasks = list(dict.fromkeys(c["task"]))
    pairs = list(dict.fromkeys(c["pair"]))
    w = 0.8 / max(len(pairs), 1)
    for j, p in enumerate(pairs):
        g = c[c["pair"] == p].set_index("task").reindex(tasks)
        x = np.arange(len(tasks)) + j * w
        y = g["mean_adv"].to_numpy(float)
        err = np.vstack([y - g["ci_lo"].to_numpy(float), g["ci_hi"].to_numpy(float) - y])
        ax.bar(x, np.nan_to_num(y), w, yerr=np.nan_to_num(err), capsize=3, label=p, color=f"C{j}")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(tasks)) + w * (len(pairs) - 1) / 2, tasks)
    ax.set_ylabel("mean RDI advantage (AR - DLM)")
    ax.set_title("RDI advantage over the conditions (n/m bars are 0)")
    ax.legend(fontsize=7)
    _save(fig, d / "rdi_advantage.png", out)


def fig_accuracy_vs_rate(t, d: Path, out: list[Path]) -> None:
    acc = t.get("accuracy")
    if not _ok(acc):
        return
    plt = _plt()
    for task, g in _gen_first(acc).groupby("task", sort=False):
        types = [x for x in dict.fromkeys(g["type"]) if x != "clean"]
        if not types:
            continue
        fig, axes = plt.subplots(1, len(types), figsize=(2.6 * len(types), 2.8), squeeze=False, sharey=True)
        for ax, typ in zip(axes[0], types):
            for i, (model, gm) in enumerate(g.groupby("model", sort=False)):
                clean = gm.loc[gm["type"] == "clean", "accuracy"]
                pts = gm[gm["type"] == typ].sort_values("rate")
                x = [0.0, *pts["rate"]]
                y = [float(clean.iloc[0]) if len(clean) else np.nan, *pts["accuracy"]]
                ax.plot(x, y, marker="o", ms=3, color=f"C{i}", label=model)
            ax.set_title(typ, fontsize=8)
            ax.set_xlabel("rate r")
        axes[0][0].set_ylabel("accuracy")
        axes[0][0].legend(fontsize=6)
        fig.suptitle(f"{task}: accuracy vs perturbation rate", fontsize=9)
        _save(fig, d / f"accuracy_vs_rate_{task}.png", out)


def fig_rdi_heatmap(t, d: Path, out: list[Path]) -> None:
    """The report's RDI heat map (:func:`dlmeval.report.figures.rdi_heatmap`: type x rate, one colour scale
    centred on 0), one PNG per task: the same figure in the output directory as in the HTML report."""
    acc = t.get("accuracy")
    if not _ok(acc) or "type" not in acc.columns:
        return
    from dlmeval.report import figures as F

    for task, g in _gen_first(acc).groupby("task", sort=False):
        g = g[(g["condition"] != "clean") & (g["type"].astype(str) != "clean")]
        if g.empty or not np.isfinite(pd.to_numeric(g["rdi"], errors="coerce")).any():
            continue
        fig = F.rdi_heatmap(g)
        fig.suptitle(f"{task}: RDI per perturbation type and rate", fontsize=9)
        fig.savefig(d / f"rdi_heatmap_{task}.png", dpi=110)
        out.append(d / f"rdi_heatmap_{task}.png")


def fig_clean_accuracy_ece(t, d: Path, out: list[Path]) -> None:
    cal, summ = t.get("calibration"), t.get("summary")
    if not _ok(cal) or not _ok(summ):
        return
    c = _gen_first(cal[cal["split"] == "clean"])
    s = _gen_first(summ).drop_duplicates(["task", "model"])
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, (frame, col, label) in zip(axes, ((s, "acc_clean", "clean accuracy"), (c, "ece", "clean ECE"))):
        tasks = list(dict.fromkeys(frame["task"]))
        models = list(dict.fromkeys(frame["model"]))
        w = 0.8 / max(len(models), 1)
        for j, mdl in enumerate(models):
            g = frame[frame["model"] == mdl].set_index("task").reindex(tasks)
            ax.bar(np.arange(len(tasks)) + j * w, g[col].to_numpy(float), w, label=mdl, color=f"C{j}")
        ax.set_xticks(np.arange(len(tasks)) + w * (len(models) - 1) / 2, tasks, fontsize=7)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=6)
    _save(fig, d / "clean_accuracy_ece.png", out)


def fig_ece_auroc_vs_rate(t, d: Path, out: list[Path]) -> None:
    cal = t.get("calibration")
    if not _ok(cal):
        return
    plt = _plt()
    cal = _gen_first(cal)
    for task, g in cal.groupby("task", sort=False):
        per = g[~g["split"].isin(["clean", "noisy"])].copy()
        if per.empty:
            continue
        per["rate"] = [float(s.rsplit("@", 1)[1]) for s in per["split"]]
        fig, axes = plt.subplots(1, 2, figsize=(8, 3))
        for i, (model, gm) in enumerate(g.groupby("model", sort=False)):
            clean = gm[gm["split"] == "clean"]
            pm = per[per["model"] == model].groupby("rate")[["ece", "auroc"]].mean().reset_index()
            for ax, col in zip(axes, ("ece", "auroc")):
                x = [0.0, *pm["rate"]]
                y = [float(clean[col].iloc[0]) if len(clean) else np.nan, *pm[col]]
                ax.plot(x, y, marker="o", ms=3, color=f"C{i}", label=model)
                ax.set_xlabel("rate r (mean over types)")
                ax.set_ylabel(col.upper())
        axes[0].legend(fontsize=6)
        fig.suptitle(f"{task}: calibration vs perturbation rate", fontsize=9)
        _save(fig, d / f"ece_auroc_vs_rate_{task}.png", out)


def fig_dgcg(t, d: Path, out: list[Path]) -> None:
    dg = t.get("dgcg")
    if not _ok(dg):
        return
    plt = _plt()
    for task, g in dg.groupby("task", sort=False):
        fig, axes = plt.subplots(1, 4, figsize=(13, 3))
        for i, (model, gm) in enumerate(g.groupby("model", sort=False)):
            first = gm.drop_duplicates("suffix_length").sort_values("suffix_length")
            axes[0].plot(first["suffix_length"], first["degradation"], marker="o", color=f"C{i}", label=model)
            axes[1].bar(i, first["mean_grad_norm"].iloc[-1], color=f"C{i}")
            if "transfer_from" in gm:
                for k, (src, tr) in enumerate(
                    gm[gm["transfer_from"].notna()].groupby("transfer_from", sort=False)
                ):
                    axes[2].plot(tr["suffix_length"], tr["transfer_degradation"], marker="s", color=f"C{i + k}",
                                 label=f"{src} -> {model}")  # fmt: skip
            traj = [float(x) for x in str(first["loss_trajectory"].iloc[-1]).split()]
            axes[3].plot(range(1, len(traj) + 1), traj, color=f"C{i}", label=model)
        axes[0].axhline(0.2, color="grey", ls=":", lw=0.8)
        axes[0].set(xlabel="suffix length", ylabel="degradation", title="A: degradation vs length")
        axes[1].set(title="B: gradient norm (longest suffix)", xticks=range(g["model"].nunique()))
        axes[1].set_xticklabels(list(dict.fromkeys(g["model"])), rotation=20, fontsize=6)
        axes[2].set(xlabel="suffix length", ylabel="degradation", title="C: transfer DLM -> AR")
        axes[3].set(xlabel="step", ylabel="loss", title="D: loss trajectory (longest suffix)")
        axes[0].legend(fontsize=6)
        if axes[2].lines:
            axes[2].legend(fontsize=6)
        _save(fig, d / f"dgcg_{task}.png", out)


def fig_probes(t, d: Path, out: list[Path]) -> None:
    pr = t.get("probes")
    if not _ok(pr):
        return
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, (_, r) in enumerate(pr.iterrows()):
        layers = [int(x) for x in str(r["layers"]).split()]
        acc = [float(x) for x in str(r["accuracy_by_layer"]).split()]
        ax.plot(
            layers,
            acc,
            marker="o",
            ms=3,
            color=f"C{i % 10}",
            label=f"{r['model']} {r['task']} {r['condition']}",
        )
    ax.set(xlabel="hidden state (0 = embeddings)", ylabel="probe accuracy", title="Linear probe by layer")
    ax.legend(fontsize=5)
    _save(fig, d / "probes_by_layer.png", out)


def fig_mechanism(t, d: Path, out: list[Path]) -> None:
    tr, at = t.get("trajectory"), t.get("attention")
    if not _ok(tr) and not _ok(at):
        return
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    if _ok(tr):
        m = tr.groupby(["model", "task"], sort=False)["id_divergence"].mean().unstack()
        m.plot.bar(ax=axes[0], rot=0, fontsize=7)
        axes[0].set(ylabel="ID divergence", title="A: DLM trajectory divergence by task")
    if _ok(at):
        m = at.groupby(["model", "condition"], sort=False)["mean_ratio"].mean().unstack()
        m.plot.bar(ax=axes[1], rot=0, fontsize=7)
        axes[1].axhline(1.0, color="grey", ls=":", lw=0.8)
        axes[1].set(ylabel="attention on corrupted / uniform", title="B: AR attention re-routing")
    _save(fig, d / "mechanism.png", out)


def fig_pair_summary(t, d: Path, out: list[Path]) -> None:
    comp, cal = t.get("comparison"), t.get("calibration")
    if not _ok(comp) or "adv_rate" not in comp:
        return
    plt = _plt()
    comp = _gen_first(comp)
    clean = _gen_first(cal[cal["split"] == "clean"]) if _ok(cal) else pd.DataFrame()
    for k, (pair, g) in enumerate(comp.groupby("pair", sort=False), start=1):
        fig, axes = plt.subplots(1, 3, figsize=(10, 3))
        tasks = list(g["task"])
        axes[0].bar(tasks, np.nan_to_num(g["mean_adv"].to_numpy(float)), color="C0")
        axes[0].set(title="RDI advantage (AR - DLM)")
        axes[1].bar(tasks, np.nan_to_num(g["adv_rate"].to_numpy(float)), color="C1")
        axes[1].axhline(0.5, color="grey", ls=":", lw=0.8)
        axes[1].set(title="DLM win rate over conditions", ylim=(0, 1))
        gap = []
        for _, r in g.iterrows():
            e = (
                clean[(clean["task"] == r["task"])].set_index("model")["ece"]
                if not clean.empty
                else pd.Series()
            )
            gap.append(float(e.get(r["dlm"], np.nan) - e.get(r["ar"], np.nan)))
        axes[2].bar(tasks, np.nan_to_num(gap), color="C3")
        axes[2].set(title="calibration gap (DLM ECE - AR ECE)")
        fig.suptitle(pair, fontsize=9)
        _save(fig, d / f"pair_summary_{k}.png", out)


def fig_ipm(t, d: Path, out: list[Path]) -> None:
    ipm = t.get("ipm")
    if not _ok(ipm):
        return
    plt = _plt()
    groups = list(ipm.groupby(["model", "task", "condition"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3.4), squeeze=False)
    for ax, ((model, task, cond), g) in zip(axes[0], groups):
        v = g[~g["variant"].isin(["clean", "noisy baseline"])]
        base = g.loc[g["variant"] == "noisy baseline", "accuracy"]
        ax.bar(range(len(v)), v["accuracy"], color="C0")
        if len(base):
            ax.axhline(float(base.iloc[0]), color="k", ls="--", lw=0.9, label="noisy baseline")
        ax.set_xticks(range(len(v)), [s.split("[")[0].replace("ipm.", "") + "[" + s.split("[")[1] if "[" in s else s
                                      for s in v["variant"]], rotation=90, fontsize=5)  # fmt: skip
        ax.set_title(f"{model}\n{task} / {cond}", fontsize=7)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("accuracy")
    _save(fig, d / "ipm_variants.png", out)


FIGURES = (
    fig_rdi_advantage,
    fig_accuracy_vs_rate,
    fig_rdi_heatmap,
    fig_clean_accuracy_ece,
    fig_ece_auroc_vs_rate,
    fig_dgcg,
    fig_probes,
    fig_mechanism,
    fig_pair_summary,
    fig_ipm,
)


def draw_figures(tables: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Every figure whose tables are there (the reliability diagrams: :func:`.output.plot_reliability`)."""
    d = Path(out_dir)
    out: list[Path] = []
    for fig in FIGURES:
        fig(tables, d, out)
    return out
