"""Block-causal passes of the remasking sampler: whether a model is a block-diffusion family, the block size its
passes use (:func:`block_setup`) and the prompt layout over whole blocks (:func:`block_layout`). The remasking
sampler (:mod:`dlmeval.sampling.sampler`) and the block-diffusion sampler (:mod:`dlmeval.sampling.block`, which
builds on it) both read them here, so the sampler never imports the module that subclasses it (#35)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from dlmeval.errors import InputError
from dlmeval.models.base import DiffusionLM
from dlmeval.sampling.config import SamplerConfig


def is_block_diffusion(model: Any) -> bool:
    """Whether ``model`` is a block-diffusion family (trained block-causally: it names its block size)."""
    return bool(getattr(model, "block_attention", False)) and getattr(model, "block_size", None) is not None


def block_setup(
    model: Any, config: SamplerConfig, *, force: bool = False
) -> tuple[SamplerConfig, int | None]:
    """``(config, block size of block-causal passes or None)``: a block-diffusion family (or any model that
    takes a block-causal mask, with ``force``) gets its block size as ``block_length`` when none is given."""
    if not (is_block_diffusion(model) or force):
        return config, None
    if not getattr(model, "block_attention", False):
        raise InputError(
            f"{model.family} models take no block-causal attention mask; block diffusion needs a "
            "block-diffusion family (a2d-bd3lm:PATH)"
        )
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
    return config, int(config.block)


def block_layout(
    model: DiffusionLM, prompt_ids, rows, block: int, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts left-padded to a whole number of blocks, then the masked generation region (``rows``)."""
    plen = max(len(p) for p in prompt_ids)
    width = -(-plen // block) * block + length
    if width > model.max_length:
        raise InputError(
            f"a prompt of {plen} tokens padded to blocks of {block} plus {length} generated tokens exceeds the "
            f"model's window of {model.max_length}; shorten the prompt or the length"
        )
    return model.pad(rows, length=width, side="left")


def dllm_valid(ids: torch.Tensor, attn: torch.Tensor, pad_id: int, start: int) -> torch.Tensor:
    """The columns a block-diffusion pass treats as tokens, as dllm's ``_prepare_for_sampling`` does
    (``valid = x != pad_token_id``): before column ``start`` (the prompt and the finished blocks) a column holding
    the pad id is padding (neither query nor key, no position), whether it was padding, a pad id inside the prompt
    or a pad id a finished block decoded (Qwen's ``<|endoftext|>`` is both its pad and its EOS); the current block
    from ``start`` on counts whole, as dllm builds its mask once at the block's start, when it is all masks."""
    out = attn.clone()
    out[:, :start] = out[:, :start] * (ids[:, :start] != int(pad_id)).to(out.dtype)
    return out
