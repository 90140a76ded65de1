"""DiffScore estimator settings: :class:`EstimatorSpec` (K, T, masking scheme, weighting), the named presets and
the per-mask weighting. Kept apart from :mod:`dlmeval.scoring.estimator` so that protocols and command lines can
resolve and record settings without the scorer.

``EstimatorSpec.paper()`` (``--preset paper``) is exactly the paper's estimator (DiffScore section 4.3, appendix
D.5): K = 20 masking patterns over T = 10 evenly spaced rates ``t_k = k / 10`` in (0, 1], two per rate, each token
hidden independently with probability ``t_k``, and the mean log-probability (MLP) weighting ``w = 1 / |M|`` the
paper defaults to; ``EstimatorSpec.paper(fast=True)`` (``--preset paper-fast``) is its DiffScore-Fast (K = 5,
T = 5, one mask per rate). The default ``standard`` differs only in the masking scheme (``combined``,
:mod:`dlmeval.scoring.stratified`: the same estimand, 0.30 of the variance at 8 passes on short texts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dlmeval.errors import InputError
from dlmeval.scoring.masks import MASKING, MaskSet, rate_grid
from dlmeval.scoring.names import PRESET_ALIASES, PRESET_SETTINGS, SCHEMES, WEIGHTINGS
from dlmeval.scoring.stratified import CONTROL_BETA

#: the weight of a mask M at rate t over a text of L tokens, for run signatures
WEIGHT_FORMULA = {"mlp": "1/|M|", "elbo": "1/t", "elbo_norm": "1/(t*L)"}


@dataclass(frozen=True)
class EstimatorSpec:
    """Everything that changes a score (goes into the run signature). Batch sizes do not."""

    n_masks: int = 20
    n_rates: int = 10
    scheme: str = "combined"
    weighting: str = "mlp"

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise InputError(f"unknown masking scheme {self.scheme!r}; choose one of {', '.join(SCHEMES)}")
        if self.weighting not in WEIGHTINGS:
            raise InputError(f"unknown weighting {self.weighting!r}; choose one of {', '.join(WEIGHTINGS)}")
        for name in ("n_masks", "n_rates"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}")

    def as_dict(self) -> dict[str, Any]:
        """The settings as recorded with every score: K, T, scheme, weighting, what the masks are, the weight
        formula and the preset these settings are (None when they are no preset's)."""
        d = asdict(self)
        if self.scheme == "pll":  # K, T and the weighting play no part in the exact mode
            d.pop("n_masks")
            d.pop("n_rates")
            d["weight"] = "1/|M|"
        else:
            d["weight"] = WEIGHT_FORMULA[self.weighting]
        d["masking"] = MASKING[self.scheme]
        d["preset"] = self.preset_name()
        return d

    def preset_name(self) -> str | None:
        """The name of the preset with exactly these settings, or None."""
        return next((name for name, spec in PRESETS.items() if spec == self), None)

    @classmethod
    def paper(cls, fast: bool = False) -> EstimatorSpec:
        """The paper's estimator: K = 20 masks over T = 10 evenly spaced rates (DiffScore-Fast: K = 5, T = 5),
        independent Bernoulli(t_k) masks, MLP weighting (DiffScore appendix D.5)."""
        return PRESETS["paper-fast" if fast else "paper"]

    @classmethod
    def preset(cls, name: str, fast: bool = False) -> EstimatorSpec:
        """A preset by name (:data:`PRESETS`; ``default`` is ``standard``); ``fast`` picks its Fast variant."""
        return resolve_estimator(name, fast=fast)


#: named estimator settings (:data:`dlmeval.scoring.names.PRESET_SETTINGS`, where they are listed)
PRESETS: dict[str, EstimatorSpec] = {name: EstimatorSpec(*s) for name, s in PRESET_SETTINGS.items()}
_FAST_OF = {"standard": "fast", "fast": "fast", "paper": "paper-fast", "paper-fast": "paper-fast"}


def resolve_estimator(
    preset: str | None = None,
    *,
    fast: bool = False,
    n_masks: int | None = None,
    n_rates: int | None = None,
    scheme: str | None = None,
    weighting: str | None = None,
) -> EstimatorSpec:
    """The estimator settings of a preset (default ``standard``; ``fast`` takes its Fast variant), with any of
    K, T, scheme and weighting given explicitly replacing the preset's (what the command-line flags do)."""
    name = (
        PRESET_ALIASES.get(str(preset).strip().lower(), str(preset).strip().lower()) if preset else "standard"
    )
    if name not in PRESETS:
        raise InputError(
            f"unknown estimator preset {preset!r}; choose one of {', '.join(['default', *PRESETS])}"
        )
    base = PRESETS[_FAST_OF[name] if fast else name]
    return EstimatorSpec(
        int(base.n_masks if n_masks is None else n_masks),
        int(base.n_rates if n_rates is None else n_rates),
        base.scheme if scheme is None else scheme,
        base.weighting if weighting is None else weighting,
    )


def mask_values(
    sums: np.ndarray, masks: MaskSet, spec: EstimatorSpec, full: np.ndarray | None = None
) -> np.ndarray:
    """Per-mask values ``w * sum_{i in M} log p(x_i | x_t)`` from the sums of hidden log-probs: ``mlp``
    ``w = 1/|M|``; ``elbo`` ``w = 1/t`` and a mask drawn empty counts as the empty sum 0 (the Monte Carlo ELBO is
    exact for it); ``elbo_norm`` the ``elbo`` value over L. ``pll`` is always the mean. When the masks carry a
    control variate (``masks.control``), ``full`` is every token's log-probability with all of them hidden (that
    mask's row) and each value becomes ``v - beta (c - E[c | size])`` (:mod:`dlmeval.scoring.stratified`)."""
    if spec.scheme == "pll" or spec.weighting == "mlp":
        v = sums / masks.hidden.sum(axis=1)
    else:
        t = rate_grid(spec.n_rates)[masks.rate_index]
        v = np.where(masks.drawn_empty(), 0.0, sums / t)
    if masks.control is not None:
        if full is None:
            raise ValueError(
                "these masks carry a control variate: pass the log-probabilities of the full mask"
            )
        v = v - CONTROL_BETA * control_terms(full, masks, spec)
    return v / masks.length if spec.weighting == "elbo_norm" and spec.scheme != "pll" else v


def control_terms(full: np.ndarray, masks: MaskSet, spec: EstimatorSpec) -> np.ndarray:
    """``c(M) - E[c(M)]`` for every mask, from ``b = full``: under ``mlp`` ``mean_{i in M} b_i - mean(b)`` (given its
    size a mask is a uniform subset, so the term has expectation 0 at every size); under the ELBO weightings
    ``sum_{i in M} b_i / t - e mean(b)`` (the sum 0 for a mask drawn empty, like its value) with ``e =
    masks.size_mean``, the expectation of ``|M| / t`` over the mask's (rate, size) cell distribution: the term
    has expectation 0 over that distribution, and it also takes out much of the noise of the drawn size."""
    h = masks.hidden.astype(np.float64)
    b = np.asarray(full, dtype=np.float64)
    sb, cnt = h @ b, h.sum(axis=1)
    if spec.weighting == "mlp":
        return sb / cnt - b.mean()
    t = rate_grid(spec.n_rates)[masks.rate_index]
    return np.where(masks.drawn_empty(), 0.0, sb / t) - masks.size_mean * b.mean()
