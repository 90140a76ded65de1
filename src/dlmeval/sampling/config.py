"""Sampler settings, the unmasking schedule, and NFE prediction (the count rules the sampler follows).

Count rules (the sampler implements exactly these; :func:`predict_nfe` replays them without a model):

* The generation region of ``length`` positions is split into ``length // block_length`` blocks, filled left to
  right. The nominal ``steps`` are split evenly over the blocks (the first ``steps % n_blocks`` blocks get one
  more).
* In a block of ``M`` positions with ``S`` steps, step ``i`` unmasks ``n_i = M // S + (1 if i < M % S else 0)``
  tokens (the linear schedule, as LLaDA's ``get_num_transfer_tokens``), **plus** as many as the previous step
  re-masked (re-masked tokens are refilled at the next step, so the masked count follows the schedule).
* A re-masking strategy re-masks ``floor(remask_fraction * D)`` tokens per step, ``D`` being the tokens of the
  current block decided before the step; never at the last step of a block, so every block ends fully decided.
  (``agreement`` re-masks at most that many: only tokens the model disagrees with.)
* Step skipping: on a model that is not time-conditioned (``model.time_conditioned`` is False), a step that can
  change no token (nothing to unmask and nothing to re-mask, known from the counts alone) is skipped: no forward
  pass, no NFE. A step that was run counts even if it ended up changing nothing (``agreement`` finding no
  disagreement). On a time-conditioned model every nominal step is a forward pass.

So ``none`` with ``steps >= length`` (one block) spends exactly ``length`` forward passes, and a re-masking strategy
usually spends one pass per nominal step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from dlmeval.errors import InputError

#: tolerance when flooring ``fraction * count`` so that e.g. 0.29 * 100 gives 29, not 28
_FLOOR_EPS = 1e-9


def remask_budget(fraction: float, n_decided: int) -> int:
    """Tokens a re-masking strategy may re-mask at a step: ``floor(fraction * n_decided)``."""
    return int(math.floor(fraction * n_decided + _FLOOR_EPS))


@dataclass(frozen=True)
class SamplerConfig:
    """Everything that decides a sample (besides the model and the prompts).

    ``steps`` (nominal steps) or ``nfe`` (compute-matched: the sampler picks the nominal steps whose forward-pass
    count is ``nfe``, see :func:`steps_for_nfe`) must be given, not both. ``block_length=None`` means one block.
    ``temperature`` is the unmask temperature (Gumbel noise in float64; 0 is argmax). ``position_temperature`` is
    Dream's ``alg_temp``: when > 0, the positions to unmask are drawn (Gumbel-top-k over ``score / temp``)
    instead of taken by rank. ``suppress_eos`` bans the model's EOS/EoT ids (the ranking confidence is computed
    from the suppressed distribution). ``stop_at_eos`` ends a row once its text up to the first EOS can no
    longer change.
    """

    length: int = 128
    steps: int | None = 128
    nfe: int | None = None
    block_length: int | None = None
    strategy: str = "none"
    remask_fraction: float = 0.15
    temperature: float = 0.0
    position_temperature: float = 0.0
    suppress_eos: bool = False
    stop_at_eos: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        from dlmeval.sampling.strategies import STRATEGIES

        def _int(name: str, v: Any, lo: int) -> None:
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")

        _int("length", self.length, 1)
        if (self.steps is None) == (self.nfe is None):
            raise InputError(
                "give either steps (nominal steps) or nfe (a forward-pass budget to match), not both"
                if self.steps is not None
                else "give steps (nominal steps) or nfe (a forward-pass budget to match)"
            )
        if self.steps is not None:
            _int("steps", self.steps, 1)
        if self.nfe is not None:
            _int("nfe", self.nfe, 1)
        if self.block_length is not None:
            _int("block_length", self.block_length, 1)
            if self.length % self.block_length:
                raise InputError(
                    f"block_length {self.block_length} does not divide length {self.length}; "
                    f"pick a divisor of {self.length} (or omit it for one block)"
                )
        if self.strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        for name in ("remask_fraction", "temperature", "position_temperature"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise InputError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.remask_fraction > 1:
            raise InputError(f"remask_fraction must be in [0, 1], got {self.remask_fraction}")
        if self.steps is not None and self.steps < self.n_blocks:
            raise InputError(
                f"{self.steps} steps cannot cover {self.n_blocks} blocks (one step each at least); "
                f"use steps >= {self.n_blocks} or a longer block_length"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"seed must be an integer, got {self.seed!r}")

    # ------------------------------------------------------------------ derived
    @property
    def block(self) -> int:
        return self.block_length or self.length

    @property
    def n_blocks(self) -> int:
        return self.length // self.block

    def block_steps(self, steps: int | None = None) -> list[int]:
        """Nominal steps of each block (split evenly, the first blocks take the remainder)."""
        s = self.steps if steps is None else steps
        assert s is not None
        nb = self.n_blocks
        return [s // nb + (1 if j < s % nb else 0) for j in range(nb)]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_steps(self, steps: int) -> SamplerConfig:
        """The same settings with the nominal steps fixed (and no NFE target)."""
        return replace(self, steps=steps, nfe=None)


def linear_schedule(masked: int, steps: int) -> list[int]:
    """Tokens to unmask at each of ``steps`` steps so that ``masked`` tokens are done, as evenly as possible."""
    base, rem = divmod(masked, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


def predict_nfe(
    length: int,
    steps: int,
    *,
    block_length: int | None = None,
    remasks: bool = False,
    remask_fraction: float = 0.15,
    time_conditioned: bool = False,
) -> int:
    """Forward passes per row under the count rules above (no EOS stop; exact for every strategy but
    ``agreement``, for which it is an upper bound)."""
    block = block_length or length
    nb = length // block
    per_block = [steps // nb + (1 if j < steps % nb else 0) for j in range(nb)]
    if time_conditioned:
        return steps
    if not remasks or remask_budget(remask_fraction, block) == 0:
        return sum(min(s_b, block) for s_b in per_block)  # steps past the schedule's end change nothing
    calls = 0
    for s_b in per_block:
        sched = linear_schedule(block, s_b)
        masked, refill = block, 0
        for i in range(s_b):
            k_re = remask_budget(remask_fraction, block - masked) if remasks and i < s_b - 1 else 0
            k_un = min(sched[i] + refill, masked)
            if time_conditioned or k_un > 0 or k_re > 0:
                calls += 1
            masked += k_re - k_un
            refill = k_re
    return calls


def steps_for_nfe(
    target: int,
    length: int,
    *,
    block_length: int | None = None,
    remasks: bool = False,
    remask_fraction: float = 0.15,
    time_conditioned: bool = False,
) -> tuple[int, int]:
    """Nominal steps whose predicted NFE is ``target``: the smallest such, else (when no step count reaches it,
    e.g. ``none`` asked for more than ``length`` passes) the smallest step count with the largest NFE below
    the target. Returns ``(steps, predicted_nfe)``."""
    nb = length // (block_length or length)
    kw = dict(
        block_length=block_length,
        remasks=remasks,
        remask_fraction=remask_fraction,
        time_conditioned=time_conditioned,
    )
    if target < nb:
        raise InputError(f"an NFE of {target} cannot cover {nb} blocks; ask for nfe >= {nb}")
    best = (nb, predict_nfe(length, nb, **kw))
    # one nominal step costs at most one pass, so steps < target cannot reach it; a step count beyond
    # target + length adds only passes that a longer run would also make (scan bound)
    for s in range(nb, target + length + 1):
        got = predict_nfe(length, s, **kw)
        if got == target:
            return s, got
        if best[1] < got <= target:
            best = (s, got)
    return best
