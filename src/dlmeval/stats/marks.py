"""The DiffScore paper's significance marks: ``†`` / ``‡`` = significantly better than BARTScore / GPTScore
(Williams test, p < 0.05; paper Table 1), computed at the level the table's correlation is computed at.

The Williams test (:func:`dlmeval.stats.williams_test` with ``alternative="greater"``: one-sided, H1: r(human, A) >
r(human, B), the paper's and BARTScore's convention) needs the two
correlations with the human scores, the correlation between the two metrics and the number of items, all at the
table's level:

=============  ========================================================================================
level          r12, r13, r23 and n
=============  ========================================================================================
``segment``    Pearson / Spearman / Kendall over all judged outputs; n = outputs (QAGS, D2T)
``system``     Pearson / Spearman of the per-system means; n = systems (REALSumm COV)
``summary``    per document over its systems (Spearman / Kendall), one Williams test per document (n = that
               document's outputs, at least 4), the one-sided p-values combined by Stouffer's method
               (:func:`scipy.stats.combine_pvalues`): the table value is a mean of per-document
               correlations, not one correlation, so no single Williams test exists (SummEval, Newsroom)
``darr``       WMT DARR: each of the n human better/worse pairs is one observation of three +-1 variables,
               the human's orientation (+1), metric A's (+1 when it scores the better output higher, -1
               otherwise: a tie is discordant, as in the Kendall-like tau) and metric B's; r12 and r13 are then
               exactly the two DARR taus and r23 = mean(a_i * b_i) is how often the metrics order a pair alike
               (an inner-product, Kendall-style correlation, so the 3x3 matrix is always valid); n = pairs
=============  ========================================================================================

The paper states Williams and p < 0.05 for its WMT table; it says nothing of how a Kendall-like tau or a
per-document average is fed to a test built for one Pearson correlation: the ``darr`` and ``summary`` rules are
dlmeval's. Kendall's tau in a Williams test is, like Spearman on ranks, an approximation. Items with a NaN in the
human score or either metric are left out of that comparison (whole pairs for DARR).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.stats.significance import stouffer, williams_test

#: the paper's level (Table 1: "p < 0.05, Williams test")
ALPHA = 0.05
#: the paper's marks: significantly better than BARTScore / than GPTScore
DAGGER, DOUBLE_DAGGER = "\u2020", "\u2021"
LEVELS = ("segment", "system", "summary", "darr")
_METHODS = {"segment": ("pearson", "spearman", "kendall"), "system": ("pearson", "spearman")}
_METHODS["summary"] = ("spearman", "kendall", "pearson")
_METHODS["darr"] = ("darr",)


@dataclass(frozen=True)
class WilliamsComparison:
    """Metric A against metric B at one level: the correlations, n, Williams' t and its one-sided p
    (``summary``: ``t`` is Stouffer's z, ``n`` the documents tested, ``r_*`` the per-document means)."""

    level: str
    method: str
    r_a: float
    r_b: float
    r_ab: float
    n: int
    t: float
    p: float
    note: str | None = None

    def better(self, alpha: float = ALPHA) -> bool:
        return bool(np.isfinite(self.p) and self.p < alpha)


def _corr(method: str, x: np.ndarray, y: np.ndarray) -> float:
    from dlmeval.stats.correlation import correlation

    return correlation(method, x, y)


def _williams(level: str, method: str, r12: float, r13: float, r23: float, n: int) -> WilliamsComparison:
    nan = float("nan")
    if not np.all(np.isfinite([r12, r13, r23])):
        return WilliamsComparison(level, method, r12, r13, r23, n, nan, nan, "a correlation is undefined")
    if n <= 3:
        return WilliamsComparison(level, method, r12, r13, r23, n, nan, nan, f"n = {n}: Williams needs n > 3")
    try:
        w = williams_test(float(r12), float(r13), float(r23), int(n), alternative="greater")
    except InputError as e:  # a Kendall matrix with ties can fall outside the valid set
        return WilliamsComparison(level, method, r12, r13, r23, n, nan, nan, str(e))
    return WilliamsComparison(level, method, r12, r13, r23, n, w.t, w.p)


def _vec(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise InputError(f"{name} must be 1-dimensional, got shape {a.shape}")
    return a


def williams_at_level(
    level: str,
    metric_a,
    metric_b,
    *,
    human=None,
    method: str | None = None,
    docs: Sequence | None = None,
    systems: Sequence | None = None,
    pairs: tuple[Sequence[int], Sequence[int]] | None = None,
) -> WilliamsComparison:
    """Is metric A's correlation with the humans higher than metric B's, at ``level`` (see the module table)?

    ``metric_a`` / ``metric_b`` / ``human``: one value per judged output. ``docs`` (summary level) and
    ``systems`` (system level) label the outputs; ``pairs = (better_index, worse_index)`` point into the outputs
    (DARR; ``human`` is unused there)."""
    if level not in LEVELS:
        raise InputError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    method = method or ("darr" if level == "darr" else "pearson" if level != "summary" else "spearman")
    if method not in _METHODS[level]:
        raise InputError(
            f"method {method!r} does not apply at the {level} level; use {', '.join(_METHODS[level])}"
        )
    a, b = _vec(metric_a, "metric_a"), _vec(metric_b, "metric_b")
    if a.size != b.size:
        raise InputError(f"metric_a and metric_b differ in length ({a.size} vs {b.size})")
    if level == "darr":
        if pairs is None:
            raise InputError("the darr level needs pairs=(better_index, worse_index)")
        bi, wi = (np.asarray(p, dtype=np.int64) for p in pairs)
        if bi.shape != wi.shape:
            raise InputError("better_index and worse_index differ in length")
        ok = np.isfinite(a[bi]) & np.isfinite(a[wi]) & np.isfinite(b[bi]) & np.isfinite(b[wi])
        bi, wi = bi[ok], wi[ok]
        sa = np.where(a[bi] > a[wi], 1.0, -1.0)  # a tie is discordant (WMT's Kendall-like tau)
        sb = np.where(b[bi] > b[wi], 1.0, -1.0)
        if sa.size == 0:
            return _williams(level, method, float("nan"), float("nan"), float("nan"), 0)
        return _williams(
            level, method, float(sa.mean()), float(sb.mean()), float((sa * sb).mean()), int(sa.size)
        )
    if human is None:
        raise InputError(f"the {level} level needs human scores")
    h = _vec(human, "human")
    if h.size != a.size:
        raise InputError(f"human and metric scores differ in length ({h.size} vs {a.size})")
    ok = np.isfinite(h) & np.isfinite(a) & np.isfinite(b)
    if level == "segment":
        h, a, b = h[ok], a[ok], b[ok]
        return _williams(
            level, method, _corr(method, h, a), _corr(method, h, b), _corr(method, a, b), int(h.size)
        )
    labels = docs if level == "summary" else systems
    if labels is None:
        raise InputError(f"the {level} level needs {'docs' if level == 'summary' else 'systems'}")
    lab = np.asarray(list(labels), dtype=object)
    if lab.size != h.size:
        raise InputError(f"{lab.size} labels for {h.size} outputs")
    if level == "system":
        g = pd.DataFrame({"s": lab[ok], "h": h[ok], "a": a[ok], "b": b[ok]}).groupby("s", sort=False).mean()
        x, y, z = g["h"].to_numpy(), g["a"].to_numpy(), g["b"].to_numpy()
        return _williams(level, method, _corr(method, x, y), _corr(method, x, z), _corr(method, y, z), len(g))
    # summary level: one Williams test per document, Stouffer-combined
    tests = []
    for d in pd.unique(lab[ok]):
        sel = ok & (lab == d)
        x, y, z = h[sel], a[sel], b[sel]
        w = _williams(
            level, method, _corr(method, x, y), _corr(method, x, z), _corr(method, y, z), int(sel.sum())
        )
        if np.isfinite(w.p):
            tests.append(w)
    nan = float("nan")
    if not tests:
        return WilliamsComparison(level, method, nan, nan, nan, 0, nan, nan, "no document could be tested")
    z, p = stouffer([w.p for w in tests])  # a certain difference (p = 0 or 1) stays finite
    return WilliamsComparison(
        level,
        method,
        float(np.mean([w.r_a for w in tests])),
        float(np.mean([w.r_b for w in tests])),
        float(np.mean([w.r_ab for w in tests])),
        len(tests),
        float(z),
        float(p),
        None,
    )


def significance_marks(
    scores: Mapping[str, Sequence[float]],
    rows: Sequence[str],
    *,
    level: str,
    baselines: Mapping[str, str],
    human=None,
    method: str | None = None,
    docs: Sequence | None = None,
    systems: Sequence | None = None,
    pairs: tuple[Sequence[int], Sequence[int]] | None = None,
    alpha: float = ALPHA,
) -> tuple[dict[str, str], list[dict]]:
    """The paper's marks for each of ``rows`` (DiffScore rows: metric names in ``scores``).

    ``baselines`` maps a mark to the metric it beats, e.g. ``{"†": "bartscore:mapped", "‡": "gptscore:mapped"}``
    (a baseline missing from ``scores`` gives no mark and no test). Returns ``({row: marks in baselines' order},
    [one record per test: row, baseline, mark, level, method, r_a, r_b, r_ab, n, t, p, significant, note])``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    marks: dict[str, str] = {}
    records: list[dict] = []
    for row in rows:
        if row not in scores:
            raise InputError(f"row {row!r} has no scores")
        got = ""
        for mark, base in baselines.items():
            if base not in scores or base == row:
                continue
            w = williams_at_level(
                level,
                scores[row],
                scores[base],
                human=human,
                method=method,
                docs=docs,
                systems=systems,
                pairs=pairs,
            )
            sig = w.better(alpha)
            got += mark if sig else ""
            records.append(
                {"row": row, "baseline": base, "mark": mark, **asdict(w), "significant": sig, "alpha": alpha}
            )
        marks[row] = got
    return marks, records
