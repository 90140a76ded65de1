"""The block-diffusion sampler (BD3LM; dllm's ``BD3LMSampler``, the A2D-BD3LM rows): generation block by block,
the network run **block-causally** over the prompt, the finished blocks and the current block only.

Layout (dllm's ``_prepare_for_sampling``): the prompt is left-padded to a whole number of blocks, so block
boundaries are physical columns shared by the batch (column ``j`` is in block ``j // B``); a query sees the keys
of its own block and of every block before it, padding is neither query nor key, and position ids count each
row's real tokens. As in dllm, padding is every column before the current block that holds the pad id
(:func:`dllm_valid`): a pad id inside the prompt or decoded by a finished block is dropped from attention too. The prompt's own blocks are block-causal too (as BD3LM trains). The columns after the current
block are not in the pass at all.

The remasking sampler itself runs a block-diffusion family this way (:func:`block_setup`: it reads the model's
``block_size``), so Care and every other caller need nothing special; :class:`BlockDiffusionSampler` also runs a
network that merely *can* attend block-causally (an A2D MDLM checkpoint) that way with an explicit block length.
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
count is dlmeval's NFE plus the number of blocks when the blocks divide the steps (dllm gives every block
``ceil(steps / blocks)`` steps), and its passes are narrower. Care reports the former, the passes that decide
tokens; ``block_nfe_dllm(config)`` gives the latter, counted as dllm's loop runs it, for comparison.
"""

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


def _sampler_cls():
    from dlmeval.sampling.sampler import RemaskingSampler

    return RemaskingSampler


class BlockDiffusionSampler(_sampler_cls()):
    """Block diffusion over any model whose trunk takes a block-causal mask (``model.block_attention``):
    ``config.block_length`` is the block size (default: the model's own, ``model.block_size``; dllm's A2D-BD3LM
    models use 32)."""

    def __init__(self, model: DiffusionLM, config: SamplerConfig | None = None, **overrides: Any):
        config = config or SamplerConfig()
        softmask = overrides.pop("softmask", None)
        if overrides:
            config = replace(config, **overrides)
        config, block = block_setup(model, config, force=True)
        super().__init__(model, config, softmask=softmask)
        self.block_causal = block


def dllm_transfer_counts(masked: int, steps: int) -> list[int]:
    """dllm's ``get_num_transfer_tokens`` under its linear scheduler, deterministic: at step ``j`` of ``steps``,
    ``round(remaining * (1 - s / t))`` tokens with ``s = (steps - j - 1) / steps``, ``t = (steps - j) / steps``,
    the ratio in float32 as dllm's scheduler computes it (``(1 - alpha(s)) / (1 - alpha(t))``, alpha = 1 - x),
    the product in float64 and rounded half to even (``torch.round``); steps that transfer nothing are dropped
    (dllm skips them: no forward pass)."""
    import numpy as np

    one = np.float32(1.0)
    left, out = masked, []
    for j in range(steps):
        s32, t32 = np.float32((steps - j - 1) / steps), np.float32((steps - j) / steps)
        ratio = (one - (one - s32)) / (one - (one - t32))
        n = min(int(np.round(np.float64(left) * (1.0 - float(ratio)))), left)
        left -= n
        if n > 0:
            out.append(n)
        if left == 0:
            break
    return out


def block_nfe_dllm(config: SamplerConfig) -> int:
    """dllm's own count of forward passes for ``config`` (no EOS stop), as its BD3LM loop runs them: every block
    gets ``ceil(steps / blocks)`` steps (not dlmeval's ``steps // blocks`` plus the remainder on the first
    blocks), one KV-cache prefix pass, then one pass per step that transfers tokens (dllm's schedule, steps with
    none dropped); a strategy that re-masks (not in dllm) is replayed under the same per-block step count by
    dlmeval's rules. Equals dlmeval's NFE plus the number of blocks whenever the blocks divide the steps."""
    from dlmeval.sampling.config import _paper_block, _refill_block, _strategy_traits

    length, block = config.length, config.block
    nb = -(-length // block)
    per_block = -(-int(config.steps) // nb)
    remasks, scoring = _strategy_traits(config.strategy)
    total = 0
    for b in range(nb):
        width = min(block, length - b * block)
        if remasks:
            replay = _paper_block if config.accounting == "paper" else _refill_block
            passes = replay(width, per_block, remasks, scoring, config.remask_fraction, False)
        else:
            passes = len(dllm_transfer_counts(width, per_block))
        total += 1 + passes
    return total


def make_sampler(model: DiffusionLM, config: SamplerConfig | None = None, **overrides: Any):
    """The sampler a model's family is run with (the remasking sampler, which runs block-diffusion families
    block-causally and applies the model's own soft-mask feedback)."""
    return _sampler_cls()(model, config, **overrides)
