"""Renderers: one report section per (run kind, stored table), registered here and looked up by the report.

A renderer declares the run kinds it applies to, the table it needs (``"@items"``: the run's per-item results),
the columns it requires, and a function ``fn(ctx) -> Section``. The report shows a renderer's section only when its
table exists in a run of one of its kinds; a table without a required column, or a function that raises
:class:`Omit`, leaves a one-line note saying why instead. Extra columns are ignored. ``docs/report.md`` lists the
registry (``python -m dlmeval.report.registry`` prints it as Markdown).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dlmeval.registry import Registry

if TYPE_CHECKING:
    import pandas as pd

    from dlmeval.report.fmt import TableView

ITEMS = "@items"
PILLARS = ("scoring", "sampling", "robustness")
PILLAR_TITLES = {
    "scoring": "Scoring (DiffScore)",
    "sampling": "Sampling (Care)",
    "robustness": "Robustness",
    "other": "Other runs",
}
PILLAR_KINDS: dict[str, tuple[str, ...]] = {
    "scoring": (
        "diffscore",
        "meta-eval",
        "meta-eval-analysis",
        "meta-eval-lexical",
        "meta-eval-embedding",
        "meta-eval-ar",
        "meta-eval-diffscore",
        "meta-eval-diffscore-ft",
    ),
    "sampling": ("care", "care-sweep", "sample"),
    "robustness": ("robust", "robust-spec"),
}
PILLAR_HINTS = {
    "scoring": "run `dlmeval meta-eval` or `dlmeval score` to add scoring results",
    "sampling": "run `dlmeval care` to add a Care sweep",
    "robustness": "run `dlmeval robust` to add robustness results",
}


def pillar_of(kind: str) -> str:
    for p, kinds in PILLAR_KINDS.items():
        if kind in kinds:
            return p
    return "other"


class Omit(Exception):
    """Raised by a renderer to leave its section out; the message says why (shown in the report)."""


@dataclass
class FigureBlock:
    caption: str
    figure: Any  # matplotlib Figure
    alt: str = ""


@dataclass
class Section:
    """What a renderer returns: a title, tables (:class:`~dlmeval.report.fmt.TableView`), figures and notes, in
    the order given."""

    title: str
    blocks: list[TableView | FigureBlock | str] = field(default_factory=list)
    intro: str = ""

    def table(self, view: TableView) -> Section:
        self.blocks.append(view)
        return self

    def figure(self, caption: str, fig: Any, alt: str = "") -> Section:
        self.blocks.append(FigureBlock(caption, fig, alt or caption))
        return self

    def note(self, text: str) -> Section:
        self.blocks.append(text)
        return self


@dataclass
class Context:
    """What a renderer sees: the run, its table (or items), the other runs in the report, report options."""

    run: Any
    name: str
    df: pd.DataFrame | None  # the table; None for a renderer of per-item results (see :meth:`items`)
    related: Sequence[Any] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def items(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """``{key: result}`` of this run's items whose key starts with ``prefix`` (one query; a large run is not
        read whole for a few records)."""
        return results_with_prefix(self.run, prefix)

    def item_runs(self) -> list[Any]:
        """This run and the runs folded into it (their per-item results belong to this block)."""
        return list(self.options.get("item_runs", {}).get(self.run.run_id, [self.run]))

    def table(self, name: str) -> pd.DataFrame | None:
        """Another table of the same run, or None (without its ``data_source`` column: the section names it)."""
        if name not in self.run.tables():
            return None
        from dlmeval.report.fmt import split_data_source

        return split_data_source(self.run.get_table(name))[0]

    def more_hint(self, name: str | None = None) -> str:
        return f"dlmeval runs export {self.run.run_id} --table {name or self.name}"


@dataclass(frozen=True)
class Renderer:
    key: str
    pillar: str
    kinds: tuple[str, ...]
    table: str
    title: str
    columns: tuple[str, ...]
    fn: Callable[[Context], Section]
    optional: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()  # other tables of the run it reads (the fallback does not show them again)
    n_tables: int = 1  # tables the section shows at least
    n_figures: int = 0  # figures the section shows at least
    description: str = ""
    order: int = 0
    expected_from: str = ""  # who stores the table, when it is not stored yet

    def missing_columns(self, df: pd.DataFrame) -> list[str]:
        have = {str(c) for c in df.columns}
        return [c for c in self.columns if c not in have]


def results_with_prefix(run, prefix: str = "") -> dict[str, dict[str, Any]]:
    """``{key: result}`` of the items of ``run`` whose key starts with ``prefix``, in natural key order."""
    from dlmeval.store import jsonsafe
    from dlmeval.store.db import natural_key

    rows = run.store.execute(
        "SELECT key, result FROM items WHERE run_id = ? AND substr(key, 1, ?) = ?",
        (run.run_id, len(prefix), prefix),
    ).fetchall()
    rows.sort(key=lambda r: natural_key(r[0]))
    return {k: jsonsafe.loads(v) for k, v in rows}


REGISTRY: Registry[Renderer] = Registry("report section")


def register(
    key: str,
    *,
    pillar: str,
    kinds: Sequence[str],
    table: str,
    title: str,
    columns: Sequence[str] = (),
    optional: Sequence[str] = (),
    uses: Sequence[str] = (),
    n_tables: int = 1,
    n_figures: int = 0,
    description: str = "",
    expected_from: str = "",
) -> Callable[[Callable[[Context], Section]], Callable[[Context], Section]]:
    """Decorator: add ``fn`` to :data:`REGISTRY` under ``key`` (a key taken by another section is refused)."""

    def deco(fn: Callable[[Context], Section]) -> Callable[[Context], Section]:
        r = Renderer(
            key=key,
            pillar=pillar,
            kinds=tuple(kinds),
            table=table,
            title=title,
            columns=tuple(columns),
            fn=fn,
            optional=tuple(optional),
            uses=tuple(uses),
            n_tables=n_tables,
            n_figures=n_figures,
            description=description,
            order=len(REGISTRY),
            expected_from=expected_from,
        )
        REGISTRY.add(key, r)
        return fn

    return deco


def renderers(kind: str | None = None) -> list[Renderer]:
    """Registered renderers (of one run kind), in registration order (the shipped sections register when
    :mod:`dlmeval.report` is imported, which importing any of its modules does first)."""
    return [r for r in REGISTRY.values() if kind is None or kind in r.kinds]


def registry_markdown() -> str:
    """The registry as a Markdown table (for docs/report.md)."""
    lines = [
        "| section | run kinds | table | required columns | optional columns | figures |",
        "|---|---|---|---|---|---|",
    ]
    for r in renderers():
        table = "per-item results" if r.table == ITEMS else f"`{r.table}`"
        if r.uses:
            table += " (+ " + ", ".join(f"`{u}`" for u in r.uses) + ")"
        lines.append(
            f"| {r.title} | {', '.join(f'`{k}`' for k in r.kinds)} | {table} | "
            f"{', '.join(f'`{c}`' for c in r.columns) or '-'} | {', '.join(f'`{c}`' for c in r.optional) or '-'} "
            f"| {r.n_figures} |"
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "ITEMS",
    "PILLARS",
    "PILLAR_KINDS",
    "PILLAR_TITLES",
    "REGISTRY",
    "Context",
    "FigureBlock",
    "Omit",
    "Renderer",
    "Section",
    "pillar_of",
    "register",
    "registry_markdown",
    "renderers",
]

# `python -m dlmeval.report.registry`: read the registry the package filled, not this __main__ copy's (empty)
if __name__ == "__main__":
    from dlmeval.report.registry import registry_markdown as _markdown

    print(_markdown(), end="")
