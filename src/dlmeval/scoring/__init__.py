"""DiffScore: text quality by masked reconstruction with a diffusion LM.

API summary (stable; for meta-evaluation, baselines, analyses and DiffScore-FT)
------------------------------------------------------------------------------

>>> from dlmeval.models import tiny_model
>>> from dlmeval.scoring import DiffScorer
>>> model = tiny_model("bert")                            # any DiffusionLM: load_diffusion("default"), ...
>>> scorer = DiffScorer(model)                            # K=20 masks, T=10 rates, combined masks, MLP weighting
>>> scorer = DiffScorer.fast(model)                       # K=5, T=5
>>> scorer = DiffScorer.paper(model)                      # the paper's estimator: K=20, T=10, Bernoulli masks, MLP
>>> scorer = DiffScorer.from_preset(model, "paper-fast")  # presets: standard, fast, paper, paper-fast
>>> df = scorer.score(["the cat sat"], ["a cat sat on the mat"], config="cond", token_scores=False)
>>> int(df.loc[0, "n_tokens"]), int(df.loc[0, "n_masks"]), df.attrs["rates"]
(3, 5, [0.2, 0.4, 0.6, 0.8, 1.0])

A stored, resumable, data-parallel run of many texts: :func:`dlmeval.protocols.score.score_run`.

``DiffScorer(model, *, n_masks=20, n_rates=10, scheme="combined"|"independent"|"balanced"|...,
weighting="mlp"|"elbo"|"elbo_norm", seed=0, prompt=None, chat=None, batch_size=None, max_tokens=None,
progress=False)``; ``EstimatorSpec.paper()`` / ``resolve_estimator(preset, fast=..., n_masks=..., ...)`` give the
settings alone (:mod:`dlmeval.scoring.spec`).

``config``: ``marginal`` (candidate alone; fluency), ``cond`` (source visible, candidate masked; faithfulness),
``reverse`` (candidate visible, source masked; coverage), ``bidir`` (``(cond + reverse) / 2``), ``pmi``
(``cond - marginal`` on the same candidate masks). Aliases: mar, conditional, rev, bidirectional, bi.

``score`` returns a DataFrame, one row per input in input order:

* ``item_id`` (given, or a hash of the texts), ``config``, ``score`` (float; higher = better reconstructed),
  ``se`` (Monte Carlo standard error), ``profile`` (list of T per-rate scores ``S(t_k)``; the rates are in
  ``df.attrs["rates"]``), ``n_tokens`` (scored tokens), ``n_masks``,
* ``reason`` (None, or why ``score`` is NaN: e.g. ``"empty candidate: no tokens to score"``), ``warning`` (None or
  a truncation note), ``signature`` (the run signature, one line; also ``df.attrs["signature"]``,
  ``df.attrs["signature_dict"]``, ``df.attrs["config"]``, ``df.attrs["warnings"]``),
* ``bidir`` / ``pmi`` add ``score_<d>``, ``se_<d>``, ``n_tokens_<d>`` for both directions ``d`` (cond and
  reverse / cond and marginal); ``pmi`` adds ``coupled`` (True when both directions used the same masks),
* ``token_scores=True`` adds ``tokens``, ``token_logprob`` (mean log p per token over the masks that hid it),
  ``token_rate_logprob`` (``[T][L]``), suffixed ``_<d>`` for bidir/pmi, and ``token_pmi`` for pmi.

Errors: a source-needing configuration without sources raises :class:`dlmeval.errors.InputError`; an empty
candidate (or source, where it is masked or conditioned on) gives NaN with ``reason``, never an exception.

Resumable, data-parallel runs: :mod:`dlmeval.protocols.score` (``run = open_run(store, scorer, config)`` then
``score_run(scorer, run, candidates, sources, config=config)``): stored items are read back, pending canonical
chunks computed and written one transaction each, truncation warnings go to ``run.warn``.

Determinism: masks come from ``numpy_rng(seed, "diffscore-masks", key, side, scheme, K, T)`` where ``key`` is the
item id when ``item_ids`` are given, else a hash of the masked text, so ``cond`` and ``marginal`` of one candidate
share masks across calls. A score's last float bits can depend on the rows it shares a forward pass with (batch
shape, padding): the same call gives the same bits, and a stored run fixes its calls (canonical chunks).

Diagnostics (:mod:`dlmeval.scoring.diagnostics`): profile matrices, profile weights learned by k-fold CV on human
scores, token tables and token heat maps.

Modules: :mod:`~dlmeval.scoring.core` (the masked-scoring core: masked copies of token ids in, per-position
log-probabilities out, in canonical batches; every masked-scoring caller's one loop),
:mod:`~dlmeval.scoring.masks` (mask schemes), :mod:`~dlmeval.scoring.configs` (configurations, input layout,
prompts, truncation), :mod:`~dlmeval.scoring.spec` (estimator settings, presets, weightings),
:mod:`~dlmeval.scoring.estimator` (:class:`DiffScorer`),
:mod:`~dlmeval.scoring.diagnostics`.
"""

from __future__ import annotations

from dlmeval.lazy import lazy_exports

# the names below are read lazily (PEP 562): ``dlmeval.scoring.names`` (the command line's choices) imports
# without the estimator, numpy or torch
_EXPORTS = {
    "COMPONENTS": "configs",
    "CONFIGS": "configs",
    "PROMPTS": "configs",
    "PairFormatter": "configs",
    "resolve_config": "configs",
    "RUN_KIND": "estimator",
    "DiffScorer": "estimator",
    "SCHEMES": "names",
    "WEIGHTINGS": "names",
    "MaskSet": "masks",
    "make_masks": "masks",
    "rate_grid": "masks",
    "PRESETS": "spec",
    "EstimatorSpec": "spec",
    "resolve_estimator": "spec",
}
_MODULES = ("configs", "core", "diagnostics", "estimator", "llada_ll", "masks", "names", "spec")


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _MODULES)


__all__ = [
    "COMPONENTS",
    "CONFIGS",
    "PROMPTS",
    "PRESETS",
    "RUN_KIND",
    "SCHEMES",
    "WEIGHTINGS",
    "DiffScorer",
    "EstimatorSpec",
    "MaskSet",
    "PairFormatter",
    "make_masks",
    "rate_grid",
    "resolve_config",
    "resolve_estimator",
]
