"""Where the run store lives and whether a command may use it: path resolution, writability checks made before any
work (they create nothing), and the one-line messages for SQLite's operational errors (full disk, read-only file,
locked store)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from dlmeval.errors import InputError, StoreError

STORE_ENV = "DLMEVAL_STORE"
DEFAULT_FILENAME = "runs.sqlite"


def resolve_store_path(path: str | os.PathLike | None = None) -> Path:
    """``path``, else ``$DLMEVAL_STORE``, else ``<user data dir>/dlmeval/runs.sqlite``; a directory gets
    ``runs.sqlite`` inside it. An empty ``path`` (``--store ""``) is an error, not the default store."""
    if path is not None:
        if not str(path).strip():
            raise InputError("--store is empty; pass a file path, or leave --store out for the default store")
        p = Path(path)
    elif os.environ.get(STORE_ENV, "").strip():
        p = Path(os.environ[STORE_ENV])
    else:
        from platformdirs import user_data_dir

        p = Path(user_data_dir("dlmeval")) / DEFAULT_FILENAME
    p = p.expanduser()
    if p.is_dir():
        p = p / DEFAULT_FILENAME
    return p


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create its journal files beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def check_writable_store(path: str | os.PathLike | None = None) -> Path:
    """The resolved store path if a writing command can use it (an existing writable file, or a new file in a
    directory that exists or can be made); :class:`StoreError` otherwise. Creates nothing: commands call it before
    their work so that a bad ``--store`` fails first and leaves no trace."""
    p = resolve_store_path(path)
    if p.exists():
        if not p.is_file() or not os.access(p, os.R_OK):
            raise StoreError(f"cannot read the run store {p}; pass another --store PATH")
        if not _writable(p):
            raise StoreError(
                f"the run store {p} is read-only; pass a writable --store PATH "
                "(reading it works: `dlmeval runs list --store ...`)"
            )
        return p
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(
            f"cannot create the run store {p} ({parent} is not writable); pass a writable --store PATH"
        )
    return p


def store_message(path: Path, e: sqlite3.OperationalError) -> str:
    msg = str(e)
    if "full" in msg:
        hint = "free disk space or pass another --store PATH"
    elif "readonly" in msg or "read-only" in msg:
        hint = "the file or its directory is read-only; pass a writable --store PATH"
    elif "locked" in msg or "busy" in msg:
        hint = "another process holds it; wait for it or pass another --store PATH"
    else:
        hint = "pass another --store PATH"
    return f"run store {path}: {msg}; {hint}"


__all__ = ["DEFAULT_FILENAME", "STORE_ENV", "check_writable_store", "resolve_store_path", "store_message"]
