"""The run store of a data-parallel job: one SQLite writer (rank 0), rank journals, results gathered by collectives.

The design, chosen so that it is safe on every file system a cluster has:

* **Rank 0 is the only process that opens the SQLite store.** SQLite's WAL mode needs shared memory on one host,
  and its locks are not reliable on network file systems, so ranks on other nodes never touch the file. The store
  may live on rank 0's local disk or on a shared file system; either works.
* **Every other rank writes its results to a journal** (JSON lines, flushed and fsynced at every write) under
  ``<store>.ranks/<run id>/`` (or ``$DLMEVAL_RANK_DIR``), and keeps them in memory.
* **At a sync point** (:meth:`MainRun.sync` / :meth:`MirrorRun.sync`, a collective called by every rank at the same
  place: the end of a phase) every rank's new results travel to every rank with ``all_gather``; rank 0 writes them
  to SQLite in one transaction per chunk, then the journals are emptied. Every rank then holds every result of the
  run, so a phase that reads the previous phase's results (a cell's metrics over all its generations) runs the
  same on every rank.
* **A killed rank loses nothing it wrote**: its journal is on disk. The next opening of the run (the same command,
  with any number of ranks, or in one process) finds every journal file of the run that some rank can see, merges
  it into SQLite (item keys make the merge idempotent: no duplicate records) and deletes it, before the pending
  work is computed and shared. Journals on a node-local disk are found when a rank of the rerun runs on that node;
  otherwise that work is simply done again, with the same result (every draw is seeded per item).

Opening a run is a collective too: every rank computes the run signature and the job stops with a clear error when
they differ (different code, config, data or models on different nodes).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dlmeval.parallel.context import ParallelContext, ParallelError, current
from dlmeval.store import jsonsafe
from dlmeval.store.access import resolve_store_path
from dlmeval.store.db import Run, RunStore, natural_key
from dlmeval.store.signature import Signature

RANK_DIR_ENV = "DLMEVAL_RANK_DIR"
_OPENINGS = itertools.count()
#: records, and bytes of JSON, per collective round (bound the memory of one all_gather)
CHUNK = 2000
CHUNK_BYTES = 32 * 2**20


def rank_dir(store_path: Path) -> Path:
    """Where the rank journals of a store live: ``<store>.ranks/`` beside it, or a folder named by the store's
    path under ``$DLMEVAL_RANK_DIR`` (so two stores sharing that directory never merge each other's journals)."""
    env = os.environ.get(RANK_DIR_ENV, "").strip()
    if not env:
        return store_path.with_name(store_path.name + ".ranks")
    tag = hashlib.sha256(str(Path(store_path).expanduser().resolve()).encode()).hexdigest()[:12]
    return Path(env).expanduser() / f"{store_path.name}-{tag}"


def _normalised(result: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise TypeError(f"a result must be a dict, got {type(result).__name__}")
    return jsonsafe.loads(jsonsafe.dumps(dict(result)))


def _pairs(pairs) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(pairs, Mapping):
        pairs = pairs.items()
    return [(str(k), _normalised(v)) for k, v in pairs]


class Journal:
    """One rank's append-only record of the results it wrote since the last sync (JSON lines)."""

    def __init__(self, directory: Path, rank: int):
        self.dir = directory
        # one file per opening: two openings of one run in a process never clear each other's records
        n = next(_OPENINGS)
        self.path = directory / f"rank{rank:05d}-{socket.gethostname()}-{os.getpid()}-{n}.jsonl"
        self._fh = None

    def append(self, pairs: list[tuple[str, dict[str, Any]]]) -> None:
        if not pairs:
            return
        if self._fh is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        self._fh.write("".join(jsonsafe.dumps({"k": k, "r": r}) + "\n" for k, r in pairs))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def clear(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def read_journal(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The records of a journal file; a torn last line (a rank killed mid-write) is dropped."""
    out = []
    with open(
        path, "rb"
    ) as fh:  # bytes: a line cut inside a multi-byte character must not fail the whole read
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                d = jsonsafe.loads(raw.decode("utf-8"))
                out.append((str(d["k"]), d["r"]))
            except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
                break
    return out


def _byte_chunks(pairs: list[tuple[str, dict[str, Any]]]) -> list[list[tuple[str, dict[str, Any]]]]:
    """``pairs`` in consecutive chunks of at most :data:`CHUNK` records and about :data:`CHUNK_BYTES` of JSON each
    (a round of ``all_gather`` holds world size x its largest chunk on every rank: long generations or token
    scores must not make that gigabytes)."""
    out: list[list[tuple[str, dict[str, Any]]]] = []
    cur: list[tuple[str, dict[str, Any]]] = []
    size = 0
    for pair in pairs:
        n = len(jsonsafe.dumps(pair[1])) + len(pair[0])
        if cur and (len(cur) >= CHUNK or size + n > CHUNK_BYTES):
            out.append(cur)
            cur, size = [], 0
        cur.append(pair)
        size += n
    if cur:
        out.append(cur)
    return out


class _Sync:
    """What :class:`MainRun` and :class:`MirrorRun` share: the outbox of results written since the last sync."""

    par: ParallelContext
    run_id: str

    def _init_sync(self, par: ParallelContext) -> None:
        self.par = par
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._warns: list[str] = []

    def _received(self, pairs: list[tuple[str, dict[str, Any]]], warns: list[str]) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        """Collective: every rank's results since the last sync reach every rank (and rank 0's store). Call it on
        every rank at the same place, at the end of a phase, before reading another rank's results or sharing the
        next phase's pending work. A no-op in a single process."""
        par = self.par
        if not par.distributed:
            return
        parts = _byte_chunks(self._outbox)
        rounds = max(1, max(par.all_gather(len(parts))))
        for i in range(rounds):
            part = {
                "r": [[k, r] for k, r in (parts[i] if i < len(parts) else [])],
                "w": self._warns if i == 0 else [],
            }
            for rank, got in enumerate(par.all_gather(part)):
                if rank != par.rank:
                    self._received([(str(k), r) for k, r in got["r"]], list(got["w"]))
        par.barrier()  # rank 0 has committed everything: the journals may go
        self._outbox, self._warns = [], []
        self._synced()

    def _synced(self) -> None:
        pass


class MainRun(Run, _Sync):
    """A run on rank 0 (or in a single process): the SQLite run, plus the outbox other ranks receive at sync."""

    def __init__(self, store: RunStore, run_id: str, par: ParallelContext):
        Run.__init__(self, store, run_id)
        self._init_sync(par)

    def put(self, key: Any, result: Mapping[str, Any]) -> None:
        self.put_many([(key, result)])

    def put_many(self, pairs) -> int:
        pairs = _pairs(pairs)
        n = Run.put_many(self, pairs)
        if self.par.distributed:
            self._outbox.extend(pairs)
        return n

    def _received(self, pairs, warns) -> None:
        for i in range(0, len(pairs), CHUNK):
            Run.put_many(self, pairs[i : i + CHUNK])
        for w in warns:
            Run.warn(self, w)


class MirrorRun(Run, _Sync):
    """A run on a rank other than 0: results in memory and in the rank's journal, never in SQLite. It holds every
    result of the run known at its opening and at the last sync, plus its own."""

    def __init__(
        self, store: RankStore, sig: Signature, cache: dict[str, dict[str, Any]], par: ParallelContext
    ):
        self.store = store  # type: ignore[assignment]
        self.run_id = sig.run_id
        self.signature = sig
        self.created = ""
        self.command_line = None
        self._cache = cache
        self._journal = Journal(rank_dir(store.path) / sig.run_id, par.rank)
        self._init_sync(par)

    def __repr__(self) -> str:
        return f"MirrorRun({self.run_id!r}, rank {self.par.rank})"

    def _refuse(self, what: str):
        raise ParallelError(
            f"rank {self.par.rank} cannot read {what} of run {self.run_id}: only rank 0 opens the store; "
            "read it after the job, or on rank 0"
        )

    status = property(lambda self: "running")
    updated = property(lambda self: "")

    def finish(self, status: str = "done") -> None:
        """Rank 0 finishes the run."""

    def put(self, key: Any, result: Mapping[str, Any]) -> None:
        self.put_many([(key, result)])

    def put_many(self, pairs) -> int:
        pairs = _pairs(pairs)
        self._journal.append(pairs)
        self._cache.update(pairs)
        self._outbox.extend(pairs)
        return len(pairs)

    def done_keys(self, prefix: str | None = None) -> set[str]:
        return {k for k in self._cache if prefix is None or k.startswith(prefix)}

    def results_with_prefix(self, prefix: str) -> dict[str, dict[str, Any]]:
        """As :meth:`Run.results_with_prefix` (key order)."""
        return {k: self.get(k) for k in sorted(k for k in self._cache if k.startswith(prefix))}

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, key: Any, default: Any = None):
        v = self._cache.get(str(key))
        return default if v is None else jsonsafe.loads(jsonsafe.dumps(v))

    def results(self) -> dict[str, dict[str, Any]]:
        return {
            k: jsonsafe.loads(jsonsafe.dumps(self._cache[k])) for k in sorted(self._cache, key=natural_key)
        }

    def put_table(self, name: str, df) -> None:
        """Tables are written by rank 0 (from the same results), so a rank's copy is dropped."""

    def get_table(self, name: str):
        self._refuse(f"table {name!r}")

    def tables(self) -> list[str]:
        self._refuse("the tables")

    def warn(self, message: str) -> bool:
        self._warns.append(str(message))
        return True

    def warnings(self) -> list[str]:
        self._refuse("the warnings")

    def sessions(self) -> list[dict[str, Any]]:
        self._refuse("the sessions")

    def info(self) -> dict[str, Any]:
        self._refuse("the run info")

    def _received(self, pairs, warns) -> None:
        self._cache.update(pairs)

    def _synced(self) -> None:
        self._journal.clear()


def _sig_payload(sig: Signature) -> dict[str, Any]:
    d = sig.as_dict()
    return {k: d[k] for k in ("run_id", "kind", "seed", "config", "models", "versions", "code") if k in d}


def _leftover_journals(store_path: Path, run_id: str) -> list[Path]:
    d = rank_dir(store_path) / run_id
    return sorted(d.glob("*.jsonl")) if d.is_dir() else []


class _OpenCollective:
    """``open_run`` as every rank runs it: agree on the signature, merge leftover journals, mirror the results."""

    par: ParallelContext
    path: Path

    def _open_collective(self, sig: Signature, open_main) -> Run:
        par = self.par
        par.agree(f"the signature of a {sig.kind!r} run", _sig_payload(sig))
        main_run = open_main() if par.is_main else None
        # leftover journals of this run (a killed rank): each file is read by the lowest rank that sees it
        seen = par.all_gather([p.name for p in _leftover_journals(self.path, sig.run_id)])
        mine = []
        for name in seen[par.rank]:
            if all(name not in seen[r] for r in range(par.rank)):
                mine.append(rank_dir(self.path) / sig.run_id / name)
        recovered = [pair for p in mine for pair in read_journal(p)]
        counts = par.all_gather(len(recovered))
        for i in range(max(1, -(-max(counts) // CHUNK))):
            got = par.all_gather([[k, r] for k, r in recovered[i * CHUNK : (i + 1) * CHUNK]])
            if main_run is not None:
                for part in got:
                    if part:
                        Run.put_many(main_run, [(str(k), r) for k, r in part])
        par.barrier()
        for p in mine:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        # every rank starts from every result of the run
        if par.is_main:
            items = list(Run.results(main_run).items())
            par.broadcast(len(items))
            for i in range(0, len(items), CHUNK):
                par.broadcast([[k, r] for k, r in items[i : i + CHUNK]])
            return main_run
        n = int(par.broadcast(None))
        cache: dict[str, dict[str, Any]] = {}
        for _ in range(0, n, CHUNK):
            cache.update((str(k), r) for k, r in par.broadcast(None))
        return MirrorRun(self, sig, cache, par)  # type: ignore[arg-type]


class ParallelStore(RunStore, _OpenCollective):
    """The SQLite store as rank 0 (or a single process) opens it: :meth:`open_run` is collective in a distributed
    job and merges leftover rank journals in every case."""

    def __init__(self, path=None, *, par: ParallelContext | None = None, **kw):
        super().__init__(path, **kw)
        self.par = par or current()

    def _open_plain(self, kind, config, models, seed, command_line) -> MainRun:
        run = RunStore.open_run(self, kind, config, models, seed, command_line)
        return MainRun(self, run.run_id, self.par)

    _local = False

    @contextlib.contextmanager
    def local(self) -> Iterator[ParallelStore]:
        """Inside ``with store.local():`` runs open on rank 0 alone (no collective): for the summary runs a
        protocol writes after its work, while the other ranks have finished."""
        old, self._local = self._local, True
        try:
            yield self
        finally:
            self._local = old

    def open_run(self, kind, config, models=None, seed=0, command_line=None) -> Run:
        def open_main():
            return self._open_plain(kind, config, models, seed, command_line)

        if not self.par.distributed or self._local:
            run = open_main()
            left = _leftover_journals(self.path, run.run_id)
            for p in left:
                pairs = read_journal(p)
                for i in range(0, len(pairs), CHUNK):
                    Run.put_many(run, pairs[i : i + CHUNK])
                p.unlink()
            return run
        return self._open_collective(Signature.create(kind, config, models, seed), open_main)


class RankStore(_OpenCollective):
    """What a rank other than 0 has instead of the SQLite store: :meth:`open_run` (collective) and nothing else."""

    read_only = False

    def __init__(self, path=None, *, par: ParallelContext | None = None):
        self.path = resolve_store_path(path)
        self.par = par or current()

    def open_run(self, kind, config, models=None, seed=0, command_line=None) -> Run:
        return self._open_collective(Signature.create(kind, config, models, seed), None)

    def _refuse(self, *a, **k):
        raise ParallelError(
            f"rank {self.par.rank} does not open the run store {self.path}: only rank 0 reads it"
        )

    get_run = list_runs = transaction = execute = _refuse

    def close(self) -> None:
        pass

    def __enter__(self) -> RankStore:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def __repr__(self) -> str:
        return f"RankStore({str(self.path)!r}, rank {self.par.rank})"


def open_store(path=None, *, par: ParallelContext | None = None) -> RunStore | RankStore:
    """The run store for this process: the SQLite store on rank 0 and in a single process, a
    :class:`RankStore` on every other rank. Commands that write runs open their store with this."""
    par = par or current()
    if par.is_main:
        return ParallelStore(path, par=par)
    return RankStore(path, par=par)


@contextlib.contextmanager
def main_only(store) -> Iterator[bool]:
    """``with main_only(store) as main:`` -- ``main`` is whether this rank writes the outputs (rank 0, or a
    single process); inside, rank 0 opens runs alone (see :meth:`ParallelStore.local`)."""
    local = getattr(store, "local", None)
    if not current().is_main:
        yield False
    elif local is None:
        yield True
    else:
        with local():
            yield True


def run_context(run: Run) -> ParallelContext:
    """The context a run's work is shared in: the run's own (opened through :func:`open_store`), else a single
    process. A plain :class:`RunStore` run inside a distributed job is refused: its work would be split, but never
    synced, and every rank would write the same SQLite file."""
    par = getattr(run, "par", None)
    if par is not None:
        return par
    if current().distributed:
        raise ParallelError(
            "this run was opened from a plain RunStore inside a distributed job; open the store with "
            "dlmeval.parallel.open_store(path) so that the ranks share the work and rank 0 alone writes SQLite"
        )
    return ParallelContext()


def sync(run: Run) -> None:
    """:meth:`sync` of a parallel run; nothing for a plain :class:`Run`."""
    f = getattr(run, "sync", None)
    if f is not None:
        f()
