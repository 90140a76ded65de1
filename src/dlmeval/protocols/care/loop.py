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
    run,
    units: Sequence[Unit],
    *,
    say: Callable[[str], None],
    progress: bool = False,
    label: str = "",
    shard: tuple[int, int] | None = None,
) -> dict[str, list[dict]]:
    """Compute every unit's missing records into ``run`` (its missing item chunks, then its summary) and read
    the rest back; returns the table rows of all units, per ``Unit.table``, in unit order.

    Two phases, so that a data-parallel job (``torchrun``) splits both: every pending item chunk of every unit,
    shared among the ranks; then every pending summary, shared likewise (a summary reads all its unit's items,
    which every rank holds after the sync). Records never depend on the phase order or on which rank computed
    them. Units sharing a summary key (a cell provably identical to an earlier one) are computed once.

    ``shard = (i, n)`` (``--shard i/n``): only this job's part of the item chunks (:func:`work_loop`), and no
    summary (it reads items other jobs compute): returns ``{}``; the run is completed by rerunning the command
    without ``--shard`` on the store the jobs' bundles were imported into."""
    from dlmeval.parallel import Chunk, fixed_chunks, run_context, work_loop

    par = run_context(run)
    done = run.done_keys()
    first: dict[str, Unit] = {}
    for u in units:
        first.setdefault(u.key, u)
    pending = [u for u in first.values() if u.key not in done]
    # phase 1: the item chunks (fixed composition, so a chunk's records do not depend on the world size)
    work = [
        c
        for u in pending
        for c in fixed_chunks(u.items, u.item_keys, max(1, u.chunk_size), meta=u, info=u.name, tag=u.key)
    ]
    gen = work_loop(
        run,
        work,
        lambda c: c.meta.generate(list(c.items), run.warn),
        label=f"care {label}",
        progress=progress,
        done=done,
        timed=True,
        shard=shard,
    )
    if shard is not None:
        return {}

    # phase 2: the summaries. A unit's seconds: the generation time of all its chunks, on whichever ranks ran
    # them, plus its summary
    def summary(c: Chunk) -> list[dict]:
        u, t0 = c.meta, time.perf_counter()
        rec = u.finish([run.get(k) for k in u.item_keys], run.warn)
        if u.timed:
            rec["seconds"] = round(gen.seconds.get(u.key, 0.0) + time.perf_counter() - t0, 3)
        return [rec]

    work_loop(run, [Chunk((u.key,), meta=u) for u in pending], summary, done=done)
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
