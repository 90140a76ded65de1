"""Rows of a dataset through 🤗 ``datasets``: a hub dataset id, a ``save_to_disk`` directory, or one parquet /
JSONL / CSV file.

:func:`load_rows` is the one reader every corpus and task uses for data that is not a shipped stand-in. It returns
:class:`DatasetRows`: the rows (plain dicts, in dataset order, the selected columns only) and a provenance dict
that goes into run signatures, so that another dataset, config, split, field set or row count is never a resumed
run:

``kind``         ``hub`` | ``disk`` (``save_to_disk`` directory) | ``parquet`` | ``json`` | ``csv``
``id`` / ``path``  the hub id, or the resolved local path
``name``         the config name (hub datasets with several configs), else None
``split``        the split read (None for a single file)
``fields``       the columns the rows carry
``rows``         the row count after ``limit``
``digest``       16 hex digits of SHA-256 over the rows as read (every value of every selected column): the
                 content identity, whatever the kind
``fingerprint``  the hub / disk dataset's own ``datasets`` fingerprint (another revision, another fingerprint)
``file_digest``  a local source's bytes (:func:`dlmeval.data.paths.file_digest`; for a directory, over its
                 files)

Offline by default: a hub id is read from the ``datasets`` cache with ``HF_HUB_OFFLINE`` /
``HF_DATASETS_OFFLINE`` in force, and one that is not cached raises a one-line InputError naming
``--allow-download``; with ``allow_download=True`` ``datasets`` downloads and caches it the way it always does
(``HF_DATASETS_CACHE``). Dataset scripts are never run (``datasets`` >= 4 has none).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError

#: a hub dataset id: ``name`` or ``owner/name`` (optionally written ``hf:owner/name``)
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_FILE_KINDS = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".jsonl.gz": "json",
    ".json.gz": "json",
    ".csv": "csv",
    ".csv.gz": "csv",
}
LOCAL = "a datasets.save_to_disk directory or a parquet / JSONL / CSV file"
HINT = f"pass a hub dataset id (owner/name; fetched with --allow-download) or {LOCAL}"


@dataclass(frozen=True)
class DatasetRows:
    """The rows a source gave (dicts, dataset order) and where they came from (``provenance``, for signatures)."""

    rows: list[dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]

    @property
    def label(self) -> str:
        """One line for plans and logs: ``hub:openai/gsm8k[main] test, 1319 rows``."""
        return describe(self.provenance)


def describe(prov: dict[str, Any]) -> str:
    """A provenance dict as one line (``hub:openai/gsm8k[main] test, 1319 rows``)."""
    where = prov.get("id") or prov.get("path")
    name = f"[{prov['name']}]" if prov.get("name") else ""
    split = f" {prov['split']}" if prov.get("split") else ""
    return f"{prov.get('kind')}:{where}{name}{split}, {prov.get('rows')} rows"


def is_hub_id(source: str) -> bool:
    """Whether ``source`` is written as a hub dataset id (``owner/name``, ``name`` or ``hf:owner/name``) and is not
    a path on disk."""
    s = str(source)
    if s.startswith("hf:"):
        return bool(_HUB_ID.fullmatch(s[3:]))
    return not Path(s).expanduser().exists() and bool(_HUB_ID.fullmatch(s)) and not _file_kind(Path(s))


def source_stamp(source: str | os.PathLike | None) -> tuple:
    """What changes when a local source's files do (path, modification time and size of each file): a key for
    caches of loaded rows; ``()`` for a hub id or None."""
    if source is None:
        return ()
    p = Path(str(source)).expanduser()
    if not p.exists():
        return ()
    files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)


def _file_kind(p: Path) -> str | None:
    name = p.name.lower()
    for ext in sorted(_FILE_KINDS, key=len, reverse=True):
        if name.endswith(ext):
            return _FILE_KINDS[ext]
    return None


def load_rows(
    source: str | os.PathLike,
    *,
    split: str | None = None,
    default_split: str | None = None,
    name: str | None = None,
    columns: Sequence[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
    allow_download: bool = False,
    what: str = "dataset",
) -> DatasetRows:
    """The rows of ``source`` (see the module docstring).

    ``split``: the split to read (a hub dataset or a ``DatasetDict`` directory; ``datasets`` slicing such as
    ``train[:5000]`` works for hub ids); None takes the only split, else ``default_split`` when the dataset has it,
    else an InputError listing the splits. A single file has no splits (``split`` must be None). ``name``: the
    hub config. ``columns``: the fields to keep (each must exist). ``limit``: the first ``limit`` rows. ``sample``: a
    fixed slice of ``sample`` rows chosen by document index (:func:`sample_indices`, after ``limit``), recorded in
    the provenance as ``sample = {n, seed, of, indices}``. ``what`` names the setting in error messages
    (``downstream.gsm8k.source``)."""
    if limit is not None and limit < 1:
        raise InputError(f"{what}: limit must be a positive number of rows, got {limit}")
    s = str(source)
    if not s.strip():
        raise InputError(f"{what}: empty dataset source; {HINT}")
    if s.startswith("hf:") or is_hub_id(s):
        hub_id = s[3:] if s.startswith("hf:") else s
        ds, prov = _hub(hub_id, split, default_split, name, allow_download, what)
    else:
        p = Path(s).expanduser()
        if not p.exists():
            raise InputError(f"{what}: {p} does not exist and is not a hub dataset id; {HINT}")
        if name is not None:
            raise InputError(f"{what}: a config name ({name!r}) applies to hub datasets only, not to {p}")
        ds, prov = _local(p.resolve(), split, default_split, what)
    ds = _select(ds, columns, limit, what)
    if sample is not None:
        if sample < 1:
            raise InputError(f"{what}: sample must be a positive number of rows, got {sample}")
        of = len(ds)
        idx = sample_indices(of, sample, sample_seed)
        ds = ds.select(idx)
        prov["sample"] = {"n": len(idx), "seed": int(sample_seed), "of": of, "indices": _ints_digest(idx)}
    rows = ds.to_list()
    prov.update(fields=list(ds.column_names), rows=len(rows), digest=rows_digest(rows))
    return DatasetRows(rows, prov)


def sample_indices(n_rows: int, n: int, seed: int) -> list[int]:
    """The documented held-out slice: ``sorted(numpy.random.default_rng(seed).choice(n_rows, size=min(n,
    n_rows), replace=False))``, the document indices of a split with no held-out part of its own (OpenWebText
    has only ``train``), in index order."""
    import numpy as np

    pick = np.random.default_rng(int(seed)).choice(n_rows, size=min(int(n), n_rows), replace=False)
    return sorted(int(i) for i in pick)


def _ints_digest(idx: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, idx)).encode()).hexdigest()[:16]


def rows_digest(rows: Sequence[dict[str, Any]]) -> str:
    """16 hex digits of SHA-256 over the rows (canonical JSON, keys sorted), in order."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ sources
@contextlib.contextmanager
def offline(enabled: bool = True):
    """``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` in force for ``datasets`` and ``huggingface_hub`` while
    inside (both libraries read the environment at import, so their module flags are set and restored)."""
    import datasets.config
    import huggingface_hub.constants as hub_constants

    if not enabled:
        yield
        return
    saved = (
        datasets.config.HF_HUB_OFFLINE,
        datasets.config.HF_DATASETS_OFFLINE,
        hub_constants.HF_HUB_OFFLINE,
    )
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        (
            datasets.config.HF_HUB_OFFLINE,
            datasets.config.HF_DATASETS_OFFLINE,
            hub_constants.HF_HUB_OFFLINE,
        ) = saved


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _hub(hub_id, split, default_split, name, allow_download, what):
    import datasets

    if not _HUB_ID.fullmatch(hub_id):
        raise InputError(f"{what}: {hub_id!r} is not a hub dataset id (owner/name); {HINT}")
    kw: dict[str, Any] = {}
    if not allow_download:
        kw["download_config"] = datasets.DownloadConfig(local_files_only=True)
    try:
        with offline(not allow_download):
            ds = datasets.load_dataset(hub_id, name, split=split, **kw)
    except (ValueError, KeyError) as e:
        # a split or config that the (cached) dataset does not have: datasets names the ones it has
        if not allow_download and "find cache" in str(e):
            raise _not_cached(hub_id, name, what) from None
        raise InputError(f"{what}: {hub_id}: {_first_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - datasets raises many types (ConnectionError, FileNotFoundError, ...)
        if not allow_download:
            raise _not_cached(hub_id, name, what) from None
        raise InputError(f"{what}: could not load the hub dataset {hub_id!r}: {_first_line(e)}") from None
    ds, split = _pick_split(ds, split, default_split, f"{what}: {hub_id}")
    prov = {
        "kind": "hub",
        "id": hub_id,
        "name": name or _config_name(ds),
        "split": split,
        "fingerprint": getattr(ds, "_fingerprint", None),
    }
    return ds, prov


def _not_cached(hub_id, name, what) -> InputError:
    import datasets.config

    return InputError(
        f"{what}: the hub dataset {hub_id!r}{f' [{name}]' if name else ''} is not in the 🤗 datasets cache "
        f"({datasets.config.HF_DATASETS_CACHE}); add --allow-download to fetch it, or pass {LOCAL}"
    )


def _config_name(ds) -> str | None:
    n = getattr(getattr(ds, "info", None), "config_name", None)
    return n if n and n != "default" else None


def _local(p: Path, split, default_split, what):
    import datasets

    if p.is_dir():
        if not ((p / "dataset_dict.json").is_file() or (p / "state.json").is_file()):
            raise InputError(
                f"{what}: {p} is not a datasets.save_to_disk directory (no dataset_dict.json or state.json); {HINT}"
            )
        try:
            ds = datasets.load_from_disk(str(p))
        except Exception as e:  # noqa: BLE001 - a corrupt directory: datasets raises several types
            raise DataFormatError(
                f"{what}: {p}: cannot be read by datasets.load_from_disk ({_first_line(e)})"
            ) from None
        ds, split = _pick_split(ds, split, default_split, f"{what}: {p}")
        prov = {"kind": "disk", "path": str(p), "name": None, "split": split}
        prov.update(fingerprint=getattr(ds, "_fingerprint", None), file_digest=_dir_digest(p))
        return ds, prov
    kind = _file_kind(p)
    if kind is None:
        raise InputError(f"{what}: {p}: unknown file type; {HINT}")
    if split is not None:
        raise InputError(f"{what}: {p} is one file and has no splits; remove split = {split!r}")
    from dlmeval.data.paths import cache_dir, file_digest

    try:
        ds = datasets.load_dataset(
            kind, data_files=str(p), split="train", cache_dir=str(cache_dir() / "hf-datasets")
        )
    except Exception as e:  # noqa: BLE001 - arrow / json / csv parsers raise many types
        raise DataFormatError(f"{what}: {p}: not a readable {kind} file ({_first_line(e)})") from None
    return ds, {"kind": kind, "path": str(p), "name": None, "split": None, "file_digest": file_digest(p)}


def _pick_split(ds, split, default_split, where):
    import datasets

    if not isinstance(ds, datasets.DatasetDict | datasets.IterableDatasetDict):
        return ds, split
    names = list(ds)
    if split is None:
        if len(names) == 1:
            split = names[0]
        elif default_split in names:
            split = default_split
        else:
            raise InputError(f"{where} has splits {', '.join(names)}: choose one with split = ...")
    if split not in ds:
        raise InputError(f"{where} has no split {split!r} (splits: {', '.join(names)})")
    return ds[split], split


def _select(ds, columns, limit, what):
    if columns is not None:
        missing = [c for c in columns if c not in ds.column_names]
        if missing:
            raise DataFormatError(
                f"{what}: the dataset has no field {', '.join(map(repr, missing))} "
                f"(fields: {', '.join(ds.column_names)})"
            )
        ds = ds.select_columns(list(columns))
    if limit is not None and limit < len(ds):
        ds = ds.select(range(limit))
    return ds


def _dir_digest(p: Path) -> str:
    from dlmeval.data.paths import file_digest

    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        h.update(f"{f.relative_to(p).as_posix()}\0{file_digest(f)}\n".encode())
    return h.hexdigest()[:16]


__all__ = [
    "DatasetRows",
    "describe",
    "is_hub_id",
    "load_rows",
    "offline",
    "rows_digest",
    "sample_indices",
    "source_stamp",
]
