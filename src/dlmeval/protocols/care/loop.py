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

    Units sharing a summary key (a cell provably identical to an earlier one) are computed once."""
    from dlmeval.progress import progress_bar

    done = run.done_keys()
    rows: dict[str, list[dict]] = {}
    with progress_bar(f"care {label}", len(units), enabled=progress) as bar:
        for u in units:
            if u.key in done:
                rec = run.get(u.key)
            else:
                t0 = time.perf_counter()
                size = max(1, u.chunk_size)
                for chunk, keys in zip(chunks(u.items, size), chunks(u.item_keys, size)):
                    if all(k in done for k in keys):
                        continue
                    recs = u.generate(chunk, run.warn)
                    run.put_many(list(zip(keys, recs)))
                    done.update(keys)
                rec = u.finish([run.get(k) for k in u.item_keys], run.warn)
                if u.timed:
                    rec["seconds"] = round(time.perf_counter() - t0, 3)
                run.put(u.key, rec)
                done.add(u.key)
                msg = u.describe(rec)
                if msg:
                    say(msg)
            if u.note:
                say(u.note)
            rows.setdefault(u.table, []).append(u.row(rec))
            bar.update(1, u.name)
    return rows


__all__ = ["Unit", "run_units"]
