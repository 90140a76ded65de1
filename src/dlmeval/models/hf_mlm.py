"""Adapter for Hugging Face masked LMs (``AutoModelForMaskedLM``: BERT, RoBERTa, ModernBERT, ...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dlmeval.errors import CheckpointError, InputError
from dlmeval.models import validate
from dlmeval.models.base import DiffusionLM, RunOut
from dlmeval.models.family import Family, LoadOptions, register_family
from dlmeval.models.tiny import register_standin, standin_loader

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch
    from torch import nn

# (trunk attribute, head attributes applied in order) for the architectures whose head we can split off, so the
# memory-lean path projects only requested positions. Anything else falls back to full logits and a gather.
_SPLITS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bert", ("cls",)),
    ("roberta", ("lm_head",)),
    ("distilbert", ("vocab_transform", "activation", "vocab_layer_norm", "vocab_projector")),
    ("model", ("head", "decoder")),  # ModernBERT
)


class HFMaskedLM(DiffusionLM):
    family = "hf-mlm"

    def __init__(self, module: nn.Module, tokenizer, **kw):
        if tokenizer.mask_token_id is None and "mask_token_id" not in kw:
            raise InputError("this tokenizer has no mask token; it is not a masked LM")
        kw.setdefault("mask_token_id", tokenizer.mask_token_id)
        eos = [t for t in (tokenizer.sep_token_id,) if t is not None]
        kw.setdefault("eos_token_ids", eos)
        super().__init__(module, tokenizer, **kw)
        self._trunk = None
        self._head_mods: list[nn.Module] = []
        for trunk, heads in _SPLITS:
            if hasattr(module, trunk) and all(hasattr(module, h) for h in heads):
                self._trunk = getattr(module, trunk)
                self._head_mods = [getattr(module, h) for h in heads]
                break

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        # the trunk where the head splits off (it then runs on the positions read only), else the whole network
        net = self.module if self._trunk is None else self._trunk
        out = net(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
        )
        return RunOut.of(out, output_hidden_states, trunk=self._trunk is not None)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        for m in self._head_mods:
            hidden = m(hidden)
        return hidden


def check_hf_dir(path: str, trust_remote_code: bool = False) -> dict:
    """A local ``hf:`` directory: config.json, weights and tokenizer files present, and a ``model_type``
    transformers knows (or an ``auto_map`` with ``--trust-remote-code``); returns the config."""
    from transformers import CONFIG_MAPPING

    cfg = validate.check_dir(path, "masked LM")
    mt = cfg.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise CheckpointError(
            f"masked LM checkpoint {path}: config.json has no model_type; use the release's config.json"
        )
    if mt not in CONFIG_MAPPING and not (trust_remote_code and cfg.get("auto_map")):
        raise CheckpointError(
            f"{path} is a {mt!r} model, which transformers does not know; use the spec of its family (see "
            "`dlmeval models`)"
            + (", or --trust-remote-code for a checkpoint that ships its code" if cfg.get("auto_map") else "")
        )
    return cfg


def load_masked_lm(
    path: str,
    *,
    label: str,
    what: str,
    device: Any,
    dtype: Any,
    allow_download: bool,
    check_local: Callable[[str], Any],
    check_config: Callable[[Any], None],
    check_tokenizer: Callable[[Any], None],
    trust_remote_code: bool | None = None,
) -> tuple[Any, Any, Any, torch.device, torch.dtype]:
    """``(module, tokenizer, config, device, dtype)`` of an ``AutoModelForMaskedLM`` checkpoint (every masked-LM
    family's loader: ``hf:``, ``bert-chat:``). A path not on disk is refused without ``allow_download`` (``what``
    names it); a local directory goes through ``check_local`` before anything is built; the config transformers
    reads through ``check_config`` (a model of another kind refused with the spec to use), the tokenizer through
    ``check_tokenizer`` (its mask token); then the mask and pad ids must fit the vocabulary and the weights load
    checked (``label`` names the checkpoint in each message, :mod:`dlmeval.models.validate`), placed on ``device``.
    ``trust_remote_code`` is passed on when given."""
    from pathlib import Path

    from transformers import AutoConfig, AutoModelForMaskedLM

    from dlmeval.errors import ModelNotFoundError
    from dlmeval.models.base import place, place_kwargs, resolve_device, resolve_dtype

    if not Path(path).exists() and not allow_download:
        raise ModelNotFoundError(
            f"{what} {path!r} is not on disk; pass a local directory or add --allow-download"
        )
    from dlmeval.models.hub import local_files_only

    kw: dict[str, Any] = {"local_files_only": local_files_only(path, allow_download)}
    if trust_remote_code is not None:
        kw["trust_remote_code"] = trust_remote_code
    if Path(path).exists():  # a local directory: its files checked before anything is built
        check_local(path)
    try:
        cfg = AutoConfig.from_pretrained(path, **kw)
    except (OSError, ValueError) as e:
        raise ModelNotFoundError(
            f"cannot read a model config from {path!r}: {validate.first_line(e)}"
        ) from None
    check_config(cfg)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    tok = validate.load_tokenizer(path, label, **kw)
    check_tokenizer(tok)
    validate.check_ids_fit(
        {"mask id": tok.mask_token_id, "pad id": tok.pad_token_id},
        int(getattr(cfg, "vocab_size", 0) or 0) or None,
        path,
        label,
        tokenizer=tok,
    )
    module, _ = validate.from_pretrained_checked(
        AutoModelForMaskedLM, path, label, dtype=dt, **kw, **place_kwargs(device)
    )
    return place(module, dev, device), tok, cfg, dev, dt


def load_hf_mlm(path: str, opts: LoadOptions) -> HFMaskedLM:
    """``hf:PATH``: ``AutoModelForMaskedLM`` + ``AutoTokenizer`` from a local directory (a hub id only with
    ``allow_download``); a causal LM directory is refused with the spec to use."""
    from pathlib import Path

    if not path:
        raise InputError("hf: needs a path, e.g. hf:./my-bert")

    def not_causal(cfg) -> None:
        archs = " ".join(cfg.architectures or [])
        if "CausalLM" in archs:
            raise InputError(
                f"{path} is a causal LM ({archs}); use causal:{path}, or llada:/dream: for those families"
            )

    def has_mask(tok) -> None:
        if tok.mask_token_id is None:
            raise InputError(
                f"{path}: the tokenizer has no mask token; it is not a masked LM (see `dlmeval models`)"
            )

    module, tok, cfg, dev, dt = load_masked_lm(
        path,
        label="masked LM",
        what="masked LM",
        device=opts.device,
        dtype=opts.dtype,
        allow_download=opts.allow_download,
        check_local=lambda p: check_hf_dir(p, opts.trust_remote_code),
        check_config=not_causal,
        check_tokenizer=has_mask,
        trust_remote_code=opts.trust_remote_code,
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


def tiny_bert(*, seed: int = 0, device=None, layers: int = 2, hidden: int = 32) -> HFMaskedLM:
    """``tiny-bert``: a random BERT masked LM over :func:`dlmeval.models.tiny.tiny_tokenizer`'s words (seed 0: the
    shipped weights of :mod:`dlmeval.models.standin_weights`)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from dlmeval.models.base import resolve_device
    from dlmeval.models.standin_weights import load_into
    from dlmeval.models.tiny import tiny_tokenizer, tiny_vocab_size

    dev = resolve_device(device)
    name = "tiny-bert"
    cfg = BertConfig(
        vocab_size=tiny_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        m = BertForMaskedLM(cfg)
    load_into(m, f"{name}-s{seed}-l{layers}-h{hidden}")
    m = m.to(dev).eval()
    return HFMaskedLM(
        m,
        tiny_tokenizer("bert"),
        name=name,
        source=f"tiny:bert:seed={seed}",
        max_length=128,
        device=dev,
        dtype=torch.float32,
    )


register_standin("bert", tiny_bert)

FAMILY = register_family(
    Family(
        name="hf",
        aliases=("hf-mlm",),  # the adapter's identity label
        kind="diffusion",
        prefix="hf",
        description="any Hugging Face masked LM (AutoModelForMaskedLM)",
        adapter=HFMaskedLM,
        load=load_hf_mlm,
        standin="tiny-bert",
        load_standin=standin_loader("bert"),
        standin_description="random 2-layer BERT MLM over a 120-word vocabulary (tests)",
        mask_sources=("tokenizer",),
        bos="tokenizer",
        padding_side="right",
        tokenizer_quirks=("[CLS] ... [SEP] wrapping; [SEP] is the EOS",),
        chat_template="optional",
        logit_shift=0,
        attention="bidirectional",
        native_schedule="linear",
        module=__name__,
    )
)
