"""Low-variance masks for the paper's DiffScore estimand: (rate, size) draws stratified over the paper's joint
distribution, complementary pairs, an exact pass at ``t = 1`` and a control variate read off that pass.

The paper's estimand (:mod:`.masks`) is ``F = (1/T) sum_k E[v(M) | M ~ Bernoulli(t_k)]``. A Bernoulli(t) mask is a
uniformly random subset of Binomial(L, t) size, so ``F`` is an average over the *joint* distribution of
(rate, size), ``p(k, m) = Binomial(m; L, t_k) / T``, of the mean value of uniformly random ``m``-subsets. Every scheme
here estimates exactly that ``F`` with K forward passes (at most; identical rows of one item are computed once):

* **exact pass at t = 1** (all schemes): the rate ``t_T = 1`` hides every token, so its value is not random; one
  pass gives it exactly and it gets its weight ``1 / T``. The other ``n = K - 1`` masks draw (rate, size) from
  ``p`` restricted to the rates below 1, each with weight ``(1 - 1/T) / n`` (their values' mean estimates the rest
  of ``F``). That pass is reused: it also yields every token's log-probability with nothing visible, ``b_i``,
  which the control variate uses.
* ``reuse``: the above with the n (rate, size) cells drawn independently.
* ``stratified``: the n cells at stratified points ``u_j = (j + U_j) / n`` of the joint's CDF (ordered by rate,
  then size; the quasi-Monte Carlo rule): each cell alone has the stratum's distribution and together the strata
  cover ``p`` once, so the rates and sizes of an item spread over the grid instead of clustering.
* ``antithetic``: cells in pairs ``(u, 1 - u)``: the reflection of the ordered joint maps (rate ``t``, size
  ``m``) to (``1 - t``, ``L - m``), and the partner mask is the complement of the first (each token hidden in
  exactly one of the two; the complement of a uniform m-subset is a uniform (L - m)-subset), so a pair's two
  values move in opposite directions with the hard and easy tokens.
* ``control``: a control variate with a known expectation: ``c(M) = mean_{i in M} b_i`` (``mlp``; ``elbo``:
  ``sum_{i in M} b_i / t``). Given its size a mask is a uniform subset, so ``E[c(M) | m] = b_bar`` (``m b_bar /
  t``) exactly, and ``v(M) - beta (c(M) - E[c(M) | m])`` has the expectation of ``v(M)`` for any fixed ``beta``
  (:data:`CONTROL_BETA`). It removes most of the "which tokens were hidden" noise at low rates, where a mask
  holds few tokens.
* ``importance``: cells drawn from ``q(k, m) proportional to p(k, m) / sqrt(max(m, 1))`` (more masks where few
  tokens make a noisy mean), each value weighted by ``p / q``.
* ``combined`` (the default): ``stratified`` + ``control``, with the drawn masks laid end to end along one random
  permutation in the order of their points (tiling, as :mod:`.masks` ``balanced`` does), so the small masks of
  an item rarely overlap; a window of a uniform permutation at an offset fixed by the sizes is a uniform subset of
  its size. Complementary pairs are left out: on top of stratification and the control they added variance
  (0.32 against 0.29 of the paper's at K = 8 on 16 enumerated 7-9-token texts, MLP; 0.20 against 0.15 for ELBO;
  ``benchmarks/bench_estimator_variance.py``, docs/benchmarks.md).

Each mask alone is drawn from the cell distribution of its stratum and, given its size, is a uniform subset, so
the weighted sum ``sum_j w_j v_j`` has exactly the paper's expectation for every weighting (proved by exact
enumeration in ``tests/scoring/test_stratified.py``). A size 0 cell is the paper's empty draw: under ``mlp`` it
hides one uniformly chosen token (flagged ``empty``), under ``elbo`` its value is the empty sum 0; its partner is
the full mask, the same row as the ``t = 1`` pass. ``K = 1`` draws one cell from the whole joint (``t = 1``
included) and ``T = 1`` is the exact pass alone (no control variate in either).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import binom

#: the control variate's coefficient: the slope of a hidden token's log-probability in context on its log-probability
#: with nothing visible was 0.46-0.97 (rates 0.1-0.9) on 20 SummEval and held-out sentences with the default model;
#: 0.7-1.0 left the same within-rate variance there (about 40 % of it without the control). Any fixed value keeps
#: the expectation.
CONTROL_BETA = 0.8

#: what each scheme of this module adds to the exact t = 1 pass (``reuse``)
FEATURES: dict[str, frozenset[str]] = {
    "reuse": frozenset(),
    "stratified": frozenset({"stratify"}),
    "antithetic": frozenset({"antithetic"}),
    "control": frozenset({"control"}),
    "importance": frozenset({"importance"}),
    "combined": frozenset({"stratify", "control", "tile"}),
}


@lru_cache(maxsize=256)
def has_rate_profile(scheme: str) -> bool:
    """Whether the scheme's per-rate means estimate the paper's S(t_k): not for the schemes of this module
    (``combined``, the default, among them), whose weighted sum alone is unbiased, nor for ``pll`` (no rates)."""
    return scheme not in FEATURES and scheme != "pll"


def joint_cells(length: int, n_rates: int, *, below_one: bool = True) -> np.ndarray:
    """``p(k, m)`` as a ``[T', L + 1]`` array (``T' = T - 1`` rates below 1, or all T), rows the rates ``t_k = k/T``,
    columns the sizes ``m = 0..L``: ``Binomial(m; L, t_k) / T'``. Ordered by rate, then size, it is the CDF the
    stratified points are read on. The reflection ``(k, m) -> (T - k, L - m)`` leaves it unchanged."""
    n = n_rates - 1 if below_one else n_rates
    rates = np.arange(1, n + 1, dtype=np.float64) / n_rates
    m = np.arange(length + 1)
    out = binom.pmf(m[None, :], length, rates[:, None]) / n
    out.flags.writeable = False  # cached: shared by every call
    return out


@lru_cache(maxsize=64)
def proposal(length: int, n_rates: int) -> np.ndarray:
    """The ``importance`` scheme's cell distribution: ``p(k, m) / sqrt(max(m, 1))`` over the rates below 1,
    normalized."""
    p = joint_cells(length, n_rates)
    q = p / np.sqrt(np.maximum(np.arange(p.shape[1]), 1))[None, :]
    out = q / q.sum()
    out.flags.writeable = False
    return out


def cell_of(u: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rate index, size) of the points ``u`` in [0, 1) on the CDF of ``cells`` (ordered by rate, then size)."""
    cdf = np.cumsum(cells.ravel())
    idx = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), cdf.size - 1)
    return idx // cells.shape[1], idx % cells.shape[1]


def points(n: int, rng: np.random.Generator, *, stratify: bool, antithetic: bool) -> tuple[np.ndarray, int]:
    """``n`` points of [0, 1), each uniform on its own (on its stratum when ``stratify``), and how many of them lead
    a pair: with ``antithetic`` the first ``n // 2`` points are the leaders and their partners are ``1 - u`` (not
    returned: the partner's cell is the reflection of the leader's), the rest stand alone."""
    if antithetic:
        h = n // 2
        lead = (np.arange(h) + rng.random(h)) / n if stratify else rng.random(h)
        rest = n - 2 * h
        alone = (h + np.arange(rest) + rng.random(rest)) / n if stratify else rng.random(rest)
        return np.concatenate([lead, alone]), h
    return ((np.arange(n) + rng.random(n)) / n if stratify else rng.random(n)), 0


def slot_cells(cells: np.ndarray, n: int, *, stratify: bool, antithetic: bool) -> np.ndarray:
    """``[n, T', L + 1]``: the cell distribution of each of the n drawn masks, in the order
    :func:`stratified_masks` emits them (a leader, then its partner: the reflection of the leader's distribution;
    then the masks that stand alone). A point uniform on ``[a, b)`` lands in a cell with probability the overlap of
    ``[a, b)`` with the cell's interval of the normalized CDF, over ``b - a``; the n distributions average to
    ``cells`` (normalized) exactly, which is why the drawn masks' mean has the expectation of one draw from
    ``cells``."""
    flat = cells.ravel() / cells.sum()
    edges = np.concatenate([[0.0], np.cumsum(flat)])
    edges[-1] = 1.0

    def on(a: float, b: float) -> np.ndarray:
        lo, hi = np.maximum(edges[:-1], a), np.minimum(edges[1:], b)
        return (np.clip(hi - lo, 0.0, None) / (b - a)).reshape(cells.shape)

    h = n // 2 if antithetic else 0
    out = []
    for j in range(h):
        lead = on(j / n, (j + 1) / n) if stratify else on(0.0, 1.0)
        out += [lead, lead[::-1, ::-1]]  # (k, m) -> (T' - 1 - k, L - m)
    for i in range(n - 2 * h):
        out.append(on((h + i) / n, (h + i + 1) / n) if stratify else on(0.0, 1.0))
    return np.stack(out)


@lru_cache(maxsize=256)
def _size_means(length: int, n_rates: int, n: int, feats: frozenset[str]) -> np.ndarray:
    """``E[|M| / t]`` of each of the n drawn masks over its cell distribution (:func:`slot_cells`)."""
    ratio = np.arange(length + 1)[None, :] / (np.arange(1, n_rates) / n_rates)[:, None]
    dist = slot_cells(
        joint_cells(length, n_rates), n, stratify="stratify" in feats, antithetic="antithetic" in feats
    )
    out = (dist * ratio).sum(axis=(1, 2))
    out.flags.writeable = False
    return out


def slot_weights(n_masks: int, n_rates: int) -> tuple[int, float]:
    """(number of drawn masks n, weight of each before importance ratios) for the masks after the exact pass."""
    if n_rates == 1:
        return 0, 0.0
    if n_masks == 1:
        return 1, 1.0
    return n_masks - 1, (1.0 - 1.0 / n_rates) / (n_masks - 1)


def stratified_masks(
    scheme: str, length: int, n_masks: int, n_rates: int, rng: np.random.Generator
) -> dict[str, Any]:
    """The fields of the :class:`~dlmeval.scoring.masks.MaskSet` of the scheme ``scheme`` (module docstring; masks.py
    builds the set, so this module imports nothing of it): the drawn masks in order (a pair's leader, then its
    partner), then the exact ``t = 1`` pass; ``weight`` holds each mask's weight in the score, ``control`` the index
    of the ``t = 1`` mask when the control variate is on."""
    feats = FEATURES[scheme]
    n, w0 = slot_weights(n_masks, n_rates)
    hidden: list[np.ndarray] = []
    rate_index: list[int] = []
    unit: list[int] = []
    empty: list[bool] = []
    weight: list[float] = []
    if n:
        whole = n_masks == 1
        p = joint_cells(length, n_rates, below_one=not whole)
        pair = "antithetic" in feats and not whole
        imp = "importance" in feats and not whole
        assert not (pair and imp), (
            "a proposal other than p has no reflection: no scheme pairs importance draws"
        )
        q = proposal(length, n_rates) if imp else p
        u, n_lead = points(n, rng, stratify="stratify" in feats and not whole, antithetic=pair)
        ks, ms = cell_of(u, q)
        ratio = p[ks, ms] / q[ks, ms] if imp else np.ones(len(u))
        perm, off = None, 0
        for j, (k, m) in enumerate(zip(ks.tolist(), ms.tolist(), strict=True)):
            if "tile" not in feats or perm is None or off + max(m, 1) > length:
                perm, off = rng.permutation(length), 0
            h = np.zeros(length, dtype=bool)
            h[perm[off : off + max(m, 1)]] = True  # size 0: one uniformly chosen token stands in
            off += max(m, 1)
            hidden.append(h)
            rate_index.append(int(k))
            unit.append(j)
            empty.append(m == 0)
            weight.append(w0 * float(ratio[j]))
            if j < n_lead:  # the partner: the complement, at the reflected cell (T - k, L - m)
                if m == length:  # its complement is empty: one uniformly chosen token stands in
                    c = np.zeros(length, dtype=bool)
                    c[rng.integers(length)] = True
                else:
                    c = ~h if m else np.ones(length, dtype=bool)
                hidden.append(c)
                rate_index.append(n_rates - 2 - int(k))
                unit.append(j)
                empty.append(m == length)
                weight.append(w0)
    if n_rates == 1 or n_masks > 1:  # the exact pass at t = 1
        hidden.append(np.ones(length, dtype=bool))
        rate_index.append(n_rates - 1)
        unit.append(len(hidden))
        empty.append(False)
        weight.append(1.0 / n_rates if n_rates > 1 else 1.0)
    control = len(hidden) - 1 if "control" in feats and n_masks > 1 and n_rates > 1 else None
    size_mean = None
    if control is not None:  # E[|M| / t] of each mask over its cell distribution (the ELBO control's mean)
        size_mean = np.append(_size_means(length, n_rates, n, feats), float(length))
    rate_arr = np.asarray(rate_index, dtype=np.int64)
    strata = np.where(rate_arr == n_rates - 1, 1, 0)  # the drawn units (one stratum, conservative); t = 1
    return {
        "hidden": np.stack(hidden),
        "rate_index": rate_arr,
        "unit": np.asarray(unit, dtype=np.int64),
        "stratum": strata.astype(np.int64),
        "empty": np.asarray(empty, dtype=bool),
        "weight": np.asarray(weight, dtype=np.float64),
        "control": control,
        "size_mean": size_mean,
    }
