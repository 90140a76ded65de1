"""Meta-evaluation protocols of the BARTScore benchmarks, the DiffScore dimension mapping, CIs and significance.

Each benchmark is judged the way BARTScore's ``analysis.py`` (Yuan et al. 2021) and the DiffScore paper judge it:

=====================  =========================================================================================
protocol               definition
=====================  =========================================================================================
``doc_spearman``       summary level: Spearman's rho between metric and human over the systems of ONE document,
``doc_kendall``        averaged over documents (Kendall's tau-b likewise); a document where the metric or the
                       human score is constant is skipped (BARTScore's ``evaluate_summary``)
``sys_pearson``        system level: each system's mean metric and mean human score over the documents, then
``sys_spearman``       Pearson's r / Spearman's rho across systems
``pairwise_acc``       Rank19: the share of documents whose ``correct`` summary scores strictly above the
                       ``incorrect`` one (a tie counts as wrong; BARTScore's ``get_fact_acc``)
``pearson``            segment level: one correlation over all judged outputs (QAGS: Pearson, BARTScore's
``spearman``           ``get_fact_pearson``; D2T: Spearman, BARTScore's ``evaluate_text``)
``kendall``
``darr_tau``           WMT19 DARR: ``(Concordant - Discordant) / (Concordant + Discordant)`` over the human
                       better/worse pairs; a metric tie is Discordant (:func:`dlmeval.stats.darr_kendall_like`)
=====================  =========================================================================================

Uncertainty: a percentile bootstrap CI (:func:`dlmeval.stats.bootstrap_ci`) that resamples the protocol's unit:
documents (summary level, system level, pairwise accuracy), judged outputs (segment level) or DARR pairs.
Comparisons of two metrics on the same items, one-sided (H1: A better than B; ``alternative="greater"`` of
:mod:`dlmeval.stats.significance`, as in BARTScore's analysis): the Williams test (:func:`dlmeval.stats.williams_test`)
for a single Pearson / Spearman correlation (segment or system level; Spearman as the Williams test on ranks);
otherwise a paired bootstrap test of the difference over the same unit (its 1 - 2 alpha interval; significant when
the lower end is above 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dlmeval.errors import InputError

# ---------------------------------------------------------------------------------------------- protocols
PROTOCOLS: dict[str, str] = {
    "doc_spearman": "Spearman rho per document, averaged (summary level)",
    "doc_kendall": "Kendall tau-b per document, averaged (summary level)",
    "sys_pearson": "Pearson r of system means (system level)",
    "sys_spearman": "Spearman rho of system means (system level)",
    "pairwise_acc": "pairwise accuracy: correct > incorrect (ties wrong)",
    "pearson": "Pearson r over all outputs (segment level)",
    "spearman": "Spearman rho over all outputs (segment level)",
    "kendall": "Kendall tau-b over all outputs (segment level)",
    "darr_tau": "WMT DARR Kendall-like tau = (C - D) / (C + D), ties discordant",
}
#: a comparison on fewer units than this claims no significance (a bootstrap of 2 documents is no evidence)
MIN_TEST_UNITS = 5
#: protocols whose value is a mean over units (documents, pairs) with one value each
UNIT_MEAN = frozenset({"doc_spearman", "doc_kendall", "pairwise_acc", "darr_tau"})
#: protocols that are one Pearson / Spearman correlation (the Williams test applies)
SINGLE_CORRELATION = frozenset({"pearson", "spearman", "sys_pearson", "sys_spearman"})

#: protocols per benchmark; the first is the paper's number (Tables 1-3)
BENCHMARK_PROTOCOLS: dict[str, tuple[str, ...]] = {
    # the pooled segment-level correlations over all outputs beside the per-document average (secondary)
    "SummEval": ("doc_spearman", "doc_kendall", "sys_pearson", "sys_spearman", "spearman", "kendall"),
    "Newsroom": ("doc_spearman", "doc_kendall", "sys_pearson", "sys_spearman", "spearman", "kendall"),
    "REALSumm": ("sys_pearson", "sys_spearman", "doc_spearman"),
    "Rank19": ("pairwise_acc",),
    "QAGS_CNN": ("pearson", "spearman", "kendall"),
    "QAGS_XSUM": ("pearson", "spearman", "kendall"),
    "BAGEL": ("spearman", "kendall"),
    "SFHOT": ("spearman", "kendall"),
    "SFRES": ("spearman", "kendall"),
    "gu-en": ("darr_tau",),
    "kk-en": ("darr_tau",),
    "lt-en": ("darr_tau",),
    **{lp: ("darr_tau",) for lp in ("de-en", "fi-en", "ru-en", "zh-en")},
}

#: ``--protocol``: ``paper`` = what the DiffScore paper states (BENCHMARK_PROTOCOLS), ``bartscore`` = BARTScore's
#: ``analysis.py`` / ``analysis.ipynb`` exactly (the tables its baseline numbers come from)
SUITE_PROTOCOLS = ("paper", "bartscore")
#: where the ``bartscore`` protocol differs from BENCHMARK_PROTOCOLS: REALSumm is judged by the Spearman / Kendall
#: correlation per document over its 24 systems, averaged (``SUMStat.evaluate_summary``, analysis.ipynb cell 9),
#: not by the system-level Pearson the DiffScore paper states for it (its Table 2 caption)
BARTSCORE_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "REALSumm": ("doc_spearman", "doc_kendall", "sys_pearson", "sys_spearman"),
}
#: the variant of a reference-based metric (P / R / F) each benchmark reports under the ``bartscore`` protocol:
#: recall on REALSumm ("we use recall-based metrics (e.g. bert_score_r, rouge1_r, ...)", analysis.ipynb cell 8),
#: F elsewhere ("For others, we use F-based metrics", same cell). The ``paper`` protocol reports F everywhere (the
#: DiffScore paper names no variant).
BARTSCORE_VARIANT: dict[str, str] = {"REALSumm": "r"}


def metric_variant(benchmark: str, suite_protocol: str = "paper") -> str:
    """``"p"``, ``"r"`` or ``"f"``: the variant of the reference-based metrics a benchmark reports."""
    return BARTSCORE_VARIANT.get(benchmark, "f") if suite_protocol == "bartscore" else "f"


#: the human "dimension" of the WMT DARR sets (pairs, no score column)
DARR = "DARR"

# ---------------------------------------------------------------------------------------------- mapping
#: DiffScore configuration per (task, human dimension), paper section 4.3 / appendix D.5:
#: MT: conditional on the reference; SUM: conditional for consistency/faithfulness, reverse for coverage,
#: marginal for fluency, bidirectional for coherence, relevance and informativeness; D2T: bidirectional.
DIMENSION_CONFIG: dict[tuple[str, str], str] = {
    ("SUM", "consistency"): "cond",
    ("SUM", "fact"): "cond",
    ("SUM", "litepyramid_recall"): "reverse",
    ("SUM", "fluency"): "marginal",
    ("SUM", "coherence"): "bidir",
    ("SUM", "relevance"): "bidir",
    ("SUM", "informativeness"): "bidir",
    ("D2T", "informativeness"): "bidir",
    ("D2T", "naturalness"): "bidir",
    ("D2T", "quality"): "bidir",
    ("WMT", DARR): "cond",
}
#: short names of the dimensions, as in the paper's tables
DIMENSION_TAGS: dict[str, str] = {
    "coherence": "COH",
    "consistency": "CON",
    "fluency": "FLU",
    "relevance": "REL",
    "informativeness": "INF",
    "naturalness": "NAT",
    "quality": "QUA",
    "litepyramid_recall": "COV",
    "fact": "FAC",
    DARR: "DARR",
}


def dimension_config(task: str, dimension: str) -> str:
    """The DiffScore configuration the paper uses for a (task, human dimension)."""
    try:
        return DIMENSION_CONFIG[(task, dimension)]
    except KeyError:
        raise InputError(
            f"no DiffScore configuration is defined for task {task!r}, dimension {dimension!r}"
        ) from None


def ar_direction(task: str, config: str) -> str:
    """The autoregressive direction that plays a DiffScore configuration's part (``AR (paper mapping)``).

    cond -> ``s2h`` (MT: ``r2h``), reverse -> ``h2s`` (MT: ``h2r``), marginal -> ``mar``, bidir -> ``sbi`` (the
    mean of s2h and h2s; MT: ``f``, the mean of r2h and h2r).
    """
    if task == "WMT":
        table = {"cond": "r2h", "reverse": "h2r", "marginal": "mar", "bidir": "f"}
    else:
        table = {"cond": "s2h", "reverse": "h2s", "marginal": "mar", "bidir": "sbi"}
    if config not in table:
        raise InputError(f"no AR direction for configuration {config!r}")
    return table[config]


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ProtocolResult:
    """A protocol's value, the number of units it rests on, and the per-unit values of unit-mean protocols."""

    protocol: str
    value: float
    n: int
    unit: str  # "documents" | "systems" | "outputs" | "pairs"
    units: np.ndarray | None = None  # per-unit values (unit-mean protocols)
    unit_ids: tuple | None = None
    skipped: int = 0  # documents left out (constant metric or human scores)


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")


def _arr(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(
            f"{name} holds {int(np.sum(~np.isfinite(a)))} NaN/inf value(s); drop or impute them first"
        )
    return a


def _corr(method: str, x: np.ndarray, y: np.ndarray) -> float:
    """Pearson / Spearman / Kendall tau-b (:func:`dlmeval.stats.correlation.correlation`); NaN for a constant
    side."""
    from dlmeval.stats.correlation import correlation

    return correlation(method, x, y)


_METHOD = {
    "doc_spearman": "spearman",
    "doc_kendall": "kendall",
    "sys_pearson": "pearson",
    "sys_spearman": "spearman",
    "pearson": "pearson",
    "spearman": "spearman",
    "kendall": "kendall",
}


def summary_level(metric, human, docs: Sequence, method: str = "spearman") -> ProtocolResult:
    """Per-document correlation across that document's outputs, averaged over documents (BARTScore)."""
    m, h = _arr(metric, "metric"), _arr(human, "human")
    d = np.asarray(list(docs), dtype=object)
    if not (m.size == h.size == d.size):
        raise InputError(f"metric, human and docs differ in length ({m.size}, {h.size}, {d.size})")
    vals, ids, skipped = [], [], 0
    for doc in pd.unique(d):
        sel = d == doc
        x, y = m[sel], h[sel]
        if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
            skipped += 1
            continue
        vals.append(_corr(method, x, y))
        ids.append(doc)
    u = np.asarray(vals, dtype=np.float64)
    proto = (
        "doc_spearman" if method == "spearman" else "doc_kendall" if method == "kendall" else f"doc_{method}"
    )
    value = float(u.mean()) if u.size else float("nan")
    return ProtocolResult(proto, value, int(u.size), "documents", u, tuple(ids), skipped)


def system_means(metric, human, systems: Sequence) -> pd.DataFrame:
    """Mean metric and mean human score per system (in order of first appearance)."""
    m, h = _arr(metric, "metric"), _arr(human, "human")
    s = list(systems)
    if not (m.size == h.size == len(s)):
        raise InputError("metric, human and systems differ in length")
    df = pd.DataFrame({"system": s, "metric": m, "human": h})
    return df.groupby("system", sort=False)[["metric", "human"]].mean()


def system_level(metric, human, systems: Sequence, method: str = "pearson") -> ProtocolResult:
    """Correlation of per-system means (each system averaged over the documents it was judged on)."""
    g = system_means(metric, human, systems)
    v = _corr(method, g["metric"].to_numpy(), g["human"].to_numpy())
    return ProtocolResult(f"sys_{method}", v, int(len(g)), "systems")


def pairwise_accuracy(
    metric, docs: Sequence, systems: Sequence, better: str = "correct", worse: str = "incorrect"
) -> ProtocolResult:
    """Share of documents whose ``better`` output scores strictly above its ``worse`` one (ties are wrong)."""
    m = _arr(metric, "metric")
    d, s = list(docs), [str(x) for x in systems]
    if not (m.size == len(d) == len(s)):
        raise InputError("metric, docs and systems differ in length")
    by_doc: dict = {}
    for x, doc, sy in zip(m, d, s):
        by_doc.setdefault(doc, {})[sy] = x
    vals, ids = [], []
    for doc, pair in by_doc.items():
        if better in pair and worse in pair:
            vals.append(1.0 if pair[better] > pair[worse] else 0.0)
            ids.append(doc)
    if not vals:
        raise InputError(f"no document has both a {better!r} and a {worse!r} output")
    u = np.asarray(vals)
    return ProtocolResult("pairwise_acc", float(u.mean()), int(u.size), "documents", u, tuple(ids))


def segment_level(metric, human, method: str = "pearson") -> ProtocolResult:
    """One correlation over all judged outputs."""
    m, h = _arr(metric, "metric"), _arr(human, "human")
    if m.size != h.size:
        raise InputError(f"metric and human differ in length ({m.size} vs {h.size})")
    return ProtocolResult(method, _corr(method, m, h), int(m.size), "outputs")


def darr_kendall(better_scores, worse_scores, pair_ids: Sequence | None = None) -> ProtocolResult:
    """WMT DARR Kendall-like tau, with the per-pair concordance (+1 / -1) as units."""
    from dlmeval.stats import darr_kendall_like

    b, w = _arr(better_scores, "better_scores"), _arr(worse_scores, "worse_scores")
    if b.size != w.size:
        raise InputError("better and worse scores differ in length")
    value = float(darr_kendall_like(b, w))
    units = np.where(b > w, 1.0, -1.0)
    return ProtocolResult(
        "darr_tau", value, int(b.size), "pairs", units, None if pair_ids is None else tuple(pair_ids)
    )


# ---------------------------------------------------------------------------------------------- one benchmark
@dataclass
class Judged:
    """The judged outputs of one benchmark for one human dimension, aligned with metric scores.

    SUM / D2T: ``human`` per output, ``docs`` and ``systems`` per output. WMT: ``better_index`` / ``worse_index``
    point into the output arrays, one entry per DARR pair (``human`` is unused).
    """

    docs: np.ndarray
    systems: np.ndarray
    human: np.ndarray | None = None
    better_index: np.ndarray | None = None
    worse_index: np.ndarray | None = None
    pair_ids: np.ndarray | None = None


def evaluate(protocol: str, judged: Judged, metric) -> ProtocolResult:
    """The value of ``protocol`` for one metric's scores (aligned with ``judged``)."""
    _check_protocol(protocol)
    m = _arr(metric, "metric")
    if protocol == "darr_tau":
        if judged.better_index is None or judged.worse_index is None:
            raise InputError("darr_tau needs better/worse pair indices")
        return darr_kendall(m[judged.better_index], m[judged.worse_index], judged.pair_ids)
    if protocol == "pairwise_acc":
        return pairwise_accuracy(m, judged.docs, judged.systems)
    if judged.human is None:
        raise InputError(f"{protocol} needs human scores")
    if protocol in ("doc_spearman", "doc_kendall"):
        return summary_level(m, judged.human, judged.docs, _METHOD[protocol])
    if protocol in ("sys_pearson", "sys_spearman"):
        return system_level(m, judged.human, judged.systems, _METHOD[protocol])
    return segment_level(m, judged.human, _METHOD[protocol])


# ---------------------------------------------------------------------------------------------- resampling
class _Resampler:
    """One protocol on bootstrap resamples of its units (documents drawn twice count twice).

    ``n_units`` units are drawn with replacement; ``value(idx)`` is the protocol on the drawn units. Written
    vectorised by hand (numpy ranks and correlations, per-document system sums) because the protocols are
    recomputed on every resample and a pandas group-by per resample costs 100x more.
    """

    def __init__(self, protocol: str, judged: Judged, metric: np.ndarray):
        self.protocol = protocol
        self.metric = metric
        self.judged = judged
        if protocol == "darr_tau":
            b, w = metric[judged.better_index], metric[judged.worse_index]
            self.conc = np.where(b > w, 1.0, -1.0)
            self.n_units = int(self.conc.size)
        elif protocol in ("pearson", "spearman", "kendall"):
            self.n_units = int(metric.size)
        elif protocol in ("sys_pearson", "sys_spearman"):
            docs, d_idx = np.unique(judged.docs.astype(str), return_inverse=True)
            systems, s_idx = np.unique(judged.systems.astype(str), return_inverse=True)
            shape = (docs.size, systems.size)
            self.m_sum, self.h_sum, self.cnt = np.zeros(shape), np.zeros(shape), np.zeros(shape)
            np.add.at(self.m_sum, (d_idx, s_idx), metric)
            np.add.at(self.h_sum, (d_idx, s_idx), judged.human)
            np.add.at(self.cnt, (d_idx, s_idx), 1.0)
            self.n_units = int(docs.size)
        else:
            raise InputError(f"{protocol} is resampled through its per-unit values")

    def value(self, idx: np.ndarray) -> float:
        p = self.protocol
        if p == "darr_tau":
            return float(self.conc[idx].mean())
        if p in ("pearson", "spearman", "kendall"):
            return _fast_corr(p, self.metric[idx], self.judged.human[idx])
        cnt = self.cnt[idx].sum(axis=0)
        ok = cnt > 0
        m = self.m_sum[idx].sum(axis=0)[ok] / cnt[ok]
        h = self.h_sum[idx].sum(axis=0)[ok] / cnt[ok]
        return _fast_corr(_METHOD[p], m, h)


def _fast_corr(method: str, x: np.ndarray, y: np.ndarray) -> float:
    """:func:`_corr` by :func:`numpy.corrcoef` for the bootstrap's resamples."""
    from dlmeval.stats.correlation import correlation

    return correlation(method, x, y, fast=True)


def protocol_ci(
    protocol: str,
    judged: Judged,
    metric,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the protocol's value, resampling its unit (see the module docstring).

    Unit-mean protocols bootstrap the mean of their per-unit values; the others recompute the correlation on each
    resample. Resamples on which the correlation is undefined (a constant side) are dropped; returns NaNs when
    fewer than two units exist or no resample is defined.
    """
    from dlmeval.stats import bootstrap_ci, resampled_ci

    m = _arr(metric, "metric")
    if n_resamples < 1:
        return float("nan"), float("nan")
    res = evaluate(protocol, judged, m)
    if protocol in UNIT_MEAN:
        u = res.units
        if u is None or u.size < 2:
            return float("nan"), float("nan")
        if np.ptp(u) == 0:  # every unit agrees: every resample gives the same value
            return float(u[0]), float(u[0])
        ci = bootstrap_ci(u, np.mean, n_resamples=n_resamples, confidence=confidence, seed=seed)
        return ci.lo, ci.hi
    rs = _Resampler(protocol, judged, m)
    if rs.n_units < 2 or not np.isfinite(res.value):
        return float("nan"), float("nan")
    # by unit (not scipy.stats.bootstrap): a correlation is undefined on some resamples of a small benchmark (all
    # drawn outputs tied); resampled_ci drops those instead of returning NaN for the whole interval
    return resampled_ci(
        rs.value,
        rs.n_units,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        stream=("protocol_ci", protocol),
    )


@dataclass(frozen=True)
class Comparison:
    """Metric A against metric B under one protocol: the test, its statistic and p (Williams) or the CI of
    A - B (paired bootstrap), and whether A is significantly better."""

    protocol: str
    test: str  # "williams" | "paired_bootstrap"
    value_a: float
    value_b: float
    statistic: float
    p: float
    ci_lo: float
    ci_hi: float
    n: int
    a_better: bool


def compare(
    protocol: str,
    judged: Judged,
    metric_a,
    metric_b,
    *,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Is metric A's protocol value significantly higher than metric B's on the same items?

    Pearson / Spearman (segment or system level): the Williams test of r(human, A) > r(human, B) given r(A, B)
    (Spearman: the same test on ranks). Otherwise: a paired bootstrap CI (1 - 2 alpha, i.e. a one-sided test at
    level alpha) of value(A) - value(B), resampling the protocol's unit with the same draws for A and B.
    """
    from dlmeval.stats import paired_bootstrap_test, resampled_paired_test, williams_test

    a, b = _arr(metric_a, "metric_a"), _arr(metric_b, "metric_b")
    ra, rb = evaluate(protocol, judged, a), evaluate(protocol, judged, b)
    nan = float("nan")
    if protocol in SINGLE_CORRELATION:
        method = _METHOD[protocol]
        if protocol.startswith("sys_"):
            ga = system_means(a, judged.human, judged.systems)
            gb = system_means(b, judged.human, judged.systems)
            x, y, h = ga["metric"].to_numpy(), gb["metric"].to_numpy(), ga["human"].to_numpy()
        else:
            x, y, h = a, b, judged.human
        r12, r13, r23 = _corr(method, h, x), _corr(method, h, y), _corr(method, x, y)
        n = int(h.size)
        t, p = nan, nan
        if n > 3 and all(np.isfinite([r12, r13, r23])):
            try:
                w = williams_test(float(r12), float(r13), float(r23), n, alternative="greater")
                t, p = w.t, w.p
            except InputError:
                pass
        return Comparison(protocol, "williams", ra.value, rb.value, t, p, nan, nan, n, bool(p < alpha))
    # the DiffScore paper's convention (BARTScore's analysis.py, WMT): one-sided, H1: A better than B
    alternative = "greater"
    if protocol in UNIT_MEAN:
        ua, ub = (
            dict(zip(ra.unit_ids or range(ra.n), ra.units)),
            dict(zip(rb.unit_ids or range(rb.n), rb.units)),
        )
        common = [k for k in ua if k in ub]
        if len(common) < MIN_TEST_UNITS:  # too few units: no interval, no claim
            est = float(np.mean([ua[k] - ub[k] for k in common])) if common else nan
            return Comparison(
                protocol, "paired_bootstrap", ra.value, rb.value, est, nan, nan, nan, len(common), False
            )
        bt = paired_bootstrap_test(
            [ua[k] for k in common],
            [ub[k] for k in common],
            alpha=alpha,
            alternative=alternative,
            n_resamples=n_resamples,
            seed=seed,
        )
        return Comparison(
            protocol,
            "paired_bootstrap",
            ra.value,
            rb.value,
            bt.estimate,
            nan,
            bt.lo,
            bt.hi,
            bt.n,
            bt.significant,
        )
    ra_s, rb_s = _Resampler(protocol, judged, a), _Resampler(protocol, judged, b)
    n_units = ra_s.n_units
    if n_units < MIN_TEST_UNITS:
        return Comparison(
            protocol,
            "paired_bootstrap",
            ra.value,
            rb.value,
            ra.value - rb.value,
            nan,
            nan,
            nan,
            n_units,
            False,
        )
    bt = resampled_paired_test(
        ra_s.value,
        rb_s.value,
        n_units,
        estimate=ra.value - rb.value,
        alpha=alpha,
        alternative=alternative,
        n_resamples=n_resamples,
        seed=seed,
        stream=("compare", protocol),
    )
    return Comparison(
        protocol,
        "paired_bootstrap",
        ra.value,
        rb.value,
        bt.estimate,
        nan,
        bt.lo,
        bt.hi,
        n_units,
        bt.significant,
    )
