"""Data-parallel runs under ``torchrun`` / ``accelerate launch`` / ``srun``: every protocol, the same numbers.

Under a launcher (not run here)::

    par = init_from_env()                      # RANK / WORLD_SIZE / LOCAL_RANK from the launcher; (0, 1) otherwise
    store = open_store(path)                   # SQLite on rank 0, a RankStore elsewhere
    run = store.open_run(kind, config, models, seed)   # collective: same signature on every rank, or an error
    work_loop(run, fixed_chunks(items, keys, size), compute)   # pending chunks shared, written, synced
    if par.is_main:
        write_tables(run.results())

:func:`~dlmeval.parallel.work.work_loop` is the one loop every protocol runs (pending chunks, this rank's share,
one write per chunk, the sync, the job-wide progress bar). Chunks have a fixed composition and every draw is seeded
by (run seed, item id), so the union of the ranks' results equals a one-process run, whatever the world size.
See docs/scaling.md.
"""

from dlmeval.parallel.context import (
    ParallelContext,
    ParallelError,
    current,
    init_from_env,
    shutdown,
)
from dlmeval.parallel.progress import job_progress
from dlmeval.parallel.store import (
    MainRun,
    MirrorRun,
    ParallelStore,
    RankStore,
    main_only,
    open_store,
    rank_dir,
    read_journal,
    run_context,
    sync,
)
from dlmeval.parallel.work import Chunk, WorkDone, fixed_chunks, work_loop

__all__ = [
    "Chunk",
    "WorkDone",
    "fixed_chunks",
    "work_loop",
    "MainRun",
    "MirrorRun",
    "ParallelContext",
    "ParallelError",
    "ParallelStore",
    "RankStore",
    "current",
    "init_from_env",
    "job_progress",
    "main_only",
    "open_store",
    "rank_dir",
    "read_journal",
    "run_context",
    "shutdown",
    "sync",
]
