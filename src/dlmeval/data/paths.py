"""Where dlmeval finds data: ``DLMEVAL_DATA``, else ``../shared/data`` beside a source checkout, else the user's
data directory."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from platformdirs import user_cache_dir, user_data_dir

from dlmeval.errors import InputError


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        p = Path(explicit)
    elif os.environ.get("DLMEVAL_DATA"):
        p = Path(os.environ["DLMEVAL_DATA"])
    else:
        repo = Path(__file__).resolve().parents[3]
        p = repo.parent / "shared" / "data"
        if not p.exists():
            p = Path(user_data_dir("dlmeval")) / "data"
    if not p.exists():
        raise InputError(
            f"data directory {p} does not exist; set DLMEVAL_DATA or pass --data-dir, or get the public data "
            "sets with `dlmeval data fetch all` (or `dlmeval data fetch demo` for the demo's subset)"
        )
    return p


def fetch_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Where ``dlmeval data fetch`` writes: ``explicit``, else ``DLMEVAL_DATA``, else the user's data directory
    (never a shared checkout folder). Not created here."""
    if explicit:
        return Path(explicit)
    if os.environ.get("DLMEVAL_DATA"):
        return Path(os.environ["DLMEVAL_DATA"])
    return Path(user_data_dir("dlmeval")) / "data"


def cache_dir() -> Path:
    p = Path(os.environ.get("DLMEVAL_CACHE") or user_cache_dir("dlmeval"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def file_digest(path: str | os.PathLike) -> str:
    """16 hex digits of the SHA-256 of a file's bytes (cached per path, modification time and size), for run
    configurations that must change when a data file does."""
    p = Path(path)
    st = p.stat()
    return sha256_file(str(p.resolve()), st.st_mtime_ns, st.st_size)[:16]


@functools.lru_cache(maxsize=256)
def sha256_file(path: str, mtime_ns: int, size: int) -> str:
    """The full SHA-256 hex digest of a file's bytes, cached per (path, modification time, size): pass the
    ``stat`` fields so that a changed file is read again."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
