"""Masking patterns for the DiffScore Monte Carlo estimator.

A pattern set for one text of ``L`` scored tokens is a boolean matrix ``hidden[n_masks, L]`` plus, for every mask,
the index of its masking rate on the grid ``t_k = k / T`` (``k = 1..T``) and the sampling unit it belongs to (used
for the standard error). Three schemes:

``balanced`` (the default; goes beyond the paper)
    *Stratified rates*: every rate gets ``K // T`` masks and, when T does not divide K, the ``K mod T`` remaining
    masks go to rates picked by systematic sampling (a random offset, then every ``T / (K mod T)``-th rate), so
    every rate receives an extra mask with the same probability ``(K mod T) / T`` and the expected weight of every
    rate is exactly ``1 / T`` for any K >= 1 (with K < T an item's K masks sit at K distinct rates spread over
    the whole grid, and over items every rate is scored; a round-robin layout would only ever score the lowest K
    rates and bias the score towards them). When T divides K (the presets K=20/T=10 and K=5/T=5) every rate gets
    exactly K/T masks and nothing is drawn. *Exact counts*: a mask at rate ``t_k`` hides exactly ``m_k = clamp(floor(t_k * L + 1/2), 1, L)``
    tokens, so there is no noise from a random mask size (and no empty mask). *Complementary (antithetic) masks*:
    rate ``t_k`` is paired with rate ``1 - t_k`` (``k`` with ``T - k``); the j-th mask at ``1 - t_k`` is the
    complement of the j-th mask at ``t_k``, so every complementary pair hides every token exactly once and every
    token is hidden equally often. *Tiling*: the masks of the rates below 1/2 are cyclic windows laid end to end
    along one random permutation of the tokens (for T=10 the windows of 0.1, 0.2, 0.3 and 0.4 partition the
    text), ascending in even rounds and descending in odd ones, so the small, noisy masks of one item never
    overlap and cancel part of each other's token-sampling noise. The rate 1/2 (T even) takes windows of its own
    permutation at offsets ``0, L/2, ...`` (two of them are complements) and ``t = 1`` hides everything. Every
    single mask at rate ``t_k`` is still a uniformly random ``m_k``-subset, so the expectation is that of
    independent exact-count masks; only the variance drops.

``independent`` (the paper's estimator, DiffScore section 4.3 / appendix D.5)
    T evenly spaced rates ``t_k = k / T``, K/T masks at each (the ``K mod T`` others at systematically sampled
    rates, as above), each token hidden independently with probability
    ``t_k`` (Bernoulli). A mask that comes out empty hides one uniformly chosen token instead (the paper does not
    say what it does; an empty mask has no score).

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

from dlmeval.errors import InputError

SCHEMES = ("balanced", "independent", "pll")


@dataclass(frozen=True)
class MaskSet:
    """The masking patterns of one text.

    ``hidden``: bool ``[n, L]``; ``rate_index``: int ``[n]`` (0-based index into :func:`rate_grid`, ``-1`` for
    PLL); ``unit``: int ``[n]``, masks with the same unit id form one sampling unit (a complementary pair, or a
    single mask); ``stratum``: int ``[n]``, units of one stratum are exchangeable draws (one rate, or one rate
    pair), the standard error is computed stratum by stratum.
    """

    hidden: np.ndarray
    rate_index: np.ndarray
    unit: np.ndarray
    stratum: np.ndarray

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


def balanced_masks(length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    """Stratified, exact-count, complementary, tiled masks (see the module docstring)."""
    _check(length, n_masks, n_rates)
    rates = rate_grid(n_rates)
    counts = masks_per_rate(n_masks, n_rates, rng)
    sizes = [hidden_count(float(r), length) for r in rates]
    top = n_rates - 1  # t = 1
    partner = {a: n_rates - 2 - a for a in range(n_rates - 1)}  # t_b = 1 - t_a (0-based rate indices)
    low = [a for a in range(n_rates - 1) if partner[a] > a and (counts[a] or counts[partner[a]])]
    mid = [a for a in range(n_rates - 1) if partner[a] == a and counts[a]]
    per_rate: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(n_rates)]  # (hidden, unit)
    stratum_of_rate = np.zeros(n_rates, dtype=np.int64)
    unit = 0
    # Low rates (t < 1/2) are laid end to end along one permutation (a tiling: disjoint windows while their sizes
    # add up to at most L; a new permutation starts when they would not), their partners are the complements.
    groups: list[list[int]] = []
    total = 0
    for a in low:
        if groups and total + sizes[a] <= length:
            groups[-1].append(a)
            total += sizes[a]
        else:
            groups.append([a])
            total = sizes[a]
    for g in groups:
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
                    per_rate[a].append((w, unit))
                if j < counts[b]:
                    comp = ~w if length - sizes[a] >= 1 else _window(perm, off, sizes[b])
                    per_rate[b].append((comp, unit))
                off += sizes[a]
                unit += 1
    for a in mid:  # t = 1/2 paired with itself: evenly spread windows of one permutation, one unit each
        perm = rng.permutation(length)
        n = int(counts[a])
        for j in range(n):
            per_rate[a].append((_window(perm, (j * length) // n, sizes[a]), unit))
            unit += 1
    for _ in range(counts[top]):  # t = 1: everything hidden, no randomness
        per_rate[top].append((np.ones(length, dtype=bool), unit))
        unit += 1
    for s_i, a in enumerate(low):
        stratum_of_rate[a] = stratum_of_rate[partner[a]] = s_i
    for s_i, a in enumerate(mid, start=len(low)):
        stratum_of_rate[a] = s_i
    stratum_of_rate[top] = len(low) + len(mid)
    hidden, rate_index, units, strata = [], [], [], []
    # Interleave in the round-robin order of the paper (mask j at rate j mod T) so the layout is easy to read.
    taken = np.zeros(n_rates, dtype=np.int64)
    for k in _layout_order(counts):
        h, u = per_rate[k][taken[k]]
        taken[k] += 1
        hidden.append(h)
        rate_index.append(k)
        units.append(u)
        strata.append(stratum_of_rate[k])
    return MaskSet(np.stack(hidden), np.asarray(rate_index), np.asarray(units), np.asarray(strata))


def independent_masks(length: int, n_masks: int, n_rates: int, rng: np.random.Generator) -> MaskSet:
    """The paper's estimator: Bernoulli(t_k) masks, independent, K/T per rate; an empty mask hides one token."""
    _check(length, n_masks, n_rates)
    rates = rate_grid(n_rates)
    hidden = np.zeros((n_masks, length), dtype=bool)
    rate_index = _layout_order(masks_per_rate(n_masks, n_rates, rng))
    for j in range(n_masks):
        h = rng.random(length) < rates[rate_index[j]]
        if not h.any():
            h[rng.integers(length)] = True
        hidden[j] = h
    return MaskSet(hidden, rate_index, np.arange(n_masks), rate_index.copy())


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
    if scheme == "independent":
        return independent_masks(length, n_masks, n_rates, rng)
    if scheme == "pll":
        return pll_masks(length)
    raise InputError(f"unknown masking scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def _check(length: int, n_masks: int, n_rates: int) -> None:
    if length < 1:
        raise InputError("cannot build masks for an empty text")
    if n_masks < 1 or n_rates < 1:
        raise InputError(f"need at least one mask and one rate, got K={n_masks}, T={n_rates}")
