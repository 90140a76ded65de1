"""The paper's figures, each a pure function of the tables (so of the stored records), drawn into the output
directory as PNG. A figure whose table is absent (or empty) is skipped; :func:`draw_figures` returns what it drew.
Every figure is drawn by the figure home, :mod:`dlmeval.report.figures` (the HTML report draws the same kinds of
plot with the same functions); this module only chooses the rows, the title and the file name.

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

from dlmeval.report import figures as F


def _ok(df) -> bool:
    return df is not None and not df.empty


def _save(fig, path: Path, out: list[Path], title: str | None = None) -> None:
    if title:
        fig.suptitle(title, fontsize=9)
    F.save_png(fig, path, out)


def _gen_first(df: pd.DataFrame) -> pd.DataFrame:
    """The generation rows where a task has them (the paper's numbers), else the likelihood rows."""
    keep = []
    for _, g in df.groupby("task", sort=False):
        keep.append(g[g["mode"] == "generation"] if (g["mode"] == "generation").any() else g)
    return pd.concat(keep) if keep else df


def _clean_calibration(t) -> pd.DataFrame:
    cal = t.get("calibration")
    return _gen_first(cal[cal["split"] == "clean"]) if _ok(cal) else pd.DataFrame()


def fig_rdi_advantage(t, d: Path, out: list[Path]) -> None:
    comp = t.get("comparison")
    if not _ok(comp) or "mean_adv" not in comp:
        return
    _save(F.rdi_advantage(_gen_first(comp)), d / "rdi_advantage.png", out)


def fig_accuracy_vs_rate(t, d: Path, out: list[Path]) -> None:
    acc = t.get("accuracy")
    if not _ok(acc):
        return
    for task, g in _gen_first(acc).groupby("task", sort=False):
        perturbed = g[g["type"] != "clean"]
        if perturbed.empty:
            continue
        clean = g[g["type"] == "clean"].drop_duplicates("model")[["model", "accuracy"]]
        fig = F.accuracy_vs_rate(perturbed, clean.rename(columns={"accuracy": "clean_accuracy"}))
        _save(fig, d / f"accuracy_vs_rate_{task}.png", out, f"{task}: accuracy vs perturbation rate")


def fig_rdi_heatmap(t, d: Path, out: list[Path]) -> None:
    """The report's RDI heat map (type x rate, one colour scale centred on 0), one PNG per task."""
    acc = t.get("accuracy")
    if not _ok(acc) or "type" not in acc.columns:
        return
    for task, g in _gen_first(acc).groupby("task", sort=False):
        g = g[(g["condition"] != "clean") & (g["type"].astype(str) != "clean")]
        if g.empty or not np.isfinite(pd.to_numeric(g["rdi"], errors="coerce")).any():
            continue
        fig = F.rdi_heatmap(g)
        _save(fig, d / f"rdi_heatmap_{task}.png", out, f"{task}: RDI per perturbation type and rate")


def fig_clean_accuracy_ece(t, d: Path, out: list[Path]) -> None:
    cal, summ = t.get("calibration"), t.get("summary")
    if not _ok(cal) or not _ok(summ):
        return
    s = _gen_first(summ).drop_duplicates(["task", "model"])
    _save(F.clean_accuracy_ece(s, _clean_calibration(t)), d / "clean_accuracy_ece.png", out)


def fig_ece_auroc_vs_rate(t, d: Path, out: list[Path]) -> None:
    cal = t.get("calibration")
    if not _ok(cal):
        return
    for task, g in _gen_first(cal).groupby("task", sort=False):
        if g["split"].isin(["clean", "noisy"]).all():
            continue
        fig = F.calibration_vs_rate(g)
        _save(fig, d / f"ece_auroc_vs_rate_{task}.png", out, f"{task}: calibration vs perturbation rate")


def fig_dgcg(t, d: Path, out: list[Path]) -> None:
    dg = t.get("dgcg")
    if not _ok(dg):
        return
    for task, g in dg.groupby("task", sort=False):
        _save(F.dgcg_summary(g), d / f"dgcg_{task}.png", out, f"{task}: D-GCG")


def fig_probes(t, d: Path, out: list[Path]) -> None:
    pr = t.get("probes")
    if not _ok(pr):
        return
    _save(F.probe_layers(pr), d / "probes_by_layer.png", out, "Linear probe by layer")


def fig_mechanism(t, d: Path, out: list[Path]) -> None:
    tr, at = t.get("trajectory"), t.get("attention")
    if not _ok(tr) and not _ok(at):
        return
    _save(F.mechanism(tr if _ok(tr) else None, at if _ok(at) else None), d / "mechanism.png", out)


def fig_pair_summary(t, d: Path, out: list[Path]) -> None:
    comp = t.get("comparison")
    if not _ok(comp) or "adv_rate" not in comp:
        return
    clean = _clean_calibration(t)
    for k, (pair, g) in enumerate(_gen_first(comp).groupby("pair", sort=False), start=1):
        _save(F.pair_summary(g, clean), d / f"pair_summary_{k}.png", out, str(pair))


def fig_ipm(t, d: Path, out: list[Path]) -> None:
    ipm = t.get("ipm")
    if not _ok(ipm):
        return
    variants = ipm[ipm["variant"] != "clean"]
    if variants.empty:
        return
    _save(F.ipm_comparison(variants, baseline="noisy baseline"), d / "ipm_variants.png", out)


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
