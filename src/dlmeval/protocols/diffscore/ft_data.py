"""DiffScore-FT's training set (``--ft-train``): the paper's CNN/DailyMail by name, any Hugging Face ``datasets`` id,
a ``save_to_disk`` directory, a parquet file, or a JSONL / CSV / TSV file of source/target pairs.

Everything but a pairs file is read through the one data layer, :func:`dlmeval.data.hub.load_rows` (offline by
default: a hub id is read from the ``datasets`` cache and one that is not cached raises a one-line error naming
``--allow-download``).

=================  ===============================================================================================
``cnn_dailymail``  ``abisee/cnn_dailymail``, config ``3.0.0``, split ``train``: ``article`` -> ``highlights``
                   (the paper's FT data)
``ID[:CONFIG]``    a hub dataset (split ``train``; ``ID[:CONFIG]@SPLIT`` for another)
a directory        ``datasets.load_from_disk`` (a DatasetDict: its ``train`` split)
``*.parquet``      ``datasets.Dataset.from_parquet``
``*.jsonl`` ...    :func:`dlmeval.train.finetune.read_pairs` (``source`` / ``target`` fields)
=================  ===============================================================================================

Columns: ``source`` / ``target``, else the first of the known pairs (article/highlights, document/summary,
text/summary). The provenance (:func:`describe_training_data`) goes into the FT run configuration: the kind, id,
config, split, row count and a digest of the pairs as read.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError

ALIASES = {"cnn_dailymail": ("abisee/cnn_dailymail", "3.0.0"), "cnn_dm": ("abisee/cnn_dailymail", "3.0.0")}
COLUMNS = (("source", "target"), ("article", "highlights"), ("document", "summary"), ("text", "summary"))
FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv", ".tsv")


def _pairs(rows: list[dict], where: str) -> list[dict]:
    cols = set(rows[0]) if rows else set()
    pair = next(((s, t) for s, t in COLUMNS if s in cols and t in cols), None)
    if pair is None:
        raise DataFormatError(
            f"{where}: no source/target columns (has {sorted(cols)}); it needs one of "
            + ", ".join(f"{s}/{t}" for s, t in COLUMNS)
        )
    s, t = pair
    for i, r in enumerate(
        rows
    ):  # every pair's fields are texts (a number or None was quietly str()-ed or dropped)
        for f in (s, t):
            if not isinstance(r.get(f), str):
                raise DataFormatError(
                    f"{where}: row {i}: field {f!r} is {type(r.get(f)).__name__}, expected a string"
                )
    out = [{"source": r[s], "target": r[t]} for r in rows if r[t].strip()]
    if not out:
        raise DataFormatError(f"{where}: no pair with a non-empty {t}")
    return out


@functools.lru_cache(maxsize=4)
def _read(spec: str, allow_download: bool) -> tuple[tuple[dict, ...], str, dict]:
    from dlmeval.data.hub import load_rows

    p = Path(spec).expanduser()
    if p.is_file() and p.name.lower().endswith(FILE_SUFFIXES):
        from dlmeval.train.finetune import read_pairs

        return tuple(read_pairs(p)), "file", {"path": str(p.resolve())}
    if p.exists():
        got = load_rows(p, default_split="train", what=f"--ft-train {p}")
        where = {"path": got.provenance.get("path", str(p.resolve())), "split": got.provenance.get("split")}
        return tuple(_pairs(got.rows, str(p))), got.provenance["kind"], where
    if str(spec).startswith((".", "/", "~")) or p.suffix:
        raise InputError(f"--ft-train {spec}: no such file or directory")
    name, _, split = str(spec).partition("@")
    repo, _, config = name.partition(":")
    repo, config = ALIASES.get(repo, (repo, config or None)) if not config else (repo, config)
    split = split or "train"
    got = load_rows(
        repo,
        name=config,
        split=split,
        allow_download=allow_download,
        what=f"--ft-train {spec} ({repo}, {config}, {split})",
    )
    return tuple(_pairs(got.rows, repo)), "hub", {"id": repo, "config": config, "split": split}


def read_training_pairs(spec: str, *, allow_download: bool = False) -> list[dict]:
    """``[{source, target}]`` of the ``--ft-train`` data."""
    return [dict(r) for r in _read(str(spec), bool(allow_download))[0]]


def describe_training_data(spec: str, *, allow_download: bool = False) -> dict[str, Any]:
    """Provenance for the run configuration: kind, where, rows and a digest of the pairs as read."""
    pairs, kind, where = _read(str(spec), bool(allow_download))
    h = hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()[:16]
    return {"kind": kind, **where, "rows": len(pairs), "digest": h}
