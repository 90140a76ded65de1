"""Files of texts to score (``dlmeval score --candidates / --sources``), each format parsed as what it is.

==============  ===================================================================================================
``.jsonl``      one object per line; the text is the field named for the role (``candidate`` for candidates,
                ``source`` for sources; ``text`` for either), optional ``source`` and ``id`` / ``item_id``. A line
                without its role's field is an error: a candidates line that only has a ``source`` is never scored
                as if the source were the candidate.
``.json``       a JSON array of strings, or of objects read like the JSONL lines; anything else is refused
``.csv/.tsv``   a header row naming the columns (the same names as the JSONL fields), then one text per row
other           plain text, one text per line (a blank line is an empty text, scored NaN with a reason)
==============  ===================================================================================================

A path that does not exist, a directory and a file with no texts (0 bytes) are errors (:class:`InputError` /
:class:`DataFormatError`) naming the file; a literal text is never guessed from a path that is missing.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError

#: the field that holds the text of each role (``text`` is accepted for both)
ROLE_FIELDS = {"candidates": "candidate", "sources": "source"}


@dataclass(frozen=True)
class TextFile:
    """The texts of one file, the sources found next to candidates (or None) and the item ids (or None)."""

    texts: list[str]
    sources: list[str | None] | None
    ids: list[str] | None


def _open_text(p: Path):
    with p.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if gz:
        return gzip.open(p, "rt", encoding="utf-8-sig", newline="")
    return p.open(encoding="utf-8-sig", newline="")


def _read_all(p: Path) -> str:
    try:
        with _open_text(p) as fh:
            return fh.read()
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{p}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except (OSError, EOFError) as e:
        raise DataFormatError(f"{p}: cannot read it ({e})") from None


def _suffix(p: Path) -> str:
    name = p.name.lower()
    name = name[:-3] if name.endswith(".gz") else name
    return Path(name).suffix


def read_text_file(path: str | os.PathLike, role: str = "candidates") -> TextFile:
    """The texts of ``path`` for ``role`` (``"candidates"`` or ``"sources"``); see the module docstring."""
    if role not in ROLE_FIELDS:
        raise ValueError(f"role must be one of {sorted(ROLE_FIELDS)}, got {role!r}")
    flag = f"--{role}"
    p = Path(path)
    if not p.exists():
        raise InputError(
            f"{flag}: no such file {str(path)!r}; pass an existing file, or add --text to score the argument "
            "itself as a text"
        )
    if p.is_dir():
        raise InputError(
            f"{flag}: {p} is a directory; pass a file of texts (.txt, .jsonl, .json, .csv, .tsv)"
        )
    if p.stat().st_size == 0:
        raise DataFormatError(f"{flag}: {p} is empty (0 bytes); it has no texts to score")
    kind = _suffix(p)
    if kind == ".jsonl":
        rows = []
        for n, line in enumerate(_read_all(p).splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{p}:{n}: invalid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise DataFormatError(f"{p}:{n}: expected a JSON object, found {type(obj).__name__}")
            rows.append((f"{p}:{n}", obj))
        out = _from_records(p, rows, role)
    elif kind == ".json":
        try:
            data = json.loads(_read_all(p))
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{p}: invalid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, list):
            raise DataFormatError(
                f"{p}: expected a JSON array of strings or of objects, found {type(data).__name__}"
            )
        if all(isinstance(x, str) for x in data):
            out = TextFile(list(data), None, None)
        elif all(isinstance(x, dict) for x in data):
            out = _from_records(p, [(f"{p}: element {i}", x) for i, x in enumerate(data)], role)
        else:
            raise DataFormatError(f"{p}: a JSON array must hold only strings or only objects")
    elif kind in (".csv", ".tsv"):
        text = _read_all(p)
        try:
            reader = csv.DictReader(text.splitlines(), delimiter="\t" if kind == ".tsv" else ",")
            records = [(f"{p}:{n + 2}", dict(r)) for n, r in enumerate(reader)]
        except csv.Error as e:
            raise DataFormatError(f"{p}: malformed {kind[1:].upper()} ({e})") from None
        fields = reader.fieldnames or []
        if not ({ROLE_FIELDS[role], "text"} & set(fields)):
            raise DataFormatError(
                f"{p}: the header row {fields} has no {ROLE_FIELDS[role]!r} (or 'text') column; the first row "
                f"of a {kind[1:].upper()} file names the columns"
            )
        for where, r in records:
            if None in r:
                raise DataFormatError(f"{where}: more cells than the header has columns")
        out = _from_records(p, records, role)
    else:
        out = TextFile(_read_all(p).splitlines(), None, None)
    if not out.texts:
        raise DataFormatError(f"{flag}: {p} has no texts to score")
    return out


def _from_records(p: Path, rows: list[tuple[str, dict[str, Any]]], role: str) -> TextFile:
    field = ROLE_FIELDS[role]
    texts: list[str] = []
    srcs: list[str | None] = []
    ids: list[str] = []
    for where, obj in rows:
        key = field if field in obj else ("text" if "text" in obj else None)
        if key is None:
            other = f" (it has {', '.join(repr(k) for k in list(obj)[:6])})" if obj else ""
            raise DataFormatError(f"{where}: no {field!r} (or 'text') field{other}")
        if not isinstance(obj[key], str):
            raise DataFormatError(f"{where}: {key!r} must be a string, got {type(obj[key]).__name__}")
        texts.append(obj[key])
        s = obj.get("source") if role == "candidates" else None
        if s is not None and not isinstance(s, str):
            raise DataFormatError(f"{where}: 'source' must be a string")
        srcs.append(s)
        given = obj.get("id", obj.get("item_id"))
        if given is not None and given != "":
            if isinstance(given, bool) or not isinstance(given, (str, int)):
                name = "id" if "id" in obj else "item_id"
                raise DataFormatError(
                    f"{where}: field {name!r} is {type(given).__name__} ({given!r}), expected a string or an integer"
                )
            ids.append(str(given))
    if ids and len(ids) != len(texts):
        raise DataFormatError(f"{p}: some rows have an 'id' and some do not; give every row one or none")
    has_src = role == "candidates" and any(s is not None for s in srcs)
    return TextFile(texts, srcs if has_src else None, ids or None)


__all__ = ["TextFile", "read_text_file", "ROLE_FIELDS"]
