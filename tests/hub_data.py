"""Small datasets built with 🤗 ``datasets`` itself, for the hub data layer's tests: ``save_to_disk`` directories
and an emulated hub cache entry (what ``load_dataset(owner/name, config)`` leaves in ``HF_DATASETS_CACHE``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def save_dataset(path, splits: dict[str, list[dict]]) -> str:
    """A ``DatasetDict`` of ``splits`` written with ``save_to_disk`` at ``path``."""
    import datasets

    datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()}).save_to_disk(
        str(path)
    )
    return str(path)


def cache_hub_dataset(cache, hub_id: str, config: str, splits: dict[str, list[dict]]) -> None:
    """Leave ``splits`` in the ``datasets`` cache at ``cache`` exactly where a download of ``hub_id`` / ``config``
    would (``owner___name/config/0.0.0/<hash>/name-split.arrow`` + ``dataset_info.json``), so that an offline
    ``load_dataset(hub_id, config)`` finds it. Built by the packaged JSON builder, then moved into the hub layout."""
    from datasets.packaged_modules.json.json import Json

    cache = Path(cache)
    owner, name = hub_id.split("/")
    src = cache / "_src" / owner / name / config
    src.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, rows in splits.items():
        f = src / f"{split}.jsonl"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files[split] = str(f)
    built = cache / "_build"
    b = Json(cache_dir=str(built), dataset_name=f"{owner}___{name}", config_name=config, hash="0123abcd",
             data_files=files)  # fmt: skip
    b.download_and_prepare()
    target = cache / f"{owner}___{name}" / config / "0.0.0" / "0123abcd"
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(b.cache_dir, target)
    for f in target.glob(f"{owner}___{name}-*.arrow"):
        f.rename(target / f.name.replace(f"{owner}___{name}-", f"{name}-"))
    shutil.rmtree(built)
