"""Loading a checkpoint whose model code ships with its weights (``auto_map``: LLaDA, Dream, ...): the one path
every remote-code family takes, reading the family's facts from its :class:`~dlmeval.models.family.Family`, so a
fix to it (dtype keyword, special ids, the version warning) lands in all of them."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dlmeval.errors import CheckpointError, InputError, ModelNotFoundError
from dlmeval.models import validate
from dlmeval.models.base import place, place_kwargs, resolve_device, resolve_dtype
from dlmeval.models.family import Family, LoadOptions
from dlmeval.models.validate import SUPPORTED_TRANSFORMERS, transformers_status


def version_note(family: str) -> list[str]:
    """A warning when the installed transformers is outside the range the families' remote code runs on."""
    version, ok = transformers_status()
    if ok:
        return []
    note = f"{family}: transformers {version} is outside {SUPPORTED_TRANSFORMERS}, the range its remote code runs on"
    warnings.warn(note, UserWarning, stacklevel=3)
    return [note]


def generation_config(path: str, kw: dict):
    """The checkpoint's ``generation_config.json``, or None."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(path, **kw)
    except (OSError, ValueError):
        return None


def _random_module(auto, cfg, dtype, dev, seed: int):
    """The architecture of ``cfg`` with random weights (seeded), built directly on ``dev``: throughput and memory
    checks at a family's real shapes without its weights (``benchmarks/gpu_check.sh``)."""
    import torch

    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        with torch.device(dev):
            module = auto.from_config(cfg, dtype=dtype, trust_remote_code=True)
    return module.eval()


def _file_config(path: str, kw: dict) -> SimpleNamespace:
    """The ids ``config.json`` itself names. A config *class* fills what the file leaves out with its defaults
    (LLaDA's ``mask_token_id`` 50256, Dream's 151666), so the loaded object cannot tell a named id from a default;
    the raw file can."""
    from transformers import PretrainedConfig

    raw, _ = PretrainedConfig.get_config_dict(path, **kw)
    return SimpleNamespace(**{k: raw[k] for k in ("mask_token_id", "eos_token_id") if k in raw})


def load_remote_family(
    family: Family,
    path: str,
    *,
    device=None,
    dtype=None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    mask_token_id: int | None = None,
    eos_token_ids=None,
    name: str | None = None,
    random_init: int | None = None,
) -> Any:
    """Load ``path`` through ``AutoModel`` + ``trust_remote_code`` as ``family`` (its adapter class, the
    ``model_type`` its config must name, where its window length is read): special ids from the tokenizer, the
    config *file* and the chat template (:func:`dlmeval.models.tokens.special_ids_from_files`, the family's
    documented fallbacks only with a warning). ``random_init=SEED`` builds the architecture of ``path``'s config
    with seeded random weights instead of loading any (a directory with a config, code and tokenizer but no
    weights suffices)."""
    from transformers import AutoConfig, AutoModel

    from dlmeval.models.tokens import special_ids_from_files

    label = family.name
    if not Path(path).exists() and not allow_download:
        raise ModelNotFoundError(
            f"{label} model {path!r} is not on disk. Pass a local directory, or add --allow-download (needs "
            "internet) to fetch it from the Hugging Face hub."
        )
    if not trust_remote_code:
        raise InputError(
            f"{label} checkpoints ship their model code with the weights; loading them runs that code. "
            "Re-run with --trust-remote-code if you trust the source."
        )
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    from dlmeval.models.hub import local_files_only

    offline = local_files_only(path, allow_download)
    kw = {"trust_remote_code": True, "local_files_only": offline}
    raw = None
    if Path(path).exists():  # a local directory: its files checked before any of its code runs
        raw = validate.check_dir(path, label, validate.Needs(weights=random_init is None, code=True))
        if family.model_type:
            validate.check_model_type(raw, (family.model_type,), path, label)
    try:
        cfg = AutoConfig.from_pretrained(path, **kw)
    except (OSError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{label} checkpoint {path}: config.json cannot be read ({validate.first_line(e)}); use the release's "
            "config.json and model code"
        ) from None
    if family.model_type and family.model_type not in (getattr(cfg, "model_type", "") or "").lower():
        raise InputError(
            f"{path} is a {cfg.model_type!r} model, not {label}; use the matching spec (see `dlmeval models`)"
        )
    tok = validate.load_tokenizer(path, label, **kw)
    tok.padding_side = family.padding_side
    mid, eos, notes = special_ids_from_files(
        tok,
        _file_config(path, {"local_files_only": offline}),
        generation_config(path, {"local_files_only": offline}),
        family=label,
        mask_override=mask_token_id,
        eos_override=eos_token_ids,
        default_mask=family.default_mask_id,
        default_eos=family.default_eos_ids,
        sources=family.mask_sources,
        mask_token=family.mask_token,
    )
    pad = tok.pad_token_id if tok.pad_token_id is not None else getattr(cfg, "pad_token_id", None)
    rows = validate.embedding_rows(raw if raw is not None else vars(cfg))
    bos = tok.bos_token_id
    validate.check_ids_fit({"mask id": mid, "pad id": pad, "BOS id": bos}, rows, path, label, tokenizer=tok)
    if random_init is None:
        module, unused = validate.from_pretrained_checked(
            AutoModel, path, label, strict=False, dtype=dt, **kw, **place_kwargs(device)
        )
        module = place(module, dev, device)
        notes = notes + unused
    else:
        module = _random_module(AutoModel, cfg, dt, dev, int(random_init))
    m = family.adapter(
        module,
        tok,
        name=name or Path(path).name,
        source=str(path),
        mask_token_id=mid,
        max_length=int(getattr(cfg, family.max_length_key, 4096)),
        device=dev,
        dtype=dt,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=pad if pad is not None else eos[0],
        chat_template=bool(getattr(tok, "chat_template", None)),
    )
    m.load_warnings = notes + version_note(label)
    return m


def remote_loader(family_name: str) -> Callable[[str, LoadOptions], Any]:
    """``Family.load`` for a remote-code family: :func:`load_remote_family` with the options."""

    def load(path: str, opts: LoadOptions) -> Any:
        from dlmeval.models.family import FAMILIES

        return load_remote_family(
            FAMILIES.get(family_name),
            path,
            device=opts.device,
            dtype=opts.dtype,
            trust_remote_code=opts.trust_remote_code,
            allow_download=opts.allow_download,
        )

    return load
