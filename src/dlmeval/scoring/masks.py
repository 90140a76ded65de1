"""Masking patterns for the DiffScore Monte Carlo estimator.

A pattern set for one text of ``L`` scored tokens is a boolean matrix ``hidden[n_masks, L]`` plus, for every mask,
the index of its masking rate on the grid ``t_k = k / T`` (``k = 1..T``), the sampling unit it belongs to (used
for the standard error) and whether it was drawn empty. Rates: every rate gets ``K // T`` masks and, when T does
not divide K, the ``K mod T`` remaining masks go to rates picked by systematic sampling (a random offset, then
every ``T / (K mod T)``-th rate), so every rate receives an extra mask with the same probability
``(K mod T) / T`` and the expected weight of every rate is exactly ``1 / T`` for any K >= 1 (with K < T an item's
K masks sit at K distinct rates spread over the whole grid, and over items every rate is scored; a round-robin
layout would only ever score the lowest K rates). When T divides K (K=20/T=10, K=5/T=5) nothing is drawn.

Every random scheme below draws each single mask at rate ``t_k`` from the paper's distribution: each token hidden
independently with probability ``t_k`` (Bernoulli), and a mask that comes out empty hides one uniformly chosen
token instead (the paper does not say what it does with an empty mask; it has no mean log-probability). Such a
mask is flagged in :attr:`MaskSet.empty`: the ELBO weightings count it as the empty sum it was drawn as (0). The
schemes differ only in how the masks of one item depend on each other, so they estimate the same quantity.

``independent`` (the paper's estimator, DiffScore section 4.3 / appendix D.5)
    Every mask drawn on its own: ``K // T`` (plus the spare ones) Bernoulli(``t_k``) masks per rate.

``balanced`` (the default; same expectation, lower variance)
    A mask of Bernoulli(t) tokens is a uniformly random subset whose size is Binomial(L, t); ``balanced`` draws
    exactly that, but couples the masks of an item. *Antithetic pairs*: rate ``t_k`` is paired with ``1 - t_k``
    (``k`` with ``T - k``); the j-th mask at ``1 - t_k`` is the complement of the j-th mask at ``t_k`` (the
    complement of a Bernoulli(t) mask is a Bernoulli(1 - t) mask), so a pair hides every token exactly once.
    *Stratified sizes*: the N sizes an item draws (one per low-rate mask and its complement, one per pair at 1/2)
    are Binomial(L, t) quantiles at ``u_d = (s_d + U_d) / N`` for a random order ``s`` of the N strata of (0, 1):
    each size alone is Binomial(L, t), and together they spread over their distributions (a small mask at one rate
    goes with large ones at others), which cancels much of the size noise of the item's mean. *Tiling*: the masks of the rates below 1/2 are windows laid
    end to end along one random permutation of the tokens, ascending in even rounds and descending in odd ones
    (the layout uses the nominal sizes ``round(t L)``), so the small masks of one item rarely overlap. The rate 1/2
    (T even) pairs its masks two by two as complements, and ``t = 1`` hides everything. A window of a uniformly
    random permutation at an offset chosen independently of it is a uniformly random subset of its size, so every
    single mask has exactly the Bernoulli(t_k) distribution of ``independent`` (same expectation for every
    weighting, by linearity); only the variance drops.

``exact-count`` (the former default; a different estimand)
    As ``balanced``, but a mask at rate ``t_k`` hides exactly ``m_k = clamp(round(t_k L), 1, L)`` tokens. Lowest
    variance, but its expectation is the mean log-probability at ``m_k`` hidden tokens, not the average over the
    Binomial sizes the paper's masks have; the two differ when the mean log-probability is not linear in the
    number of hidden tokens (they agree to first order; ``docs/diffscore.md`` shows the gap on a tiny model).

``pll`` (exact and deterministic, for short texts)
    L masks, each hiding one token: the mean of ``log p(x_i | x_{-i})`` is the pseudo-log-likelihood per token.
    K and T are ignored and there is no profile.

Every random draw comes from the ``numpy.random.Generator`` the caller passes, seeded by
:func:`dlmeval.seeding.numpy_rng` from (seed, item, masked side, scheme, K, T); the patterns of a text depend only
on that seed and on ``L``, never on batch size or item order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from dlmeval.errors import InputError
from dlmeval.scoring.names import SCHEMES
from dlmeval.scoring.stratified import CONTROL_BETA, FEATURES, stratified_masks

#: what each scheme's masks are, for run signatures
MASKING = {
    "combined": "bernoulli (rate, size) cells, stratified + tiled; exact t=1 pass; "
    f"control variate beta={CONTROL_BETA}",
    "balanced": "bernoulli, antithetic + item-stratified sizes + tiled",
    "independent": "bernoulli, independent",
    "exact-count": "exact-count, antithetic + tiled",
    "pll": "single-token",
    "reuse": "bernoulli (rate, size) cells, independent; exact t=1 pass",
    "stratified": "bernoulli (rate, size) cells, stratified; exact t=1 pass",
    "antithetic": "bernoulli (rate, size) cells, complementary pairs; exact t=1 pass",
    "control": f"bernoulli (rate, size) cells, independent; exact t=1 pass; control variate beta={CONTROL_BETA}",
    "importance": "bernoulli (rate, size) cells, proposal p/sqrt(m), weighted p/q; exact t=1 pass",
}


@dataclass(frozen=True)
class MaskSet:
    """The masking patterns of one text.

    ``hidden``: bool ``[n, L]``; ``rate_index``: int ``[n]`` (0-based index into :func:`rate_grid`, ``-1`` for
    PLL); ``unit``: int ``[n]``, masks with the same unit id form one sampling unit (a complementary pair, or a
    single mask); ``stratum``: int ``[n]``, units of one stratum are exchangeable draws (one rate, or one rate
    pair), the standard error is computed stratum by stratum; ``empty``: bool ``[n]`` (or None: none), the masks
    that were drawn empty and hide one uniformly chosen token instead; ``weight``: float ``[n]``, each mask's weight
    in the score (None: the plain mean, ``1 / n`` each); ``control``: the index of the mask that hides every token
    when its log-probabilities feed the control variate of :mod:`.stratified` (None: no control variate);
    ``size_mean``: float ``[n]``, with ``control``: each mask's expected ``|M| / t`` over the distribution of its
    (rate, size) cell (a drawn-empty mask counting 0), the mean of the ELBO weightings' control variate.
    """

    hidden: np.ndarray
    rate_index: np.ndarray
    unit: np.ndarray
    stratum: np.ndarray
    empty: np.ndarray | None = None
    weight: np.ndarray | None = None
    control: int | None = None
    size_mean: np.ndarray | None = None

    def weights(self) -> np.ndarray:
        """float ``[n]``: each mask's weight in the score (``1 / n`` each unless the scheme sets them)."""
        return np.full(self.n_masks, 1.0 / self.n_masks) if self.weight is None else self.weight

    def drawn_empty(self) -> np.ndarray:
        """bool ``[n]``: which masks were drawn empty (all False when the scheme never draws one)."""
        return np.zeros(self.n_masks, dtype=bool) if self.empty is None else self.empty

    @property
    def n_masks(self) -> int:
        return int(self.hidden.shape[0])

    @property
    def length(self) -> int:
        return int(self.hidden.shape[1])


def rate_grid(n_rates: int) -> np.ndarray:
    """The masking rates ``t_k = k / T`` for ``k = 1..T`` (evenly spaced in (0, 1], as in the paper)."""
    if n_rates < 1:
        raise InputError(f"the number of masking rates must be at least 1, got {n_rates}")
    return np.arange(1, n_rates + 1, dtype=np.float64) / n_rates


def masks_per_rate(n_masks: int, n_rates: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Masks at each of the T rates: ``K // T`` each, plus one at each of ``K mod T`` rates chosen by systematic
    sampling with a random offset from ``rng`` (every rate equally likely, so the expected weight of each rate is
    ``1 / T``). ``rng`` may be left out only when T divides K (nothing is drawn then)."""
    if n_masks < 1:
        raise InputError(f"the number of masks must be at least 1, got {n_masks}")
    if n_rates < 1:
        raise InputError(f"the number of masking rates must be at least 1, got {n_rates}")
    counts = np.full(n_rates, n_masks // n_rates, dtype=np.int64)
    extra = n_masks % n_rates
    if extra:
        if rng is None:
            raise ValueError(f"K={n_masks} masks over T={n_rates} rates: the spare masks' rates need an rng")
        # systematic sampling: points u, u + T/extra, ... (spacing > 1, so at most one per rate)
        picks = np.floor((np.arange(extra) + rng.random()) * (n_rates / extra)).astype(np.int64)
        counts[np.minimum(picks, n_rates - 1)] += 1
    return counts


def _layout_order(counts: np.ndarray) -> np.ndarray:
    """Rate index of every mask, round by round over the rates that still have masks (``j mod T`` when every rate
    has the same count)."""
    return np.asarray(
        [k for r in range(int(counts.max(initial=0))) for k in range(len(counts)) if counts[k] > r],
        dtype=np.int64,
    )


def hidden_count(rate: float, length: int) -> int:
    """Tokens an exact-count mask hides at ``rate``: ``round(rate * L)`` (halves up), at least 1, at most L."""
    return int(min(length, max(1, np.floor(rate * length + 0.5))))


def _window(perm: np.ndarray, start: int, size: int) -> np.ndarray:
    out = np.zeros(perm.shape[0], dtype=bool)
    out[perm[(start + np.arange(size)) % perm.shape[0]]] = True
    return out


def _rate_layout(counts: np.ndarray, n_rates: int) -> tuple[dict[int, int], list[int], list[int]]:
    """(partner of each rate below 1, rates below 1/2 with masks at them or their partner, the rate 1/2)."""
    partner = {a: n_rates - 2 - a for a in range(n_rates - 1)}  # t_b = 1 - t_a (0-based rate indices)
    low = [a for a in range(n_rates - 1) if partner[a] > a and (counts[a] or counts[partner[a]])]
    mid = [a for a in range(n_rates - 1) if partner[a] == a and counts[a]]
    return partner, low, mid


def _tiles(low: list[int], sizes: list[int], length: int) -> list[list[int]]:
    """Low rates (t < 1/2) laid end to end along one permutation: disjoint windows while their (nominal) sizes add
    up to at most L; a new permutation starts when they would not."""
    groups: list[list[int]] = []
    total = 0
    for a in low:
        if groups and total + sizes[a] <= length:
            groups[-1].append(a)
            total += sizes[a]
        else:
            groups.append([a])
            total = sizes[a]
    return groups


def _assemble(per_rate, counts, partner, low, mid) -> MaskSet:
    """The MaskSet from per-rate lists of (hidden, unit, drawn empty), interleaved in the round-robin order of the
    paper (mask j at rate j mod T) so the layout is easy to read; strata: a rate pair, the rate 1/2, t = 1."""
    n_rates = len(counts)
    stratum_of_rate = np.zeros(n_rates, dtype=np.int64)
    for s_i, a in enumerate(low):
        stratum_of_rate[a] = stratum_of_rate[partner[a]] = s_i
    for s_i, a in enumerate(mid, start=len(low)):
        stratum_of_rate[a] = s_i
    stratum_of_rate[n_rates - 1] = len(low) + len(mid)
    hidden, rate_index, units, strata, empty = [], [], [], [], []
    taken = np.zeros(n_rates, dtype=np.int64)
    for k in _layout_order(counts):
        h, u, e = per_rate[k][taken[k]]
        taken[k] += 1
        hidden.append(h)
        rate_index.append(k)
        units.append(u)
        strata.append(stratum_of_rate[k])
        empty.append(e)
    return MaskSet(
        np.stack(hidden), np.asarray(rate_index), np.asarray(units), np.asarray(strata), np.asarray(empty)
    )


def binomial_quantiles(length: int, rates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One mask size per entry of ``rates``, each Binomial(L, rate) on its own, together stratified: the Binomial
    quantiles at ``u_d = (s_d + U_d) / N`` for a random order ``s`` of the N strata of (0, 1) and uniform ``U_d``
    (``u_d`` alone is uniform on [0, 1), whatever its stratum). The sizes of one item spread over their
    distributions together (a small draw at one rate goes with a large one at another), which cancels most of the
    size noise of the mean over the item's masks while every single size keeps its Binomial distribution."""
    n = len(rates)
    u = (rng.permutation(n) + rng.random(n)) / n
    out = np.empty(n, dtype=np.int64)
    for d, (rate, q) in enumerate(zip(rates, u, strict=True)):
        cdf = binom.cdf(np.arange(length + 1), length, rate)
        out[d] = min(int(np.searchsorted(cdf, q, side="left")), length)
    return out


def _one_token(perm: np.ndarray, off: int) -> np.ndarray:
    """The stand-in for a mask drawn empty: one token, uniformly chosen (a position of a random permutation)."""
    return _window(perm, off, 1)


def balanced_masks(length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    """Bernoulli(t_k) masks, coupled: antithetic pairs, stratified Binomial sizes, tiling (module docstring)."""
    _check(length, n_masks, n_rates)
    rates = rate_grid(n_rates)
    counts = masks_per_rate(n_masks, n_rates, rng)
    nominal = [hidden_count(float(r), length) for r in rates]  # layout only; the sizes are drawn
    partner, low, mid = _rate_layout(counts, n_rates)
    per_rate: list[list[tuple[np.ndarray, int, bool]]] = [[] for _ in range(n_rates)]
    groups = _tiles(low, nominal, length)
    n_of = {a: int(max(counts[a], counts[partner[a]])) for a in low}
    pairs_of = {a: -(-int(counts[a]) // 2) for a in mid}
    # every size draw of the item: (rate index, round) for the low rates (their partners take the complement),
    # (rate index, pair) for the rate 1/2; stratified together
    draws = [(a, j) for g in groups for a in g for j in range(n_of[a])]
    draws += [(a, p) for a in mid for p in range(pairs_of[a])]
    drawn = binomial_quantiles(length, np.asarray([rates[a] for a, _ in draws]), rng)
    size = {d: int(m) for d, m in zip(draws, drawn, strict=True)}
    unit = 0
    for g in groups:
        perm = rng.permutation(length)
        rounds = max(n_of[a] for a in g)
        half = -(-rounds // 2)
        for j in range(rounds):
            off = ((j // 2) * length) // half  # as exact_count_masks: opposite ends in consecutive rounds
            for a in g if j % 2 == 0 else g[::-1]:
                if j >= n_of[a]:
                    continue
                b, m = partner[a], size[(a, j)]
                w = _window(perm, off, m)
                if j < counts[a]:
                    per_rate[a].append((w, unit, False) if m else (_one_token(perm, off), unit, True))
                if j < counts[b]:  # the complement of a Bernoulli(t) mask is a Bernoulli(1 - t) mask
                    per_rate[b].append(
                        (~w, unit, False) if m < length else (_one_token(perm, off), unit, True)
                    )
                off += m
                unit += 1
    for a in mid:  # t = 1/2: masks two by two complements of each other, one unit each (conservative SE)
        perm = rng.permutation(length)
        n = int(counts[a])
        for p in range(pairs_of[a]):
            off, m = (p * length) // pairs_of[a], size[(a, p)]
            w = _window(perm, off, m)
            per_rate[a].append((w, unit, False) if m else (_one_token(perm, off), unit, True))
            unit += 1
            if 2 * p + 1 < n:
                per_rate[a].append((~w, unit, False) if m < length else (_one_token(perm, off), unit, True))
                unit += 1
    return _assemble_full(per_rate, counts, partner, low, mid, length, unit)


def _assemble_full(per_rate, counts, partner, low, mid, length: int, unit: int) -> MaskSet:
    """:func:`_assemble`, after the masks of the rate t = 1 (everything hidden, no randomness; units from
    ``unit`` on) are added: the common end of the tiled schemes."""
    for _ in range(counts[-1]):
        per_rate[-1].append((np.ones(length, dtype=bool), unit, False))
        unit += 1
    return _assemble(per_rate, counts, partner, low, mid)


def exact_count_masks(length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    """Exact-count, complementary, tiled masks (see the module docstring; not the paper's estimand). Draws the
    same random numbers as the former ``balanced`` scheme, so it reproduces its masks under the same seed."""
    _check(length, n_masks, n_rates)
    rates = rate_grid(n_rates)
    counts = masks_per_rate(n_masks, n_rates, rng)
    sizes = [hidden_count(float(r), length) for r in rates]
    partner, low, mid = _rate_layout(counts, n_rates)
    per_rate: list[list[tuple[np.ndarray, int, bool]]] = [[] for _ in range(n_rates)]
    unit = 0
    for g in _tiles(low, sizes, length):
        perm = rng.permutation(length)
        rounds = max(max(counts[a], counts[partner[a]]) for a in g)
        half = -(-rounds // 2)
        for j in range(rounds):
            # Round j: ascending rates in even rounds, descending in odd ones, so the small windows of two
            # consecutive rounds sit at opposite ends; pairs of rounds start at evenly spread offsets.
            off = ((j // 2) * length) // half
            for a in g if j % 2 == 0 else g[::-1]:
                b = partner[a]
                w = _window(perm, off, sizes[a])
                if j < counts[a]:
                    per_rate[a].append((w, unit, False))
                if j < counts[b]:
                    comp = ~w if length - sizes[a] >= 1 else _window(perm, off, sizes[b])
                    per_rate[b].append((comp, unit, False))
                off += sizes[a]
                unit += 1
    for a in mid:  # t = 1/2 paired with itself: evenly spread windows of one permutation, one unit each
        perm = rng.permutation(length)
        n = int(counts[a])
        for j in range(n):
            per_rate[a].append((_window(perm, (j * length) // n, sizes[a]), unit, False))
            unit += 1
    return _assemble_full(per_rate, counts, partner, low, mid, length, unit)


def independent_masks(length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    """The paper's estimator: Bernoulli(t_k) masks, independent, K/T per rate; a mask drawn empty hides one
    uniformly chosen token instead (and is flagged)."""
    _check(length, n_masks, n_rates)
    rates = rate_grid(n_rates)
    hidden = np.zeros((n_masks, length), dtype=bool)
    empty = np.zeros(n_masks, dtype=bool)
    rate_index = _layout_order(masks_per_rate(n_masks, n_rates, rng))
    for j in range(n_masks):
        h = rng.random(length) < rates[rate_index[j]]
        if not h.any():
            h[rng.integers(length)] = True
            empty[j] = True
        hidden[j] = h
    return MaskSet(hidden, rate_index, np.arange(n_masks), rate_index.copy(), empty)


def pll_masks(length: int) -> MaskSet:
    """Every single-token mask, in token order (deterministic)."""
    if length < 1:
        raise InputError("cannot build masks for an empty text")
    return MaskSet(
        np.eye(length, dtype=bool),
        np.full(length, -1, dtype=np.int64),
        np.arange(length),
        np.zeros(length, dtype=np.int64),
    )


def make_masks(scheme: str, length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    if scheme == "balanced":
        return balanced_masks(length, n_masks, n_rates, rng)
    if scheme == "exact-count":
        return exact_count_masks(length, n_masks, n_rates, rng)
    if scheme == "independent":
        return independent_masks(length, n_masks, n_rates, rng)
    if scheme == "pll":
        return pll_masks(length)
    if scheme in FEATURES:
        _check(length, n_masks, n_rates)
        return MaskSet(**stratified_masks(scheme, length, n_masks, n_rates, rng))
    raise InputError(f"unknown masking scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def _check(length: int, n_masks: int, n_rates: int) -> None:
    if length < 1:
        raise InputError("cannot build masks for an empty text")
    if n_masks < 1 or n_rates < 1:
        raise InputError(f"need at least one mask and one rate, got K={n_masks}, T={n_rates}")
