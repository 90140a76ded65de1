"""Paper-style tables of the result records, their Markdown, and the files written to ``--out``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS, TABLE_ORDER
from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES
from dlmeval.report.fmt import PROTOCOL_TAGS

TABLE_NOTES = {
    "mt": "WMT19 DARR Kendall-like tau = (Concordant - Discordant) / (Concordant + Discordant) over the human "
    "better/worse pairs; a metric tie is Discordant.",
    "sum": "rho doc-avg: Spearman per document over its systems, averaged (SummEval, Newsroom); r sys: Pearson of "
    "system means (REALSumm coverage); acc: pairwise accuracy correct > incorrect (Rank19); r: Pearson over all "
    "outputs (QAGS); the secondary table has SummEval / Newsroom pooled over all outputs too (rho, tau). Reference-based baselines compare with the source on Rank19 / QAGS (no reference).",
    "d2t": "rho: Spearman over all outputs (BARTScore's evaluate_text), where the D2T files carry no system names "
    "(BARTScore's do not); rho sys: Spearman of system means, where they do (an imported file with sys_name).",
    "secondary": "Protocols other than the paper's headline number, same metrics.",
}
#: the row the '†' marks compare with
MARK_AGAINST = "ar:mapped"


def _fmt(x: float) -> str:
    return "" if x is None or not np.isfinite(x) else f"{x:.3f}"


def column_label(benchmark: str, dimension: str, dimension_tag: str, protocol: str) -> str:
    """``"SummEval COH (rho doc-avg)"``; a pairwise set has one dimension and shows none (``"gu-en (DARR tau)"``)."""
    if dimension == P.DARR:
        return f"{benchmark} ({PROTOCOL_TAGS[protocol]})"
    return f"{benchmark} {dimension_tag} ({PROTOCOL_TAGS[protocol]})"


#: paper baselines dlmeval has no family for, and why (a row in every table says so; empty: each has one)
NOT_BUILT: dict[str, str] = {}


def absent_rows(opts) -> dict[str, str]:
    """``{paper row: why it is absent}`` for every paper baseline family a suite under ``opts`` does not run, and
    the paper baselines dlmeval has no family for (:data:`NOT_BUILT`)."""
    out = dict(NOT_BUILT)
    for cls in METRIC_FAMILIES.values():
        why = cls.absent(opts) if cls.paper_row else None
        if why:
            out[cls.paper_row] = why
    return out


def paper_tables(results: pd.DataFrame, absent: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Wide tables (rows = metric labels, columns = "benchmark DIM (protocol)") of the primary protocols, per
    benchmark table (``mt``, ``sum``, ``d2t``, ...; each with an ``avg`` column), and ``secondary`` with every
    other protocol. Rows: families in registration order, then each family's ``order``, then label; then one
    empty row ``"NAME (absent: why)"`` per paper baseline in ``absent`` (primary tables only)."""
    out: dict[str, pd.DataFrame] = {}
    if results.empty:
        return out
    fam_rank = {f: i for i, f in enumerate(METRIC_FAMILIES)}
    met_rank = {f: {m: i for i, m in enumerate(c.order)} for f, c in METRIC_FAMILIES.items()}
    firsts = results.drop_duplicates("label")
    keyed = sorted(
        zip(firsts["family"], firsts["metric"], firsts["label"]),
        key=lambda t: (fam_rank.get(t[0], 99), met_rank.get(t[0], {}).get(t[1], 999), t[2]),
    )
    order = [lab for _, _, lab in keyed]  # the same row order in every table, whatever benchmark came first
    bench_order = list(BENCHMARKS)

    def wide(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        df["column"] = [
            column_label(b, d, t, p)
            for b, d, t, p in zip(df["benchmark"], df["dimension"], df["dimension_tag"], df["protocol"])
        ]
        df["_b"] = df["benchmark"].map(bench_order.index)
        cols = list(dict.fromkeys(df.sort_values(["_b"], kind="stable")["column"]))
        w = df.pivot_table(index="label", columns="column", values="value", aggfunc="first", dropna=False)
        w = w.reindex(index=[lab for lab in order if lab in w.index], columns=cols)
        w.index.name = "metric"
        return w

    prim = results[results["primary"]]
    table_of = prim["benchmark"].map(lambda b: BENCHMARKS[b].table)
    for name in TABLE_ORDER:
        sub = prim[table_of == name]
        if sub.empty:
            continue
        w = wide(sub)
        w["avg"] = w.mean(axis=1, skipna=False)
        for row, why in (absent or {}).items():
            w.loc[f"{row} (absent: {why})"] = np.nan
        out[name] = w
    sec = results[~results["primary"]]
    if not sec.empty:
        out["secondary"] = wide(sec)
    return out


def markdown_table(
    w: pd.DataFrame, marks: dict[tuple[str, str], str] | None = None, note: str = "", *, emphasis: bool = True
) -> str:
    """A GitHub Markdown table (3 decimals; ``marks[(row, column)]`` appended to a cell; best per column in bold,
    second underlined, unless ``emphasis=False``)."""
    from dlmeval.report.fmt import best_rows, second_rows

    marks = marks or {}
    head = [w.index.name or "metric", *map(str, w.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(w.columns)) + "|"]
    # the paper's emphasis: the best value of every column in bold, the second underlined (higher is better for
    # every protocol here); on the 3-decimal values shown, so that equal-looking cells are emphasized alike
    shown = w.apply(lambda col: col.round(3))
    best = {c: best_rows(shown[c].reset_index(drop=True), "max") for c in w.columns} if emphasis else {}
    second = {c: second_rows(shown[c].reset_index(drop=True), "max") for c in w.columns} if emphasis else {}
    for i, (lab, row) in enumerate(w.iterrows()):
        cells = []
        for c, v in row.items():
            t = _fmt(v)
            if t and i in best.get(c, ()):
                t = f"**{t}**"
            elif t and i in second.get(c, ()):
                t = f"<u>{t}</u>"
            cells.append(t + marks.get((lab, c), ""))
        lines.append("| " + " | ".join([str(lab), *cells]) + " |")
    text = "\n".join(lines) + "\n"
    return text + (f"\n{note}\n" if note else "")


def _marks(comparisons: pd.DataFrame, results: pd.DataFrame) -> dict[tuple[str, str], str]:
    """'†' on cells significantly better than AR (paper mapping) (:data:`MARK_AGAINST`)."""
    marks: dict[tuple[str, str], str] = {}
    if comparisons.empty:
        return marks
    sig = comparisons[(comparisons["metric_b"] == MARK_AGAINST) & comparisons["a_significantly_better"]]
    for r in sig.itertuples(index=False):
        marks[(r.label_a, column_label(r.benchmark, r.dimension, r.dimension_tag, r.protocol))] = "†"
    return marks


def markdown_tables(tables: dict[str, pd.DataFrame], comparisons: pd.DataFrame, results, alpha: float):
    """``{table name: Markdown}`` with the notes and the significance marks (the paper's, when a BARTScore or
    GPTScore family ran: :mod:`.paper_marks`)."""
    from dlmeval.protocols.diffscore.meta_eval import paper_marks

    marks = paper_marks.cell_marks(comparisons, column_label)
    legend = paper_marks.note(alpha) if marks is not None else None
    if marks is None:
        marks = _marks(comparisons, results)
    return {
        name: f"## {name}\n\n"
        + markdown_table(w, marks if name != "secondary" else None, TABLE_NOTES.get(name, ""))
        + "\nBold: best value per column; underlined: second.\n"
        + (
            legend
            or "\n† significantly better than AR (paper mapping), p < "
            f"{alpha} (Williams test or paired bootstrap; see comparisons).\n"
            if name != "secondary"
            else ""
        )
        for name, w in tables.items()
    }


def write_outputs(out_dir: Path, tables: dict[str, pd.DataFrame], markdown: dict[str, str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out_dir / f"{name}.csv", index=not isinstance(df.index, pd.RangeIndex))
    for name, text in markdown.items():
        (out_dir / f"{name}.md").write_text(text, encoding="utf-8")
