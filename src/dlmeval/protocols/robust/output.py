"""Output: Markdown of each table (with the chance guard's ``n/m``), the CSV / Markdown files, the figures, and
reading a run's stored tables back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.protocols import common

TABLE_ORDER = (
    "summary",
    "comparison",
    "accuracy",
    "aurdi",
    "calibration",
    "calibration_ablation",
    "calibration_ablation_mean",
    "reliability",
    "guard",
    "ipm",
    "dgcg",
    "probes",
    "trajectory",
    "attention",
    "recipe",
    "published",
    "runs",
)
TITLES = {
    "summary": "Clean accuracy and robustness (Table 1): Acc_r = mean accuracy under noise, RDI = mean relative "
    "degradation, Adv. = share of conditions where the DLM degrades less",
    "comparison": "DLM vs AR (App. H): advantage = RDI_AR - RDI_DLM per condition; paired bootstrap CI of the mean "
    "and Wilcoxon signed-rank test over conditions",
    "accuracy": "Accuracy per condition (perturbation seeds pooled) and RDI",
    "aurdi": "AURDI per perturbation type (lower = more robust)",
    "calibration": "Calibration (paper's confidences: DLM max/geo, AR chosen/geo; likelihood: choice/softmax): "
    "ECE (15 bins), selective AUROC",
    "calibration_ablation": "Confidence-definition ablation (App. I): ECE and AUROC per basis x aggregation",
    "calibration_ablation_mean": "Confidence-definition ablation averaged over the tasks (Table 13): mean ECE "
    "and AUROC per basis x aggregation",
    "reliability": "Reliability-diagram bins (paper's confidences)",
    "guard": "Chance guard: is clean accuracy above chance? (one-sided exact binomial test)",
    "ipm": "Input prompt masking (IPM) variants",
    "dgcg": "D-GCG / GCG adversarial suffix probe",
    "probes": "Linear probes: corrupted vs clean tokens from hidden states",
    "trajectory": "Denoising-trajectory divergence, clean vs perturbed prompt (DLMs; Fig. 8A)",
    "attention": "Attention on corrupted tokens over the uniform baseline (AR models; Fig. 8B)",
    "recipe": "Decoding recipe per pair, model and task (the paper's Table 6 as run)",
    "published": "Measured vs published: every cell the spec carries a paper value for",
    "runs": "Store runs",
}


def _fmt(v: Any, col: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        if math.isnan(v):
            return "—"
        if col in ("p_value", "wilcoxon_p"):
            return f"{v:.2g}" if v >= 1e-3 else "<0.001"
        return f"{v:.3f}"
    return str(v)


def table_markdown(name: str, df: pd.DataFrame) -> str:
    """One table as GitHub Markdown with its title. RDI-type columns of models that are not above chance on
    clean input print as ``n/m`` (not meaningful), never as a number."""
    title = TITLES.get(name, name)
    if df is None or df.empty:
        return f"### {title}\n\n(no rows)\n"
    if name == "published":
        from dlmeval.protocols.published import markdown_of_frame

        return f"### {title}\n\n{markdown_of_frame(df)}\n"
    view = df.copy()
    if name == "reliability":
        view = view[view["count"] > 0]
    guarded = {"rdi", "mean_rdi", "aurdi", "adv_rate", "mean_adv", "ci_lo", "ci_hi", "wilcoxon_p"}
    flag = (
        "meaningful"
        if "meaningful" in view.columns
        else ("above_chance" if "above_chance" in view.columns else None)
    )
    out = pd.DataFrame(index=view.index)
    for col in view.columns:
        vals = []
        for idx, v in view[col].items():
            if col in guarded and flag is not None and not bool(view.at[idx, flag]):
                vals.append("n/m")
            else:
                vals.append(_fmt(v, col))
        out[col] = vals
    body = out.to_markdown(index=False, disable_numparse=True)
    return f"### {title}\n\n{body}\n"


#: a table's Markdown with the line ``Data: SOURCE`` under it, SOURCE its ``data_source`` column
markdown = common.with_data_note(table_markdown)


def guard_notes(guard: pd.DataFrame | None) -> list[str]:
    if guard is None or guard.empty:
        return []
    return [n for n in guard["note"] if n]


def data_note(spec) -> str:
    """Where each task's items came from (the shipped stand-in, a file or a dataset)."""
    return "; ".join(f"{t.name}: {t.describe()}" for t in spec.tasks)


def write_tables(
    tables: Mapping[str, pd.DataFrame], out_dir: str | Path, header: str = "", data: str = ""
) -> Path:
    """Each table as ``<name>.csv`` and ``<name>.md`` in ``out_dir``, all of them (and the chance-guard notes) in
    ``tables.md``; every CSV has the table's ``data_source`` column and every Markdown table the line ``Data:
    SOURCE`` under it; ``data`` (:func:`data_note`) stands in for a table stored without the column."""
    notes = guard_notes(tables.get("guard"))
    preface = ["**Chance guard.** " + " ".join(f"\n\n* {n}" for n in notes) + "\n"] if notes else []
    order = list(TABLE_ORDER) + [n for n in tables if n not in TABLE_ORDER]
    md = common.with_data_note(table_markdown, data)
    return common.write_tables(
        tables, out_dir, order=order, markdown=md, header=header, preface=preface, data=data
    )


def plot_reliability(reliability: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """One reliability diagram per (task, mode), ``reliability_<task>_<mode>.png``: the report's figure
    (:func:`dlmeval.report.figures.reliability_diagram`: one panel per model, one line per split), so the output
    directory and the HTML report show the same diagram."""
    paths: list[Path] = []
    if reliability is None or reliability.empty:
        return paths
    from dlmeval.report import figures as F

    for (task, mode), g in reliability.groupby(["task", "mode"], sort=False):
        g = g.rename(columns={"split": "condition"}) if "condition" not in g.columns else g
        fig = F.reliability_diagram(g.drop(columns=["task", "mode"]))
        fig.suptitle(f"{task} / {mode}", fontsize=9)
        F.save_png(fig, Path(out_dir) / f"reliability_{task}_{mode}.png", paths, dpi=120)
    return paths


def load_tables(store, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables stored on a ``robust-spec`` (or ``robust``) run, in :data:`TABLE_ORDER` (then the others)."""
    have = store.get_run(run_id).tables()
    return common.load_tables(store, run_id, list(TABLE_ORDER) + [n for n in have if n not in TABLE_ORDER])
