"""The block-diffusion sampler (BD3LM; dllm's ``BD3LMSampler``, the A2D-BD3LM rows): generation block by block,
the network run **block-causally** over the prompt, the finished blocks and the current block only.

Layout (dllm's ``_prepare_for_sampling``): the prompt is left-padded to a whole number of blocks, so block
boundaries are physical columns shared by the batch (column ``j`` is in block ``j // B``); a query sees the keys
of its own block and of every block before it, padding is neither query nor key, and position ids count each
row's real tokens. As in dllm, padding is every column before the current block that holds the pad id
(:func:`dlmeval.sampling.block_causal.dllm_valid`): a pad id inside the prompt or decoded by a finished block is dropped from attention too. The prompt's own blocks are block-causal too (as BD3LM trains). The columns after the current
block are not in the pass at all.

The remasking sampler itself runs a block-diffusion family this way (:mod:`dlmeval.sampling.block_causal`:
``block_setup`` reads the model's ``block_size``), so Care and every other caller need nothing special;
:class:`BlockDiffusionSampler` also runs a network that merely *can* attend block-causally (an A2D MDLM
checkpoint) that way with an explicit block length.
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

from dlmeval.models.base import DiffusionLM
from dlmeval.sampling.block_causal import block_setup
from dlmeval.sampling.config import SamplerConfig
from dlmeval.sampling.sampler import RemaskingSampler


class BlockDiffusionSampler(RemaskingSampler):
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
    return RemaskingSampler(model, config, **overrides)
