"""Adapter for Hugging Face masked LMs (``AutoModelForMaskedLM``: BERT, RoBERTa, ModernBERT, ...)."""

from __future__ import annotations

import torch
from torch import nn

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM, RunOut

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
        if self._trunk is None:
            out = self.module(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_hidden_states=output_hidden_states,
            )
            return RunOut(
                logits=out.logits, hidden_states=out.hidden_states if output_hidden_states else None
            )
        out = self._trunk(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
        )
        return RunOut(
            last_hidden=out.last_hidden_state,
            hidden_states=out.hidden_states if output_hidden_states else None,
        )

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        for m in self._head_mods:
            hidden = m(hidden)
        return hidden
