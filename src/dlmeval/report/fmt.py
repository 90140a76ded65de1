"""Number formatting and HTML tables for reports: one rounding rule per kind of column, applied everywhere.

Rules (by column name, so every table of every pillar rounds the same quantity the same way):

* counts (``n``, ``n_*``, ``steps``, ``seed``, ``layer``, ``position``, ``step``, ``count``, ...) as integers;
* p-values (``p``, ``p_*``, ``*_p``, ``*p_value``) with 3 decimals, ``<0.001`` below that;
* perplexity, NFE, percentages, seconds and remask counts with 1 decimal;
* F statistics and t statistics with 2 decimals;
* settings (unmask temperature, perturbation rate, remask fraction) as given: 0.25, 0.1, 0;
* everything else (MAUVE, correlations, accuracies, RDI, ECE, gaps, scores) with 3 decimals;
* a missing value (NaN / None) as an en dash.

A column ``x`` with a companion ``x_se`` is shown as one ``x ± se`` column, and ``ci_lo`` / ``ci_hi`` as one
``CI`` column ``[lo, hi]``, in the precision of ``x``.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

MISSING = "–"
MAX_ROWS = 40
#: short column-header tags of the meta-eval correlation protocols (protocols/diffscore/paper_protocols.py
#: defines the protocols and reads these; the report layer keeps them, as it never imports a protocol, #35)
PROTOCOL_TAGS: dict[str, str] = {
    "doc_spearman": "rho doc-avg",
    "doc_kendall": "tau doc-avg",
    "sys_pearson": "r sys",
    "sys_spearman": "rho sys",
    "pairwise_acc": "acc",
    "pearson": "r",
    "spearman": "rho",
    "kendall": "tau",
    "darr_tau": "DARR tau",
}

_INT_NAMES = {
    "n",
    "steps",
    "seed",
    "seeds",
    "layer",
    "position",
    "step",
    "count",
    "bin",
    "suffix_length",
    "nfe_budget",
    "n_resamples",
    "bootstrap_seed",
    "outputs",
    "units_computed",
    "texts",
    "tokens",
    "positions",
    "pairs",
    "dropped",
    "resolved_steps",
}
_ONE_DECIMAL = re.compile(
    r"^(ppl|nfe|remasks|seconds|wall_s|gen_tokens)|(_pct|_seconds|_ppl|_nfe)$|^pct_|^acceptance_pct"
)
_TWO_DECIMALS = {"F", "t", "statistic", "df", "sum_sq", "ratio"}
#: settings rather than measurements: printed as given (0.25, 0.1, 0), at most 4 decimals
_SETTINGS = {
    "temperature",
    "rate",
    "fraction",
    "remask_fraction",
    "tau",
    "rho",
    "confidence",
    "lower",
    "upper",
}

#: column labels with units and protocols; unknown columns keep their name with spaces for underscores
LABELS: dict[str, str] = {
    "model": "model",
    "source": "prefix source",
    "strategy": "strategy",
    "steps": "steps (nominal)",
    "temperature": "unmask temp. t",
    "nfe": "actual NFE / sample",
    "nfe_min": "NFE min",
    "nfe_max": "NFE max",
    "nfe_budget": "NFE budget",
    "n_cells": "cells",
    "n_seeds": "seeds",
    "ppl": "PPL (external AR)",
    "mauve": "MAUVE",
    "self_bleu": "Self-BLEU",
    "distinct3": "Distinct-3",
    "acceptance": "English-filter acceptance",
    "acceptance_pct": "accepted (%)",
    "min_pct": "min (%)",
    "max_pct": "max (%)",
    "gap": "gap (MAUVE)",
    "partial_eta_sq": "partial η²",
    "sum_sq": "sum sq.",
    "p": "p",
    "remasks_per_sample": "remasks / sample",
    "replacement_rate": "replaced / step",
    "fraction": "remask fraction",
    "accuracy": "accuracy",
    "clean_accuracy": "clean acc.",
    "mean_rdi": "mean RDI",
    "mean_accuracy": "Acc_r",
    "rdi": "RDI",
    "aurdi": "AURDI",
    "ece": "ECE (15 bins)",
    "auroc": "AUROC",
    "humaneval_pass1": "HumanEval pass@1",
    "gsm8k_em": "GSM8K EM",
    "arc_acc": "ARC acc. (log-lik.)",
    "value": "value",
    "metric": "metric",
    "signature": "signature",
    "run_id": "run",
    "mauve_baseline": "MAUVE baseline",
    "mauve_strategy": "MAUVE strategy",
    "ppl_baseline": "PPL baseline",
    "ppl_strategy": "PPL strategy",
    "nfe_baseline": "NFE baseline",
    "nfe_strategy": "NFE strategy",
    "weights": "weights sha256",
}


def _is_missing(x: Any) -> bool:
    if x is None or x is pd.NA or x is pd.NaT:
        return True
    try:
        return isinstance(x, float | np.floating) and math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def is_int_column(name: str) -> bool:
    base = str(name)
    return base in _INT_NAMES or base.startswith("n_") or base.endswith("_count") or base.endswith("_n")


def is_p_column(name: str) -> bool:
    s = str(name)
    return s == "p" or s.startswith("p_") or s.endswith("_p") or s.endswith("p_value") or s == "PR(>F)"


def decimals(name: str) -> int:
    """Decimals for a float column (see the module docstring)."""
    s = str(name)
    if _ONE_DECIMAL.search(s):
        return 1
    if s in _TWO_DECIMALS:
        return 2
    return 3


def fmt_p(p: Any) -> str:
    if _is_missing(p):
        return MISSING
    p = float(p)
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_value(x: Any, column: str = "", digits: int | None = None) -> str:
    """One cell as text under the rules of the module docstring."""
    if _is_missing(x):
        return MISSING
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    if isinstance(x, str):
        return x
    if isinstance(x, int | np.integer):
        return str(int(x))
    if isinstance(x, float | np.floating):
        x = float(x)
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if digits is None and is_p_column(column):
            return fmt_p(x)
        if digits is None and is_int_column(column) and x == int(x):
            return str(int(x))
        if digits is None and str(column) in _SETTINGS:
            return f"{x:.4f}".rstrip("0").rstrip(".") or "0"
        d = decimals(column) if digits is None else digits
        return f"{x:.{d}f}"
    if isinstance(x, list | tuple):
        return ", ".join(fmt_value(v, column, digits) for v in x)
    return str(x)


_PREFIXES = (("ppl_", "PPL "), ("mauve_", "MAUVE "), ("nfe_", "NFE "), ("delta_mauve_vs_", "Δ MAUVE vs "))


def label(column: Any) -> str:
    s = str(column)
    if s in LABELS:
        return LABELS[s]
    for pre, lab in _PREFIXES:
        if s.startswith(pre):
            return lab + s[len(pre) :]
    return s.replace("_", " ")


# ------------------------------------------------------------------------------------------------ views
def display_frame(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table people read: ``x``/``x_se`` merged to ``x ± se``, ``ci_lo``/``ci_hi`` to ``[lo, hi]``, every value
    formatted. Returns (strings frame, {display column: source column}) so callers can still find numbers."""
    cols = [str(c) for c in df.columns]
    data = df.copy()
    data.columns = cols
    out: dict[str, list[str]] = {}
    source: dict[str, str] = {}
    used: set[str] = set()
    for c in cols:
        if c in used:
            continue
        if c.endswith("_se") and c[:-3] in cols:
            continue  # merged into its mean
        if c in ("ci_hi", "diff_ci_hi") and c.replace("hi", "lo") in cols:
            continue
        if c in ("ci_lo", "diff_ci_lo") and c.replace("lo", "hi") in cols:
            hi = c.replace("lo", "hi")
            anchor = "gap" if "gap" in cols else None
            head = "CI" if c == "ci_lo" else "diff. CI"
            out[head] = [
                MISSING
                if _is_missing(a) and _is_missing(b)
                else f"[{fmt_value(a, anchor or c)}, {fmt_value(b, anchor or c)}]"
                for a, b in zip(data[c], data[hi])
            ]
            source[head] = c
            used |= {c, hi}
            continue
        se = f"{c}_se"
        if se in cols:
            head = f"{label(c)} ± SE"
            out[head] = [
                fmt_value(m, c) if _is_missing(s) else f"{fmt_value(m, c)} ± {fmt_value(s, c)}"
                for m, s in zip(data[c], data[se])
            ]
            source[head] = c
            used |= {c, se}
            continue
        head = label(c)
        while head in out:
            head += " "
        out[head] = [fmt_value(v, c) for v in data[c]]
        source[head] = c
        used.add(c)
    return pd.DataFrame(out, index=range(len(df))), source


@dataclass
class TableView:
    """A table for a report: the numbers, how to show them, what to emphasize.

    ``best``: {source column: "max" | "min"}: the best value of the column is emphasized (bold).
    ``marks``: {(row position, source column): mark} appended to a cell (significance daggers).
    """

    df: pd.DataFrame
    caption: str = ""
    name: str = ""
    best: dict[str, str] = field(default_factory=dict)
    marks: dict[tuple[int, str], str] = field(default_factory=dict)
    note: str = ""
    max_rows: int = MAX_ROWS
    more_hint: str = ""
    #: underline the second-best value of every ``best`` column too (the paper's tables: bold best, underline second)
    underline_second: bool = False
    #: hide the rows the run did not compute (:func:`split_absent` on this label column, or on ``(label, note)``
    #: columns) and list them in a footnote under the table: a headline table shows numbers, not rows of dashes
    hide_absent: str | tuple[str, str] | None = None
    #: the rows left out, "NAME (why)" (filled from ``hide_absent``)
    absent: list[str] = field(default_factory=list)

    def __post_init__(self):
        if not self.hide_absent:
            return
        label, note = (self.hide_absent, None) if isinstance(self.hide_absent, str) else self.hide_absent
        kept, absent = split_absent(self.df, label, note)
        if not absent:
            return
        pos = {old: new for new, old in enumerate(kept)}  # marks are keyed by row position
        self.marks = {(pos[i], c): m for (i, c), m in self.marks.items() if i in pos}
        self.df = self.df.iloc[kept]
        self.absent = [*self.absent, *absent]


#: a row label that stands for a row the run did not compute: ``"BARTScore (absent: no checkpoint)"``
ABSENT_LABEL = re.compile(r"^(?P<name>.+?) \(absent: (?P<why>.+)\)$", re.S)


def split_absent(df: pd.DataFrame, label: str, note: str | None = None) -> tuple[list[int], list[str]]:
    """The positions of the rows of ``df`` the run computed, and ``"NAME (why)"`` of each row it did not: a row
    whose ``label`` reads
    ``NAME (absent: why)`` with no value in any other column (the meta-evaluation paper tables' empty baseline rows),
    or whose ``note`` column reads ``absent (why)`` (the latency table). A headline table shows the first and
    lists the second under it (:attr:`TableView.absent`) instead of a row of dashes."""
    if df is None or df.empty or label not in df.columns:
        return list(range(0 if df is None else len(df))), []
    keep, absent = [], []
    others = [c for c in df.columns if c not in (label, note)]
    for i, row in enumerate(df.itertuples(index=False)):
        rec = dict(zip(df.columns, row))
        m = ABSENT_LABEL.match(str(rec[label]))
        empty = all(
            v is None or (isinstance(v, float) and math.isnan(v)) for k, v in rec.items() if k in others
        )
        why = str(rec.get(note) or "") if note else ""
        if m and empty:
            absent.append(f"{m['name']} ({m['why']})")
        elif why.startswith("absent"):
            absent.append(f"{rec[label]} {why[len('absent') :].strip() or '(not run)'}")
        else:
            keep.append(i)
    return keep, absent


def best_rows(values: pd.Series, how: str) -> set[int]:
    """Row positions holding the best finite value (ties all count; none when every row ties, which says
    nothing)."""
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(v)
    if not ok.any():
        return set()
    target = np.nanmax(np.where(ok, v, np.nan)) if how == "max" else np.nanmin(np.where(ok, v, np.nan))
    best = {int(i) for i in np.flatnonzero(ok & np.isclose(v, target, rtol=0, atol=1e-12))}
    return set() if len(best) == int(ok.sum()) and len(best) > 1 else best


def second_rows(values: pd.Series, how: str) -> set[int]:
    """Row positions holding the second-best distinct finite value (none when :func:`best_rows` finds none)."""
    best = best_rows(values, how)
    if not best:
        return set()
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float).copy()
    v[list(best)] = np.nan
    return (
        best_rows(pd.Series(v), how)
        if np.isfinite(v).sum() > 1
        else {int(i) for i in np.flatnonzero(np.isfinite(v))}
    )


def table_html(view: TableView) -> str:
    df = view.df
    # a named or multi-level index carries data (a pivot's row keys); a plain one (RangeIndex, or what is left of
    # it after filtering rows) does not
    named = isinstance(df.index, pd.MultiIndex) or df.index.name is not None
    df = df.reset_index(drop=not named)
    shown = df.head(view.max_rows)
    disp, source = display_frame(shown)
    bold: dict[str, set[int]] = {}
    under: dict[str, set[int]] = {}
    for head, src in source.items():
        how = view.best.get(src)
        if how and src in df.columns:
            bold[head] = {i for i in best_rows(df[src], how) if i < len(shown)}
            if view.underline_second:
                under[head] = {i for i in second_rows(df[src], how) if i < len(shown)}
    numeric = {
        head
        for head, src in source.items()
        if src in df.columns
        and pd.api.types.is_numeric_dtype(df[src])
        and not pd.api.types.is_bool_dtype(df[src])
    }
    # a frame around every table: a table wider than the page scrolls inside it instead of running off the page
    parts = [f'<div class="frame"><table class="data" data-table="{html.escape(view.name)}">']
    if view.caption:
        parts.append(f"<caption>{html.escape(view.caption)}</caption>")
    parts.append(
        "<thead><tr>"
        + "".join(
            f'<th{" class=num" if h in numeric else ""} scope="col">{html.escape(h.strip())}</th>'
            for h in disp.columns
        )
        + "</tr></thead><tbody>"
    )
    for i in range(len(disp)):
        cells = []
        for head in disp.columns:
            text = html.escape(disp[head].iat[i])
            mark = view.marks.get((i, source[head]), "")
            if mark:
                text += f'<sup class="mark">{html.escape(mark)}</sup>'
            if i in bold.get(head, ()):
                text = f"<strong>{text}</strong>"
            elif i in under.get(head, ()):
                text = f"<u>{text}</u>"
            cls = ' class="num"' if head in numeric else ""
            cells.append(f"<td{cls}>{text}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table></div>")
    extra = len(df) - len(shown)
    if extra > 0:
        hint = f" ({view.more_hint})" if view.more_hint else ""
        parts.append(f'<p class="more">… {extra} more rows not shown{hint}.</p>')
    if view.absent:
        parts.append(
            f'<p class="note absent" data-absent="{len(view.absent)}">Not in this table (the run did not compute '
            f"them): {html.escape('; '.join(view.absent))}.</p>"
        )
    if view.note:
        parts.append(f'<p class="note">{html.escape(view.note)}</p>')
    return "\n".join(parts)


def markdown_table(df: pd.DataFrame) -> str:
    """GitHub Markdown of a table under the same rounding rules."""
    disp, _ = display_frame(df.reset_index(drop=True))
    cols = [c.strip() for c in disp.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for i in range(len(disp)):
        lines.append(
            "| " + " | ".join(str(disp.iat[i, j]).replace("|", "\\|") for j in range(len(cols))) + " |"
        )
    return "\n".join(lines) + "\n"


#: the column every table a protocol stores and exports carries: where its data came from (the shipped stand-in or
#: the dataset with its held-out slice), the ``Data:`` line under the table's Markdown and HTML (#34)
DATA_SOURCE = "data_source"


def split_data_source(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``df`` without its :data:`DATA_SOURCE` column, and that column's distinct values joined (``""``: none)."""
    if DATA_SOURCE not in df.columns:
        return df, ""
    seen = [str(v) for v in dict.fromkeys(df[DATA_SOURCE].dropna()) if str(v)]
    return df.drop(columns=[DATA_SOURCE]), "; ".join(seen)


def with_data_source(df: pd.DataFrame, note: str) -> pd.DataFrame:
    """``df`` with a :data:`DATA_SOURCE` column of ``note`` (last; a table that has one, or an empty ``note``, is
    returned as it is)."""
    if not note or DATA_SOURCE in df.columns:
        return df
    return df.assign(**{DATA_SOURCE: note})


def first_present(mapping: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        if n in mapping:
            return mapping[n]
    return None


__all__ = [
    "DATA_SOURCE",
    "LABELS",
    "MISSING",
    "TableView",
    "best_rows",
    "split_absent",
    "decimals",
    "display_frame",
    "fmt_p",
    "fmt_value",
    "label",
    "markdown_table",
    "split_data_source",
    "table_html",
    "with_data_source",
]
