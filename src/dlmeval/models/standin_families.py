"""Tiny stand-ins of the AR-converted, encoder and MoE families (A2D MDLM / BD3LM, DiffuLLaMA, BERT-Chat,
LLaDA-MoE), written as checkpoint directories laid out like the released ones and loaded by the families' own
loaders, so every test on them runs through the real load path (as :mod:`dlmeval.models.standins` does for
LLaDA and Dream).

=================  ==========================================================================================
stand-in           what the directory is
=================  ==========================================================================================
``tiny-a2d``       ``model_type: a2d-qwen2`` (dllm's converted Qwen2: q/k/v biases), a Qwen-style tokenizer with
                   ``<|mask|>`` as mask token and an ``<|im_start|>`` / ``<|im_end|>`` chat template
``tiny-a2d-qwen3`` ``model_type: a2d-qwen3`` (per-head q/k RMSNorm, no biases), the same tokenizer
``tiny-a2d-bd3lm`` the ``a2d-qwen2`` layout, trained block-causally (blocks of 4), loaded as ``a2d-bd3lm:``
``tiny-diffullama`` ``model_type: llama`` (DiffuLLaMA ships plain LLaMA weights), a LLaMA-style tokenizer that adds
                   BOS, with ``[MASK]`` added as mask token; trained with DiffuLLaMA's shift (output ``i - 1``
                   predicts token ``i``)
``tiny-bert-chat`` ``model_type: modernbert`` (ModernBERT masked LM), a BERT tokenizer whose EOS is ``[PAD]`` (as
                   dllm's ``get_tokenizer`` sets it) and dllm's BERT-Chat chat template
``tiny-lladamoe``  ``model_type: lladamoe`` with ``auto_map`` and dlmeval's own MoE code
                   (``assets/standins/modeling_tiny_lladamoe.py``: softmax top-k routing, a shared expert, a dense
                   first layer, per-head q/k norm), the ``<|mask|>`` / ``<|role_end|>`` tokenizer
=================  ==========================================================================================

Weights: seeded, then trained for a few seconds on the "successor" sequences of :mod:`dlmeval.models.standins`
through the family's own adapter (so with its alignment and attention), so that ``check-model`` can tell a right
shift or attention from a wrong one. Built once per (kind, seed, code) in the cache; the default ones (seed 0) ship
their weights (:mod:`dlmeval.models.standin_weights`), so they are the same bytes on every machine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dlmeval.models.standins import ASSETS, _words, cached_checkpoint
from dlmeval.models.tiny import register_standin, word_level

KINDS = ("a2d", "a2d-qwen3", "a2d-bd3lm", "diffullama", "bert-chat", "lladamoe")


@dataclass(frozen=True)
class CheckpointStandin:
    """What a family's module tells this module about its stand-in ``kind`` (:func:`register_checkpoint_standin`):
    its adapter class (trained through), its loader ``load(path, *, device, dtype, name)`` (the directory is loaded
    as a real checkpoint is), the transformers base types of its ``model_type`` names, its chat template."""

    adapter: type
    load: Callable[..., Any]
    base_types: Mapping[str, str] = field(default_factory=dict)
    chat_template: str | None = None


#: kind -> its family's facts, registered by the family's module (this module imports no family)
_STANDINS: dict[str, CheckpointStandin] = {}


def register_checkpoint_standin(kind: str, standin: CheckpointStandin) -> None:
    """Register the family side of stand-in ``kind`` (one of :data:`KINDS`) and its builder for
    :func:`dlmeval.models.tiny.tiny_model`."""
    if kind not in KINDS:
        raise ValueError(f"no stand-in recipe for {kind!r}; this module builds {', '.join(KINDS)}")
    _STANDINS[kind] = standin
    register_standin(kind, functools.partial(load_family_standin, kind))


def _standin(kind: str) -> CheckpointStandin:
    if kind not in _STANDINS:
        from dlmeval.models.family import load_families

        load_families()  # the family modules register their side on import
    return _STANDINS[kind]


BUILD_VERSION = 1
TRAIN_STEPS = 120
#: the block size the tiny BD3LM stand-in is trained with (dllm's released models: 32)
TINY_BD3LM_BLOCK = 4

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>", "[UNK]"]
QWEN_CHAT = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA_SPECIALS = ["<unk>", "<s>", "</s>", "[MASK]"]
MOE_SPECIALS = ["<|endoftext|>", "<|role_start|>", "<|role_end|>", "<|mask|>", "[UNK]"]
MOE_CHAT = (
    "{% for m in messages %}{{ '<|role_start|>' + m['role'] + '<|role_end|>' + m['content'] + '<|role_end|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|role_start|>assistant<|role_end|>' }}{% endif %}"
)
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MOE_CODE = ("standin_layers.py", "configuration_tiny_lladamoe.py", "modeling_tiny_lladamoe.py")


def _code_hash() -> str:
    h = hashlib.sha256(f"{BUILD_VERSION}:{TRAIN_STEPS}".encode())
    h.update(" ".join(_words()).encode())
    for f in MOE_CODE:
        h.update((ASSETS / f).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def _fast_tokenizer(out: Path, specials: list[str], *, bos: str | None, **roles):
    from tokenizers import decoders, processors
    from transformers import PreTrainedTokenizerFast

    words = _words()
    if roles.pop("bert", False):
        words = words + ["[", "]", "/", "sys", "answer", "question"]
    ordered = list(dict.fromkeys(specials + words))
    vocab = {t: i for i, t in enumerate(ordered)}
    unk = roles.pop("unk_token", "[UNK]")
    tk = word_level(vocab, unk)
    template = roles.pop("template", None)
    if template == "bert":
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
    elif bos is not None:
        tk.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    chat = roles.pop("chat_template", None)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token=unk, model_max_length=128, **roles)
    if chat:
        tok.chat_template = chat
    tok.save_pretrained(str(out))
    return tok, vocab


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


def _module_and_adapter(kind: str, out: Path, cfg: dict, tok, mask: int, seed: int):
    """A freshly initialised module of ``cfg`` (seeded) wrapped in the family adapter, for training."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    from dlmeval.models.base import DiffusionLM

    fam = _standin(kind)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind.startswith("a2d") or kind == "diffullama":
            base = fam.base_types.get(cfg["model_type"], "llama")
            d = {k: v for k, v in cfg.items() if k != "model_type"}
            module = AutoModelForCausalLM.from_config(AutoConfig.for_model(base, **d))
        elif kind == "bert-chat":
            d = {k: v for k, v in cfg.items() if k != "model_type"}
            module = AutoModelForMaskedLM.from_config(AutoConfig.for_model("modernbert", **d))
        else:  # lladamoe: dlmeval's own remote code, already copied into ``out``
            config = AutoConfig.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
            module = AutoModel.from_config(config, trust_remote_code=True)
        cls = fam.adapter
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    m: DiffusionLM = cls(
        module,
        tok,
        name="build",
        source=str(out),
        mask_token_id=mask,
        max_length=128,
        device=torch.device("cpu"),
        dtype=torch.float32,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else mask,
    )
    return module, m


def _train(m, kind: str, words: list[int], *, mask: int, start: list[int], seed: int) -> None:
    """Masked-token training on successor sequences through the adapter (its alignment and attention)."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(m.module.parameters(), lr=3e-3, weight_decay=0.0)
    w = torch.tensor(words)
    n = 16 - len(start)
    m.module.train()
    for _ in range(TRAIN_STEPS):
        s = torch.randint(0, len(words), (32, 1), generator=g)
        x0 = w[(s + torch.arange(n)) % len(words)]
        if start:
            x0 = torch.cat([torch.tensor(start).expand(32, -1), x0], dim=1)
        rate = torch.rand(32, 1, generator=g) * 0.5 + 0.1
        masked = (torch.rand(x0.shape, generator=g) < rate) & (torch.arange(16) >= len(start))
        xt = torch.where(masked, torch.full_like(x0, mask), x0)
        if kind == "a2d-bd3lm":
            from dlmeval.models.base import block_causal_mask

            mask4, pos = block_causal_mask(None, xt.shape, TINY_BD3LM_BLOCK)
            z = m._head(m._run_4d(xt, None, mask4, pos, False).last_hidden)
        else:
            z = m.forward(xt, torch.ones_like(xt)).logits
        loss = torch.nn.functional.cross_entropy(z[masked], x0[masked])
        opt.zero_grad()
        loss.backward()
        opt.step()
    m.module.eval()


def _build(kind: str, out: Path, *, seed: int, layers: int, hidden: int, weights: bool = True) -> None:
    """Write the checkpoint directory; ``weights=False`` writes everything but ``model.safetensors``."""
    from dlmeval.models.standins import _padded, single_thread

    if kind.startswith("a2d"):
        tok, vocab = _fast_tokenizer(
            out,
            QWEN_SPECIALS,
            bos=None,
            eos_token="<|endoftext|>",
            pad_token="<|endoftext|>",
            mask_token="<|mask|>",
            additional_special_tokens=["<|im_start|>", "<|im_end|>"],
            chat_template=QWEN_CHAT,
        )
        cfg = _qwen_cfg(kind, _padded(len(vocab)), vocab, hidden, layers)
        mask, start = vocab["<|mask|>"], []
    elif kind == "diffullama":
        tok, vocab = _fast_tokenizer(
            out,
            LLAMA_SPECIALS,
            bos="<s>",
            unk_token="<unk>",
            bos_token="<s>",
            eos_token="</s>",
            mask_token="[MASK]",
        )
        cfg = {
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": len(
                vocab
            ),  # DiffuLLaMA resizes the embeddings to len(tokenizer) (mask token added)
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "max_position_embeddings": 128,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "bos_token_id": vocab["<s>"],
            "eos_token_id": vocab["</s>"],
        }
        mask, start = vocab["[MASK]"], [vocab["<s>"]]
    elif kind == "bert-chat":
        tok, vocab = _fast_tokenizer(
            out,
            BERT_SPECIALS,
            bos=None,
            bert=True,
            template="bert",
            cls_token="[CLS]",
            sep_token="[SEP]",
            pad_token="[PAD]",
            eos_token="[PAD]",  # dllm: a BERT tokenizer without EOS gets its pad token as EOS
            mask_token="[MASK]",
            chat_template=_standin(kind).chat_template,
        )
        cfg = {
            "model_type": "modernbert",
            "architectures": ["ModernBertForMaskedLM"],
            "vocab_size": len(vocab),
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "global_attn_every_n_layers": 1,
            "local_attention": 16,
            "pad_token_id": vocab["[PAD]"],
            "cls_token_id": vocab["[CLS]"],
            "sep_token_id": vocab["[SEP]"],
            "bos_token_id": vocab["[CLS]"],
            "eos_token_id": vocab["[SEP]"],
            "embedding_dropout": 0.0,
            "attention_dropout": 0.0,
            "mlp_dropout": 0.0,
            "reference_compile": False,
        }
        mask, start = vocab["[MASK]"], [vocab["[CLS]"]]
    else:  # lladamoe
        for f in MOE_CODE:
            shutil.copyfile(ASSETS / f, out / f)
        tok, vocab = _fast_tokenizer(
            out,
            MOE_SPECIALS,
            bos=None,
            eos_token="<|endoftext|>",
            pad_token="<|endoftext|>",
            mask_token="<|mask|>",
            additional_special_tokens=["<|role_start|>", "<|role_end|>"],
            chat_template=MOE_CHAT,
        )
        v = _padded(len(vocab))
        cfg = {
            "model_type": "llada",  # as the released LLaDA-MoE-7B-A1B config.json (dllm: edit it to lladamoe)
            "architectures": ["TinyLLaDAMoEModelLM"],
            "auto_map": {
                "AutoConfig": "configuration_tiny_lladamoe.TinyLLaDAMoEConfig",
                "AutoModel": "modeling_tiny_lladamoe.TinyLLaDAMoEModelLM",
            },
            "vocab_size": v,
            "hidden_size": hidden,
            "dense_intermediate_size": 2 * hidden,
            "expert_intermediate_size": hidden // 2,
            "shared_expert_intermediate_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_layer_freq": [0] + [1] * (layers - 1),
            "qk_layernorm": True,
            "max_position_embeddings": 128,
            "rope_theta": 10000.0,
            "mask_token_id": vocab["<|mask|>"],
            "eos_token_id": vocab["<|endoftext|>"],
            "pad_token_id": vocab["<|endoftext|>"],
            "tie_word_embeddings": False,
        }
        mask, start = vocab["<|mask|>"], []
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    if not weights:
        return
    with single_thread():
        module, m = _module_and_adapter(kind, out, cfg, tok, mask, seed)
    with torch.random.fork_rng(devices=[]), single_thread():
        torch.manual_seed(seed)
        _train(m, kind, [vocab[w] for w in _words()], mask=mask, start=start, seed=seed)
    module.save_pretrained(str(out), safe_serialization=True)
    (out / "config.json").write_text(
        json.dumps(cfg, indent=1)
    )  # keep the released layout (model_type, auto_map)
    gen = out / "generation_config.json"
    if gen.exists():
        gen.unlink()


def standin_dir(
    kind: str, *, seed: int = 0, layers: int = 2, hidden: int = 32, root: Path | None = None
) -> Path:
    """The checkpoint directory of stand-in ``kind`` (one of :data:`KINDS`), built on first use."""
    if kind not in KINDS:
        raise ValueError(f"no stand-in for {kind!r}; choose one of {', '.join(KINDS)}")
    return cached_checkpoint(_build, _code_hash, kind, seed, layers, hidden, str(root) if root else None)


def load_family_standin(kind: str, *, seed: int = 0, device=None, layers: int = 2, hidden: int = 32):
    """Build (once) and load stand-in ``kind`` through its family loader, as a real checkpoint loads."""
    path = str(standin_dir(kind, seed=seed, layers=layers, hidden=hidden))
    # (lladamoe: dlmeval's own code in the directory, written above; user checkpoints still need
    # --trust-remote-code; its family registers a loader that passes trust_remote_code=True)
    m = _standin(kind).load(path, device=device, dtype="float32", name=f"tiny-{kind}")
    m.source = f"tiny:{kind}:seed={seed}"
    return m
