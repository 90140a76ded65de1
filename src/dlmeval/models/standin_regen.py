"""Regenerating the shipped stand-in weights of :mod:`dlmeval.models.standin_weights` (kept apart from it: this
module builds every stand-in, so it sits above the families, while the shipped files are read below them)::

    python -m dlmeval.models.standin_regen            # every stand-in
    python -m dlmeval.models.standin_regen tiny-llada # one
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dlmeval.models.standin_weights import (
    DEFAULT,
    MANIFEST,
    REGEN_ENV,
    RETRAIN,
    SHIPPED,
    WEIGHTS,
    file_sha256,
    manifest,
)


def _write_tiny(kind: str, dest: Path) -> None:
    from safetensors.torch import save_model

    from dlmeval.models.tiny import tiny_model

    save_model(tiny_model(kind).module, str(dest))


def _regenerate_one(kind: str, out: str | None = None) -> None:
    """(In the regenerating process) train stand-in ``kind`` and write its weights into ``out`` (default
    :data:`WEIGHTS`)."""
    stem = f"tiny-{kind}-{DEFAULT}"
    tmp = Path(tempfile.mkdtemp(prefix="dlmeval-regen-"))
    try:
        if SHIPPED[kind] == "tiny":
            src = tmp / "model.safetensors"
            _write_tiny(kind, src)
        elif SHIPPED[kind] == "standins":
            from dlmeval.models.standins import standin_checkpoint

            src = standin_checkpoint(kind, root=tmp) / "model.safetensors"
        else:
            from dlmeval.models.standin_families import standin_dir

            src = standin_dir(kind, root=tmp) / "model.safetensors"
        dest = Path(out) if out else WEIGHTS
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / f"{stem}.safetensors")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def rebuild(kind: str, out: Path) -> Path:
    """Train stand-in ``kind`` in a fresh process under :data:`REGEN_ENV` and write its weights into ``out``;
    returns the file."""
    env = {**os.environ, **REGEN_ENV, RETRAIN: "1"}
    code = (
        f"from dlmeval.models.standin_regen import _regenerate_one; _regenerate_one({kind!r}, {str(out)!r})"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return Path(out) / f"tiny-{kind}-{DEFAULT}.safetensors"


def regenerate(kinds: list[str]) -> dict[str, dict]:
    """Rebuild the shipped weights of ``kinds`` (:func:`rebuild`) and rewrite the manifest; returns the new
    manifest."""
    import torch

    entries = dict(manifest())
    for kind in kinds:
        path = rebuild(kind, WEIGHTS)
        stem = f"tiny-{kind}-{DEFAULT}"
        entries[stem] = {
            "sha256": file_sha256(path),
            "bytes": path.stat().st_size,
            "built_with": {**REGEN_ENV, "torch": torch.__version__},
        }
    MANIFEST.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
    manifest.cache_clear()
    return entries


if __name__ == "__main__":
    names = [a.removeprefix("tiny-") for a in sys.argv[1:]] or list(SHIPPED)
    bad = [n for n in names if n not in SHIPPED]
    if bad:
        sys.exit(f"no shipped stand-in {bad[0]!r}; choose from {', '.join('tiny-' + k for k in SHIPPED)}")
    for stem, e in regenerate(names).items():
        print(f"{stem}: {e['bytes']} bytes, sha256 {e['sha256'][:16]}")
