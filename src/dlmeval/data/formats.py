"""Line-oriented data files (JSONL, TSV, plain text; gzip-compressed or not) with errors that name file and line.

Every reader skips blank (whitespace-only) lines, strips the line terminator (``\\n`` or ``\\r\\n``) and decodes each
line as UTF-8 on its own, so that a bad byte is reported with its line number. Malformed content raises
:class:`~dlmeval.errors.DataFormatError` with a message ``"FILE:LINE: what is wrong"``; a missing file raises
:class:`~dlmeval.errors.InputError`.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError

_GZIP_MAGIC = b"\x1f\x8b"


def require_file(path: str | os.PathLike, what: str = "data file") -> Path:
    """``path`` as a Path if it is a file; otherwise an InputError that says what is missing and how to fix it."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"{what} not found at {p}; put the data files under the data directory "
            "(see shared/data/README.md) or point DLMEVAL_DATA / --data-dir at them"
        )
    return p


def _is_gzip(p: Path) -> bool:
    with p.open("rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def iter_lines(path: str | os.PathLike, *, what: str = "data file") -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for every non-blank line of a UTF-8 text file (gzip detected by its magic bytes);
    the text has its line terminator removed but is otherwise unchanged."""
    p = require_file(path, what)
    opener = gzip.open if _is_gzip(p) else open
    n = 0
    try:
        with opener(p, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise DataFormatError(
                        f"{p}:{n}: not valid UTF-8 ({e.reason} at byte {e.start})"
                    ) from None
                line = line.rstrip("\r\n")
                if line.strip():
                    yield n, line
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise DataFormatError(f"{p}:{n + 1}: corrupt or truncated gzip data ({e})") from None


def iter_jsonl(path: str | os.PathLike, *, require_object: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSONL file (``.gz`` too). With ``require_object``
    every value must be a JSON object."""
    for n, line in iter_lines(path):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}:{n}: invalid JSON ({e.msg} at column {e.colno})") from None
        if require_object and not isinstance(value, dict):
            raise DataFormatError(f"{path}:{n}: expected a JSON object, found {type(value).__name__}")
        yield n, value


def read_jsonl(path: str | os.PathLike, *, require_object: bool = True) -> list[Any]:
    """All values of a JSONL file (``.gz`` too), blank lines skipped; see :func:`iter_jsonl`."""
    return [v for _, v in iter_jsonl(path, require_object=require_object)]


def iter_tsv(
    path: str | os.PathLike, *, n_fields: int | None = None, quoting: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` for every non-blank line of a tab-separated file.

    ``quoting=False``: fields are the line split on tabs, taken literally. ``quoting=True``: each line is one
    record of the ``csv`` module's tab dialect (a field may be wrapped in double quotes, with ``""`` for a quote
    inside), as written by ``csv.writer(..., delimiter="\\t")``; a record may not span lines. ``n_fields``: the
    exact number of fields every line must have.
    """
    for n, line in iter_lines(path):
        if quoting:
            try:
                rows = list(csv.reader([line], delimiter="\t", quotechar='"', doublequote=True, strict=True))
            except csv.Error as e:
                raise DataFormatError(f"{path}:{n}: malformed quoted field ({e})") from None
            fields = rows[0] if rows else []
        else:
            fields = line.split("\t")
        if n_fields is not None and len(fields) != n_fields:
            raise DataFormatError(
                f"{path}:{n}: expected {n_fields} tab-separated fields, found {len(fields)}"
            )
        yield n, fields


def read_tsv(
    path: str | os.PathLike, *, n_fields: int | None = None, quoting: bool = False
) -> list[list[str]]:
    """All records of a tab-separated file, blank lines skipped; see :func:`iter_tsv`."""
    return [f for _, f in iter_tsv(path, n_fields=n_fields, quoting=quoting)]
