"""Sampling: the remasking sampler of the Care protocol over any :class:`~dlmeval.models.base.DiffusionLM`.

Quick use::

    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    cfg = SamplerConfig(length=128, steps=256, block_length=32, strategy="high_entropy",
                        remask_fraction=0.15, temperature=0.25, seed=1)
    res = RemaskingSampler(model, cfg).sample(prompts, item_ids=ids, batch_size=16)
    res.texts            # list[str], ended before the first EOS, decoded without special tokens
    res.token_ids        # list[list[int]] (same cut); res.tokens: np.ndarray [B, L] raw region
    res.nfe              # np.ndarray [B]: forward passes each row took part in (from model.nfe)
    res.steps_taken      # np.ndarray [B]: nominal steps iterated (skipped ones included)
    res.history.churn()  # per row: remasks, replacements, stable_cells, replacement_rate
    res.config           # the settings as run (dict; steps resolved, nfe = compute-matched target or None)
    res.records()        # one JSON-ready dict per row

Compute-matched mode: ``SamplerConfig(nfe=256, steps=None, ...)`` picks the nominal steps so that the strategy
spends 256 forward passes per row (``sampler.config.steps``); when no step count gets there (``none`` cannot spend
more than ``length`` passes), it takes the largest NFE below the target: compare ``res.nfe`` with
``res.config["nfe"]``. ``predict_nfe`` / ``steps_for_nfe`` replay the count rules without a model.

The algorithm (per block, per nominal step; see :mod:`dlmeval.sampling.config` for the count rules of the two
accountings, ``"paper"`` by default and ``"refill"``):

1. the decode pass (``model.logits_at``) on the rows with something to decode: a candidate token for every masked
   position of the block, ``argmax(logits / T + Gumbel)`` in float64 (``T = temperature``; ``T = 0`` is argmax);
   the mask id, and with ``suppress_eos`` the EOS/EoT ids, are banned *before* both sampling and confidence, so
   the ranking uses the suppressed distribution; the schedule's count plus the tokens re-masked at the step
   before are unmasked, chosen by :meth:`Strategy.unmask_scores` (confidence, or Dream's orders; with
   ``eos_rank_last`` EOS candidates go last);
2. paper accounting: in its window a re-masking strategy re-masks ``int(remask_fraction * B)`` positions, chosen
   by :meth:`Strategy.remask_scores` from a scoring pass over the updated sequence (``random``: no pass); a
   block's last re-masks are decoded by a drain pass. Refill accounting: up to ``floor(remask_fraction *
   decided)`` decided tokens are re-masked from the decode pass's logits (never at a block's last step);
3. a row stops once its text up to its first EOS can no longer change (``stop_at_eos``); it then takes part in
   no more passes.

Randomness: row ``b`` draws only from ``torch_generator(derive_seed(seed, "sample", item_ids[b]))`` and only at steps
it takes part in, so a row's sample is the same alone or in any batch (up to the model's own batch invariance).

Strategies (registry :data:`STRATEGIES`, add one with :func:`register_strategy`): ``none``, ``random``,
``low_confidence``, ``running_confidence``, ``high_entropy``, ``conf_entropy``, ``agreement`` (re-masking), and
Dream's ``origin``, ``entropy``, ``maskgit`` (unmasking orders); see :mod:`dlmeval.sampling.strategies`.
"""

from dlmeval.sampling.config import (
    ACCOUNTINGS,
    SCHEDULES,
    SamplerConfig,
    dream_transfer_count,
    equivalent_steps,
    linear_schedule,
    predict_nfe,
    remask_budget,
    steps_for_nfe,
)
from dlmeval.sampling.noise import gumbel_argmax, top_k_mask
from dlmeval.sampling.sampler import RemaskingSampler, SampleResult, SamplingHistory, sample
from dlmeval.sampling.strategies import STRATEGIES, StepView, Strategy, get_strategy, register_strategy

__all__ = [
    "ACCOUNTINGS",
    "SCHEDULES",
    "STRATEGIES",
    "RemaskingSampler",
    "SampleResult",
    "SamplerConfig",
    "SamplingHistory",
    "StepView",
    "Strategy",
    "dream_transfer_count",
    "equivalent_steps",
    "get_strategy",
    "gumbel_argmax",
    "linear_schedule",
    "predict_nfe",
    "register_strategy",
    "remask_budget",
    "sample",
    "steps_for_nfe",
    "top_k_mask",
]
