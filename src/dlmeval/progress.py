"""Rich progress bars that switch themselves off when output is not a terminal or when asked."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class _Bar:
    def __init__(self, progress: Progress | None, task):
        self._p, self._t = progress, task

    def update(self, n: int = 1, info: str | None = None) -> None:
        if self._p is not None:
            self._p.update(self._t, advance=n, info=info or "")


@contextmanager
def progress_bar(label: str, total: int | None, *, completed: int = 0, enabled: bool = True):
    if not enabled or not sys.stderr.isatty():
        yield _Bar(None, None)
        return
    from rich.console import Console

    p = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=Console(stderr=True),
        transient=False,
    )
    with p:
        t = p.add_task(label, total=total, completed=completed, info="")
        yield _Bar(p, t)
