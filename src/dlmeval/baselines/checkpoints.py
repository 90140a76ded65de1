"""Where a baseline's checkpoint comes from: a local directory, or a Hugging Face hub id read from the local cache
(fetched only with ``allow_download``). One resolver for every baseline family (BERTScore, MoverScore, UniEval,
AlignScore, QuestEval, G-Eval's local judge), so that each says the same thing when its weights are not on this
machine."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from dlmeval.errors import ModelNotFoundError


def cached_snapshot(repo_id: str, *, allow_download: bool = False) -> Path | None:
    """The local snapshot directory of hub repository ``repo_id`` (None when it is not cached and downloading is
    not allowed, or the download fails)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=not allow_download))
    except Exception:  # not cached / no network / no such repository: the caller says what to do
        return None


def resolve_checkpoint(
    spec: str | Path | None,
    *,
    defaults: Sequence[str] = (),
    allow_download: bool = False,
    what: str,
    option: str,
) -> Path:
    """A checkpoint directory for ``spec`` (a directory, or a hub id). ``spec=None`` tries the hub ids in
    ``defaults`` (the published checkpoints) in the local cache. Raises :class:`ModelNotFoundError` naming
    ``option`` (the command-line option that points at a local copy) and ``--allow-download``."""
    if spec is not None:
        p = Path(str(spec)).expanduser()
        if p.is_dir():
            return p
        if str(spec).startswith((".", "/", "~")):
            raise ModelNotFoundError(f"{what}: checkpoint directory {spec} does not exist; pass {option} DIR")
        got = cached_snapshot(str(spec), allow_download=allow_download)
        if got is not None:
            return got
        raise ModelNotFoundError(
            f"{what}: {spec!r} is not on this machine; pass {option} DIR (a local copy), or --allow-download"
        )
    for repo in defaults:
        got = cached_snapshot(repo, allow_download=allow_download)
        if got is not None:
            return got
    names = " or ".join(defaults) or "a checkpoint"
    raise ModelNotFoundError(
        f"{what}: {names} is not on this machine; pass {option} DIR (a local copy), or --allow-download"
    )


def weights_digest(directory: str | Path) -> str | None:
    """sha256 over the checkpoint's weight files (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.ckpt``) in name
    order, for run signatures (None when the directory has none)."""
    from dlmeval.data.paths import file_digest

    d = Path(directory)
    files = sorted(
        f for pat in ("*.safetensors", "*.bin", "*.pt", "*.ckpt") for f in d.glob(pat) if f.is_file()
    )
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(file_digest(f).encode())
    return h.hexdigest()[:16]
