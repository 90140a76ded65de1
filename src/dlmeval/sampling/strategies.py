"""Unmasking / re-masking strategies: a registry of small classes with one selection method each.

A strategy scores positions; the sampler keeps the top ``k`` per row, ``k`` coming from the schedule (unmasking)
or from the re-mask budget (re-masking, see :mod:`dlmeval.sampling.config`). A score of ``-inf`` means "never".

* Care / LLaDA re-masking strategies override :meth:`Strategy.remask_scores` (which decided tokens of the current
  block to put back under the mask); they unmask by confidence like ``none``:

  ==================== ================================================================================
  ``none``             never re-masks (the baseline); unmasks the most confident candidates first
  ``random``           re-masks decided tokens uniformly at random
  ``low_confidence``   re-masks the tokens the model now gives the lowest probability
  ``running_confidence`` re-masks the lowest running mean probability (from the step it was decided on)
  ``high_entropy``     re-masks the positions whose predictive distribution has the highest entropy
  ``conf_entropy``     re-masks the lowest ``p(token) - H / log V`` (low confidence and high entropy)
  ``agreement``        re-masks only tokens that differ from the model's current argmax, least confident first
  ==================== ================================================================================

* Dream's algorithms override :meth:`Strategy.unmask_scores` (the order in which masked positions are filled) and
  never re-mask:

  ==================== ================================================================================
  ``origin``           uniformly random order (Dream's ``origin``; here with the schedule's counts, not
                       Dream's Binomial counts, so that steps and NFE are deterministic)
  ``entropy``          lowest entropy of the tempered distribution first (Dream's ``entropy``)
  ``maskgit``          highest tempered probability of the sampled token first (Dream's ``maskgit_plus``)
  ==================== ================================================================================

Note: scores at decided positions come from a forward pass in which the token is visible (that is what the
published strategies do: "the current step output distribution"); ``running_confidence`` also remembers the
probability the token had when it was chosen, under the mask.

Adding a strategy::

    @register_strategy
    class LowestMargin(Strategy):
        name = "lowest_margin"
        remasks = True

        def remask_scores(self, view):
            return -view.confidence  # any [R, W] tensor built from the view's fields
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from typing import ClassVar

import torch

from dlmeval.errors import InputError

STRATEGIES: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make a strategy available by its ``name``."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a class attribute `name`")
    STRATEGIES[cls.name] = cls
    return cls


def get_strategy(name: str, *, remask_fraction: float = 0.15) -> Strategy:
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](remask_fraction=remask_fraction)


class StepView:
    """What a strategy sees at one step, as ``[R, W]`` tensors over the current block (``R`` rows take part in the
    step, ``W`` = block length). Fields are computed on first use, only at the positions that matter (masked
    positions, plus decided ones for re-masking strategies); elsewhere they hold NaN.

    * ``tokens`` current ids (the mask id where masked), ``masked`` / ``decided`` bool
    * ``candidates`` the sampled token at masked positions (the current token elsewhere)
    * ``confidence`` probability of the candidate (masked) or of the current token (decided) under the model's
      distribution, with banned ids (mask, suppressed EOS) removed and the rest renormalised
    * ``entropy`` (nats) of that distribution; ``argmax`` its most likely id
    * ``tempered_confidence`` / ``tempered_entropy``: the same under ``softmax(logits / temperature)`` (Dream)
    * ``running_confidence`` mean of ``confidence`` over the steps since the token was decided (only for
      strategies with ``tracks_running``)
    * ``uniform()``: fresh uniform draws ``[R, W]`` from each row's own generator
    * ``step`` (global nominal step), ``block``, ``block_step``, ``block_steps``, ``vocab_size``
    """

    def __init__(
        self,
        *,
        tokens: torch.Tensor,
        masked: torch.Tensor,
        decided: torch.Tensor,
        candidates: torch.Tensor,
        region_rows: torch.Tensor,
        region_cols: torch.Tensor,
        region_logits: torch.Tensor,
        temperature: float,
        uniform: Callable[[], torch.Tensor],
        step: int,
        block: int,
        block_step: int,
        block_steps: int,
        running_confidence: torch.Tensor | None = None,
    ):
        self.tokens = tokens
        self.masked = masked
        self.decided = decided
        self.candidates = candidates
        self._rows = region_rows
        self._cols = region_cols
        self._logits = region_logits  # [N, V] float32 at (rows, cols), banned ids already at finfo.min
        self.temperature = float(temperature)
        self._uniform = uniform
        self.step = step
        self.block = block
        self.block_step = block_step
        self.block_steps = block_steps
        self.vocab_size = int(region_logits.shape[-1])
        self._running = running_confidence

    def uniform(self) -> torch.Tensor:
        return self._uniform()

    # ------------------------------------------------------------------ lazily computed fields
    def _grid(self, values: torch.Tensor) -> torch.Tensor:
        out = torch.full(self.tokens.shape, float("nan"), dtype=values.dtype, device=values.device)
        out[self._rows, self._cols] = values
        return out

    @cached_property
    def _lse(self) -> torch.Tensor:
        return torch.logsumexp(self._logits, dim=-1)

    @cached_property
    def _targets(self) -> torch.Tensor:
        return self.candidates[self._rows, self._cols]

    @cached_property
    def confidence(self) -> torch.Tensor:
        z = self._logits.gather(1, self._targets.unsqueeze(1)).squeeze(1)
        return self._grid(torch.exp(z - self._lse))

    @cached_property
    def entropy(self) -> torch.Tensor:
        return self._grid(_entropy(self._logits, self._lse))

    @cached_property
    def argmax(self) -> torch.Tensor:
        out = self.tokens.clone()
        out[self._rows, self._cols] = self._logits.argmax(dim=-1)
        return out

    @cached_property
    def _tempered(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.temperature <= 0:
            return self._logits, self._lse
        z = self._logits / self.temperature
        return z, torch.logsumexp(z, dim=-1)

    @cached_property
    def tempered_confidence(self) -> torch.Tensor:
        z, lse = self._tempered
        return self._grid(torch.exp(z.gather(1, self._targets.unsqueeze(1)).squeeze(1) - lse))

    @cached_property
    def tempered_entropy(self) -> torch.Tensor:
        z, lse = self._tempered
        return self._grid(_entropy(z, lse))

    @property
    def running_confidence(self) -> torch.Tensor:
        if self._running is None:
            raise RuntimeError("running_confidence is kept only for strategies with tracks_running = True")
        return self._running


def _entropy(z: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    logp = z - lse.unsqueeze(1)
    # banned ids hold finfo.min (finite): their p underflows to 0 and 0 * finite = 0, so no NaN from 0 * -inf
    return -(torch.exp(logp) * logp).sum(dim=-1)


class Strategy:
    """Base class. Override exactly one of :meth:`unmask_scores` / :meth:`remask_scores`."""

    name: ClassVar[str] = ""
    #: whether the strategy puts decided tokens back under the mask
    remasks: ClassVar[bool] = False
    #: whether the sampler must keep ``view.running_confidence`` up to date (costs a softmax per step)
    tracks_running: ClassVar[bool] = False

    def __init__(self, remask_fraction: float = 0.15):
        self.remask_fraction = float(remask_fraction) if self.remasks else 0.0

    def unmask_scores(self, view: StepView) -> torch.Tensor:
        """Which masked positions to fill first (higher first). Default: confidence of the candidate."""
        return view.confidence

    def remask_scores(self, view: StepView) -> torch.Tensor:
        """Which decided positions to re-mask first (higher first, ``-inf`` = never)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        extra = f", remask_fraction={self.remask_fraction}" if self.remasks else ""
        return f"{type(self).__name__}(name={self.name!r}{extra})"


@register_strategy
class NoRemask(Strategy):
    name = "none"


@register_strategy
class RandomRemask(Strategy):
    name = "random"
    remasks = True

    def remask_scores(self, view):
        return view.uniform()


@register_strategy
class LowConfidence(Strategy):
    name = "low_confidence"
    remasks = True

    def remask_scores(self, view):
        return -view.confidence


@register_strategy
class RunningConfidence(Strategy):
    name = "running_confidence"
    remasks = True
    tracks_running = True

    def remask_scores(self, view):
        return -view.running_confidence


@register_strategy
class HighEntropy(Strategy):
    name = "high_entropy"
    remasks = True

    def remask_scores(self, view):
        return view.entropy


@register_strategy
class ConfEntropy(Strategy):
    name = "conf_entropy"
    remasks = True

    def remask_scores(self, view):
        # both terms in [0, 1]: entropy normalised by its maximum log V
        return view.entropy / math.log(view.vocab_size) - view.confidence


@register_strategy
class Agreement(Strategy):
    name = "agreement"
    remasks = True

    def remask_scores(self, view):
        disagree = view.decided & (view.argmax != view.tokens)
        return torch.where(disagree, -view.confidence, torch.full_like(view.confidence, -math.inf))


@register_strategy
class Origin(Strategy):
    name = "origin"

    def unmask_scores(self, view):
        return view.uniform()


@register_strategy
class Entropy(Strategy):
    name = "entropy"

    def unmask_scores(self, view):
        return -view.tempered_entropy


@register_strategy
class MaskGIT(Strategy):
    name = "maskgit"

    def unmask_scores(self, view):
        return view.tempered_confidence
