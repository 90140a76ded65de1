"""The Care run loop: :func:`run_units` is the one place that walks a model's work (every sweep cell, downstream
cell and the ARC check, as :class:`Unit` values) and its items, and writes records to the run.

A unit is a list of work items with one record key each, generated in fixed consecutive chunks of
``chunk_size`` items (one atomic ``put_many`` per chunk: a killed run redoes at most one chunk, with the same rows,
so it resumes to identical numbers), then summarised into one record under ``key``. A unit's ``generate`` and
``finish`` compute records and never write them; everything the store receives goes through :func:`run_units`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlmeval.protocols.common import chunks

Warn = Callable[[str], None]


@dataclass
class Unit:
    """One cell of work of a model.

    ``generate(chunk, warn)``: the records of a chunk of ``items`` (one per item, in order, stored under the
    matching ``item_keys``). ``finish(records, warn)``: the unit's summary record from its item records (all of
    them, in item order). ``row(summary)``: its row for the tables (``table`` names which list it joins).
    ``describe(summary)``: the progress line once it is computed; ``note``: a line said whether computed or read.
    ``timed``: the summary records the seconds generation and summary took."""

    key: str
    name: str
    table: str
    items: Sequence[Any]
    item_keys: Sequence[str]
    chunk_size: int
    generate: Callable[[list, Warn], list[dict]]
    finish: Callable[[list[dict], Warn], dict]
    row: Callable[[dict], dict]
    describe: Callable[[dict], str] = lambda rec: ""
    note: str | None = None
    timed: bool = False


def run_units(
    run, units: Sequence[Unit], *, say: Callable[[str], None], progress: bool = False, label: str = ""
) -> dict[str, list[dict]]:
    """Compute every unit's missing records into ``run`` (its missing item chunks, then its summary) and read
    the rest back; returns the table rows of all units, per ``Unit.table``, in unit order.

    Two phases, so that a data-parallel job (``torchrun``) splits both: every pending item chunk of every unit,
    shared among the ranks; then every pending summary, shared likewise (a summary reads all its unit's items,
    which every rank holds after the sync). Records never depend on the phase order or on which rank computed
    them. Units sharing a summary key (a cell provably identical to an earlier one) are computed once."""
    from dlmeval.parallel import job_progress, run_context, sync

    par = run_context(run)
    done = run.done_keys()
    first: dict[str, Unit] = {}
    for u in units:
        first.setdefault(u.key, u)
    pending = [u for u in first.values() if u.key not in done]
    # phase 1: the item chunks (fixed composition, so a chunk's records do not depend on the world size)
    work = []
    for u in pending:
        size = max(1, u.chunk_size)
        for chunk, keys in zip(chunks(u.items, size), chunks(u.item_keys, size)):
            if not all(k in done for k in keys):
                work.append((u, chunk, keys))
    gen_seconds: dict[str, float] = {}
    with job_progress(f"care {label}", sum(len(c) for _, c, _ in work), enabled=progress) as bar:
        for u, chunk, keys in par.share(work):
            t0 = time.perf_counter()
            recs = u.generate(chunk, run.warn)
            run.put_many(list(zip(keys, recs)))
            gen_seconds[u.key] = gen_seconds.get(u.key, 0.0) + time.perf_counter() - t0
            bar.update(len(chunk), u.name)
    sync(run)
    # a unit's seconds: the generation time of all its chunks, on whichever ranks ran them, plus its summary
    totals: dict[str, float] = {}
    for part in par.all_gather(gen_seconds):
        for k, v in part.items():
            totals[k] = totals.get(k, 0.0) + float(v)
    # phase 2: the summaries
    for u in par.share(pending):
        t0 = time.perf_counter()
        rec = u.finish([run.get(k) for k in u.item_keys], run.warn)
        if u.timed:
            rec["seconds"] = round(totals.get(u.key, 0.0) + time.perf_counter() - t0, 3)
        run.put(u.key, rec)
    sync(run)
    computed = {u.key for u in pending}
    rows: dict[str, list[dict]] = {}
    for u in units:
        rec = run.get(u.key)
        if u.key in computed and par.is_main:
            msg = u.describe(rec)
            if msg:
                say(msg)
            computed.discard(u.key)
        if u.note and par.is_main:
            say(u.note)
        rows.setdefault(u.table, []).append(u.row(rec))
    return rows


__all__ = ["Unit", "run_units"]
