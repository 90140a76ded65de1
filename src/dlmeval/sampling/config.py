"""Sampler settings, the unmasking schedule, and NFE prediction (the count rules the sampler follows).

Two accountings (``SamplerConfig.accounting``); :func:`predict_nfe` replays either without a model.

``"paper"`` (the default: the Care paper's "report actual NFE")
    Nominal steps fix the unmasking schedule; a token a strategy re-masks goes back to the masked pool and is
    decoded again, and the passes that takes are real passes. Per block of ``B`` positions with ``S`` steps:

    * step ``i`` unmasks ``n_i`` new tokens (LLaDA's ``get_num_transfer_tokens``: ``B // S`` plus one for the
      first ``B % S`` steps) **plus** every token re-masked at the step before (the *decode pass*). A step with
      nothing to decode is skipped: no pass (so ``none`` at ``S >= B`` spends ``B`` passes, Table 3's 128);
    * a re-masking strategy re-masks ``k = int(remask_fraction * B)`` positions (App. C.2's
      ``int(self.fraction * L)``) at the steps ``i >= ceil(2k * S / B)`` of its window (re-masking starts once
      the nominal clock has passed ``2k / B`` of the block, so that at ``S <= B`` at least ``2k`` tokens are
      decided), the last step included;
    * a strategy whose choice reads the model (every informed one: ``low_confidence``, ``high_entropy``,
      ``conf_entropy``, ``agreement``) scores the sequence *after* the step's unmasking with one more forward
      pass (the *scoring pass*, "the current step output distribution") at each step of its window;
      ``running_confidence`` updates its running means with a scoring pass at **every** step; ``random`` draws
      its choice without the model and spends none;
    * after a block's last step, tokens re-masked there are decoded by one more pass (the *drain pass*).

    At ``L = 128`` (one block, ``remask_fraction = 0.15``, so ``k = 19``) this gives exactly the paper's counts:
    256 steps: ``none`` 128, ``random`` 257, informed ``256 + 180 + 1 = 437``, ``running_confidence``
    ``2 * 256 + 1 = 513`` (Table 3); 128 steps: 128 / 129 / ``128 + 90 + 1 = 219`` / 257 (Table 16). The
    arithmetic and what it does not reproduce are in ``docs/care.md``.

``"refill"`` (named option: a fixed forward-pass budget per nominal step, answering "what does a strategy do
with the same passes")
    Step ``i`` unmasks ``n_i`` plus as many as the previous step re-masked; a re-masking strategy re-masks
    ``floor(remask_fraction * D)`` of the ``D`` decided tokens of the block, chosen from the decode pass's own
    logits, never at a block's last step; so it spends (about) one pass per nominal step.

In both, a model that is time-conditioned (``model.time_conditioned``) runs the decode pass at every nominal
step, and ``agreement`` (which re-masks only tokens the model disagrees with) may spend fewer passes than
predicted (the prediction is an upper bound for it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from dlmeval.errors import InputError

#: the NFE accountings (see the module doc)
ACCOUNTINGS = ("paper", "refill")
#: the unmasking schedules (see :class:`SamplerConfig`)
SCHEDULES = ("linear", "dream")

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
    from the suppressed distribution). ``eos_rank_last`` keeps EOS/EoT candidates but unmasks them only after
    every other masked position of the block (the robustness paper's "LLaDA EOS suppression on", LLaDA App.
    B.4: EOS ranked last in the confidence ranking rather than banned). ``stop_at_eos`` ends a row once its
    text up to the first EOS can no longer change. ``accounting`` is ``"paper"`` (re-masked tokens are decoded
    again with real passes; the default) or ``"refill"`` (one pass per nominal step), see the module doc.
    ``schedule`` is how many tokens a step decodes: ``"linear"`` (LLaDA's ``get_num_transfer_tokens``),
    ``"dream"`` (Dream's ``diffusion_generate``: ``int(M * (1 - s / t))`` of the ``M`` masked positions over
    ``t = linspace(1, eps, steps + 1)``, every step a forward pass, ``origin`` transferring each masked position
    with probability ``1 - s / t``) or None: the model's own (``model.native_schedule``; ``linear`` for every
    family but Dream). ``top_p`` is nucleus filtering of the sampling distribution (Dream's ``top_p``); ``top_k``
    keeps the ``k`` most likely tokens (Dream's ``top_k``; None: off), applied after top-p as Dream does. Both shape
    the distribution the candidates are drawn from and the ``tempered_*`` fields the Dream strategies rank by.
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
    eos_rank_last: bool = False
    stop_at_eos: bool = True
    seed: int = 0
    accounting: str = "paper"
    schedule: str | None = None
    top_p: float = 1.0
    eps: float = 1e-3
    top_k: int | None = None

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
        if self.accounting not in ACCOUNTINGS:
            raise InputError(
                f"unknown accounting {self.accounting!r}; choose one of {', '.join(ACCOUNTINGS)} "
                "(paper: re-masked tokens are decoded again with real passes; refill: one pass per step)"
            )
        if self.accounting == "paper" and STRATEGIES[self.strategy].remasks and self.remask_fraction > 0:
            k = paper_remask_k(self.remask_fraction, self.block)
            if self.block < 3:
                raise InputError(
                    f"a block of {self.block} positions is too short to re-mask under the paper accounting "
                    f"(re-masking k >= 1 positions starts once 2k of them are decided); use block_length >= 3 "
                    "or accounting='refill'"
                )
            if k == 0 or 2 * k >= self.block:
                raise InputError(
                    f"remask_fraction {self.remask_fraction} re-masks int({self.remask_fraction} x {self.block}) = "
                    f"{k} of a block of {self.block} per step, so under the paper accounting (re-masking starts "
                    f"once 2k / B of the block's steps have passed) {self.strategy} would never re-mask; use "
                    f"a fraction in [{1 / self.block:g}, 0.5), a longer block, or accounting='refill'"
                )
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise InputError(
                f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)} (or omit it: the "
                "model's own)"
            )
        if self.schedule == "dream" and STRATEGIES[self.strategy].remasks:
            raise InputError(
                f"the dream schedule is Dream's own loop, which never re-masks; {self.strategy} re-masks: use "
                "schedule='linear' for it"
            )
        for name, v in (("top_p", self.top_p), ("eps", self.eps)):
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
                raise InputError(f"{name} must be in (0, 1], got {v!r}")
        if self.top_k is not None and (
            isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1
        ):
            raise InputError(
                f"top_k must be an integer >= 1 (or left out: no top-k filter), got {self.top_k!r}"
            )
        if self.suppress_eos and self.eos_rank_last:
            raise InputError("suppress_eos bans EOS and eos_rank_last keeps it (ranked last): choose one")

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
        """The settings as a dict (run signatures hash it). ``top_k`` appears only when set, so configurations
        from before it existed keep their signatures; a set ``top_k`` changes the signature."""
        d = asdict(self)
        if d["top_k"] is None:
            del d["top_k"]
        return d

    def with_steps(self, steps: int) -> SamplerConfig:
        """The same settings with the nominal steps fixed (and no NFE target)."""
        return replace(self, steps=steps, nfe=None)


def _dream_ratio(step: int, steps: int, eps: float) -> float:
    """``1 - s / t`` for Dream's ``timesteps = torch.linspace(1, eps, steps + 1)``, in float32 as Dream computes
    it (a float64 ratio truncates differently where ``masked * ratio`` is close to a whole number)."""
    import torch

    ts = torch.linspace(1, eps, steps + 1, dtype=torch.float32)
    return float(1 - ts[step + 1] / ts[step])


def dream_transfer_count(masked: int, step: int, steps: int, eps: float = 1e-3) -> int:
    """Tokens Dream's ``diffusion_generate`` decodes at ``step`` of ``steps`` with ``masked`` positions still
    masked: ``int(masked * (1 - s / t))`` for ``t, s`` consecutive points of ``linspace(1, eps, steps + 1)``, and
    every remaining one at the last step."""
    import torch

    if step >= steps - 1:
        return masked
    ts = torch.linspace(1, eps, steps + 1, dtype=torch.float32)
    return int(torch.tensor(float(masked)) * (1 - ts[step + 1] / ts[step]))


def dream_transfer_probability(step: int, steps: int, eps: float = 1e-3) -> float:
    """Dream ``origin``'s per-position transfer probability ``1 - s / t`` (1 at the last step)."""
    return 1.0 if step >= steps - 1 else _dream_ratio(step, steps, eps)


def linear_schedule(masked: int, steps: int) -> list[int]:
    """Tokens to unmask at each of ``steps`` steps so that ``masked`` tokens are done, as evenly as possible."""
    base, rem = divmod(masked, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


def paper_remask_k(fraction: float, block: int) -> int:
    """Positions a re-masking strategy re-masks per step under the paper's accounting: ``int(fraction * B)``."""
    return remask_budget(fraction, block)


def paper_window_start(fraction: float, block: int, steps: int) -> int | None:
    """First step of a block at which a re-masking strategy re-masks under the paper's accounting:
    ``ceil(2k * S / B)`` (``None`` when ``k = 0``: it never re-masks)."""
    k = paper_remask_k(fraction, block)
    return None if k < 1 else -(-2 * k * steps // block)


def _strategy_traits(strategy: str) -> tuple[bool, str]:
    from dlmeval.sampling.strategies import get_strategy

    s = get_strategy(strategy)
    return s.remasks, s.scoring


def predict_nfe(
    length: int,
    steps: int,
    *,
    strategy: str = "none",
    block_length: int | None = None,
    remask_fraction: float = 0.15,
    accounting: str = "paper",
    time_conditioned: bool = False,
    schedule: str = "linear",
) -> int:
    """Forward passes per row under the count rules of ``accounting`` (no EOS stop; exact for every strategy
    but ``agreement``, for which it is an upper bound). Under the ``dream`` schedule every nominal step is a
    pass, as in Dream's loop."""
    if accounting not in ACCOUNTINGS:
        raise InputError(f"unknown accounting {accounting!r}; choose one of {', '.join(ACCOUNTINGS)}")
    remasks, scoring = _strategy_traits(strategy)
    block = block_length or length
    nb = length // block
    per_block = [steps // nb + (1 if j < steps % nb else 0) for j in range(nb)]
    if schedule == "dream":
        return steps
    replay = _paper_block if accounting == "paper" else _refill_block
    return sum(replay(block, s_b, remasks, scoring, remask_fraction, time_conditioned) for s_b in per_block)


def _paper_block(block: int, steps: int, remasks: bool, scoring: str, fraction: float, tc: bool) -> int:
    sched = linear_schedule(block, steps)
    k = paper_remask_k(fraction, block) if remasks else 0
    w0 = paper_window_start(fraction, block, steps) if remasks else None
    passes, waiting, decided = 0, 0, 0
    for i in range(steps):
        if tc or sched[i] + waiting > 0:
            passes += 1  # decode pass
        decided += sched[i]
        in_window = w0 is not None and i >= w0
        if decided > 0 and (scoring == "every" or (scoring == "window" and in_window)):
            passes += 1  # scoring pass
        waiting = min(k, decided) if in_window else 0
    return passes + (1 if waiting else 0)  # drain pass


def _refill_block(block: int, steps: int, remasks: bool, scoring: str, fraction: float, tc: bool) -> int:
    if tc:
        return steps
    if not remasks or remask_budget(fraction, block) == 0:
        return min(steps, block)  # steps past the schedule's end change nothing
    sched = linear_schedule(block, steps)
    calls, masked, refill = 0, block, 0
    for i in range(steps):
        k_re = remask_budget(fraction, block - masked) if i < steps - 1 else 0
        k_un = min(sched[i] + refill, masked)
        if k_un > 0 or k_re > 0:
            calls += 1
        masked += k_re - k_un
        refill = k_re
    return calls


def equivalent_steps(
    length: int,
    steps: int,
    *,
    strategy: str = "none",
    block_length: int | None = None,
    time_conditioned: bool = False,
    schedule: str = "linear",
) -> int:
    """The smallest nominal step count whose sample is provably identical to ``steps``'s (same tokens at any
    temperature and seed): for a strategy that never re-masks on a model that is not time-conditioned, the
    steps past a block's schedule end decode nothing, draw nothing and are skipped, so every block with
    ``S_b >= B`` steps samples as with ``B``. Otherwise ``steps`` itself."""
    remasks, _ = _strategy_traits(strategy)
    block = block_length or length
    nb = length // block
    if remasks or time_conditioned or schedule != "linear" or steps // nb < block:
        return steps
    return nb * block


def steps_for_nfe(
    target: int,
    length: int,
    *,
    strategy: str = "none",
    block_length: int | None = None,
    remask_fraction: float = 0.15,
    accounting: str = "paper",
    time_conditioned: bool = False,
    schedule: str = "linear",
) -> tuple[int, int]:
    """Nominal steps whose predicted NFE is ``target``: the smallest such, else (when no step count reaches it,
    e.g. ``none`` asked for more than ``length`` passes) the step count with the NFE closest to the target
    from below (the smallest such). Returns ``(steps, predicted_nfe)``; compare the NFE with the target."""
    nb = length // (block_length or length)
    kw = dict(
        strategy=strategy,
        block_length=block_length,
        remask_fraction=remask_fraction,
        accounting=accounting,
        time_conditioned=time_conditioned,
        schedule=schedule,
    )
    if target < nb:
        raise InputError(f"an NFE of {target} cannot cover {nb} blocks; ask for nfe >= {nb}")
    best = (nb, predict_nfe(length, nb, **kw))
    # a nominal step costs at least one pass until the schedule ends, so steps past target + length cannot
    # reach the target with fewer passes than a shorter run (scan bound)
    for s in range(nb, target + length + 1):
        got = predict_nfe(length, s, **kw)
        if got == target:
            return s, got
        if best[1] < got <= target:
            best = (s, got)
    return best
