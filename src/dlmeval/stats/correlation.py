"""Correlations for meta-evaluation (Kendall, Spearman, Pearson), WMT DARR Kendall-like tau. Tests of one
correlation against another (Williams) are in :mod:`dlmeval.stats.significance`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.stats._common import as_pair


class Correlation(NamedTuple):
    """A correlation coefficient with scipy's two-sided p-value and the number of pairs."""

    r: float
    p: float
    n: int


def kendall_tau(x, y, variant: str = "b") -> Correlation:
    """Kendall's tau (:func:`scipy.stats.kendalltau`): ``variant="b"`` adjusts for ties, ``"c"`` (Stuart's) for
    rectangular tables. NaN when x or y is constant."""
    if variant not in ("b", "c"):
        raise InputError(f"Kendall variant must be 'b' or 'c', got {variant!r}")
    a, b = as_pair(x, y, ("x", "y"), min_n=2)
    r = sps.kendalltau(a, b, variant=variant)
    return Correlation(float(r.statistic), float(r.pvalue), int(a.size))


def spearman(x, y) -> Correlation:
    """Spearman's rho (:func:`scipy.stats.spearmanr`); NaN when x or y is constant."""
    a, b = as_pair(x, y, ("x", "y"), min_n=2)
    r = sps.spearmanr(a, b)
    return Correlation(float(r.statistic), float(r.pvalue), int(a.size))


def pearson(x, y) -> Correlation:
    """Pearson's r (:func:`scipy.stats.pearsonr`); NaN when x or y is constant."""
    a, b = as_pair(x, y, ("x", "y"), min_n=2)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(float("nan"), float("nan"), int(a.size))
    if a.size == 2:
        return Correlation(float(np.sign((a[1] - a[0]) * (b[1] - b[0]))), 1.0, 2)
    r = sps.pearsonr(a, b)
    return Correlation(float(r.statistic), float(r.pvalue), int(a.size))


METHODS = ("pearson", "spearman", "kendall")


def correlation(method: str, x, y, *, fast: bool = False) -> float:
    """The coefficient alone, for the meta-evaluation's many calls: ``method`` in :data:`METHODS` (Kendall:
    tau-b), NaN with fewer than 2 pairs or a constant side. ``fast``: Pearson and Spearman by
    :func:`numpy.corrcoef` (of average ranks for Spearman, as scipy does), for bootstrap resamples; equal to
    scipy's up to float rounding.

    >>> round(correlation("spearman", [1, 2, 3, 4], [1, 3, 2, 4]), 12)
    0.8
    >>> correlation("kendall", [1, 1, 1], [1, 2, 3])
    nan
    """
    if method not in METHODS:
        raise InputError(f"correlation method must be one of {', '.join(METHODS)}, got {method!r}")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    if method == "kendall":
        return float(sps.kendalltau(x, y).statistic)
    if fast:
        if method == "spearman":
            x, y = sps.rankdata(x), sps.rankdata(y)
        return float(np.corrcoef(x, y)[0, 1])
    if method == "pearson":
        return float(sps.pearsonr(x, y).statistic)
    return float(sps.spearmanr(x, y).statistic)


def darr_kendall_like(better_scores, worse_scores) -> float:
    """WMT DARR Kendall's-tau-like coefficient: ``(Concordant - Discordant) / (Concordant + Discordant)``.

    Each pair i is a human judgment that translation ``better`` beats ``worse`` (DA difference > 25 points).
    The metric is Concordant when ``better_scores[i] > worse_scores[i]``, and Discordant otherwise, so a metric
    TIE counts as Discordant (the WMT17-19 rule, Ma et al. 2019, "Results of the WMT19 Metrics Shared Task",
    sec. 2.3: ties are penalised). Higher scores must mean better; negate a lower-is-better metric first.
    Written by hand: no library implements this WMT-specific formula.
    """
    b, w = as_pair(better_scores, worse_scores, ("better_scores", "worse_scores"), min_n=1)
    conc = int(np.sum(b > w))
    disc = int(b.size - conc)
    return (conc - disc) / (conc + disc)
