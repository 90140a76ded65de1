"""Data-parallel runs under ``torchrun`` / ``accelerate launch`` / ``srun``: every protocol, the same numbers.

>>> par = init_from_env()                      # RANK / WORLD_SIZE / LOCAL_RANK from the launcher; (0, 1) otherwise
>>> store = open_store(path)                   # SQLite on rank 0, a RankStore elsewhere
>>> run = store.open_run(kind, config, models, seed)   # collective: same signature on every rank, or an error
>>> for key in share_pending(run, keys):       # this rank's share of what is not done yet
...     run.put(key, compute(key))
>>> sync(run)                                  # collective: every rank's results on every rank and in rank 0's store
>>> if par.is_main: write_tables(run.results())

Every result is keyed by item and every draw seeded by (run seed, item id), so the union of the ranks' results
equals a one-process run, whatever the world size. See docs/scaling.md.
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
    share,
    share_pending,
    sync,
    synced,
)

__all__ = [
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
    "share",
    "share_pending",
    "shutdown",
    "sync",
    "synced",
]
