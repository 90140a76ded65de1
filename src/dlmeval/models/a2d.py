"""The A2D family (dllm's "AR-to-diffusion": Qwen2 / Qwen3 / LLaMA checkpoints converted to masked diffusion,
the Care leaderboard's Tiny-A2D rows, ``dllm-hub/Qwen3-0.6B-diffusion-{mdlm,bd3lm}-v0.1``), in two variants:

* ``a2d:PATH`` (MDLM): the AR network with **bidirectional** attention (dllm's ``A2DQwen2Model`` replaces the
  causal mask by a padding-only 4-D mask); sampled by the remasking sampler like LLaDA;
* ``a2d-bd3lm:PATH`` (BD3LM): the same network run **block-causally** (a block sees itself and the blocks
  before it, dllm's ``_prepare_for_sampling``), sampled block by block by :mod:`dlmeval.sampling.block`; plain
  passes (scoring, ``check-model``) are block-causal too, blocks counted from the first real token.

Quirks kept here (docs/models.md, "A2D"):

* the checkpoint is an ordinary Qwen2 / Qwen3 / LLaMA state dict under ``model_type`` ``a2d-qwen2`` /
  ``a2d-qwen3`` / ``a2d-llama``; dllm registers those types in-process (``AutoConfig.register``), so the hub
  directories need dllm's package, not remote code. dlmeval reads the config as the base type and builds the
  transformers ``*ForCausalLM`` class, then always passes an explicit 4-D mask (the causal default never runs):
  no ``trust_remote_code`` is needed;
* no logit shift: dllm's MDLM and BD3LM samplers default to ``right_shift_logits=False`` for A2D (position i
  scores token i);
* the mask token ``<|mask|>`` is the one dllm's ``get_tokenizer`` adds; the tokenizer's mask role, then that
  token's id, is used (never a constant); EOS ``<|endoftext|>`` and EoT ``<|im_end|>`` (Qwen) or ``<|eot_id|>``
  (LLaMA) from the tokenizer and chat template;
* left padding with position ids counted from each row's first real token (dllm's BD3LM sampler does the same),
  so padding changes no logit;
* Qwen2's q/k/v projections carry biases; Qwen3 has per-head q/k RMSNorm and no biases (the stand-ins keep both).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from dlmeval.errors import CheckpointError, ModelNotFoundError
from dlmeval.models import validate
from dlmeval.models.base import DiffusionLM, RunOut, one_input
from dlmeval.models.family import Family, path_loader, register_family
from dlmeval.models.standin_families import CheckpointStandin, register_checkpoint_standin
from dlmeval.models.tiny import standin_loader
from dlmeval.models.tokens import vocab_id

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch

#: dllm's A2D model types and the transformers base types their state dicts are
A2D_TYPES = {"a2d-qwen2": "qwen2", "a2d-qwen3": "qwen3", "a2d-llama": "llama"}
#: dllm's default block size for the BD3LM variant (``BD3LMSamplerConfig.block_size``)
BD3LM_BLOCK = 32
MASK_TOKEN = "<|mask|>"


def additive(mask4: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean ``[B, 1, L, L]`` mask as the additive float mask transformers' eager / sdpa attention adds
    (0 where allowed, the dtype's minimum elsewhere), the form dllm's ``_prepare_4d_attention_mask`` builds."""
    import torch

    return torch.zeros(mask4.shape, dtype=dtype, device=mask4.device).masked_fill(
        ~mask4, torch.finfo(dtype).min
    )


def padding_mask(
    attention_mask: torch.Tensor | None, b: int, n: int, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The bidirectional padding-only mask ``[B, 1, L, L]`` (a padded query sees itself only) and position ids
    counted from each row's first real token."""
    import torch

    am = torch.ones(b, n, dtype=torch.long, device=device) if attention_mask is None else attention_mask
    keep = am.bool()
    mask4 = (keep[:, None, None, :] & keep[:, None, :, None]) | torch.eye(n, dtype=torch.bool, device=device)
    pos = torch.where(keep, am.long().cumsum(-1) - 1, 0)
    return mask4, pos


class HFBidirectionalLM(DiffusionLM):
    """A transformers ``*ForCausalLM`` run under explicit 4-D masks (never its causal default): the shared
    adapter of the AR-converted families (A2D, DiffuLLaMA)."""

    block_attention = True

    def __init__(self, module, tokenizer, **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        x = input_ids if input_ids is not None else inputs_embeds
        mask4, pos = padding_mask(attention_mask, x.shape[0], x.shape[1], x.device)
        return self._run_4d(input_ids, inputs_embeds, mask4, pos, output_hidden_states)

    def _run_4d(self, input_ids, inputs_embeds, mask4, position_ids, output_hidden_states):
        dt = next(self.module.parameters()).dtype
        kw = one_input(
            input_ids,
            inputs_embeds,
            attention_mask=additive(mask4, dt),
            position_ids=position_ids,
            use_cache=False,
            output_hidden_states=output_hidden_states,
        )
        # the trunk; the head runs on the positions read only
        return RunOut.of(self.module.model(**kw), output_hidden_states, trunk=True)

    def _head(self, hidden):
        return self.module.lm_head(hidden)


class A2DLM(HFBidirectionalLM):
    family = "a2d"
    # dllm's get_tokenizer wraps the Qwen2 / Qwen3 A2D tokenizers' apply_chat_template with enable_thinking=False
    # (Qwen3's template then closes an empty <think></think> block; others ignore the variable), and its samplers
    # take apply_chat_template(tokenize=True) ids: no special tokens added to the templated text
    chat_kwargs = {"enable_thinking": False}
    chat_special_tokens = False


class A2DBlockLM(A2DLM):
    """The BD3LM variant: the same network, run block-causally as it was trained. Plain passes (``logits``,
    ``score_positions``, ``forward``) count blocks of ``block_size`` from each row's first real token (so padding
    changes nothing); the sampler (:mod:`dlmeval.sampling.block`) passes physical blocks over a prompt padded to
    whole blocks, as dllm's BD3LM sampler does."""

    family = "a2d-bd3lm"
    block_size = BD3LM_BLOCK

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        import torch

        x = input_ids if input_ids is not None else inputs_embeds
        b, n = x.shape[0], x.shape[1]
        am = torch.ones(b, n, dtype=torch.long, device=x.device) if attention_mask is None else attention_mask
        keep = am.bool()
        first = am.long().argmax(1)
        blk = (torch.arange(n, device=x.device)[None] - first[:, None]).clamp(min=0) // int(self.block_size)
        mask4 = (
            (blk[:, None, None, :] <= blk[:, None, :, None]) & keep[:, None, None, :] & keep[:, None, :, None]
        )
        mask4 = mask4 | torch.eye(n, dtype=torch.bool, device=x.device)
        pos = torch.where(keep, am.long().cumsum(-1) - 1, 0)
        return self._run_4d(input_ids, inputs_embeds, mask4, pos, output_hidden_states)


def read_config(path: str, types: dict[str, str], label: str = "A2D") -> tuple[dict, str]:
    """``(config dict, base model type)`` of a local checkpoint directory whose ``model_type`` is one of ``types``,
    after :func:`dlmeval.models.validate.check_dir` (config, weights and tokenizer files present)."""
    cfg = validate.check_dir(path, label)
    mt = str(cfg.get("model_type", "") or "")
    if mt not in types:
        raise CheckpointError(
            f"{path} is a{' ' + repr(mt) if mt else ''} model"
            + ("" if mt else " with no model_type in config.json")
            + f", not {label} (model_type {' / '.join(sorted(types))}); use the spec of its family (see "
            "`dlmeval models`)"
        )
    return cfg, types[mt]


def build_causal_module(
    path: str, cfg: dict, base: str, *, dtype, device, allow_download: bool = False, label: str = "A2D"
):
    """The transformers ``*ForCausalLM`` of base type ``base`` with ``path``'s weights (its own ``model_type``
    and ``auto_map`` set aside, so no remote code runs); weights that do not fit that class are refused
    (:func:`dlmeval.models.validate.from_pretrained_checked`)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from dlmeval.models.base import place_kwargs

    d = {
        k: v
        for k, v in cfg.items()
        if k not in ("model_type", "auto_map", "architectures", "transformers_version")
    }
    from dlmeval.models.hub import local_files_only

    try:
        config = AutoConfig.for_model(base, **d)
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"{path}: config.json does not make a {base} config ({validate.first_line(e)}); use the release's "
            "config.json"
        ) from None
    offline = local_files_only(path, allow_download)
    module, _ = validate.from_pretrained_checked(
        AutoModelForCausalLM,
        path,
        label,
        config=config,
        dtype=dtype,
        local_files_only=offline,
        **place_kwargs(device),
    )
    return module


def _mask_id(tok, label: str, path: str, cfg: dict) -> tuple[int, list[str]]:
    """dllm's rule: ``get_tokenizer`` makes ``<|mask|>`` the mask token and every sampler reads
    ``tokenizer.mask_token_id``; a config's ``mask_token_id`` is never read (a disagreeing one is a load warning,
    the tokenizer's id is used). A tokenizer without ``<|mask|>`` falls back to its own mask role, warned."""
    notes = []
    tid = vocab_id(tok, MASK_TOKEN)
    role = tok.mask_token_id
    if tid is not None:
        mid = tid
        if role is not None and role != tid:
            notes.append(
                f"{label}: the tokenizer's mask token is {tok.mask_token} ({role}), not {MASK_TOKEN}; using "
                f"{MASK_TOKEN} ({tid}), the mask token dllm's get_tokenizer sets"
            )
    elif role is not None:
        mid = int(role)
        notes.append(
            f"{label}: the tokenizer has no {MASK_TOKEN}; using its mask token {tok.mask_token} ({mid})"
        )
    else:
        raise CheckpointError(
            f"{label} checkpoint {path}: the tokenizer has no mask token and no {MASK_TOKEN}; add it "
            "(tokenizer.add_special_tokens({'mask_token': '<|mask|>'})) or pass a converted dllm checkpoint"
        )
    cm = cfg.get("mask_token_id")
    if isinstance(cm, int) and not isinstance(cm, bool) and cm != mid:
        notes.append(
            f"{label}: config.json's mask_token_id {cm} differs from the tokenizer's mask id {mid}; using {mid}, as "
            "dllm does (its samplers take the mask id from the tokenizer and never read the config's)"
        )
    return mid, notes


def load_hf_bidirectional(
    cls: type,
    path: str,
    *,
    label: str,
    types: dict[str, str],
    device=None,
    dtype=None,
    allow_download: bool = False,
    name: str | None = None,
    mask_resolver=None,
) -> DiffusionLM:
    """Load an AR-converted checkpoint as ``cls`` (A2D, DiffuLLaMA): special ids from the tokenizer and chat
    template, the module as its transformers base class."""
    from dlmeval.models.base import place, resolve_device, resolve_dtype
    from dlmeval.models.tokens import end_of_turn_ids

    if not Path(path).exists() and not allow_download:
        raise ModelNotFoundError(
            f"{label} model {path!r} is not on disk. Pass a local directory, or add --allow-download (needs "
            "internet) to fetch it from the Hugging Face hub."
        )
    if not Path(path).exists():
        from huggingface_hub import snapshot_download

        path = snapshot_download(path)
    cfg, base = read_config(path, types, label)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    tok = validate.load_tokenizer(path, label, local_files_only=True)
    tok.padding_side = "left"
    mid, notes = (mask_resolver or _mask_id)(tok, label, path, cfg)
    eos = [t for t in (tok.eos_token_id,) if t is not None]
    eos += [t for t in end_of_turn_ids(tok) if t not in eos]
    if not eos:
        raise CheckpointError(
            f"{label} checkpoint {path}: the tokenizer names no EOS token; use the release's tokenizer files"
        )
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    ids = {"mask id": mid, "pad id": pad, "BOS id": tok.bos_token_id}
    validate.check_ids_fit(ids, validate.embedding_rows(cfg), path, label, tokenizer=tok)
    module = build_causal_module(path, cfg, base, dtype=dt, device=device, label=label)
    module = place(module, dev, device).eval()
    m = cls(
        module,
        tok,
        name=name or Path(path).name,
        source=str(path),
        mask_token_id=mid,
        max_length=int(cfg.get("max_position_embeddings", 4096)),
        device=dev,
        dtype=dt,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=pad,
        chat_template=bool(getattr(tok, "chat_template", None)),
    )
    if m.block_size is not None and cfg.get("block_size") is not None:
        m.block_size = int(cfg["block_size"])
    m.load_warnings = notes
    for note in notes:  # shown where the model is used, not only by check-model
        warnings.warn(note, UserWarning, stacklevel=3)
    return m


def load_a2d(
    path: str, *, bd3lm: bool = False, device=None, dtype=None, allow_download: bool = False, name=None
):
    return load_hf_bidirectional(
        A2DBlockLM if bd3lm else A2DLM,
        path,
        label="A2D-BD3LM" if bd3lm else "A2D",
        types=A2D_TYPES,
        device=device,
        dtype=dtype,
        allow_download=allow_download,
        name=name,
    )


# ---------------------------------------------------------------- the stand-ins (models/standin_families.py builds)
#: the block size the tiny BD3LM stand-in is trained with (dllm's released models: 32)
TINY_BD3LM_BLOCK = 4
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>", "[UNK]"]
QWEN_CHAT = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _qwen_cfg(kind: str, v: int, vocab: dict, hidden: int, layers: int) -> dict:
    qwen3 = kind == "a2d-qwen3"
    cfg = {
        "model_type": "a2d-qwen3" if qwen3 else "a2d-qwen2",
        "vocab_size": v,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": vocab["<|endoftext|>"],
        "eos_token_id": vocab["<|endoftext|>"],
        "use_sliding_window": False,
    }
    if qwen3:
        cfg["head_dim"] = hidden // 4
    if kind == "a2d-bd3lm":
        cfg["block_size"] = TINY_BD3LM_BLOCK  # read by the loader (a released config without it: dllm's 32)
    return cfg


def _standin_files(kind: str, out: Path, hidden: int, layers: int):
    """``tiny-a2d`` (``a2d-qwen2``: q/k/v biases), ``tiny-a2d-qwen3`` (per-head q/k RMSNorm) and ``tiny-a2d-bd3lm``
    (``a2d-qwen2`` with ``block_size``): a Qwen-style tokenizer with ``<|mask|>`` and a chat template."""
    from dlmeval.models.standins import fast_tokenizer, padded_vocab

    tok, vocab = fast_tokenizer(
        out,
        QWEN_SPECIALS,
        bos=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        mask_token="<|mask|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        chat_template=QWEN_CHAT,
    )
    cfg = _qwen_cfg(kind, padded_vocab(len(vocab)), vocab, hidden, layers)
    mask, start = vocab["<|mask|>"], []
    return tok, vocab, cfg, mask, start


def _standin_module(kind: str, out: Path, cfg: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    d = {k: v for k, v in cfg.items() if k != "model_type"}
    return AutoModelForCausalLM.from_config(
        AutoConfig.for_model(A2D_TYPES.get(cfg["model_type"], "llama"), **d)
    )


def _standin_bd3lm_logits(m, xt: torch.Tensor) -> torch.Tensor:
    """BD3LM trains block-causally (blocks of :data:`TINY_BD3LM_BLOCK`)."""
    from dlmeval.models.base import block_causal_mask

    mask4, pos = block_causal_mask(None, xt.shape, TINY_BD3LM_BLOCK)
    return m._head(m._run_4d(xt, None, mask4, pos, False).last_hidden)


for _kind, _cls in (("a2d", A2DLM), ("a2d-qwen3", A2DLM), ("a2d-bd3lm", A2DBlockLM)):
    register_checkpoint_standin(
        _kind,
        CheckpointStandin(
            files=_standin_files,
            module=_standin_module,
            adapter=_cls,
            load=functools.partial(load_a2d, bd3lm=_kind == "a2d-bd3lm"),
            logits=_standin_bd3lm_logits if _kind == "a2d-bd3lm" else None,
            source=__file__,
        ),
    )

_EXAMPLE = "a2d:./Qwen3-0.6B-diffusion-mdlm"
_QUIRKS = (
    "model_type a2d-qwen2 / a2d-qwen3 / a2d-llama: read as the transformers base class, no remote code",
    "<|mask|> made the mask token by dllm's get_tokenizer: that token's id (the tokenizer's mask role only "
    "without it); a config mask_token_id is not read (a disagreeing one is warned about), as in dllm",
    "Qwen2 q/k/v biases; Qwen3 per-head q/k RMSNorm",
)
FAMILY = register_family(
    Family(
        name="a2d",
        kind="diffusion",
        prefix="a2d",
        description="dllm's AR-to-diffusion models (Qwen2 / Qwen3 / LLaMA with bidirectional attention, MDLM); "
        "no remote code",
        adapter=A2DLM,
        load=path_loader("a2d", _EXAMPLE, load_a2d, bd3lm=False),
        standin="tiny-a2d",
        load_standin=standin_loader("a2d"),
        standin_description="A2D stand-in: an a2d-qwen2 checkpoint directory (q/k/v biases, <|mask|>, "
        "Qwen chat template) (tests)",
        mask_sources=("tokenizer",),
        bos="none",
        padding_side="left",
        tokenizer_quirks=_QUIRKS,
        chat_template="optional",
        logit_shift=0,
        likelihood_vocab="all",  # dllm's MDLM harness (LLaDAEvalHarness): F.cross_entropy over every output row
        attention="bidirectional",
        native_schedule="linear",
        # dllm's MDLMSampler `remasking` values
        native_samplers={"low_confidence": "none", "random": "origin"},
        hub_ids=("dllm-hub/Qwen3-0.6B-diffusion-mdlm-v0.1",),
        module=__name__,
    )
)
FAMILY_BD3LM = register_family(
    dataclasses.replace(  # the same facts as A2D's MDLM variant but the attention, the sampler's blocks, the ids
        FAMILY,
        name="a2d-bd3lm",
        prefix="a2d-bd3lm",
        description="dllm's AR-to-diffusion models trained as block diffusion (BD3LM): block-causal attention, "
        "sampled block by block (dlmeval.sampling.block); no remote code",
        adapter=A2DBlockLM,
        load=path_loader("a2d-bd3lm", _EXAMPLE, load_a2d, bd3lm=True),
        standin="tiny-a2d-bd3lm",
        load_standin=standin_loader("a2d-bd3lm"),
        standin_description="A2D-BD3LM stand-in: an a2d-qwen2 directory trained block-causally in blocks of 4 "
        "(tests)",
        attention="block-causal",
        likelihood_vocab="tokenizer",  # dllm's BD3LM harness has no loglikelihood: dlmeval's rule
        generation={"block_length": BD3LM_BLOCK},
        standin_block_length=TINY_BD3LM_BLOCK,
        hub_ids=("dllm-hub/Qwen3-0.6B-diffusion-bd3lm-v0.1",),
    )
)
