"""The Dream family (Dream-org/Dream-v0-Base-7B / -Instruct-7B): diffusion LMs adapted from Qwen2.5.

Quirks kept here (docs/models.md lists where each is tested):

* the **one-position logit shift**: Dream keeps Qwen's head convention, the output at ``i - 1`` predicts token
  ``i``; ``logit_shift = 1`` makes the base class re-align, so above this layer position ``i`` scores token ``i``;
* the first token has no preceding position: the tokenizer adds no BOS, so this adapter prepends the tokenizer's
  BOS (``<|beginoftext|>``, what Dream's own evaluation prepends with ``add_bos_token``) and a text's first token
  is scored from the BOS output; the BOS position itself reads its own output and is never a prediction;
* a 4-D boolean attention mask and position ids counted from each row's first real token; the first real token
  is read from the mask, so left and right padding give the same logits;
* the mask id 151666 (``<|mask|>``: tokenizer and config agree; a disagreement is warned about);
* EOS ``<|endoftext|>`` from the tokenizer / configs and ``<|im_end|>`` from the Instruct chat template;
* a slow tokenizer (``DreamTokenizer``): character spans come from incremental decoding (base class);
* a config ``bos_token_id`` (151643) that is the tokenizer's EOS: the tokenizer's BOS is used;
* a vocabulary padded past the tokenizer (152,064 rows, 151,667 tokens; masked in the base class).
"""

from __future__ import annotations

from pathlib import Path

import torch

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.base import DiffusionLM, RunOut, resolve_device, resolve_dtype

DREAM_MASK_ID = 151666
DREAM_EOS_ID = 151643
DREAM_IM_END_ID = 151645


class DreamLM(DiffusionLM):
    family = "dream"
    logit_shift = 1
    native_schedule = "dream"  # diffusion_generate: int(M * (1 - s / t)) per step, a pass at every step
    prepend_bos = True

    def __init__(self, module, tokenizer, **kw):
        kw.setdefault("padding_side", "left")
        super().__init__(module, tokenizer, **kw)

    def _run(self, input_ids, attention_mask, inputs_embeds, output_hidden_states):
        x = input_ids if input_ids is not None else inputs_embeds
        b, n = x.shape[0], x.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(b, n, dtype=torch.long, device=x.device)
        am = attention_mask.bool()
        mask4 = (am[:, None, :, None] & am[:, None, None, :]) | torch.eye(
            n, dtype=torch.bool, device=x.device
        )
        pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        kw = {"attention_mask": mask4, "position_ids": pos, "output_hidden_states": output_hidden_states}
        if inputs_embeds is not None:
            kw["inputs_embeds"] = inputs_embeds
        else:
            kw["input_ids"] = input_ids
        out = self.module(**kw)
        return RunOut(logits=out.logits, hidden_states=out.hidden_states if output_hidden_states else None)


def load_dream(
    path: str,
    *,
    device=None,
    dtype=None,
    trust_remote_code: bool = False,
    allow_download: bool = False,
    mask_token_id: int | None = None,
    name: str | None = None,
) -> DreamLM:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from dlmeval.models.llada import _generation_config, _version_note
    from dlmeval.models.tokens import special_ids_from_files

    if not Path(path).exists() and not allow_download:
        raise ModelNotFoundError(
            f"Dream model {path!r} is not on disk. Pass a local directory, or add --allow-download (needs internet)."
        )
    if not trust_remote_code:
        raise InputError(
            "Dream checkpoints ship their model code; re-run with --trust-remote-code to load it."
        )
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    kw = {"trust_remote_code": True, "local_files_only": not allow_download}
    cfg = AutoConfig.from_pretrained(path, **kw)
    if "dream" not in (getattr(cfg, "model_type", "") or "").lower():
        raise InputError(f"{path} is a {cfg.model_type!r} model, not Dream; use the matching spec")
    tok = AutoTokenizer.from_pretrained(path, **kw)
    module = AutoModel.from_pretrained(path, dtype=dt, **kw).to(dev).eval()
    mid, eos, notes = special_ids_from_files(
        tok,
        cfg,
        _generation_config(path, {"local_files_only": not allow_download}),
        family="dream",
        mask_override=mask_token_id,
        default_mask=DREAM_MASK_ID,
        default_eos=(DREAM_EOS_ID, DREAM_IM_END_ID),
    )
    pad = tok.pad_token_id if tok.pad_token_id is not None else getattr(cfg, "pad_token_id", None)
    m = DreamLM(
        module,
        tok,
        name=name or Path(path).name,
        source=str(path),
        mask_token_id=mid,
        max_length=int(getattr(cfg, "max_position_embeddings", 4096)),
        device=dev,
        dtype=dt,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=pad if pad is not None else eos[0],
        chat_template=bool(getattr(tok, "chat_template", None)),
    )
    m.load_warnings = notes + _version_note("dream")
    return m
