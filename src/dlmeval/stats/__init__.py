"""Statistics for dlmeval's protocols: numpy arrays in, floats / small dataclasses out; scipy and statsmodels inside.

Significance, intervals and ANOVA (:mod:`dlmeval.stats.significance`: THE one module, one convention for
sidedness, levels and seeds; read its docstring)
    ``mean_se(x) -> (mean, se)``                      se = SD(ddof=1)/sqrt(n); NaN for n = 1
    ``bootstrap_ci(x, statistic=np.mean, n_resamples=10_000, confidence=0.95, seed=0, method="percentile") -> CI``
    ``paired_bootstrap_ci(a, b, ...) -> CI``          CI of statistic(a - b), pairs resampled
                                                      (CI unpacks as ``lo, hi``; also .estimate, .seed, .n)
    ``paired_bootstrap_test(a, b, alpha=, alternative=) -> BootstrapTest``   .significant: the interval decides
    ``resampled_ci`` / ``resampled_paired_test``      percentile bootstrap over units of a recomputed statistic
    ``paired_ttest(a, b, alternative="two-sided") -> PairedTest(mean_diff, se, t, p, n)``   scipy ttest_rel
    ``wilcoxon(a, b) -> WilcoxonResult(stat, p, n, note)``   unpacks as ``stat, p``; all-zero diffs -> p = 1
    ``mann_whitney(a, b) -> p``                       independent samples
    ``binomial_above_chance(k, n, p0) -> p``          exact one-sided binomial test (H1: rate > p0)
    ``williams_test(r12, r13, r23, n, alternative=) -> (t, p)``   Williams (1959), df n-3; the DiffScore paper's
                                                      marks pass alternative="greater" (H1: r12 > r13)
    ``stouffer(p_values) -> (z, p)``                  one-sided p-values combined
    ``anova(df, response, factors, interactions=True, typ=2) -> DataFrame``
        sum_sq, df, F, PR(>F), partial_eta_sq = SS_effect / (SS_effect + SS_residual)

Correlations and meta-evaluation (:mod:`dlmeval.stats.correlation`)
    ``kendall_tau(x, y, variant="b"|"c")``, ``spearman(x, y)``, ``pearson(x, y)`` -> ``Correlation(r, p, n)``
    ``darr_kendall_like(better_scores, worse_scores) -> float``   WMT DARR tau; metric ties count as discordant

The DiffScore paper's significance marks (:mod:`dlmeval.stats.marks`)
    ``williams_at_level(level, a, b, human=, method=, docs=, systems=, pairs=) -> WilliamsComparison``
        level "segment" | "system" (system means) | "summary" (per-document Williams, Stouffer-combined) |
        "darr" (WMT pairs as +-1 variables); one-sided, H1: A correlates better with the humans than B
    ``significance_marks(scores, rows, level=, baselines={"†": bart, "‡": gpt}, alpha=0.05, ...)``
        -> ({row: marks}, [test records])

Bad input (NaN, unequal lengths, too few values) raises :class:`dlmeval.errors.InputError`. Random draws (the
bootstrap) come from ``numpy_rng(seed, *stream)``: pass a seed derived from the run seed.
"""

from dlmeval.stats.correlation import (
    Correlation,
    darr_kendall_like,
    kendall_tau,
    pearson,
    spearman,
)
from dlmeval.stats.marks import WilliamsComparison, significance_marks, williams_at_level
from dlmeval.stats.significance import (
    ALTERNATIVES,
    CI,
    BootstrapTest,
    PairedTest,
    WilcoxonResult,
    WilliamsResult,
    anova,
    binomial_above_chance,
    bootstrap_ci,
    mann_whitney,
    mean_se,
    paired_bootstrap_ci,
    paired_bootstrap_test,
    paired_ttest,
    rejects,
    resampled_ci,
    resampled_paired_test,
    stouffer,
    test_confidence,
    wilcoxon,
    williams_test,
)

__all__ = [
    "ALTERNATIVES",
    "CI",
    "BootstrapTest",
    "Correlation",
    "PairedTest",
    "WilcoxonResult",
    "WilliamsComparison",
    "WilliamsResult",
    "anova",
    "binomial_above_chance",
    "bootstrap_ci",
    "darr_kendall_like",
    "kendall_tau",
    "mann_whitney",
    "mean_se",
    "paired_bootstrap_ci",
    "paired_bootstrap_test",
    "paired_ttest",
    "pearson",
    "rejects",
    "resampled_ci",
    "resampled_paired_test",
    "significance_marks",
    "spearman",
    "stouffer",
    "test_confidence",
    "wilcoxon",
    "williams_at_level",
    "williams_test",
]
