"""The work of the suite: units of distinct texts, the chunk loop that computes and stores them, timing.

:func:`run_chunks` is THE loop over work chunks: every score the suite (and DiffScore-FT's adapters) writes goes
through it, one chunk per transaction; in a data-parallel job each rank computes its share of the pending chunks
and the results are synced at the end (:mod:`dlmeval.parallel`). The analyses have their own chunk loop
(``analyses.registry.score_items``); both are :func:`dlmeval.parallel.work_loop`.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Unit:
    """Distinct texts to score once: ``uid`` (a digest of the texts), the frame rows that share them."""

    uid: str
    rows: tuple[int, ...]


def make_units(frame: pd.DataFrame) -> list[Unit]:
    """Rows grouped by identical (cond_source, targets, source, candidate), in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, (cs, tg, src, cand) in enumerate(
        zip(frame["cond_source"], frame["targets"], frame["source"], frame["candidate"])
    ):
        h = hashlib.sha256("\x1e".join([cs, "\x1f".join(tg), src, cand]).encode("utf-8")).hexdigest()[:20]
        groups.setdefault("u" + h, []).append(i)
    return [Unit(uid, tuple(rows)) for uid, rows in groups.items()]


def unit_keys(frame: pd.DataFrame, unit: Unit, metrics: Iterable[str]) -> list[str]:
    """The store keys ``"{row key}|{metric}"`` of a unit's rows."""
    return [f"{frame['key'].iat[r]}|{m}" for r in unit.rows for m in metrics]


def read_results(run, prefix: str) -> dict[str, dict[str, Any]]:
    """``{key: result}`` of the items of ``run`` whose key starts with ``prefix``."""
    return run.results_with_prefix(prefix)


def run_chunks(
    run,
    frame: pd.DataFrame,
    units: Sequence[Unit],
    metrics: Sequence[str],
    compute: Callable[[list[Unit]], dict[str, dict[str, dict[str, Any]]]],
    *,
    chunk_size: int,
    done: set[str] | None = None,
    label: str = "",
    progress: bool = False,
) -> int:
    """Compute and store every pending chunk (:func:`dlmeval.parallel.work_loop`); returns the number of units
    this rank computed.

    ``compute(chunk) -> {uid: {metric: result dict}}``. A chunk is pending when any of its (item, metric) keys is
    missing; it is then recomputed whole (same composition, same batches) and written in one transaction.
    """
    from dlmeval.parallel import Chunk, work_loop

    if done is None:
        done = run.done_keys()
    work = [
        Chunk(tuple(k for u in units[s : s + chunk_size] for k in unit_keys(frame, u, metrics)),
              list(units[s : s + chunk_size]), size=len(units[s : s + chunk_size]))
        for s in range(0, len(units), chunk_size)
    ]  # fmt: skip

    def records(chunk: Chunk) -> list[dict[str, Any]]:
        res = compute(list(chunk.items))
        out = []
        for u in chunk.items:
            got = res[u.uid]
            missing = [m for m in metrics if m not in got]
            if missing:
                raise RuntimeError(f"{label}: no {missing} for unit {u.uid}")
            out += [got[m] for _ in u.rows for m in metrics]
        done.update(chunk.keys)  # a caller's second pass over the same units (another adapter) skips them
        return out

    return work_loop(run, work, records, label=label, progress=progress, done=done).computed_units


class Timer:
    """Seconds per (benchmark, family) in this session: the ``timing`` table."""

    def __init__(self, echo: bool = False):
        self.rows: list[dict[str, Any]] = []
        self.echo = echo

    @contextlib.contextmanager
    def time(self, benchmark: str, family: str, n_outputs: int):
        rec = {"benchmark": benchmark, "family": family, "outputs": n_outputs, "units_computed": 0}
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield rec
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 3)
            # CPU seconds of the whole process (all threads): a cost measure that a busy machine does not inflate
            rec["cpu_seconds"] = round(time.process_time() - c0, 3)
            self.rows.append(rec)
            if self.echo:
                print(
                    f"[meta-eval] {benchmark} {family}: {n_outputs} outputs, {rec['units_computed']} texts scored, "
                    f"{rec['seconds']:.1f} s wall, {rec['cpu_seconds']:.1f} s CPU",
                    file=sys.stderr,
                    flush=True,
                )


_Timer = Timer
