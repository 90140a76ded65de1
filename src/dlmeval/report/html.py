"""The HTML report: one self-contained file (inline CSS, figures as inline SVG, no script, no external resource)
built from the run store.

Usage (not run here: it writes a file)::

    from dlmeval.report import build_report
    build_report(RunStore("runs.sqlite"), None, "report.html")     # every run; or a list of run ids / prefixes


Layout: the run signatures first, then one part per pillar (scoring, sampling, robustness, other runs), one block
per run with its signature, and in it one section per registered renderer whose table the run stored
(:mod:`dlmeval.report.registry`). A renderer whose table is missing, or lacks a column it needs, leaves one line
saying so; a pillar with no run says how to make one. Tables no renderer claims are shown plainly at the end of
their run, so nothing stored is hidden.

Runs that another selected run already covers are folded into it: a ``care`` run (one model) into the
``care-sweep`` run of the same spec, whose tables span all models (its per-cell records still feed the churn
figure), the ``meta-eval-*`` component runs (per-item scores only) into their ``meta-eval`` summary run, and
``robust`` runs (one model each) into the ``robust-spec`` run that lists them in its ``runs`` table.
"""

from __future__ import annotations

import datetime as _dt
import html
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report import figures as F
from dlmeval.report.fmt import TableView, split_data_source, table_html
from dlmeval.report.registry import (
    ITEMS,
    PILLAR_HINTS,
    PILLAR_TITLES,
    PILLARS,
    Context,
    FigureBlock,
    Omit,
    Renderer,
    Section,
    pillar_of,
    renderers,
)

log = logging.getLogger("dlmeval.report")


# ------------------------------------------------------------------------------------------------ model
@dataclass
class RenderedSection:
    renderer: Renderer | None  # None: a plain table no renderer claims
    section: Section
    tables: list[str] = field(default_factory=list)  # tables of the run it read


@dataclass
class RunReport:
    run: Any
    pillar: str
    sections: list[RenderedSection] = field(default_factory=list)
    omitted: list[tuple[str, str]] = field(default_factory=list)  # (title, why)
    folded: list[Any] = field(default_factory=list)  # runs shown through this one


@dataclass
class Report:
    store_path: str
    runs: list[Any]
    parts: list[RunReport]
    folded_into: dict[str, str]  # run id -> run id it is shown in
    options: dict[str, Any]

    def pillar_runs(self, pillar: str) -> list[RunReport]:
        return [p for p in self.parts if p.pillar == pillar]


def _open_store(store):
    from dlmeval.store import RunStore

    if isinstance(store, str | os.PathLike):
        return RunStore(store, must_exist=True), True
    return store, False


def select_runs(store, run_ids: Iterable[str] | None = None) -> list[Any]:
    """The runs to report: the given ids / unique prefixes (in order, duplicates dropped), else every run."""
    if run_ids:
        out, seen = [], set()
        for ref in run_ids:
            r = store.get_run(ref)
            if r.run_id not in seen:
                seen.add(r.run_id)
                out.append(r)
        return out
    return [store.get_run(r["run_id"]) for r in store.list_runs()]


def fold_runs(runs: Sequence[Any]) -> dict[str, str]:
    """{run id: run id of the selected run that covers it}: ``care`` runs into the ``care-sweep`` of the same spec,
    ``meta-eval-*`` component runs into their ``meta-eval`` summary, runs listed in another run's ``runs`` table
    (``robust`` into ``robust-spec``) into that run."""
    out: dict[str, str] = {}
    ids = {r.run_id for r in runs}
    for s in runs:  # a run that lists other runs in its `runs` table (robust-spec) shows them
        if "runs" in s.tables():
            listed = s.get_table("runs")
            if "run_id" in listed.columns:
                for rid in listed["run_id"].astype(str):
                    if rid in ids and rid != s.run_id:
                        out.setdefault(rid, s.run_id)
    sweeps = [r for r in runs if r.signature.kind == "care-sweep"]
    for r in runs:
        sig = r.signature
        if sig.kind == "care":
            cfg = dict(sig.config)
            model = cfg.pop("model", None)
            for s in sweeps:
                scfg = dict(s.signature.config)
                models = scfg.pop("models", None) or []
                if model in models and scfg == cfg and s.signature.seed == sig.seed:
                    out[r.run_id] = s.run_id
                    break
        elif sig.kind.startswith("meta-eval-") and sig.kind != "meta-eval-analysis":
            for s in runs:
                comps = s.signature.config.get("components") if s.signature.kind == "meta-eval" else None
                if isinstance(comps, dict) and r.run_id in comps.values():
                    out[r.run_id] = s.run_id
                    break
    return out


def _has_items(runs: Sequence[Any]) -> bool:
    return any(len(r) > 0 for r in runs)


def render_run(run, related: Sequence[Any], options: dict[str, Any]) -> RunReport:
    """Every applicable section of one run (figures built, nothing written)."""
    kind = run.signature.kind
    rep = RunReport(run, pillar_of(kind))
    rep.folded = list(options.get("item_runs", {}).get(run.run_id, [run]))[1:]
    tables = run.tables()
    claimed: set[str] = set()
    for r in renderers(kind):
        if r.table == ITEMS:
            item_runs = options.get("item_runs", {}).get(run.run_id, [run])
            if not _has_items(item_runs):
                rep.omitted.append((r.title, "the run has no per-item results"))
                continue
            df = None
            if r.columns:  # the per-item frame, only for a renderer that needs its columns
                df = run.items() if len(run) else pd.DataFrame()
        elif r.table not in tables:
            rep.omitted.append((r.title, f"no table `{r.table}`"))
            continue
        else:
            df = run.get_table(r.table)
        source = ""
        if df is not None:  # where the data came from: a line under the section, not a column of it (#34)
            df, source = split_data_source(df)
        missing = r.missing_columns(df) if df is not None else []
        if missing:
            rep.omitted.append((r.title, f"table `{r.table}` lacks column(s) {', '.join(missing)}"))
            continue
        ctx = Context(run=run, name=r.table, df=df, related=related, options=options)
        try:
            sec = r.fn(ctx)
        except Omit as e:
            rep.omitted.append((r.title, str(e)))
            continue
        except Exception as e:  # one bad table must not cost the whole report
            log.warning("report: section %r of run %s failed: %s", r.key, run.run_id, e, exc_info=True)
            rep.omitted.append((r.title, f"could not be drawn ({type(e).__name__}: {e})"))
            continue
        used = [r.table] if r.table != ITEMS else []
        used += [u for u in r.uses if u in tables]
        claimed.update(used)
        why = prune(sec)
        if why:
            rep.omitted.append((r.title, "; ".join(why)))
        if source:
            sec.note(f"Data: {source}")
        if any(isinstance(b, TableView | FigureBlock) for b in sec.blocks):
            rep.sections.append(RenderedSection(r, sec, used))
    for name in tables:
        if name in claimed:
            continue
        df, source = split_data_source(run.get_table(name))
        if len(df) == 0:
            rep.omitted.append((f"table {name}", "empty"))
            continue
        sec = Section(f"Table {name}").table(
            TableView(
                df,
                caption=f"Stored table {name} (no dedicated section)",
                name=name,
                more_hint=f"dlmeval runs export {run.run_id} --table {name}",
                note=f"Data: {source}" if source else "",
            )
        )
        rep.sections.append(RenderedSection(None, sec, [name]))
    return rep


def prune(sec: Section) -> list[str]:
    """Drop a section's empty tables and the figures with nothing worth drawing (no finite value, or one level of
    the factor on their x axis: the section's table shows those numbers); returns why, one phrase each, for the
    run's single "Not shown" line. Figures dropped are closed."""
    why: list[str] = []
    keep: list[Any] = []
    for b in sec.blocks:
        if isinstance(b, TableView) and len(b.df) == 0:
            why.append(f"table {b.name or b.caption[:40]!s} is empty")
            continue
        if isinstance(b, FigureBlock):
            reason = F.empty_reason(b.figure)
            if reason:
                why.append(f"figure: {reason}")
                continue
        keep.append(b)
    sec.blocks[:] = keep
    return why


def collect(store, run_ids: Iterable[str] | None = None, **options: Any) -> Report:
    """Select, fold and render every run (the report's content, before HTML)."""
    runs = select_runs(store, run_ids)
    folded = fold_runs(runs)
    item_runs: dict[str, list[Any]] = {r.run_id: [r] for r in runs}
    for rid, into in folded.items():
        item_runs[into].append(next(r for r in runs if r.run_id == rid))
    opts = {**options, "item_runs": item_runs}
    parts = [render_run(r, runs, opts) for r in runs if r.run_id not in folded]
    return Report(str(store.path), runs, parts, folded, opts)


def run_figures(store, run_id: str, **options: Any) -> dict[str, Any]:
    """Every figure the report draws for one run, as ``{"section title: n": matplotlib Figure}`` (notebooks)."""
    store, close = _open_store(store)
    try:
        run = store.get_run(run_id)
        rep = render_run(run, [run], {**options, "item_runs": {run.run_id: [run]}})
    finally:
        if close:
            store.close()
    out: dict[str, Any] = {}
    for rs in rep.sections:
        k = 0
        for b in rs.section.blocks:
            if isinstance(b, FigureBlock):
                k += 1
                out[f"{rs.section.title}: {k}"] = b.figure
    return out


# ------------------------------------------------------------------------------------------------ HTML
CSS = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg2: #f6f8fa; --accent: #0a58ca; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--fg);
  margin: 0 auto; max-width: 1180px; padding: 24px 28px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 20px; border-bottom: 2px solid var(--line);
  padding-bottom: 4px; margin-top: 40px; } h3 { font-size: 16px; margin: 28px 0 4px; } h4 { font-size: 14.5px; margin: 22px 0 6px; }
p.meta, p.note, p.more, p.omitted, p.sig, .muted { color: var(--muted); font-size: 12.5px; }
p.omitted { font-style: italic; }
code, .sig code { font: 12px/1.4 "DejaVu Sans Mono", Menlo, Consolas, monospace; background: var(--bg2);
  padding: 1px 4px; border-radius: 3px; word-break: break-all; }
div.frame { max-width: 100%; overflow-x: auto; border: 1px solid var(--line); border-radius: 4px; margin: 8px 0 4px;
  padding: 0 2px; }
table.data { border-collapse: collapse; margin: 0; font-size: 12.5px; max-width: 100%; }
table.data caption { caption-side: top; text-align: left; color: var(--muted); padding: 2px 0 6px; font-size: 12.5px; }
table.data th, table.data td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left;
  vertical-align: top; overflow-wrap: break-word; }
table.data td.num, table.data th.num { white-space: nowrap; }
table.data td:first-child, table.data th:first-child { min-width: 9em; }
table.data th { background: var(--bg2); font-weight: 600; }
table.data td.num, table.data th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.data tr:hover td { background: #fbfbfc; }
sup.mark { color: #b02a37; font-weight: 700; }
figure.fig { margin: 10px 0 14px; } figure.fig svg { max-width: 100%; height: auto; display: block; }
figure.fig figcaption { color: var(--muted); font-size: 12.5px; max-width: 900px; }
section.run { border-left: 3px solid var(--line); padding-left: 14px; margin: 18px 0; }
nav.toc ul { columns: 2; font-size: 13px; } a { color: var(--accent); text-decoration: none; }
ul.warnings { color: #8a4b00; font-size: 12.5px; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _models(run) -> str:
    return ", ".join(str(m.get("name", "?")) for m in run.signature.models) or "no model"


def _block_html(block, salt: str) -> str:
    if isinstance(block, TableView):
        return table_html(block)
    if isinstance(block, FigureBlock):
        svg = F.figure_svg(block.figure, salt=salt)
        svg = svg.replace("<svg ", f'<svg role="img" aria-label="{_e(block.alt)}" ', 1)
        return f'<figure class="fig">{svg}<figcaption>{_e(block.caption)}</figcaption></figure>'
    return f'<p class="note">{_e(block)}</p>'


def _section_html(rs: RenderedSection, run, index: int) -> str:
    key = rs.renderer.key if rs.renderer else f"table/{rs.tables[0]}"
    sid = f"s-{run.run_id}-{index}"
    n_tab = sum(isinstance(b, TableView) for b in rs.section.blocks)
    n_fig = sum(isinstance(b, FigureBlock) for b in rs.section.blocks)
    parts = [
        f'<section class="block" id="{sid}" data-renderer="{_e(key)}" data-run="{run.run_id}" '
        f'data-tables="{n_tab}" data-figures="{n_fig}">',
        f"<h4>{_e(rs.section.title)}</h4>",
    ]
    if rs.section.intro:
        parts.append(f'<p class="note">{_e(rs.section.intro)}</p>')
    for j, b in enumerate(rs.section.blocks):
        parts.append(_block_html(b, f"f{run.run_id[:8]}-{index}-{j}"))
    parts.append("</section>")
    return "\n".join(parts)


def _run_html(rep: RunReport, report: Report) -> str:
    run = rep.run
    sig = run.signature
    info = f"status {_e(run.status)} · {len(run)} items · created {_e(run.created[:19].replace('T', ' '))} UTC · seed {sig.seed}"
    parts = [
        f'<section class="run" id="run-{run.run_id}" data-run="{run.run_id}" data-kind="{_e(sig.kind)}">',
        f"<h3>{_e(sig.kind)} · {_e(_models(run))} · <code>{run.run_id}</code></h3>",
        f'<p class="sig">signature: <code>{_e(sig.short())}</code></p>',
        f'<p class="meta">{info}</p>',
    ]
    if rep.folded:
        names = ", ".join(
            f"<code>{r.run_id}</code> ({_e(r.signature.kind)}, {_e(_models(r))})" for r in rep.folded
        )
        parts.append(f'<p class="meta">Includes {names}: their results appear in this run\'s tables.</p>')
    warns = run.warnings()
    for fr in rep.folded:
        warns += [f"{fr.run_id}: {w}" for w in fr.warnings()]
    if warns:
        parts.append(f'<p class="meta">Warnings ({len(warns)}):</p><ul class="warnings">')
        parts += [f"<li>{_e(w)}</li>" for w in warns[:20]]
        if len(warns) > 20:
            parts.append(f"<li>… {len(warns) - 20} more (dlmeval runs show {run.run_id})</li>")
        parts.append("</ul>")
    for i, rs in enumerate(rep.sections):
        parts.append(_section_html(rs, run, i))
    if not rep.sections:
        parts.append(
            '<p class="omitted">Nothing to show: the run stored no table and no result a section can use.</p>'
        )
    absent = [t for t, w in rep.omitted if w.startswith("no table `")]
    other = [(t, w) for t, w in rep.omitted if not w.startswith("no table `")]
    if other:
        items = "; ".join(f"{_e(t)} ({_e(w)})" for t, w in other)
        parts.append(f'<p class="omitted">Not shown for this run: {items}.</p>')
    if absent:
        parts.append(
            f'<p class="omitted">Not in this run (it stored no table for them): {_e(", ".join(absent))}.</p>'
        )
    parts.append("</section>")
    return "\n".join(parts)


def _signatures_html(report: Report) -> str:
    rows = []
    for r in report.runs:
        shown = report.folded_into.get(r.run_id)
        where = (
            f'<a href="#run-{shown}">in {shown[:8]}</a>' if shown else f'<a href="#run-{r.run_id}">below</a>'
        )
        rows.append(
            "<tr>"
            f"<td><code>{r.run_id}</code></td><td>{_e(r.signature.kind)}</td><td>{_e(_models(r))}</td>"
            f"<td>{_e(r.status)}</td><td class=num>{len(r)}</td><td>{len(r.tables())}</td>"
            f"<td><code>{_e(r.signature.short())}</code></td><td>{where}</td>"
            "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>" for h in ("run", "kind", "models", "status", "items", "tables", "signature", "shown")
    )
    return (
        '<section id="signatures"><h2>Run signatures</h2>'
        '<p class="note">Every result below carries the signature of the run that made it: dlmeval version, run '
        "kind, models with weight hashes, dtype, seed, config hash, torch and transformers versions. "
        "<code>dlmeval runs show RUN</code> prints the full configuration.</p>"
        f'<div class="frame"><table class="data" data-table="signatures"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def render_html(report: Report, title: str | None = None) -> str:
    from dlmeval import __version__

    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = title or "dlmeval report"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Generated {now} by dlmeval {_e(__version__)} from <code>{_e(report.store_path)}</code>; '
        f"{len(report.runs)} run(s). Numbers: MAUVE, correlations, accuracies and RDI to 3 decimals, PPL and NFE to "
        "1, p-values to 3 (&lt;0.001 below); ± is one standard error unless a column says otherwise.</p>",
    ]
    toc = ['<nav class="toc"><ul><li><a href="#signatures">Run signatures</a></li>']
    for p in (*PILLARS, "other"):
        runs = report.pillar_runs(p)
        if p == "other" and not runs:
            continue
        toc.append(f'<li><a href="#pillar-{p}">{_e(PILLAR_TITLES[p])}</a> ({len(runs)} run(s))</li>')
    toc.append("</ul></nav>")
    body += toc
    body.append(_signatures_html(report))
    for p in (*PILLARS, "other"):
        runs = report.pillar_runs(p)
        if p == "other" and not runs:
            continue
        body.append(
            f'<section class="pillar" id="pillar-{p}" data-pillar="{p}"><h2>{_e(PILLAR_TITLES[p])}</h2>'
        )
        if not runs:
            body.append(f'<p class="omitted">No {p} runs in this report: {_e(PILLAR_HINTS[p])}.</p>')
        for rep in runs:
            body.append(_run_html(rep, report))
        body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # no script, no external resource: the page must open offline and make no request
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def build_report(
    store,
    run_ids: Iterable[str] | None = None,
    out_path: str | os.PathLike = "report.html",
    *,
    title: str | None = None,
    heatmap_items: Sequence[str] | None = None,
    heatmap_count: int = 2,
) -> Path:
    """Write the HTML report of ``run_ids`` (ids or unique prefixes; None: every run) of ``store`` (a
    :class:`~dlmeval.store.RunStore` or a path) to ``out_path``; returns the path.

    ``heatmap_items``: item keys of ``diffscore`` runs to draw token heat maps for (default: the first
    ``heatmap_count`` items scored with token scores).
    """
    store, close = _open_store(store)
    try:
        report = collect(store, run_ids, heatmap_items=list(heatmap_items or []), heatmap_count=heatmap_count)
        if not report.runs:
            raise InputError(
                f"no runs in {store.path}; run a protocol first (dlmeval care / meta-eval / robust)"
            )
        text = render_html(report, title)
    finally:
        if close:
            store.close()
    out = Path(out_path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise InputError(f"cannot write the report to {out}: {e.strerror or e}") from None
    return out


__all__ = [
    "Report",
    "RunReport",
    "build_report",
    "collect",
    "fold_runs",
    "render_html",
    "render_run",
    "run_figures",
    "select_runs",
]
