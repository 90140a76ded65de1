"""The shipped weights of the default tiny stand-ins (issue 32): the same bytes on every machine.

Training a stand-in (:mod:`dlmeval.models.standins`, :mod:`dlmeval.models.standin_families`) and even initialising
one (``tiny-bert``, ``tiny-causal``: ``torch.nn.init`` draws through vectorised kernels) gives different bits under
``ATEN_CPU_CAPABILITY=default`` / ``avx2`` / ``avx512`` and other thread counts, so every run id and number of a
tiny run would depend on the CPU. The default stand-ins (seed 0, 2 layers, hidden 32) therefore ship their weights
in ``assets/standins/weights/<stem>.safetensors`` with ``manifest.json`` holding each file's SHA-256; the
checkpoint directory in the cache copies the shipped file (digest checked) instead of training, and a cached
directory whose weights no longer match is rebuilt.

Regenerate (after changing what a stand-in is or how it is trained; the guard digest moves with it) with
:mod:`dlmeval.models.standin_regen`::

    python -m dlmeval.models.standin_regen            # every stand-in
    python -m dlmeval.models.standin_regen tiny-llada # one

Each stand-in is built by the training code in a fresh process with ``ATEN_CPU_CAPABILITY=default`` and one
thread (``OMP_NUM_THREADS=MKL_NUM_THREADS=1``, ``MKL_CBWR=COMPATIBLE``), in an empty cache, and its weights are
written here with their digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import cache
from pathlib import Path

from dlmeval.errors import InputError

WEIGHTS = Path(__file__).resolve().parent.parent / "assets" / "standins" / "weights"
MANIFEST = WEIGHTS / "manifest.json"
#: (kind, builder) of every shipped stand-in; ``files``: a checkpoint directory, ``tiny``: built in memory
SHIPPED = {
    "llada": "standins",
    "dream": "standins",
    "a2d": "families",
    "a2d-qwen3": "families",
    "a2d-bd3lm": "families",
    "diffullama": "families",
    "bert-chat": "families",
    "lladamoe": "families",
    "bert": "tiny",
    "causal": "tiny",
}
DEFAULT = "s0-l2-h32"
#: the environment the shipped files are regenerated under
REGEN_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MKL_CBWR": "COMPATIBLE",
}
#: set in the regenerating process: build by training even where a shipped file exists
RETRAIN = "DLMEVAL_STANDIN_RETRAIN"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@cache
def manifest() -> dict[str, dict]:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def shipped(stem: str) -> str | None:
    """The SHA-256 of the shipped weights of stand-in ``stem`` (``tiny-llada-s0-l2-h32``), or None when none ship
    (another seed or size: built by training) or while regenerating."""
    if os.environ.get(RETRAIN):
        return None
    entry = manifest().get(stem)
    return entry["sha256"] if entry else None


def shipped_path(stem: str) -> Path:
    """The shipped file of ``stem``, its digest checked against the manifest."""
    path = WEIGHTS / f"{stem}.safetensors"
    want = shipped(stem)
    if want is None or not path.exists() or file_sha256(path) != want:
        raise InputError(
            f"the shipped weights of stand-in {stem} ({path}) are missing or do not match "
            f"{MANIFEST.name}; reinstall dlmeval or regenerate them: python -m dlmeval.models.standin_weights"
        )
    return path


def install(stem: str, dest: Path) -> None:
    """Copy the shipped weights of ``stem`` to ``dest`` (digest checked)."""
    shutil.copyfile(shipped_path(stem), dest)
    if file_sha256(dest) != shipped(stem):
        raise OSError(f"copying the shipped weights of {stem} to {dest} gave other bytes")


def verify(stem: str, path: Path) -> bool:
    """Whether ``path`` holds the shipped weights of ``stem`` (checked on every load of a cached directory)."""
    return path.exists() and file_sha256(path) == shipped(stem)


def load_into(module, stem: str) -> bool:
    """Load the shipped weights of an in-memory stand-in (``tiny-bert``, ``tiny-causal``) into ``module``; False
    when none ship for ``stem``."""
    if shipped(stem) is None:
        return False
    from safetensors.torch import load_model

    load_model(module, str(shipped_path(stem)), strict=True)
    return True
