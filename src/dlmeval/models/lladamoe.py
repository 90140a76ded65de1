"""The LLaDA-MoE family (inclusionAI/LLaDA-MoE-7B-A1B-Base / -Instruct): a LLaDA-style masked diffusion LM with
mixture-of-experts layers (the Care leaderboard's LLaDA-MoE-A1B row, run at t = 0.1 as the paper footnotes).

Quirks kept here (docs/models.md, "LLaDA-MoE"):

* remote code (``modeling_lladamoe.py``): an HF-style forward (``input_ids`` / ``inputs_embeds``, a **2-D**
  attention mask made non-causal inside every attention layer, ``position_ids``), no loss or
  ``num_logits_to_keep``; loaded only with ``trust_remote_code``;
* the released ``config.json`` says ``"model_type": "llada"`` (dllm's README asks users to edit it to
  ``lladamoe``): a config with ``num_experts`` is this family under either name, and ``llada:`` refuses it;
* MoE layers: softmax router scores, top-``num_experts_per_tok`` experts with un-renormalised weights, a shared
  expert, dense layers where ``moe_layer_freq`` is 0, per-head q/k RMSNorm (the stand-in keeps all of them);
* the mask token ``<|mask|>`` and EoT ``<|role_end|>`` (dllm's ``get_tokenizer``), from the config / tokenizer /
  chat template; the constants below only as a warned fallback;
* position ids counted from each row's first real token (the family's own calls pass none, so an unpadded row
  matches exactly and left padding changes nothing).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from dlmeval.errors import InputError
from dlmeval.models import validate
from dlmeval.models.base import DiffusionLM, RunOut, one_input
from dlmeval.models.family import Family, path_loader, register_family
from dlmeval.models.standin_families import CheckpointStandin, register_checkpoint_standin
from dlmeval.models.tiny import standin_loader

#: LLaDA2's published defaults (``modeling_llada2_moe.generate``: eos_id 156892, mask_id 156895), the same
#: tokenizer family; used only when neither the config nor the tokenizer names them (with a warning)
LLADA_MOE_MASK_ID = 156895
LLADA_MOE_EOS_ID = 156892


class LLaDAMoELM(DiffusionLM):
    family = "lladamoe"

    def __init__(self, module, tokenizer, **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        import torch

        x = input_ids if input_ids is not None else inputs_embeds
        b, n = x.shape[0], x.shape[1]
        am = torch.ones(b, n, dtype=torch.long, device=x.device) if attention_mask is None else attention_mask
        pos = torch.where(am.bool(), am.long().cumsum(-1) - 1, 0)
        kw = one_input(
            input_ids,
            inputs_embeds,
            attention_mask=am,
            position_ids=pos,
            output_hidden_states=output_hidden_states,
        )
        return RunOut.of(self.module.model(**kw), output_hidden_states, trunk=True)

    def _head(self, hidden):
        return self.module.lm_head(hidden)


def is_moe_config(path: str) -> bool:
    f = Path(path) / "config.json"
    try:
        return f.exists() and "num_experts" in json.loads(f.read_text())
    except (OSError, ValueError):
        return False


def load_lladamoe(path: str, **kw) -> LLaDAMoELM:
    """Load a LLaDA-MoE checkpoint directory (keywords of :func:`dlmeval.models.remote.load_remote_family`)."""
    from dlmeval.models.remote import load_remote_family

    if Path(path).is_dir() and "num_experts" not in validate.read_config_file(path, "lladamoe"):
        raise InputError(
            f"{path} has no num_experts in its config.json: not a LLaDA-MoE checkpoint; use llada:{path}"
        )
    return load_remote_family(FAMILY, path, **kw)


MOE_SPECIALS = ["<|endoftext|>", "<|role_start|>", "<|role_end|>", "<|mask|>", "[UNK]"]
MOE_CHAT = (
    "{% for m in messages %}{{ '<|role_start|>' + m['role'] + '<|role_end|>' + m['content'] + '<|role_end|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|role_start|>assistant<|role_end|>' }}{% endif %}"
)
#: dlmeval's own MoE code for the stand-in (``assets/standins``), copied into its directory
MOE_CODE = ("standin_layers.py", "configuration_tiny_lladamoe.py", "modeling_tiny_lladamoe.py")


def _standin_files(kind: str, out: Path, hidden: int, layers: int):
    """``tiny-llada-moe``: ``model_type: llada`` (as released) with ``auto_map`` and dlmeval's own MoE code (softmax
    top-k routing, a shared expert, a dense first layer, per-head q/k norm), the ``<|mask|>`` / ``<|role_end|>``
    tokenizer."""
    import shutil

    from dlmeval.models.standins import ASSETS, fast_tokenizer, padded_vocab

    for f in MOE_CODE:
        shutil.copyfile(ASSETS / f, out / f)
    tok, vocab = fast_tokenizer(
        out,
        MOE_SPECIALS,
        bos=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        mask_token="<|mask|>",
        additional_special_tokens=["<|role_start|>", "<|role_end|>"],
        chat_template=MOE_CHAT,
    )
    v = padded_vocab(len(vocab))
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
    return tok, vocab, cfg, mask, start


def _standin_module(kind: str, out: Path, cfg: dict):
    """dlmeval's own remote code, already copied into ``out``."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
    return AutoModel.from_config(config, trust_remote_code=True)


# the stand-in's code in its directory is dlmeval's own: loaded with trust_remote_code (a user checkpoint needs
# --trust-remote-code)
register_checkpoint_standin(
    "lladamoe",
    CheckpointStandin(
        files=_standin_files,
        module=_standin_module,
        adapter=LLaDAMoELM,
        load=functools.partial(load_lladamoe, trust_remote_code=True),
        source=__file__,
        code_files=MOE_CODE,
    ),
)

FAMILY = register_family(
    Family(
        name="lladamoe",
        aliases=("llada-moe",),
        kind="diffusion",
        prefix="llada-moe",
        description="LLaDA-MoE (mixture-of-experts LLaDA); remote code only with --trust-remote-code",
        adapter=LLaDAMoELM,
        load=path_loader("llada-moe", "llada-moe:./LLaDA-MoE-7B-A1B-Base", load_lladamoe, remote_code=True),
        standin="tiny-llada-moe",
        load_standin=standin_loader("lladamoe"),
        standin_description="LLaDA-MoE stand-in: auto_map directory with dlmeval's own MoE code (softmax top-2 "
        "of 4 experts, shared expert, dense first layer, q/k norm), config model_type llada as released (tests)",
        remote_code=True,
        model_type="llada",  # the released config says "llada"; dllm's edit says "lladamoe": both contain it
        max_length_key="max_position_embeddings",
        mask_sources=("config", "tokenizer"),
        mask_token="<|mask|>",  # dllm's get_tokenizer: add_special_tokens({"mask_token": "<|mask|>"})
        default_mask_id=LLADA_MOE_MASK_ID,
        default_eos_ids=(LLADA_MOE_EOS_ID,),
        bos="tokenizer",
        padding_side="left",
        tokenizer_quirks=("<|mask|> mask token and <|role_end|> end of turn (dllm's get_tokenizer)",),
        chat_template="optional",
        logit_shift=0,
        attention="bidirectional",
        native_schedule="linear",
        native_samplers={"low_confidence": "none", "random": "origin"},
        hub_ids=("inclusionAI/LLaDA-MoE-7B-A1B-Base", "inclusionAI/LLaDA-MoE-7B-A1B-Instruct"),
        module=__name__,
    )
)
