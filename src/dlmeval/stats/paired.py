"""Means with standard errors, bootstrap confidence intervals, paired t-test, Wilcoxon, binomial test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.seeding import numpy_rng
from dlmeval.stats._common import as_1d, as_pair


def mean_se(x) -> tuple[float, float]:
    """``(mean, se)`` with ``se = sample SD (ddof=1) / sqrt(n)`` (the Care convention); ``se`` is NaN for n = 1."""
    a = as_1d(x, "x")
    if a.size == 1:
        return float(a[0]), float("nan")
    return float(a.mean()), float(sps.sem(a, ddof=1))


@dataclass(frozen=True)
class CI:
    """A confidence interval; unpacks as ``lo, hi``."""

    lo: float
    hi: float
    estimate: float
    confidence: float
    method: str
    n_resamples: int
    seed: int
    n: int

    def __iter__(self):
        return iter((self.lo, self.hi))


def bootstrap_ci(
    x,
    statistic: Callable = np.mean,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> CI:
    """Bootstrap CI of ``statistic(x)`` through :func:`scipy.stats.bootstrap` (resampling items with replacement).

    The resampling generator is ``numpy_rng(seed, "bootstrap_ci")``: pass a seed derived from the run seed
    (``derive_seed(run_seed, ...)``); the same seed gives the same interval. ``method`` is scipy's
    (``percentile``, ``basic``, ``BCa``). Unpacks as ``lo, hi``; ``.estimate`` is ``statistic`` on all of x.
    """
    a = as_1d(x, "x", min_n=2)
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be positive, got {n_resamples}")
    res = sps.bootstrap(
        (a,),
        statistic,
        n_resamples=int(n_resamples),
        confidence_level=confidence,
        method=method,
        rng=numpy_rng(int(seed), "bootstrap_ci"),
    )
    ci = res.confidence_interval
    return CI(
        float(ci.low),
        float(ci.high),
        float(statistic(a)),
        float(confidence),
        method,
        int(n_resamples),
        int(seed),
        int(a.size),
    )


def paired_bootstrap_ci(
    a,
    b,
    statistic: Callable = np.mean,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> CI:
    """Bootstrap CI of ``statistic(a - b)`` (default: the mean paired difference), resampling pairs.

    Resampling pairs and taking the statistic of their differences is the same as bootstrapping the
    differences, which is what this does (through :func:`bootstrap_ci`).
    """
    x, y = as_pair(a, b, min_n=2)
    return bootstrap_ci(x - y, statistic, n_resamples, confidence, seed, method)


@dataclass(frozen=True)
class PairedTest:
    """Paired t-test of a - b: mean difference, its SE (SD of differences, ddof=1, / sqrt(n)), t, p, n."""

    mean_diff: float
    se: float
    t: float
    p: float
    n: int
    alternative: str = "two-sided"

    @property
    def df(self) -> int:
        return self.n - 1


def paired_ttest(a, b, alternative: str = "two-sided") -> PairedTest:
    """Paired t-test (:func:`scipy.stats.ttest_rel`) of ``a`` against ``b`` on ``n - 1`` degrees of freedom.

    If every difference is identical (SE 0), t and p are NaN (scipy's result) unless the differences are all
    zero, in which case there is no evidence of a difference: t = 0, p = 1.
    """
    x, y = as_pair(a, b, min_n=2)
    d = x - y
    se = float(sps.sem(d, ddof=1))
    if np.all(d == 0):
        return PairedTest(0.0, 0.0, 0.0, 1.0, int(d.size), alternative)
    if se == 0:
        return PairedTest(float(d.mean()), 0.0, float("nan"), float("nan"), int(d.size), alternative)
    r = sps.ttest_rel(x, y, alternative=alternative)
    return PairedTest(float(d.mean()), se, float(r.statistic), float(r.pvalue), int(d.size), alternative)


@dataclass(frozen=True)
class WilcoxonResult:
    """Wilcoxon signed-rank test; unpacks as ``stat, p``. ``note`` explains a degenerate case."""

    stat: float
    p: float
    n: int
    note: str = ""

    def __iter__(self):
        return iter((self.stat, self.p))


def wilcoxon(a, b, alternative: str = "two-sided", zero_method: str = "wilcox") -> WilcoxonResult:
    """Wilcoxon signed-rank test of the paired differences ``a - b`` (:func:`scipy.stats.wilcoxon`).

    All-zero differences carry no evidence of a difference: returns stat 0, p 1.0 and a note (scipy would
    divide by a zero variance there).
    """
    x, y = as_pair(a, b, min_n=1)
    d = x - y
    if np.all(d == 0):
        return WilcoxonResult(
            0.0, 1.0, int(d.size), "all paired differences are zero: no evidence, p set to 1"
        )
    r = sps.wilcoxon(x, y, alternative=alternative, zero_method=zero_method)
    return WilcoxonResult(float(r.statistic), float(r.pvalue), int(d.size))


def binomial_above_chance(k: int, n: int, p0: float) -> float:
    """One-sided exact binomial p-value that the success rate exceeds ``p0`` (k successes of n)."""
    if not (isinstance(k, int | np.integer) and isinstance(n, int | np.integer)):
        raise InputError(f"k and n must be integers, got {k!r} and {n!r}")
    if n < 1 or not 0 <= k <= n:
        raise InputError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < p0 < 1:
        raise InputError(f"p0 must lie in (0, 1), got {p0}")
    return float(sps.binomtest(int(k), int(n), p0, alternative="greater").pvalue)
