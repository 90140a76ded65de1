"""The local ARC-Challenge file of ``arc_challenge_local.yaml`` (lm-eval calls :func:`load` with the task's
``--metadata`` keys and the model arguments as keyword arguments)."""

from __future__ import annotations

import os
from pathlib import Path

FILE = Path("tasks") / "arc_challenge_test.jsonl"


def path(arc_path: str | None = None) -> Path:
    """``arc_path`` (``--metadata '{"arc_path": ...}'``), else ``$DLMEVAL_DATA/tasks/...``, else
    ``../shared/data/tasks/...`` beside the checkout that holds this file."""
    if arc_path:
        return Path(arc_path)
    if os.environ.get("DLMEVAL_DATA"):
        return Path(os.environ["DLMEVAL_DATA"]) / FILE
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / FILE


def load(arc_path: str | None = None, **_ignored):
    import datasets

    p = path(arc_path)
    if not p.is_file():
        raise FileNotFoundError(
            f'ARC-Challenge file {p} not found; pass --metadata \'{{"arc_path": "FILE"}}\' or set DLMEVAL_DATA'
        )
    return datasets.load_dataset("json", data_files={"test": str(p)})
