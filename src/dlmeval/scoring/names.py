"""The DiffScore estimator's named settings: masking schemes, weightings and presets, each listed once.

:mod:`.masks` and :mod:`.spec` read them here, and so does the command line (the ``--scheme``, ``--weighting`` and
``--preset`` choices of ``score`` and ``meta-eval``, :mod:`dlmeval.cli.options`). This module imports nothing:
building a parser loads neither numpy nor torch.
"""

from __future__ import annotations

#: masking schemes (:func:`dlmeval.scoring.masks.make_masks`; what each one is: ``masks.MASKING``)
SCHEMES: tuple[str, ...] = (
    "combined",
    "balanced",
    "independent",
    "exact-count",
    "pll",
    "reuse",
    "stratified",
    "antithetic",
    "control",
    "importance",
)
#: per-mask weightings (:func:`dlmeval.scoring.spec.mask_values`; their formulas: ``spec.WEIGHT_FORMULA``)
WEIGHTINGS: tuple[str, ...] = ("mlp", "elbo", "elbo_norm")
#: named estimator settings, (K, T, scheme, weighting) each: ``dlmeval.scoring.spec.PRESETS`` makes them
#: :class:`~dlmeval.scoring.spec.EstimatorSpec` s. ``paper`` / ``paper-fast``: the paper's standard and DiffScore-Fast
#: configurations; ``standard`` (the default) / ``fast``: the same K, T and weighting with the ``combined`` scheme
#: (the same expectation, a fraction of the variance: :mod:`dlmeval.scoring.stratified`)
PRESET_SETTINGS: dict[str, tuple[int, int, str, str]] = {
    "standard": (20, 10, "combined", "mlp"),
    "fast": (5, 5, "combined", "mlp"),
    "paper": (20, 10, "independent", "mlp"),
    "paper-fast": (5, 5, "independent", "mlp"),
}
#: other names of presets
PRESET_ALIASES: dict[str, str] = {"default": "standard"}
#: what ``--preset`` accepts, in --help order: the aliases, then the presets
PRESET_NAMES: tuple[str, ...] = (*PRESET_ALIASES, *PRESET_SETTINGS)
