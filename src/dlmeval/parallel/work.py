"""THE work loop: every protocol's pending / share / compute / write / sync sequence, written once.

A protocol cuts its work into :class:`Chunk` values (the store keys a chunk writes, one record per key, and what
its ``compute`` needs) by a rule that depends only on the run's items and the configured sizes, never on what is
pending or on the world size; :func:`work_loop` then

1. keeps the chunks with a key not done yet (the whole chunk is recomputed: same composition, same batches, so a
   resumed run writes the bits an uninterrupted one would),
2. gives this rank its share of them (every rank computes the same pending list: results are mirrored at every
   sync),
3. computes each of its chunks and writes the chunk's records in one ``put_many`` (one transaction, or one
   journal write on a rank other than 0),
4. syncs the run (a collective: every rank then holds every result), and draws one job-wide progress bar.

>>> from dlmeval.store import RunStore
>>> store = RunStore(":memory:")
>>> run = store.open_run("toy", {"n": 5})
>>> work = fixed_chunks(range(5), [f"item/{i}" for i in range(5)], 2)
>>> [c.keys for c in work]
[('item/0', 'item/1'), ('item/2', 'item/3'), ('item/4',)]
>>> work_loop(run, work, lambda c: [{"square": i * i} for i in c.items]).pending_chunks
3
>>> run.get("item/3")
{'square': 9}
>>> work_loop(run, work, lambda c: 1 / 0).pending_chunks   # resumed: nothing is pending, nothing computed
0

Without a run (``run=None``: a command with no store, ``dlmeval sample``) the records stay in memory and are
gathered on every rank at the end (:attr:`WorkDone.records`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError


@dataclass(frozen=True)
class Chunk:
    """A fixed piece of work: ``keys`` (the records it writes, in order), ``items`` (what ``compute`` reads),
    ``meta`` (anything else the protocol needs for it), ``info`` (the progress line), ``tag`` (the name its
    seconds are summed under, with ``timed=True``) and ``size`` (progress units; default ``len(keys)``)."""

    keys: tuple[str, ...]
    items: Sequence[Any] = ()
    meta: Any = None
    info: str = ""
    tag: str | None = None
    size: int | None = None

    @property
    def units(self) -> int:
        return len(self.keys) if self.size is None else int(self.size)


def fixed_chunks(
    items: Sequence[Any], keys: Sequence[str], size: int, *, meta: Any = None, info: str = "", tag=None
) -> list[Chunk]:
    """Consecutive slices of ``size`` items (the last one shorter), each with its keys: the canonical chunks of a
    list whose items are computed in batches of ``size``."""
    if size < 1:
        raise InputError(f"chunk size must be at least 1, got {size}")
    items, keys = list(items), [str(k) for k in keys]
    if len(items) != len(keys):
        raise ValueError(f"{len(items)} items but {len(keys)} keys")
    return [
        Chunk(tuple(keys[i : i + size]), items[i : i + size], meta=meta, info=info, tag=tag)
        for i in range(0, len(items), size)
    ]


@dataclass
class WorkDone:
    """What :func:`work_loop` did: ``pending_chunks`` / ``pending_units`` of the whole job, ``computed_units`` by
    this rank, ``seconds`` per chunk tag summed over every rank (``timed=True``), ``records`` (``run=None``)."""

    pending_chunks: int = 0
    pending_units: int = 0
    computed_units: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


def _is_done(done) -> Callable[[str], bool]:
    if callable(done):
        return done
    return lambda k: k in done


#: a file to which every computed chunk appends one line (pid, first key, number of keys): how tests count the
#: chunks each process computed
TRACE_ENV = "DLMEVAL_TRACE_CHUNKS"
#: a file: after its first traced chunk (computed, not yet written; only with :data:`TRACE_ENV` set), a process
#: waits until that file exists (at most :data:`HOLD_MAX_S`): how tests hold one process in the middle of a run
#: while another opens it
HOLD_ENV = "DLMEVAL_TRACE_HOLD"
HOLD_MAX_S = 600.0
#: seconds between two looks at the chunks another process holds
POLL_S = 0.2


def _trace(chunk: Chunk) -> None:
    path = os.environ.get(TRACE_ENV, "").strip()
    if path:
        line = f"{os.getpid()} {chunk.keys[0] if chunk.keys else ''} {len(chunk.keys)}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of a short line: lines of two processes never interleave
        finally:
            os.close(fd)
        _hold()


_HELD: list[bool] = []


def _hold() -> None:
    gate = os.environ.get(HOLD_ENV, "").strip()
    if not gate or _HELD:
        return
    _HELD.append(True)
    t0 = time.monotonic()
    while not os.path.exists(gate) and time.monotonic() - t0 < HOLD_MAX_S:
        time.sleep(0.05)


class _Claims:
    """The chunks of a run that another process on the same store may be writing too (see
    :mod:`dlmeval.store.lease`): in a single process with an SQLite run, each chunk is claimed before it is
    computed; one claimed by another live process is skipped and waited for at the end (computed here only if that
    process dies before writing it). Without a store, or in a data-parallel job (rank 0 alone writes), nothing is
    claimed."""

    def __init__(self, run=None):
        self.run = run
        self.since = None
        if run is not None:
            from dlmeval.store.db import _now

            # a chunk whose records were all written after this process opened the run (before its caller read
            # the done keys) was computed in this session: by another process, or this one
            self.since = min(getattr(run, "opened", None) or _now(), _now())

    @classmethod
    def of(cls, run, par) -> _Claims:
        store = getattr(run, "store", None)
        if run is None or par.distributed or not callable(getattr(store, "transaction", None)):
            return cls()
        if getattr(store, "read_only", False):
            return cls()
        return cls(run)

    def _try(self, chunk: Chunk) -> str:
        from dlmeval.store import lease
        from dlmeval.store.db import _now

        with self.run.store.transaction() as c:
            got = lease.claim(c, self.run.run_id, chunk.keys, self.since, _now())
            if got == "held":
                lease.announce(c, self.run.run_id)
            return got

    def order(self, chunks, bar):
        """The chunks to compute here, claimed one at a time; then, until none is left, those other processes
        held (a chunk they wrote is counted on the bar and skipped)."""
        if self.run is None:
            yield from chunks
            return
        waiting = []
        for chunk in chunks:
            got = self._try(chunk)
            if got == "mine":
                yield chunk
            elif got == "held":
                waiting.append(chunk)
            else:
                bar.update(chunk.units, chunk.info or None)
        while waiting:
            time.sleep(POLL_S)
            still = []
            for chunk in waiting:
                got = self._try(chunk)
                if got == "mine":
                    yield chunk
                elif got == "held":
                    still.append(chunk)
                else:
                    bar.update(chunk.units, chunk.info or None)
            waiting = still

    def release(self, chunk: Chunk) -> None:
        if self.run is None:
            return
        from dlmeval.store import lease

        with self.run.store.transaction() as c:
            lease.unclaim(c, self.run.run_id, chunk.keys)


def work_loop(
    run,
    chunks: Sequence[Chunk],
    compute: Callable[[Chunk], Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]]],
    *,
    label: str = "",
    progress: bool = False,
    done: Container[str] | Callable[[str], bool] | None = None,
    timed: bool = False,
    shard: tuple[int, int] | None = None,
) -> WorkDone:
    """Compute, write and sync every pending chunk of ``chunks`` (see the module docstring).

    ``compute(chunk)`` returns the chunk's records: a list aligned with ``chunk.keys``, or ``{key: record}`` for
    every key. ``done``: the keys already done (a set, or a predicate; default ``run.done_keys()``), for a caller
    that also recomputes records lacking a field. ``run=None``: nothing is stored, every rank receives every
    record in :attr:`WorkDone.records`. Every rank must call it with the same chunks.

    ``shard = (i, n)``: an independent job's part of the work (``--shard i/n``: a SLURM array, two machines with
    their own stores): only every ``n``-th chunk of ``chunks`` starting at ``i`` is considered, chosen on the full
    list (never on what is pending), so the ``n`` jobs partition the work and their bundles merge into the run a
    single job writes (:mod:`dlmeval.store.bundle`)."""
    from dlmeval.parallel.context import current
    from dlmeval.parallel.progress import job_progress
    from dlmeval.parallel.store import run_context, sync

    par = run_context(run) if run is not None else current()
    # before the done keys are read: a chunk written from here on counts as done
    claims = _Claims.of(run, par)
    if done is None:
        done = run.done_keys() if run is not None else ()
    is_done = _is_done(done)
    if shard is not None:
        from dlmeval.store.shard import shard as part

        chunks = part(chunks, *shard)
    pending = [c for c in chunks if not all(is_done(k) for k in c.keys)]
    out = WorkDone(len(pending), sum(c.units for c in pending))
    mine: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    with job_progress(label, out.pending_units, enabled=progress) as bar:
        for chunk in claims.order(par.share(pending), bar):
            t0 = time.perf_counter()
            recs = compute(chunk)
            _trace(chunk)
            if isinstance(recs, Mapping):
                missing = [k for k in chunk.keys if k not in recs]
                if missing:
                    raise RuntimeError(f"{label}: no record for {missing[:3]}")
                recs = [recs[k] for k in chunk.keys]
            recs = list(recs)
            if len(recs) != len(chunk.keys):
                raise RuntimeError(f"{label}: {len(recs)} records for {len(chunk.keys)} keys")
            pairs = list(zip(chunk.keys, recs))
            if run is not None:
                run.put_many(pairs)
                claims.release(chunk)
            else:
                mine.update(pairs)
            if chunk.tag is not None:
                seconds[chunk.tag] = seconds.get(chunk.tag, 0.0) + time.perf_counter() - t0
            out.computed_units += chunk.units
            bar.update(chunk.units, chunk.info or None)
    if run is not None:
        sync(run)
    else:
        for part in par.all_gather(mine):
            out.records.update(part)
    if timed:  # a tag's seconds on whichever ranks ran its chunks
        for part in par.all_gather(seconds):
            for k, v in part.items():
                out.seconds[k] = out.seconds.get(k, 0.0) + float(v)
    return out


__all__ = ["Chunk", "WorkDone", "fixed_chunks", "work_loop"]
