"""Inputs compared across ranks at start-up: every rank must read the same files.

The ranks of a job run the same command line (checked with the code digest in
:func:`dlmeval.parallel.context.init_from_env`), but a relative path in it names a different file on a rank
started in another directory, and a node's local copy of a data directory can differ from another node's. Each
rank resolves every command-line value that names an existing file or directory (options that name outputs:
``--store``, ``--out``, ``--output``, ``-o``, ``--ft-dir`` left out; of a ``NAME=PATH`` value, the path too) and
the data directory (``--data-dir`` is on the command line already; else ``DLMEVAL_DATA`` or the default of
:func:`dlmeval.data.paths.data_dir`), hashes its content (a directory: every file's relative path and bytes), and the ranks compare. Any difference stops every rank
with one line that names the differing paths as each rank resolved them, before a model is loaded or a store
opened.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from dlmeval.errors import ParallelError

#: options whose values are written, not read (and may differ or not exist yet)
OUTPUT_OPTIONS = frozenset({"--store", "--out", "--output", "-o", "--ft-dir"})


def _candidates(argv: Sequence[str]) -> list[str]:
    """The command-line values that may name input paths (outputs excluded), in order, without duplicates."""
    out: list[str] = []
    prev = ""
    for tok in argv:
        if tok.startswith("-") and len(tok) > 1:
            flag, eq, value = tok.partition("=")
            if eq and flag not in OUTPUT_OPTIONS and value:
                out.append(value)
            prev = flag if not eq else ""
            continue
        if prev not in OUTPUT_OPTIONS and tok:
            out.append(tok)
            if "=" in tok:  # a NAME=PATH value (meta-eval --benchmark-source SummEval=DIR): the path as well
                out.append(tok.partition("=")[2])
        prev = ""
    return list(dict.fromkeys(out))


def path_digest(p: Path) -> str:
    """sha256 of a file's bytes, or of a directory's files (relative paths and bytes, sorted; symbolic links
    followed, unreadable entries named as such)."""
    from dlmeval.data.paths import sha256_file

    if p.is_file():
        st = p.stat()
        return sha256_file(str(p), st.st_mtime_ns, st.st_size)
    h = hashlib.sha256()
    for root, dirs, files in os.walk(p, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            f = Path(root) / name
            h.update(str(f.relative_to(p)).encode("utf-8", "surrogateescape") + b"\0")
            try:
                st = f.stat()
                h.update(sha256_file(str(f), st.st_mtime_ns, st.st_size).encode())
            except OSError as e:
                h.update(f"unreadable:{e.errno}".encode())
    return h.hexdigest()


def _data_dir(argv: Sequence[str]) -> Path | None:
    if any(t == "--data-dir" or t.startswith("--data-dir=") for t in argv):
        return None  # on the command line: compared with the other values
    from dlmeval.data.paths import data_dir  # the default is declared there, once
    from dlmeval.errors import InputError

    try:
        return data_dir()
    except InputError:
        return None  # no data directory: a command that needs one says so itself


def local_inputs(argv: Sequence[str], cwd: str | None = None) -> dict[str, list[str]]:
    """{label: [resolved path, sha256]} of this process's inputs (see the module docstring)."""
    base = Path(cwd or os.getcwd())
    out: dict[str, list[str]] = {}
    for tok in _candidates(argv):
        p = Path(tok).expanduser()
        p = p if p.is_absolute() else base / p
        try:
            if p.exists():
                out[tok] = [str(p.resolve()), path_digest(p)]
        except OSError:
            continue
    d = _data_dir(argv)
    if d is not None:
        out["data directory"] = [str(d.resolve()), path_digest(d)]
    return out


def compare(per_rank: Sequence[dict[str, list[str]]]) -> str | None:
    """The one-line description of how ranks' inputs differ (None when they agree)."""
    labels = list(dict.fromkeys(k for r in per_rank for k in r))
    diffs = []
    for label in labels:
        seen = [r.get(label) for r in per_rank]
        digests = [s[1] if s else None for s in seen]
        if len(set(digests)) == 1:
            continue
        where = ", ".join(
            f"rank {i}: {s[0]} (sha256 {s[1][:12]})" if s else f"rank {i}: not there"
            for i, s in enumerate(seen)
        )
        diffs.append(f"{label} ({where})")
    if not diffs:
        return None
    return (
        "ranks read different inputs: "
        + "; ".join(diffs)
        + "; start every rank where the same files are (a shared file system or identical copies, absolute paths)"
    )


def agree_inputs(ctx, argv: Sequence[str]) -> None:
    """Collective: raise :class:`~dlmeval.errors.ParallelError` on every rank unless every rank's inputs
    have the same content."""
    if not ctx.distributed:
        return
    message = compare(ctx.all_gather(local_inputs(argv)))
    if message is not None:
        raise ParallelError(message)
