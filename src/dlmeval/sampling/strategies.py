"""Unmasking / re-masking strategies: a registry of small classes with one selection method each.

A strategy scores positions; the sampler keeps the top ``k`` per row, ``k`` coming from the schedule (unmasking)
or from the re-mask count (re-masking, see :mod:`dlmeval.sampling.config`). A score of ``-inf`` means "never".

* Care's re-masking strategies override :meth:`Strategy.remask_scores` (which positions of the current block to
  put back under the mask); they unmask by confidence like ``none`` (LLaDA's ``low_confidence`` remasking order).
  Under the paper's accounting their scores come from a *scoring pass* over the sequence after the step's
  unmasking (C.2: "logits: the current step output distribution"). Sources, strategy by strategy:

  ====================== ==============================================================================
  ``none``               never re-masks (the baseline, Care's ``none``; LLaDA ``generate.py`` with
                         ``remasking='low_confidence'``): unmasks the most confident candidates first
  ``random``             re-masks ``k`` decided tokens uniformly at random (Care's ``random``; ReMDM's
                         constant-rate re-masking picks uniformly). Not LLaDA's ``remasking='random'``,
                         which is a random *unmasking order* and never re-masks (that is ``origin`` here)
  ``low_confidence``     re-masks the ``k`` decided tokens the model now gives the lowest probability
                         (ReMDM-conf's confidence signal, Care's ``low_conf``)
  ``running_confidence`` re-masks the lowest running mean probability since the token was decided (Care's
                         ``running_conf``); the mean is updated by a scoring pass at every step
  ``high_entropy``       App. C.2 as shipped: ``topk_mask(entropy, k)`` over **every** position of the block,
                         ``k = int(fraction * L)``; a masked position among the top k stays masked (a no-op),
                         so it re-masks at most ``k`` decided tokens
  ``conf_entropy``       re-masks the lowest ``p(token) - H / log V`` (low confidence and high entropy)
  ``agreement``          re-masks only decided tokens that differ from the model's current argmax, least
                         confident first (at most ``k``)
  ====================== ==============================================================================

* Dream's algorithms override :meth:`Strategy.unmask_scores` (the order in which masked positions are filled) and
  never re-mask (Dream's ``generation_utils.py``):

  ====================== ==============================================================================
  ``origin``             uniformly random order (Dream's ``origin``); under Dream's schedule (the default for
                         the Dream family) each masked position is transferred with probability ``1 - s / t``
                         as Dream's loop does; under the linear schedule, the schedule's counts in random order
  ``entropy``            lowest entropy of the tempered distribution first (Dream's ``entropy``)
  ``maskgit``            highest tempered probability of the sampled token first (Dream's ``maskgit_plus``)
  ``topk_margin``        largest gap between the two most likely tokens of the tempered distribution
                         first (Dream's ``topk_margin``: ``sorted_probs[:, 0] - sorted_probs[:, 1]``)
  ====================== ==============================================================================

  "Tempered" is the shaped distribution Dream's ``sample_tokens`` computes: ``logits / temperature``, then
  ``top_p``, then ``top_k`` (``SamplerConfig``). The families' own sampler names map onto these
  (``Family.native_samplers``): Dream ``origin`` / ``maskgit_plus`` / ``topk_margin`` / ``entropy`` are
  ``origin`` / ``maskgit`` / ``topk_margin`` / ``entropy`` (``alg_temp`` is ``position_temperature``); LLaDA
  ``generate.py``'s ``remasking='low_confidence'`` is ``none`` and ``remasking='random'`` is ``origin`` under the
  linear schedule (the same random order in distribution, not the same draws).

Note: scores at decided positions come from a forward pass in which the token is visible (that is what the
published strategies do: "the current step output distribution"); ``running_confidence`` also remembers the
probability the token had when it was chosen, under the mask.

Adding a strategy::

    @register_strategy
    class LowestMargin(Strategy):
        name = "lowest_margin"
        remasks = True
        remask_needs = frozenset({"margin"})  # the view fields remask_scores reads

        def remask_scores(self, view):
            return -view.margin  # any [R, W] tensor built from the fields listed in `remask_needs`

(docs/architecture.md "Strategy" samples with it.)

``needs`` lists the fields :meth:`Strategy.unmask_scores` reads (computed in the decode pass), ``remask_needs``
those :meth:`Strategy.remask_scores` reads (computed in the scoring pass; a strategy with none, like ``random``,
spends no scoring pass).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch

from dlmeval.registry import Registry
from dlmeval.sampling.fields import FIELDS

STRATEGIES: Registry[type[Strategy]] = Registry("strategy")


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make a strategy available by its ``name`` (a name taken by another class is refused)."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a class attribute `name`")
    unknown = (set(cls.needs) | set(cls.remask_needs)) - set(FIELDS)
    if unknown:
        raise TypeError(
            f"{cls.__name__}.needs lists unknown fields {sorted(unknown)}; known: {', '.join(FIELDS)}"
        )
    return STRATEGIES.add(cls.name, cls)


def get_strategy(name: str, *, remask_fraction: float = 0.15) -> Strategy:
    return STRATEGIES.get(name)(remask_fraction=remask_fraction)


class StepView:
    """What a strategy sees at one step, as ``[R, W]`` tensors over the current block (``R`` rows take part in the
    step, ``W`` = block length). The distribution fields are computed only at the positions that matter (masked
    positions, plus decided ones for re-masking strategies; elsewhere they hold NaN) and only when the strategy
    lists them in its ``needs`` (the sampler computes them all in one pass over the logits, see
    :mod:`dlmeval.sampling.fields`):

    * ``tokens`` current ids (the mask id where masked), ``masked`` / ``decided`` bool
    * ``candidates`` the sampled token at masked positions (the current token elsewhere)
    * ``confidence`` probability of the candidate (masked) or of the current token (decided) under the model's
      distribution, with banned ids (mask, suppressed EOS) removed and the rest renormalised
    * ``entropy`` (nats) of that distribution; ``argmax`` its most likely id
    * ``margin``: top-1 minus top-2 probability of that distribution
    * ``tempered_confidence`` / ``tempered_entropy`` / ``tempered_margin``: the same under the shaped
      distribution ``softmax(top_k(top_p(logits / temperature)))`` (Dream)
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
        fields: dict[str, torch.Tensor],
        vocab_size: int,
        temperature: float,
        uniform: Callable[[], torch.Tensor],
        step: int,
        block: int,
        block_step: int,
        block_steps: int,
        strategy: str = "",
        running_confidence: torch.Tensor | None = None,
    ):
        self.tokens = tokens
        self.masked = masked
        self.decided = decided
        self.candidates = candidates
        self._rows = region_rows
        self._cols = region_cols
        self._fields = fields  # name -> [N] values at (rows, cols)
        self._grids: dict[str, torch.Tensor] = {}
        self.temperature = float(temperature)
        self._uniform = uniform
        self.step = step
        self.block = block
        self.block_step = block_step
        self.block_steps = block_steps
        self.vocab_size = int(vocab_size)
        self._strategy = strategy
        self._running = running_confidence

    def uniform(self) -> torch.Tensor:
        return self._uniform()

    def _field(self, name: str) -> torch.Tensor:
        if name not in self._grids:
            if name not in self._fields:
                raise RuntimeError(
                    f"strategy {self._strategy!r} reads view.{name} but does not list it in its `needs`; add "
                    f"{name!r} to the class attribute `needs` so that the sampler computes it"
                )
            values = self._fields[name]
            if name == "argmax":
                out = self.tokens.clone()
            else:
                out = torch.full(self.tokens.shape, float("nan"), dtype=values.dtype, device=values.device)
            out[self._rows, self._cols] = values
            self._grids[name] = out
        return self._grids[name]

    @property
    def confidence(self) -> torch.Tensor:
        return self._field("confidence")

    @property
    def entropy(self) -> torch.Tensor:
        return self._field("entropy")

    @property
    def argmax(self) -> torch.Tensor:
        return self._field("argmax")

    @property
    def tempered_confidence(self) -> torch.Tensor:
        return self._field("tempered_confidence")

    @property
    def tempered_entropy(self) -> torch.Tensor:
        return self._field("tempered_entropy")

    @property
    def margin(self) -> torch.Tensor:
        return self._field("margin")

    @property
    def tempered_margin(self) -> torch.Tensor:
        return self._field("tempered_margin")

    @property
    def running_confidence(self) -> torch.Tensor:
        if self._running is None:
            raise RuntimeError("running_confidence is kept only for strategies with tracks_running = True")
        return self._running


class Strategy:
    """Base class. Override exactly one of :meth:`unmask_scores` / :meth:`remask_scores`."""

    name: ClassVar[str] = ""
    #: whether the strategy puts decided tokens back under the mask
    remasks: ClassVar[bool] = False
    #: whether the sampler must keep ``view.running_confidence`` up to date (needs ``confidence``)
    tracks_running: ClassVar[bool] = False
    #: the view's distribution fields :meth:`unmask_scores` reads (see :data:`dlmeval.sampling.fields.FIELDS`);
    #: the sampler computes exactly these in the decode pass (the default unmasking order reads ``confidence``)
    needs: ClassVar[frozenset[str]] = frozenset({"confidence"})
    #: the fields :meth:`remask_scores` reads (computed in the scoring pass under the paper's accounting)
    remask_needs: ClassVar[frozenset[str]] = frozenset()
    #: which positions :meth:`remask_scores` ranks under the paper's accounting: ``"decided"`` tokens only, or
    #: every position of the block (``"block"``, App. C.2's ``topk_mask`` over ``(B, L)``; masked picks no-ops)
    remask_pool: ClassVar[str] = "decided"
    #: how positions are chosen under Dream's schedule: by rank of :meth:`unmask_scores` (``"rank"``) or by
    #: Dream ``origin``'s coin flip per masked position (``"bernoulli"``)
    transfer: ClassVar[str] = "rank"

    def __init__(self, remask_fraction: float = 0.15):
        self.remask_fraction = float(remask_fraction) if self.remasks else 0.0

    @property
    def scoring(self) -> str:
        """When the strategy spends a scoring pass (paper accounting): ``"every"`` step (running statistics),
        each step of its re-mask ``"window"`` (its choice reads the model), or ``"none"``."""
        if not self.remasks:
            return "none"
        if self.tracks_running:
            return "every"
        return "window" if self.remask_needs else "none"

    @property
    def all_needs(self) -> frozenset[str]:
        """Every field the strategy reads (the refill accounting computes them all in the decode pass)."""
        extra = {"confidence"} if self.tracks_running else set()
        return frozenset(self.needs) | frozenset(self.remask_needs) | extra

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
    remask_needs = frozenset({"confidence"})

    def remask_scores(self, view):
        return -view.confidence


@register_strategy
class RunningConfidence(Strategy):
    name = "running_confidence"
    remasks = True
    tracks_running = True
    remask_needs = frozenset({"confidence"})

    def remask_scores(self, view):
        return -view.running_confidence


@register_strategy
class HighEntropy(Strategy):
    name = "high_entropy"
    remasks = True
    remask_needs = frozenset({"entropy"})
    remask_pool = "block"

    def remask_scores(self, view):
        return view.entropy


@register_strategy
class ConfEntropy(Strategy):
    name = "conf_entropy"
    remasks = True
    remask_needs = frozenset({"confidence", "entropy"})

    def remask_scores(self, view):
        # both terms in [0, 1]: entropy normalised by its maximum log V
        return view.entropy / math.log(view.vocab_size) - view.confidence


@register_strategy
class Agreement(Strategy):
    name = "agreement"
    remasks = True
    remask_needs = frozenset({"confidence", "argmax"})

    def remask_scores(self, view):
        disagree = view.decided & (view.argmax != view.tokens)
        return torch.where(disagree, -view.confidence, torch.full_like(view.confidence, -math.inf))


@register_strategy
class Origin(Strategy):
    name = "origin"
    needs = frozenset()
    transfer = "bernoulli"

    def unmask_scores(self, view):
        return view.uniform()


@register_strategy
class Entropy(Strategy):
    name = "entropy"
    needs = frozenset({"tempered_entropy"})

    def unmask_scores(self, view):
        return -view.tempered_entropy


@register_strategy
class MaskGIT(Strategy):
    name = "maskgit"
    needs = frozenset({"tempered_confidence"})

    def unmask_scores(self, view):
        return view.tempered_confidence


@register_strategy
class TopkMargin(Strategy):
    name = "topk_margin"
    needs = frozenset({"tempered_margin"})

    def unmask_scores(self, view):
        return view.tempered_margin
