"""One progress bar for the whole job: every rank adds what it finished to a job-wide counter (the rendezvous
key-value store, no collective), and rank 0's bar shows the counter."""

from __future__ import annotations

import itertools
from contextlib import contextmanager

from dlmeval.parallel.context import current
from dlmeval.progress import progress_bar

_SEQ = itertools.count()


class _JobBar:
    def __init__(self, bar, key: str):
        self._bar, self._key, self._shown = bar, key, 0
        self._par = current()

    def update(self, n: int = 1, info: str | None = None) -> None:
        total = self._par.progress_add(self._key, n)
        if self._par.is_main:
            self._bar.update(max(total - self._shown, 0), info=info)
            self._shown = max(total, self._shown)


@contextmanager
def job_progress(label: str, total: int | None, *, completed: int = 0, enabled: bool = True):
    """A progress bar over the whole job's ``total`` (the pending work of all ranks); only rank 0 draws it.
    Every rank must open the bars of a phase in the same order (their counter is named by that order)."""
    par = current()
    key = f"{next(_SEQ)}:{label}"
    with progress_bar(
        label if not par.distributed else f"{label} ({par.world_size} ranks)",
        total,
        completed=completed,
        enabled=enabled and par.is_main,
    ) as bar:
        yield _JobBar(bar, key)
