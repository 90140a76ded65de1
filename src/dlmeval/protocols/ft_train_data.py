"""DiffScore-FT's training set (``--ft-train``): the paper's CNN/DailyMail by name, any Hugging Face ``datasets`` id,
a ``save_to_disk`` directory, a parquet file, or a JSONL / CSV / TSV file of source/target pairs.

A minimal loader of its own (the generic 🤗 data layer, ``dlmeval.data.hub`` of issue #23, was not merged into this
branch; when it is, :func:`read_training_pairs` should read through it). Offline by default: a hub id is read from
the ``datasets`` cache with ``HF_DATASETS_OFFLINE`` in force and raises a one-line error naming
``--allow-download`` when it is not cached.

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

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError

ALIASES = {"cnn_dailymail": ("abisee/cnn_dailymail", "3.0.0"), "cnn_dm": ("abisee/cnn_dailymail", "3.0.0")}
COLUMNS = (("source", "target"), ("article", "highlights"), ("document", "summary"), ("text", "summary"))
FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv", ".tsv")


@contextlib.contextmanager
def _offline(on: bool):
    import datasets

    old = (
        os.environ.get("HF_DATASETS_OFFLINE"),
        os.environ.get("HF_HUB_OFFLINE"),
        datasets.config.HF_HUB_OFFLINE,
    )
    if on:
        os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
        datasets.config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for k, v in zip(("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"), old[:2]):
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        datasets.config.HF_HUB_OFFLINE = old[2]


def _pairs(ds, where: str) -> list[dict]:
    cols = set(ds.column_names)
    pair = next(((s, t) for s, t in COLUMNS if s in cols and t in cols), None)
    if pair is None:
        raise DataFormatError(
            f"{where}: no source/target columns (has {sorted(cols)}); it needs one of "
            + ", ".join(f"{s}/{t}" for s, t in COLUMNS)
        )
    s, t = pair
    out = [
        {"source": str(a), "target": str(b)} for a, b in zip(ds[s], ds[t]) if isinstance(b, str) and b.strip()
    ]
    if not out:
        raise DataFormatError(f"{where}: no pair with a non-empty {t}")
    return out


@functools.lru_cache(maxsize=4)
def _read(spec: str, allow_download: bool) -> tuple[tuple[dict, ...], str, dict]:
    import datasets

    p = Path(spec).expanduser()
    if p.is_file() and p.name.lower().endswith(FILE_SUFFIXES):
        from dlmeval.train.finetune import read_pairs

        return tuple(read_pairs(p)), "file", {"path": str(p.resolve())}
    if p.is_file() and p.suffix == ".parquet":
        return (
            tuple(_pairs(datasets.Dataset.from_parquet(str(p)), str(p))),
            "parquet",
            {"path": str(p.resolve())},
        )
    if p.is_dir():
        try:
            ds = datasets.load_from_disk(str(p))
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"--ft-train {p}: not a datasets.save_to_disk directory ({e})") from None
        split = None
        if isinstance(ds, datasets.DatasetDict):
            split = "train" if "train" in ds else next(iter(ds))
            ds = ds[split]
        return tuple(_pairs(ds, str(p))), "disk", {"path": str(p.resolve()), "split": split}
    if str(spec).startswith((".", "/", "~")) or p.suffix:
        raise InputError(f"--ft-train {spec}: no such file or directory")
    name, _, split = str(spec).partition("@")
    repo, _, config = name.partition(":")
    repo, config = ALIASES.get(repo, (repo, config or None)) if not config else (repo, config)
    split = split or "train"
    try:
        with _offline(not allow_download):
            ds = datasets.load_dataset(repo, config, split=split)
    except Exception as e:  # not cached / no network / no such dataset: one line naming the option
        what = (
            "is not in the datasets cache; pass --allow-download" if not allow_download else f"failed ({e})"
        )
        raise InputError(
            f"--ft-train {spec}: the dataset {repo} ({config}, {split}) {what}, or a local path"
        ) from None
    return tuple(_pairs(ds, repo)), "hub", {"id": repo, "config": config, "split": split}


def read_training_pairs(spec: str, *, allow_download: bool = False) -> list[dict]:
    """``[{source, target}]`` of the ``--ft-train`` data."""
    return [dict(r) for r in _read(str(spec), bool(allow_download))[0]]


def describe_training_data(spec: str, *, allow_download: bool = False) -> dict[str, Any]:
    """Provenance for the run configuration: kind, where, rows and a digest of the pairs as read."""
    pairs, kind, where = _read(str(spec), bool(allow_download))
    h = hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()[:16]
    return {"kind": kind, **where, "rows": len(pairs), "digest": h}
