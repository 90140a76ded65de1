"""The Care leaderboard over every model in a run store: MAUVE of the baseline (``none``) and the strategy
(``high_entropy``) at the headline configuration, the interaction gap, PPL, actual NFE and downstream scores, one
row per (Care run, prefix source), each with the signature of the run it comes from.

Usage (not run here: it reads the user's store and writes files)::

    from dlmeval.report.leaderboard import leaderboard_frame, write_leaderboard
    df = leaderboard_frame(RunStore())
    write_leaderboard(RunStore(), "leaderboard", formats=("html", "md", "csv"))


Every row has a ``status``: ``verified``, ``pending`` or ``failed`` (:mod:`dlmeval.store.verification`).
Rows come from the ``leaderboard`` and ``nfe`` tables of ``care`` runs (one model each); a ``care-sweep`` run adds
rows only for models no ``care`` run of the same spec provides. Rows are ranked by the baseline's MAUVE (higher is
better), ties by the smaller gap. Rows made under different headline settings (steps, temperature, source) sit in
one table but are not comparable; their settings are columns of the row.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.report.fmt import DATA_SOURCE, TableView, markdown_table, split_data_source, table_html

FORMATS = ("html", "md", "csv")
KINDS = ("care", "care-sweep")


def _headline(run) -> tuple[str, str]:
    h = run.signature.config.get("headline") or {}
    return str(h.get("baseline", "none")), str(h.get("strategy", "high_entropy"))


def _nfe_at(nfe: pd.DataFrame | None, model: str, strategy: str, steps: Any) -> float:
    if nfe is None or nfe.empty or not {"strategy", "steps", "nfe"} <= set(nfe.columns):
        return float("nan")
    sel = nfe[nfe["strategy"] == strategy]
    if "model" in sel.columns:
        sel = sel[sel["model"] == model]
    if steps is not None and pd.notna(steps):
        sel = sel[np.isclose(pd.to_numeric(sel["steps"], errors="coerce"), float(steps))]
    return float(sel["nfe"].mean()) if len(sel) else float("nan")


def _rows(run) -> list[dict[str, Any]]:
    if "leaderboard" not in run.tables():
        return []
    lb = run.get_table("leaderboard")
    nfe = run.get_table("nfe") if "nfe" in run.tables() else None
    base, strat = _headline(run)
    out = []
    for r in lb.to_dict("records"):
        model = r.get("model", run.signature.config.get("model", "?"))
        ident = next((m for m in run.signature.models if m.get("name") == model), None)
        if ident is None and run.signature.kind == "care" and run.signature.models:
            ident = run.signature.models[0]
        row = {
            "model": model,
            "weights": str((ident or {}).get("weights_sha256") or "")[:8],
            "source": r.get("source"),
            "steps": r.get("steps"),
            "temperature": r.get("temperature"),
            "baseline": base,
            "strategy": strat,
            "mauve_baseline": r.get(f"mauve_{base}"),
            "mauve_strategy": r.get(f"mauve_{strat}"),
            "gap": r.get("gap"),
            "gap_se": r.get("gap_se"),
            "p": r.get("p"),
            "ppl_baseline": r.get(f"ppl_{base}"),
            "ppl_strategy": r.get(f"ppl_{strat}"),
            "nfe_baseline": _nfe_at(nfe, model, base, r.get("steps")),
            "nfe_strategy": _nfe_at(nfe, model, strat, r.get("steps")),
            "humaneval_pass1": r.get("humaneval_pass1"),
            "gsm8k_em": r.get("gsm8k_em"),
            "arc_acc": r.get("arc_acc"),
            "n_seeds": r.get("n_seeds"),
            # where the run's prompts and references came from (a run stored before #34: not recorded)
            DATA_SOURCE: r.get(DATA_SOURCE) if isinstance(r.get(DATA_SOURCE), str) else "",
            "run_id": run.run_id,
            "signature": run.signature.short(),
        }
        out.append(row)
    return out


#: the measured columns (floats in the frame, as the temperature)
MEASURES = (
    "mauve_baseline",
    "mauve_strategy",
    "gap",
    "gap_se",
    "p",
    "ppl_baseline",
    "ppl_strategy",
    "nfe_baseline",
    "nfe_strategy",
    "humaneval_pass1",
    "gsm8k_em",
    "arc_acc",
)
COLUMNS = (
    "rank",
    "status",
    "model",
    "weights",
    "source",
    "steps",
    "temperature",
    "baseline",
    "strategy",
    *MEASURES,
    "n_seeds",
    DATA_SOURCE,
    "run_id",
    "signature",
)


def leaderboard_frame(store, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (Care run, source) with the columns of :data:`COLUMNS` (numbers unrounded)."""
    from dlmeval.report.html import _open_store, fold_runs, select_runs
    from dlmeval.store.verification import run_status, verification_index

    store, close = _open_store(store)
    try:
        runs = [r for r in select_runs(store, run_ids) if r.signature.kind in KINDS]
        folded = fold_runs(runs)  # care run -> the sweep run that also holds its rows
        by_id = {r.run_id: r for r in runs}
        covered = {(into, by_id[rid].signature.config.get("model")) for rid, into in folded.items()}
        rows = []
        for r in runs:
            rows += [x for x in _rows(r) if (r.run_id, x["model"]) not in covered]
        index = verification_index(store)  # read once, not once per run
        status = {rid: run_status(store, rid, index)["status"] for rid in {x["run_id"] for x in rows}}
        for x in rows:
            x["status"] = status[x["run_id"]]
    finally:
        if close:
            store.close()
    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "rank"])
    for c in (*MEASURES, "temperature"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    if len(df):
        df = df.sort_values(
            ["mauve_baseline", "gap"], ascending=[False, True], na_position="last", kind="mergesort"
        )
    df = df.reset_index(drop=True)
    df.insert(0, "rank", range(1, len(df) + 1))
    return df


CAPTION = (
    "Care leaderboard: MAUVE of the baseline and the informed strategy at the headline configuration (steps, "
    "unmask temperature t; means over seeds, English-filtered generations), interaction gap = MAUVE(baseline) - "
    "MAUVE(strategy) with its paired SE and p over seeds, PPL by the external AR evaluator, actual NFE per sample "
    "at the headline steps, downstream HumanEval pass@1, GSM8K exact match and ARC accuracy (log-likelihood). "
    "Ranked by the baseline's MAUVE; ties by the smaller gap. Status: verified (a seeded sample of the run's "
    "work units recomputed and matched: `dlmeval leaderboard verify`), pending (not verified yet) or failed (a "
    "recomputed unit did not match)."
)


def _data_note(source: str) -> str:
    return f"Data: {source or 'not recorded (a run stored before the tables named their data)'}"


def leaderboard_html(df: pd.DataFrame, title: str = "Care leaderboard") -> str:
    from dlmeval import __version__
    from dlmeval.report.html import CSS

    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    df, source = split_data_source(df)  # one line under the table, not a column of long text
    body = (
        table_html(
            TableView(
                df,
                note=_data_note(source),
                caption=CAPTION,
                name="leaderboard",
                best={
                    "mauve_baseline": "max",
                    "mauve_strategy": "max",
                    "gap": "min",
                    "humaneval_pass1": "max",
                    "gsm8k_em": "max",
                    "arc_acc": "max",
                },
                max_rows=10_000,
            )
        )
        if len(df)
        else '<p class="omitted">No Care run with a leaderboard table in the store: run `dlmeval care`.</p>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">Generated {now} by dlmeval {html.escape(__version__)}; '
        f"{len(df)} row(s). Bold: best per column.</p>{body}</body></html>\n"
    )


def leaderboard_markdown(df: pd.DataFrame, title: str = "Care leaderboard") -> str:
    if not len(df):
        return f"# {title}\n\nNo Care run with a leaderboard table in the store: run `dlmeval care`.\n"
    df, source = split_data_source(df)
    return f"# {title}\n\n{CAPTION}\n\n{markdown_table(df)}\n{_data_note(source)}\n"


def write_leaderboard(
    store,
    out: str | os.PathLike = "leaderboard",
    formats: Sequence[str] = FORMATS,
    run_ids: Sequence[str] | None = None,
) -> dict[str, Path]:
    """Write the leaderboard as ``<out>.html`` / ``.md`` / ``.csv`` (``out`` without suffix, or with one of them,
    which is replaced); returns ``{format: path}``."""
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise InputError(
            f"leaderboard formats are {', '.join(FORMATS)}; got {', '.join(map(str, formats)) or 'none'}"
        )
    df = leaderboard_frame(store, run_ids)
    base = Path(out)
    if base.suffix.lower().lstrip(".") in FORMATS:
        base = base.with_suffix("")
    paths: dict[str, Path] = {}
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        for f in formats:
            p = base.with_name(base.name + f".{f}")
            if f == "csv":
                df.to_csv(p, index=False)
            elif f == "md":
                p.write_text(leaderboard_markdown(df), encoding="utf-8")
            else:
                p.write_text(leaderboard_html(df), encoding="utf-8")
            paths[f] = p
    except OSError as e:
        raise InputError(f"cannot write the leaderboard to {base}: {e.strerror or e}") from None
    return paths


__all__ = [
    "COLUMNS",
    "FORMATS",
    "MEASURES",
    "leaderboard_frame",
    "leaderboard_html",
    "leaderboard_markdown",
    "write_leaderboard",
]
