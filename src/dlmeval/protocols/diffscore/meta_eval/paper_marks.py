"""The paper's significance marks in the suite's tables: ``†`` / ``‡`` on a DiffScore (paper mapping) cell that is
significantly better than BARTScore / GPTScore (paper mapping), by the Williams test at the level the column's
protocol correlates at (:func:`dlmeval.stats.marks.significance_marks`; p < ``--alpha``, the paper's 0.05).

The records join the ``comparisons`` table (``test = "williams (paper marks)"``, with ``mark`` and ``level``);
the Markdown tables put the marks of the significant ones on their cells. A baseline family that did not run
gives no mark (and no record); pairwise accuracy (Rank19) is no correlation and gets none.
"""

from __future__ import annotations

import numpy as np

from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.stats.marks import DAGGER, DOUBLE_DAGGER, significance_marks

TEST = "williams (paper marks)"
#: the DiffScore rows that get marks, and the baseline each mark stands for
ROWS = ("diffscore:mapped", "diffscore-ft:mapped")
BASELINES = {DAGGER: "bartscore:mapped", DOUBLE_DAGGER: "gptscore:mapped"}
#: (level, correlation) of each protocol's number
LEVEL = {
    "doc_spearman": ("summary", "spearman"),
    "doc_kendall": ("summary", "kendall"),
    "sys_pearson": ("system", "pearson"),
    "sys_spearman": ("system", "spearman"),
    "pearson": ("segment", "pearson"),
    "spearman": ("segment", "spearman"),
    "kendall": ("segment", "kendall"),
    "darr_tau": ("darr", "darr"),
}


def paper_mark_records(
    judged: P.Judged, protocol: str, vectors: dict[str, np.ndarray], alpha: float
) -> list[dict]:
    """Comparison records (without the benchmark / dimension columns) of every DiffScore row against every
    baseline present in ``vectors`` (metric id -> scores aligned with the judged outputs)."""
    if protocol not in LEVEL:
        return []
    rows = [r for r in ROWS if r in vectors]
    baselines = {m: b for m, b in BASELINES.items() if b in vectors}
    if not rows or not baselines:
        return []
    level, method = LEVEL[protocol]
    darr = level == "darr"
    _, recs = significance_marks(
        vectors,
        rows,
        level=level,
        method=method,
        baselines=baselines,
        human=None if darr else judged.human,
        docs=judged.docs,
        systems=judged.systems,
        pairs=(judged.better_index, judged.worse_index) if darr else None,
        alpha=alpha,
    )
    return [
        {
            "metric_a": r["row"],
            "metric_b": r["baseline"],
            "test": TEST,
            "value_a": r["r_a"],
            "value_b": r["r_b"],
            "statistic": r["t"],
            "p": r["p"],
            "diff_ci_lo": float("nan"),
            "diff_ci_hi": float("nan"),
            "n": r["n"],
            "a_significantly_better": r["significant"],
            "mark": r["mark"],
            "level": f"{level} ({method})",
            "note": r["note"],
        }
        for r in recs
    ]


def note(alpha: float) -> str:
    """The legend under a table that carries the paper's marks."""
    return (
        f"\n{DAGGER} / {DOUBLE_DAGGER} significantly better than BARTScore / GPTScore (paper mapping), p < {alpha}, "
        "one-sided Williams test at the column's level (segment; system means; summary: per-document tests, "
        f"Stouffer-combined; DARR pairs); see comparisons, test '{TEST}'.\n"
    )


def cell_marks(comparisons, column_label) -> dict[tuple[str, str], str] | None:
    """``{(row label, column): marks}`` from the paper-mark records of ``comparisons``; None when there are none
    (no BARTScore / GPTScore family ran), so the tables keep their other marks."""
    if comparisons.empty or "mark" not in comparisons or not (comparisons["test"] == TEST).any():
        return None
    out: dict[tuple[str, str], str] = {}
    sig = comparisons[(comparisons["test"] == TEST) & comparisons["a_significantly_better"].astype(bool)]
    for r in sig.itertuples(index=False):
        key = (r.label_a, column_label(r.benchmark, r.dimension, r.dimension_tag, r.protocol))
        out[key] = out.get(key, "") + r.mark
    return out
