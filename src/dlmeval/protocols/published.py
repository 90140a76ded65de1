"""The paper's numbers, carried by a paper spec and printed beside the measured ones (#34).

A paper spec (``care-paper``, ``care-leaderboard``, ``robust-paper``) lists the published value of every cell it
fills, so a finished run is a reproduction report with no hand work::

    published = [
      { paper = "Table 4", table = "compute_matched", where = { strategy = "none", nfe_budget = 128 },
        values = { ppl = 7.6, mauve = 0.601 } },
    ]

``table`` names one of the run's tables (the stored frame of that name), ``where`` selects its row (every key a
column of the table; numbers compare to 1e-9, a ``model`` value also matches a table model that ends with it, so
``"LLaDA-8B-Base"`` finds ``llada:LLaDA-8B-Base`` and ``llada:GSAI-ML/LLaDA-8B-Base``), ``values`` maps a column of the table to the paper's value.
A leaderboard row's ``published = { mauve_none = 0.948, ... }`` is the same thing with ``where = { model = label
}`` (:func:`row_entries`).

:func:`compare` looks every cell up: measured value, published value, difference, and the difference in standard
errors where the table has an SE column for that value (``<column>_se`` or ``<column>_se_seeds``; the seed SE of a
mean over seeds). A cell
whose row is missing (not run yet, another source) or ambiguous (several rows match: add a ``where`` key) is
reported with a NaN measurement and a note, never dropped.

Nothing here knows a protocol: callers pass their tables as ``{name: DataFrame}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlmeval.errors import InputError

ENTRY_KEYS = {"paper", "table", "where", "values", "note"}


@dataclass(frozen=True)
class Published:
    """One published row: the paper's table, dlmeval's table, the row selector and the published values."""

    paper: str
    table: str
    where: tuple[tuple[str, Any], ...]
    values: tuple[tuple[str, float], ...]
    note: str = ""

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.where)


@dataclass(frozen=True)
class Cell:
    paper: str
    table: str
    row: str
    column: str
    published: float
    measured: float = math.nan
    se: float = math.nan
    note: str = ""

    @property
    def diff(self) -> float:
        return self.measured - self.published

    @property
    def diff_se(self) -> float:
        if not (math.isfinite(self.se) and self.se > 0):
            return math.nan
        return self.diff / self.se


def _scalar(v: Any, at: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise InputError(f"spec: {at} must be a string or a number, got {v!r}")
    return v


def parse_entries(raw: Any, at: str = "published") -> tuple[Published, ...]:
    """The ``published`` array of a spec (validated: one line naming the bad key)."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise InputError(f"spec: {at} must be an array of tables {{paper, table, where, values}}")
    out = []
    for i, e in enumerate(raw):
        where_at = f"{at}[{i}]"
        if not isinstance(e, Mapping):
            raise InputError(f"spec: {where_at} must be a table {{paper, table, where, values}}")
        bad = set(e) - ENTRY_KEYS
        if bad:
            raise InputError(f"spec: {where_at} has unknown key(s) {', '.join(sorted(bad))}")
        for k in ("paper", "table", "values"):
            if k not in e:
                raise InputError(f"spec: {where_at}.{k} is required")
        where = e.get("where", {})
        if not isinstance(where, Mapping) or not isinstance(e["values"], Mapping) or not e["values"]:
            raise InputError(f"spec: {where_at}.where and .values must be tables (values not empty)")
        vals = []
        for col, v in e["values"].items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise InputError(f"spec: {where_at}.values.{col} must be a number, got {v!r}")
            vals.append((str(col), float(v)))
        out.append(
            Published(
                paper=str(e["paper"]),
                table=str(e["table"]),
                where=tuple((str(k), _scalar(v, f"{where_at}.where.{k}")) for k, v in where.items()),
                values=tuple(vals),
                note=str(e.get("note", "")),
            )
        )
    return tuple(out)


def row_entries(
    label: str, published: Mapping[str, Any] | None, paper: str, table: str
) -> tuple[Published, ...]:
    """A leaderboard row's ``published = {column = value}`` as one entry selecting ``model = label``."""
    if not published:
        return ()
    return parse_entries(
        [{"paper": paper, "table": table, "where": {"model": label}, "values": dict(published)}],
        f"rows[{label}].published",
    )


def _match(frame: pd.DataFrame, where: tuple[tuple[str, Any], ...]) -> tuple[pd.DataFrame, str]:
    sel = frame
    for k, v in where:
        if k not in sel.columns:
            return sel.iloc[0:0], f"the table has no column {k!r}"
        col = sel[k]
        if isinstance(v, str):
            s = col.astype(str)
            ok = (s == v) | ((s.str.endswith(":" + v) | s.str.endswith("/" + v)) if k == "model" else False)
        else:
            num = pd.to_numeric(col, errors="coerce")
            ok = (num - float(v)).abs() < 1e-9
        sel = sel[ok]
    return sel, ""


def compare(
    entries: Sequence[Published],
    tables: Mapping[str, pd.DataFrame],
    defaults: Mapping[str, Any] | None = None,
) -> list[Cell]:
    """Every published cell with the measured value beside it (NaN and a note where it cannot be found).
    ``defaults``: selector values for keys an entry does not name, applied where the table has that column
    (Care: ``source`` = the spec's first source)."""
    out = []
    for e in entries:
        frame = tables.get(e.table)
        where = e.where
        if defaults and frame is not None:
            named = {k for k, _ in where}
            where = where + tuple(
                (k, v) for k, v in defaults.items() if k not in named and v is not None and k in frame.columns
            )
        for col, pub in e.values:
            cell = Cell(e.paper, e.table, e.label(), col, pub, note=e.note)
            if frame is None or frame.empty:
                out.append(_with(cell, note=_join(e.note, f"no {e.table} table in this run")))
                continue
            sel, why = _match(frame, where)
            if why or len(sel) != 1 or col not in sel.columns:
                why = why or (
                    "no such row"
                    if len(sel) == 0
                    else f"{len(sel)} rows match: add a where key"
                    if len(sel) > 1
                    else f"no column {col!r}"
                )
                out.append(_with(cell, note=_join(e.note, why)))
                continue
            m = pd.to_numeric(sel[col], errors="coerce").iloc[0]
            se_col = next((c for c in (f"{col}_se", f"{col}_se_seeds") if c in sel.columns), None)
            se = pd.to_numeric(sel[se_col], errors="coerce").iloc[0] if se_col else math.nan
            out.append(_with(cell, measured=float(m), se=float(se)))
    return out


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _with(cell: Cell, **kw) -> Cell:
    import dataclasses

    return dataclasses.replace(cell, **kw)


def frame(cells: Sequence[Cell]) -> pd.DataFrame:
    """The comparison as a table (one row per published cell)."""
    cols = ["paper", "table", "row", "column", "published", "measured", "diff", "se", "diff_se", "note"]
    return pd.DataFrame(
        [
            {
                "paper": c.paper,
                "table": c.table,
                "row": c.row,
                "column": c.column,
                "published": c.published,
                "measured": c.measured,
                "diff": c.diff,
                "se": c.se,
                "diff_se": c.diff_se,
                "note": c.note,
            }
            for c in cells
        ],
        columns=cols,
    )


def _fmt(v: float, digits: int = 3) -> str:
    return "—" if not math.isfinite(v) else f"{v:.{digits}f}"


def markdown(cells: Sequence[Cell]) -> str:
    """Measured beside published, the difference and (where an SE exists) the difference in SEs."""
    lines = [
        "| paper | row | column | published | measured | diff | diff / SE |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c.paper} | {c.row} | {c.column} | {c.published:g} | {_fmt(c.measured)} | {_fmt(c.diff)} | "
            f"{_fmt(c.diff_se, 2)}{' (' + c.note + ')' if c.note else ''} |"
        )
    return "\n".join(lines)


def markdown_of_frame(df: pd.DataFrame) -> str:
    """:func:`markdown` of a stored comparison table (:func:`frame`'s columns), as the Care and robustness Markdown
    outputs print it."""
    cols = ("paper", "table", "row", "column", "published", "measured", "se", "note")
    return markdown([Cell(*(r[c] for c in cols)) for r in df.to_dict("records")])


def plan_lines(entries: Sequence[Published]) -> list[str]:
    """The published cells, for ``--plan``: one line per row of the paper."""
    if not entries:
        return []
    lines = [f"published values ({sum(len(e.values) for e in entries)} cells):"]
    for e in entries:
        vals = ", ".join(f"{k} {v:g}" for k, v in e.values)
        lines.append(f"  {e.paper:<9} {e.table}[{e.label()}]: {vals}" + (f"  ({e.note})" if e.note else ""))
    return lines


def plan_records(entries: Sequence[Published]) -> list[dict[str, Any]]:
    return [
        {"paper": e.paper, "table": e.table, "where": dict(e.where), "values": dict(e.values), "note": e.note}
        for e in entries
    ]


__all__ = [
    "Cell",
    "Published",
    "compare",
    "frame",
    "markdown",
    "markdown_of_frame",
    "parse_entries",
    "plan_lines",
    "plan_records",
    "row_entries",
]
