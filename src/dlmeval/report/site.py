"""The leaderboard as a static site (``dlmeval leaderboard --site DIR``, #39): no script, no network, plain links.

::

    DIR/index.html              the leaderboard ranked by the paper's headline column (the baseline's MAUVE at the
                                headline configuration), each row with its status flag and a link to its page
    DIR/models/<run id>.html    one page per model run: its status and the evidence, every metric with its SE, the
                                interaction gap with its bootstrap CI, actual NFE, the published value where the
                                leaderboard spec has one, the signature and configuration, a link to the bundle
    DIR/bundles/<run id>.zip    the run's bundle (:mod:`dlmeval.store.bundle`): anyone can import and verify it
    DIR/leaderboard.csv         the ranked table
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report.fmt import TableView, fmt_value, split_data_source, table_html
from dlmeval.store import jsonsafe

#: the columns of the index, as (frame column, header)
INDEX_COLUMNS = (
    ("source", "prefix source"),
    ("steps", "steps"),
    ("temperature", "t"),
    ("mauve_baseline", "MAUVE baseline"),
    ("mauve_strategy", "MAUVE strategy"),
    ("gap", "gap (MAUVE)"),
    ("ppl_baseline", "PPL baseline"),
    ("ppl_strategy", "PPL strategy"),
    ("nfe_baseline", "NFE baseline"),
    ("nfe_strategy", "NFE strategy"),
    ("humaneval_pass1", "HumanEval pass@1"),
    ("gsm8k_em", "GSM8K EM"),
    ("arc_acc", "ARC acc."),
)
#: the per-model tables shown, in order, with their captions
MODEL_TABLES = (
    ("headline", "Interaction gap at the headline configuration, with its paired SE, p and bootstrap CI"),
    ("leaderboard", "Leaderboard metrics (means over seeds)"),
    ("quality", "Every cell's quality metrics (mean ± SE over seeds)"),
    ("nfe", "Actual forward passes (NFE) per sample"),
    ("compute_matched", "Strategies at matched actual NFE"),
    ("acceptance", "English-filter acceptance"),
)
SITE_CSS = """
.status { font-weight: 600; padding: 0 .4em; border-radius: 3px; white-space: nowrap; }
.status.verified { color: #0f5323; background: #dafbe1; }
.status.pending { color: #6c4a00; background: #fff8c5; }
.status.failed { color: #82071e; background: #ffebe9; }
td code { white-space: nowrap; }
pre.sig { white-space: pre-wrap; word-break: break-all; background: var(--bg2); padding: .6em; }
"""
FLAGS = {"verified": "✓ verified", "pending": "… pending", "failed": "✗ failed"}


def _page(title: str, body: str) -> str:
    from dlmeval import __version__
    from dlmeval.report.html import CSS

    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>{CSS}{SITE_CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">Generated {now} by dlmeval {html.escape(__version__)}.</p>'
        f"{body}</body></html>\n"
    )


def _flag(status: str) -> str:
    return f'<span class="status {html.escape(status)}">{html.escape(FLAGS.get(status, status))}</span>'


def published_values(store, run_id: str) -> pd.DataFrame:
    """The paper's values beside ours for a model run: the rows of the ``published`` table a ``care-leaderboard``
    run stored for the row that lists this run (empty where none does)."""
    for info in store.list_runs(
        "care-leaderboard"
    ):  # the leaderboard run kind (report/ reads, never imports, it)
        lb = store.get_run(info["run_id"])
        tables = lb.tables()
        if "leaderboard_rows" not in tables or "published" not in tables:
            continue
        t = lb.get_table("leaderboard_rows")
        hit = t[t["care_run"] == run_id] if "care_run" in t.columns else t.iloc[:0]
        if not len(hit):
            continue
        pub = lb.get_table("published")
        mine = pub[pub["row"] == f"model={hit.iloc[0]['model']}"]
        return mine[["column", "published", "measured", "diff", "diff_se", "note"]].reset_index(drop=True)
    return pd.DataFrame()


def _evidence_html(st: dict[str, Any]) -> str:
    e = st.get("evidence")
    if not e:
        return (
            f"<p>{_flag(st['status'])} Not verified yet: <code>dlmeval leaderboard verify RUN</code> recomputes a "
            "seeded sample of its work units.</p>"
        )
    hw = e.get("hardware") or {}
    items = [
        ("when", e.get("when")),
        (
            "hardware",
            f"{hw.get('device')} {hw.get('dtype')}, {hw.get('cpu')}"
            + (f", {hw['gpu']}" if hw.get("gpu") else ""),
        ),
        ("torch", hw.get("torch")),
        ("units recomputed", f"{e.get('units')} of {e.get('of_units')} ({e.get('records')} records)"),
        ("identical bits", "yes" if e.get("identical") else "no"),
        ("largest difference", f"{float(e.get('largest_difference', float('nan'))):.3g}"),
        ("tolerance", e.get("tolerance")),
        ("verification run", e.get("run_id")),
    ]
    if e.get("failed_units"):
        items.append(("failed units", ", ".join(e["failed_units"])))
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in items)
    diffs = "".join(
        f"<li><code>{html.escape(str(d.get('key')))}</code> {html.escape(str(d.get('field')))}: stored "
        f"{html.escape(str(d.get('stored'))[:80])}, recomputed {html.escape(str(d.get('new'))[:80])}</li>"
        for d in e.get("differences") or []
    )
    return f"<p>{_flag(st['status'])}</p><table>{rows}</table>" + (f"<ul>{diffs}</ul>" if diffs else "")


def _model_page(store, run, rows: pd.DataFrame, st: dict[str, Any], bundle: str | None) -> str:
    model = str(rows.iloc[0]["model"])
    parts = [f'<p><a href="../index.html">Leaderboard</a> · run <code>{run.run_id}</code>']
    if bundle:
        parts.append(f' · <a href="../{html.escape(bundle)}">bundle</a>')
    parts.append("</p><h2>Status</h2>" + _evidence_html(st))
    pub = published_values(store, run.run_id)
    if len(pub):
        parts.append(
            "<h2>Published</h2>" + table_html(TableView(pub, caption="The paper's value beside ours"))
        )
    else:
        parts.append("<h2>Published</h2><p>The spec lists no published value for this model.</p>")
    for name, caption in MODEL_TABLES:
        if name in run.tables():
            df, source = split_data_source(run.get_table(name))
            if len(df):
                view = TableView(df, caption=caption, name=name, note=f"Data: {source}" if source else "")
                parts.append(f"<h2>{html.escape(name)}</h2>" + table_html(view))
    sig = run.signature
    parts.append(
        f'<h2>Signature</h2><pre class="sig">{html.escape(sig.short())}</pre>'
        f'<details><summary>configuration and models</summary><pre class="sig">'
        f"{html.escape(jsonsafe.dumps({'config': sig.config, 'models': sig.models, 'versions': sig.versions}, indent=1))}"
        "</pre></details>"
    )
    return _page(f"{model}: Care leaderboard entry", "".join(parts))


def _index(df: pd.DataFrame, pages: dict[str, str], bundles: dict[str, str]) -> str:
    from dlmeval.report.leaderboard import CAPTION, _data_note

    if not len(df):
        return _page(
            "Care leaderboard",
            '<p class="omitted">No Care run with a leaderboard table in the store: run `dlmeval care`.</p>',
        )
    head = "".join(
        f"<th>{html.escape(h)}</th>"
        for h in ("rank", "status", "model", *(h for _, h in INDEX_COLUMNS), "run", "bundle")
    )
    body = []
    for r in df.to_dict("records"):
        rid = r["run_id"]
        cells = [
            str(r["rank"]),
            _flag(r["status"]),
            f'<a href="{html.escape(pages[rid])}">{html.escape(str(r["model"]))}</a>',
        ]
        for col, _ in INDEX_COLUMNS:
            text = fmt_value(r.get(col), col)
            if col == "gap" and pd.notna(r.get("gap_se")):
                text += " ± " + fmt_value(r.get("gap_se"), "gap_se")
            cells.append(html.escape(text))
        cells.append(f"<code>{rid}</code>")
        cells.append(f'<a href="{html.escape(bundles[rid])}">zip</a>' if rid in bundles else "–")
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    counts = df["status"].value_counts().to_dict()
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("verified", "pending", "failed"))
    return _page(
        "Care leaderboard",
        f"<p>{len(df)} row(s): {summary}. Each bundle holds the run's records, signature and verifications: "
        "<code>dlmeval runs import FILE</code>, then <code>dlmeval leaderboard verify RUN</code>.</p>"
        f'<table class="leaderboard"><caption>{html.escape(CAPTION)}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
        f'<p class="note">{html.escape(_data_note(split_data_source(df)[1]))}</p>',
    )


def write_site(
    store, out_dir: str | os.PathLike, run_ids: Sequence[str] | None = None, *, bundles: bool = True
) -> dict[str, Any]:
    """Write the site (see the module docstring); returns ``{"index": path, "pages": {run: path}, "bundles":
    {run: path}, "rows": n}``."""
    from dlmeval.report.html import _open_store
    from dlmeval.report.leaderboard import leaderboard_frame
    from dlmeval.store.bundle import export_bundle
    from dlmeval.store.verification import run_status, verification_index

    out = Path(out_dir)
    store, close = _open_store(store)
    try:
        df = leaderboard_frame(store, run_ids)
        pages = {rid: f"models/{rid}.html" for rid in df["run_id"].unique()}
        index = verification_index(store)  # read once, not once per page and bundle
        made: dict[str, str] = {}
        try:
            (out / "models").mkdir(parents=True, exist_ok=True)
            if bundles and len(pages):
                (out / "bundles").mkdir(parents=True, exist_ok=True)
            for rid in pages:
                run = store.get_run(rid)
                if bundles:
                    made[rid] = f"bundles/{rid}.zip"
                    export_bundle(run, out / made[rid], index=index)
                page = _model_page(
                    store, run, df[df["run_id"] == rid], run_status(store, rid, index), made.get(rid)
                )
                (out / pages[rid]).write_text(page, encoding="utf-8")
            (out / "index.html").write_text(_index(df, pages, made), encoding="utf-8")
            df.to_csv(out / "leaderboard.csv", index=False)
        except OSError as e:
            raise InputError(f"cannot write the site to {out}: {e.strerror or e}") from None
    finally:
        if close:
            store.close()
    return {
        "index": out / "index.html",
        "pages": {rid: out / p for rid, p in pages.items()},
        "bundles": {rid: out / p for rid, p in made.items()},
        "rows": len(df),
    }


__all__ = ["published_values", "write_site"]
