"""The block-diffusion sampler (BD3LM; dllm's ``BD3LMSampler``, the A2D-BD3LM rows): generation block by block,
the network run **block-causally** over the prompt, the finished blocks and the current block only.

Layout (dllm's ``_prepare_for_sampling``): the prompt is left-padded to a whole number of blocks, so block
boundaries are physical columns shared by the batch (column ``j`` is in block ``j // B``); a query sees the keys
of its own block and of every block before it, padding is neither query nor key, and position ids count each
row's real tokens. The prompt's own blocks are block-causal too (as BD3LM trains). The columns after the current
block are not in the pass at all.

Everything else is the remasking sampler's (:class:`~dlmeval.sampling.sampler.RemaskingSampler`): the per-block
linear schedule (dllm's ``get_num_transfer_tokens`` with the linear scheduler gives the same counts whenever the
block's steps divide its length or reach it), every strategy, temperature, EOS handling, per-row generators and
both NFE accountings.

**Care NFE for block diffusion** (docs/care.md): NFE counts forward passes of the network, whatever their width,
read from ``model.nfe``: one per decode / scoring / drain pass exactly as for the remasking sampler, so
``predict_nfe(L, S, block_length=B, ...)`` holds unchanged (``none`` at ``S >= L`` steps: ``L`` passes). dlmeval
recomputes the prefix inside each pass (no KV cache; the logits are the same, since under block-causal attention
the prefix never sees the current block). dllm's loop instead spends one extra pass per block filling its KV
cache (``out_prefix = self.model(x_prefix, ...)``) and then runs each step on the block's columns only: its
count is dlmeval's NFE plus the number of blocks, and its passes are narrower. Care reports the former, the
passes that decide tokens; ``block_nfe_dllm(res)`` gives the latter for comparison.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM
from dlmeval.sampling.config import SamplerConfig
from dlmeval.sampling.sampler import RemaskingSampler


def is_block_diffusion(model: Any) -> bool:
    """Whether ``model`` is a block-diffusion family (trained block-causally: it names its block size)."""
    return bool(getattr(model, "block_attention", False)) and getattr(model, "block_size", None) is not None


class BlockDiffusionSampler(RemaskingSampler):
    """Block diffusion over a model whose trunk takes a block-causal mask (``model.block_attention``).

    ``config.block_length`` is the block size (default: the model's own, ``model.block_size``; dllm's A2D-BD3LM
    models use 32)."""

    def __init__(self, model: DiffusionLM, config: SamplerConfig | None = None, **overrides: Any):
        if not getattr(model, "block_attention", False):
            raise InputError(
                f"{model.family} models take no block-causal attention mask; block diffusion needs a "
                "block-diffusion family (a2d-bd3lm:PATH)"
            )
        config = config or SamplerConfig()
        softmask = overrides.pop("softmask", None)
        if overrides:
            config = replace(config, **overrides)
        if config.block_length is None:
            own = getattr(model, "block_size", None)
            if own is None:
                raise InputError(
                    f"{model.family} names no block size; pass block_length (a divisor of length {config.length})"
                )
            if config.length % own:
                raise InputError(
                    f"length {config.length} is not a whole number of the model's blocks of {own}; pass a length "
                    f"that {own} divides or an explicit block_length"
                )
            config = replace(config, block_length=int(own))
        super().__init__(model, config, softmask=softmask)
        self.block_causal = int(self.config.block)

    def _pad_batch(self, prompt_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Prompts left-padded to a whole number of blocks, then the masked generation region."""
        b, length = self.block_causal, self.config.length
        plen = max(len(p) for p in prompt_ids)
        width = -(-plen // b) * b + length
        if width > self.model.max_length:
            raise InputError(
                f"a prompt of {plen} tokens padded to blocks of {b} plus {length} generated tokens exceeds the "
                f"model's window of {self.model.max_length}; shorten the prompt or the length"
            )
        mask_id = int(self.model.mask_token_id)
        return self.model.pad([p + [mask_id] * length for p in prompt_ids], length=width, side="left")

    def config_dict(self) -> dict[str, Any]:
        return {**super().config_dict(), "sampler": "block"}


def block_nfe_dllm(nfe: int, config: SamplerConfig) -> int:
    """dllm's own count for the same sample: dlmeval's ``nfe`` plus one KV-cache prefix pass per block."""
    return int(nfe) + config.n_blocks


def make_sampler(
    model: DiffusionLM, config: SamplerConfig | None = None, **overrides: Any
) -> RemaskingSampler:
    """The sampler a model's family is run with: block diffusion for block-diffusion families, the remasking
    sampler otherwise."""
    if is_block_diffusion(model):
        return BlockDiffusionSampler(model, config, **overrides)
    return RemaskingSampler(model, config, **overrides)
