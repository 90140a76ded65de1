"""THE significance module of dlmeval: every test, interval and resampling a protocol reports goes through here,
under one convention.

Convention
    Sidedness. Every test takes ``alternative`` with scipy's words and scipy's meaning, about ``a - b`` (or
    ``r12 - r13``): ``"two-sided"`` (the default everywhere), ``"greater"`` (H1: a > b) or ``"less"``. A paper
    whose test is one-sided says so at its call site, never through a different default: the DiffScore marks and
    comparisons call the Williams test with ``alternative="greater"`` (H1: A correlates better with the humans, as
    in BARTScore's ``analysis.py`` and WMT), Care's and the robustness paper's paired tests are two-sided. The one
    exception in name, :func:`binomial_above_chance`, is one-sided by what it asks.

    Levels and intervals. A test at level ``alpha`` that reports an interval reports the interval that decides
    it (:func:`test_confidence`): two-sided, the ``1 - alpha`` interval, significant when it excludes 0;
    one-sided, the ``1 - 2 alpha`` interval, whose lower (``greater``) or upper (``less``) end is the one-sided
    bound at ``alpha`` (:func:`rejects`). A plain interval takes ``confidence`` (two-sided, tails
    ``(1 - confidence) / 2``).

    Seeds. Every random draw (the bootstraps) comes from ``numpy_rng(seed, *stream)``: ``seed`` is derived from the
    run seed by the caller (``derive_seed(run_seed, ...)``), ``stream`` names the draw so that two resamplings from
    one seed are independent (:func:`bootstrap_ci`: ``("bootstrap_ci",)``; the meta-evaluation protocols:
    ``("protocol_ci", protocol)`` and ``("compare", protocol)``). The same seed and stream give the same numbers.

What
    ``mean_se``, ``bootstrap_ci`` / ``paired_bootstrap_ci`` (scipy's bootstrap over items or pairs),
    ``paired_bootstrap_test`` (the test form, ``alpha`` + ``alternative``), ``resampled_ci`` /
    ``resampled_paired_test`` (a percentile bootstrap over units of a statistic recomputed per resample, such as a
    correlation, that may be undefined on some resamples: those are dropped), ``paired_ttest``, ``wilcoxon``,
    ``mann_whitney``, ``binomial_above_chance``, ``williams_test`` (dependent correlations), ``stouffer``
    (combining one-sided p-values) and ``anova`` (n-way ANOVA with partial eta squared).

Bad input (NaN, unequal lengths, too few values, an unknown ``alternative``) raises
:class:`dlmeval.errors.InputError`. Written by hand only where scipy / statsmodels have no such function (Williams,
the unit resampler); everything else wraps scipy / statsmodels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.seeding import numpy_rng
from dlmeval.stats._common import as_1d, as_pair

#: the sidedness words every test takes (scipy's)
ALTERNATIVES = ("two-sided", "greater", "less")


def check_alternative(alternative: str) -> str:
    """``alternative`` if it is one of :data:`ALTERNATIVES`, else an :class:`InputError` naming them."""
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}")
    return alternative


def test_confidence(alpha: float, alternative: str = "two-sided") -> float:
    """The confidence of the interval that decides a test at level ``alpha``: ``1 - alpha`` two-sided, ``1 - 2
    alpha`` one-sided (its lower / upper end is the one-sided bound)."""
    if not 0 < alpha < 0.5:
        raise InputError(f"alpha must lie in (0, 0.5), got {alpha}")
    return 1 - alpha if check_alternative(alternative) == "two-sided" else 1 - 2 * alpha


def rejects(lo: float, hi: float, alternative: str = "two-sided") -> bool:
    """Whether the deciding interval ``[lo, hi]`` rejects "no difference": ``greater``: lo > 0; ``less``: hi < 0;
    two-sided: either. A NaN end rejects nothing."""
    check_alternative(alternative)
    up = bool(np.isfinite(lo) and lo > 0)
    down = bool(np.isfinite(hi) and hi < 0)
    return up if alternative == "greater" else down if alternative == "less" else up or down


def _tails(confidence: float) -> tuple[float, float]:
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}")
    a = (1 - confidence) / 2
    return a, 1 - a


def _test_tails(alpha: float, alternative: str) -> tuple[float, float]:
    test_confidence(alpha, alternative)  # checks both
    return (alpha / 2, 1 - alpha / 2) if alternative == "two-sided" else (alpha, 1 - alpha)


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
    stream: Sequence = ("bootstrap_ci",),
) -> CI:
    """Bootstrap CI of ``statistic(x)`` through :func:`scipy.stats.bootstrap` (resampling items with replacement).

    The resampling generator is ``numpy_rng(seed, *stream)`` (the module's seed convention): pass a seed derived
    from the run seed (``derive_seed(run_seed, ...)``); the same seed gives the same interval. ``method`` is
    scipy's (``percentile``, ``basic``, ``BCa``). Unpacks as ``lo, hi``; ``.estimate`` is ``statistic`` on all of x.
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
        rng=numpy_rng(int(seed), *stream),
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
    stream: Sequence = ("bootstrap_ci",),
) -> CI:
    """Bootstrap CI of ``statistic(a - b)`` (default: the mean paired difference), resampling pairs.

    Resampling pairs and taking the statistic of their differences is the same as bootstrapping the
    differences, which is what this does (through :func:`bootstrap_ci`).
    """
    x, y = as_pair(a, b, min_n=2)
    return bootstrap_ci(x - y, statistic, n_resamples, confidence, seed, method, stream)


@dataclass(frozen=True)
class BootstrapTest:
    """A bootstrap test of ``a - b``: the estimate, the deciding interval (:func:`test_confidence`), n, and the
    convention it was run under; ``significant`` is :func:`rejects` of the interval."""

    estimate: float
    lo: float
    hi: float
    n: int
    alpha: float
    alternative: str

    @property
    def significant(self) -> bool:
        return rejects(self.lo, self.hi, self.alternative)


def paired_bootstrap_test(
    a,
    b,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    n_resamples: int = 10_000,
    seed: int = 0,
    stream: Sequence = ("bootstrap_ci",),
) -> BootstrapTest:
    """Percentile bootstrap test of mean(a - b) at level ``alpha`` (pairs resampled, :func:`bootstrap_ci` on the
    differences at :func:`test_confidence`). Every pair with the same difference: the interval is that value."""
    conf = test_confidence(alpha, alternative)
    x, y = as_pair(a, b, min_n=2)
    d = x - y
    est = float(d.mean())
    if np.ptp(d) == 0:  # every resample gives the same mean
        return BootstrapTest(est, est, est, int(d.size), alpha, alternative)
    ci = bootstrap_ci(d, np.mean, n_resamples=n_resamples, confidence=conf, seed=seed, stream=stream)
    return BootstrapTest(est, ci.lo, ci.hi, int(d.size), alpha, alternative)


def resampled_statistics(
    value: Callable[[np.ndarray], float], n_units: int, *, n_resamples: int, seed: int, stream: Sequence
) -> np.ndarray:
    """``value(idx)`` on ``n_resamples`` bootstrap draws of ``n_units`` unit indices (with replacement) from
    ``numpy_rng(seed, *stream)``; the finite values, in draw order.

    For a statistic recomputed on each resample that can be undefined on some of them (a correlation when every
    drawn output ties): scipy's percentile bootstrap would return NaN for the whole interval, so the undefined
    resamples are dropped here instead."""
    rng = numpy_rng(seed, *stream)
    vals = np.array([value(rng.integers(0, n_units, n_units)) for _ in range(int(n_resamples))], dtype=float)
    return vals[np.isfinite(vals)]


def resampled_ci(
    value: Callable[[np.ndarray], float],
    n_units: int,
    *,
    n_resamples: int,
    confidence: float = 0.95,
    seed: int = 0,
    stream: Sequence,
) -> tuple[float, float]:
    """Percentile CI of ``value`` over unit resamples (:func:`resampled_statistics`); NaNs when none is defined."""
    lo_q, hi_q = _tails(confidence)
    vals = resampled_statistics(value, n_units, n_resamples=n_resamples, seed=seed, stream=stream)
    if vals.size == 0:
        return float("nan"), float("nan")
    return float(np.quantile(vals, lo_q)), float(np.quantile(vals, hi_q))


def resampled_paired_test(
    value_a: Callable[[np.ndarray], float],
    value_b: Callable[[np.ndarray], float],
    n_units: int,
    *,
    estimate: float,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    n_resamples: int,
    seed: int = 0,
    stream: Sequence,
) -> BootstrapTest:
    """Percentile bootstrap test of ``value_a - value_b``, both on the same unit draws (paired), at level
    ``alpha``: the deciding interval's tails are ``alpha`` / ``1 - alpha`` one-sided, ``alpha / 2`` /
    ``1 - alpha / 2`` two-sided. ``estimate``: the difference on all units."""
    lo_q, hi_q = _test_tails(alpha, alternative)
    vals = resampled_statistics(
        lambda idx: value_a(idx) - value_b(idx), n_units, n_resamples=n_resamples, seed=seed, stream=stream
    )
    lo, hi = (
        (float(np.quantile(vals, lo_q)), float(np.quantile(vals, hi_q))) if vals.size else (math.nan,) * 2
    )
    return BootstrapTest(float(estimate), lo, hi, int(n_units), alpha, alternative)


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
    check_alternative(alternative)
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
    check_alternative(alternative)
    x, y = as_pair(a, b, min_n=1)
    d = x - y
    if np.all(d == 0):
        return WilcoxonResult(
            0.0, 1.0, int(d.size), "all paired differences are zero: no evidence, p set to 1"
        )
    r = sps.wilcoxon(x, y, alternative=alternative, zero_method=zero_method)
    return WilcoxonResult(float(r.statistic), float(r.pvalue), int(d.size))


def mann_whitney(a, b, alternative: str = "two-sided") -> float:
    """p of the Mann-Whitney U test of two independent samples (:func:`scipy.stats.mannwhitneyu`; a NaN in either
    sample gives NaN, scipy's ``propagate``)."""
    check_alternative(alternative)
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(sps.mannwhitneyu(x, y, alternative=alternative).pvalue)


def binomial_above_chance(k: int, n: int, p0: float) -> float:
    """One-sided exact binomial p-value that the success rate exceeds ``p0`` (k successes of n)."""
    if not (isinstance(k, int | np.integer) and isinstance(n, int | np.integer)):
        raise InputError(f"k and n must be integers, got {k!r} and {n!r}")
    if n < 1 or not 0 <= k <= n:
        raise InputError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < p0 < 1:
        raise InputError(f"p0 must lie in (0, 1), got {p0}")
    return float(sps.binomtest(int(k), int(n), p0, alternative="greater").pvalue)


class WilliamsResult(NamedTuple):
    t: float
    p: float


def williams_test(
    r12: float, r13: float, r23: float, n: int, *, alternative: str = "two-sided"
) -> WilliamsResult:
    """Williams (1959) test that correlation r12 exceeds r13 when both share variable 1 (dependent correlations).

    In meta-evaluation (Graham & Baldwin 2014; WMT): variable 1 is the human score, 2 and 3 are two metrics,
    r12 / r13 their correlations with humans and r23 the correlation between the two metrics, over n items.

        t = (r12 - r13) * sqrt((n - 1)(1 + r23))
            / sqrt(2 K (n - 1)/(n - 3) + ((r12 + r13)/2)^2 (1 - r23)^3),
        K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23,

    with n - 3 degrees of freedom. ``alternative`` is the module's: ``"greater"`` (H1: r12 > r13) is the
    one-sided test WMT and BARTScore's analysis report, and what the DiffScore marks and comparisons pass;
    ``"two-sided"`` (the default) doubles the smaller tail. Written by hand: scipy and statsmodels do not implement
    the Williams test.
    """
    check_alternative(alternative)
    if n is None or int(n) != n or n <= 3:
        raise InputError(f"the Williams test needs an integer n > 3, got {n!r}")
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        if not (isinstance(r, int | float | np.floating) and -1 <= r <= 1):
            raise InputError(f"{name} must be a correlation in [-1, 1], got {r!r}")
    n = int(n)
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23  # determinant of the 3x3 correlation matrix
    if k < -1e-12:
        raise InputError(
            f"r12={r12}, r13={r13}, r23={r23} cannot come from one data set (their correlation matrix is not "
            "positive semi-definite); compute all three on the same items"
        )
    if r12 == r13:
        return WilliamsResult(0.0, 1.0 if alternative == "two-sided" else 0.5)
    denom = 2 * max(k, 0.0) * (n - 1) / (n - 3) + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3
    if denom <= 0:  # perfectly dependent variables: the difference is certain
        t = math.copysign(math.inf, r12 - r13)
        p = {"greater": float(r12 < r13), "less": float(r12 > r13), "two-sided": 0.0}[alternative]
        return WilliamsResult(t, p)
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(denom)
    if alternative == "greater":
        p = sps.t.sf(t, n - 3)
    elif alternative == "less":
        p = sps.t.cdf(t, n - 3)
    else:
        p = min(1.0, 2 * sps.t.sf(abs(t), n - 3))
    return WilliamsResult(float(t), float(p))


def stouffer(p_values) -> tuple[float, float]:
    """Stouffer's combination of one-sided p-values of independent tests (:func:`scipy.stats.combine_pvalues`):
    ``(z, p)``. A certain p (0 or 1) is clipped to [1e-300, 1 - 1e-16] so that z stays finite."""
    ps = np.clip(as_1d(p_values, "p_values"), 1e-300, 1 - 1e-16)
    z, p = sps.combine_pvalues(ps, method="stouffer")
    return float(z), float(p)


def anova(
    df: pd.DataFrame,
    response: str,
    factors: list[str],
    interactions: bool = True,
    typ: int = 2,
) -> pd.DataFrame:
    """ANOVA table of ``response`` on categorical ``factors`` (all interactions when ``interactions``).

    Fits ``response ~ C(f1) * C(f2) * ...`` (or ``+`` without interactions) by OLS with statsmodels and returns
    ``anova_lm(fit, typ=typ)`` (Type II by default) with rows named by factor (``"a"``, ``"a:b"``, ...,
    ``"Residual"``), columns ``sum_sq, df, F, PR(>F)`` and ``partial_eta_sq = SS_effect / (SS_effect +
    SS_residual)`` (NaN on the Residual row). Every factor is treated as categorical (numeric levels too).
    The full factorial model needs replicates (more than one row per cell) to leave residual degrees of freedom.
    """
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"anova needs a pandas DataFrame, got {type(df).__name__}")
    factors = list(factors)
    if not factors:
        raise InputError("anova needs at least one factor")
    if len(set(factors)) != len(factors):
        raise InputError(f"factors repeat: {factors}")
    missing = [c for c in [response, *factors] if c not in df.columns]
    if missing:
        raise InputError(f"columns {missing} are not in the data frame (columns: {list(df.columns)})")
    y = pd.to_numeric(df[response], errors="coerce")
    if y.isna().any():
        raise InputError(f"response {response!r} has {int(y.isna().sum())} missing or non-numeric value(s)")
    # safe internal names: the formula parser must not see user column names (spaces, operators, ...)
    safe = {f: f"f{i}" for i, f in enumerate(factors)}
    data = pd.DataFrame({"y": y.to_numpy(dtype=np.float64)})
    for f, s in safe.items():
        if df[f].isna().any():
            raise InputError(f"factor {f!r} has missing values")
        if df[f].nunique() < 2:
            raise InputError(f"factor {f!r} has a single level; drop it from the design")
        data[s] = df[f].astype(str).to_numpy()
    joiner = " * " if interactions else " + "
    fit = ols("y ~ " + joiner.join(f"C({s})" for s in safe.values()), data=data).fit()
    if fit.df_resid <= 0:
        raise InputError(
            f"no residual degrees of freedom ({len(data)} rows for the model's {int(fit.df_model) + 1} "
            "parameters): add replicates (seeds) per cell or set interactions=False"
        )
    table = sm.stats.anova_lm(fit, typ=typ)
    back = {f"C({s})": f for f, s in safe.items()}
    table.index = [":".join(back.get(p, p) for p in str(term).split(":")) for term in table.index]
    ss_res = float(table.loc["Residual", "sum_sq"])
    eta = table["sum_sq"] / (table["sum_sq"] + ss_res)
    eta.loc["Residual"] = np.nan
    table["partial_eta_sq"] = eta
    # main effects first, then two-way, three-way ... interactions, then the residual
    order = sorted(
        (t for t in table.index if t != "Residual"),
        key=lambda t: (t.count(":"), _position(t, factors)),
    )
    return table.loc[[*order, "Residual"]]


def _position(term: str, factors: list[str]) -> tuple[int, ...]:
    return tuple(factors.index(p) for p in term.split(":"))
