"""SQLite run store: run signatures, per-item results written transactionally, resume.

A run's life (not run here: it opens the user's store)::

    store = RunStore()                                  # --store PATH / $DLMEVAL_STORE / user data dir
    run = store.open_run("diffscore", config, [model.identity()], seed=0)   # same command -> same run
    work_loop(run, fixed_chunks(items, [it.id for it in items], 16),             # dlmeval.parallel: the pending
              lambda c: [compute(it, derive_seed(0, it.id)) for it in c.items])  # chunks, one transaction each
    run.put_table("summary", df); run.finish()
    print(run.signature.short())

A protocol does not choose the pending items itself: :func:`dlmeval.parallel.work_loop` keeps the pending chunks, shares
them among the ranks, writes each chunk with ``put_many`` and syncs.
"""

from dlmeval.store.access import resolve_store_path
from dlmeval.store.db import Run, RunStore, natural_key
from dlmeval.store.frames import frame_records
from dlmeval.store.shard import rank_and_world_size, shard
from dlmeval.store.signature import Signature, library_versions

__all__ = [
    "Run",
    "RunStore",
    "Signature",
    "frame_records",
    "library_versions",
    "natural_key",
    "rank_and_world_size",
    "resolve_store_path",
    "shard",
]
