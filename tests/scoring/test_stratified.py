"""The low-variance estimator options (:mod:`dlmeval.scoring.stratified`, ``combined`` the default) estimate the
paper's quantity: proved by exact enumeration over every mask pattern of short texts on the tiny models.

``exact_scheme_expectation`` computes the expectation of a scheme's estimate with no sampling at all: each drawn
mask's (rate, size) cell distribution (:func:`slot_cells`, which the scheme's draws are checked against below),
times the mean value of every subset of that size (enumerated, with the control variate's term), weighted as the
scheme weights it, plus the exact pass at t = 1. It must equal the paper's exact expectation
(``test_estimator_paper.exact_paper_expectation``) to rounding, for every weighting.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from dlmeval.models import tiny_model
from dlmeval.scoring import DiffScorer, EstimatorSpec
from dlmeval.scoring.masks import MaskSet, make_masks, rate_grid
from dlmeval.scoring.spec import mask_values
from dlmeval.scoring.stratified import (
    CONTROL_BETA,
    FEATURES,
    joint_cells,
    proposal,
    slot_cells,
    slot_weights,
)
from tests.scoring.test_estimator_paper import CAND, _pattern_logprobs, _simulate, exact_paper_expectation

NEW = tuple(FEATURES)  # reuse, stratified, antithetic, control, importance, combined
TEXT9 = "the cat sat on the mat in the house"


@pytest.fixture(scope="module")
def plain():
    return tiny_model("llada", seed=1)


def _subset_means(table, n):
    """For every size m = 1..L: the mean over all m-subsets of (mean lp, sum lp, sum b) with b the full mask's."""
    b = table[tuple(range(n))]
    out = {}
    for m in range(1, n + 1):
        subs = list(itertools.combinations(range(n), m))
        out[m] = (
            float(np.mean([table[s].mean() for s in subs])),
            float(np.mean([table[s].sum() for s in subs])),
            float(np.mean([b[list(s)].sum() for s in subs])),
        )
    return out, b


def exact_scheme_expectation(table, n, scheme, k, t, weighting):
    """E[score] of ``scheme`` with no sampling (module docstring); K >= 2, T >= 2."""
    feats = FEATURES[scheme]
    sub, b = _subset_means(table, n)
    singles = float(np.mean([table[(i,)].mean() for i in range(n)]))  # an empty draw under MLP
    norm = n if weighting == "elbo_norm" else 1
    n_drawn, w0 = slot_weights(k, t)
    p = joint_cells(n, t)
    imp = "importance" in feats
    q = proposal(n, t) if imp else p
    dist = slot_cells(q, n_drawn, stratify="stratify" in feats, antithetic="antithetic" in feats)
    rates = rate_grid(t)
    total = 0.0
    for j in range(n_drawn):
        e_size = 0.0  # E[|M| / t] of the slot: the ELBO control's mean
        val = ctl = 0.0
        for ki in range(t - 1):
            for m in range(n + 1):
                pr = dist[j, ki, m]
                if pr == 0.0:
                    continue
                r = p[ki, m] / q[ki, m] if imp else 1.0
                tk = rates[ki]
                e_size += pr * m / tk
                if weighting == "mlp":
                    val += pr * r * (singles if m == 0 else sub[m][0])
                    ctl += pr * 0.0  # mean of b over a uniform subset (or one uniform token) is mean(b)
                else:
                    val += pr * r * (0.0 if m == 0 else sub[m][1] / tk)
                    ctl += pr * (0.0 if m == 0 else sub[m][2] / tk)
        if "control" in feats and weighting != "mlp":
            val -= CONTROL_BETA * (ctl - e_size * b.mean())
        total += w0 * val / norm
    full = b.mean() if weighting == "mlp" else b.sum() / norm
    return total + full / t


# ---------------------------------------------------------------------------------------------------- exact
@pytest.mark.parametrize("scheme", NEW)
@pytest.mark.parametrize("n,k,t", [(4, 8, 10), (4, 20, 10), (5, 5, 5), (3, 2, 2), (6, 16, 10)])
def test_slot_distributions_average_to_the_papers_joint_exactly(scheme, n, k, t):
    feats = FEATURES[scheme]
    n_drawn, _ = slot_weights(k, t)
    q = proposal(n, t) if "importance" in feats else joint_cells(n, t)
    dist = slot_cells(q, n_drawn, stratify="stratify" in feats, antithetic="antithetic" in feats)
    assert dist.shape == (n_drawn, t - 1, n + 1)
    np.testing.assert_allclose(dist.sum(axis=(1, 2)), 1.0, atol=1e-12)
    np.testing.assert_allclose(dist.mean(axis=0), q / q.sum(), atol=1e-12)
    if "stratify" in feats and n_drawn > 2:  # the check can fail: the first stratum alone is not the joint
        assert np.abs(dist[0] - q / q.sum()).max() > 0.01


@pytest.mark.parametrize("weighting", ["mlp", "elbo", "elbo_norm"])
@pytest.mark.parametrize("k,t", [(8, 10), (20, 10), (5, 5), (4, 10), (2, 2)])
def test_every_new_scheme_has_the_papers_exact_expectation(peaky, weighting, k, t):
    """Exact enumeration, no sampling: every scheme's expectation is the paper's to rounding."""
    table, n = _pattern_logprobs(peaky, CAND)
    paper = exact_paper_expectation(table, n, t, t, weighting)  # the expectation does not depend on K
    for scheme in NEW:
        got = exact_scheme_expectation(table, n, scheme, k, t, weighting)
        assert got == pytest.approx(paper, rel=1e-9, abs=1e-9), (scheme, got, paper)


def test_the_exact_check_fails_for_a_plain_mean_of_the_combined_masks(peaky):
    """The check can fail: the same masks averaged plainly (the t = 1 pass as one of K equal masks, not with its
    weight 1 / T) have another exact expectation, far beyond rounding."""
    table, n = _pattern_logprobs(peaky, CAND)
    paper = exact_paper_expectation(table, n, 10, 10, "mlp")
    total = exact_scheme_expectation(table, n, "combined", 8, 10, "mlp")
    full = table[tuple(range(n))].mean()
    n_drawn, w0 = slot_weights(8, 10)
    drawn = (total - full / 10) / w0  # the sum of the drawn masks' expectations
    plain = (drawn + full) / 8
    assert abs(plain - paper) > 0.1, (plain, paper)  # the exact check allows 1e-9 relative


@pytest.mark.parametrize("scheme", ["combined", "antithetic", "importance"])
def test_drawn_masks_follow_their_slot_distributions_and_are_uniform_given_size(scheme):
    """Chi-square, 3000 seeded mask sets (L = 4, K = 8, T = 10): each drawn mask's (rate, size) cell against
    :func:`slot_cells`, and given its size, which tokens it hides against the uniform subsets."""
    n, k, t, draws = 4, 8, 10, 3000
    feats = FEATURES[scheme]
    n_drawn, _ = slot_weights(k, t)
    q = proposal(n, t) if "importance" in feats else joint_cells(n, t)
    dist = slot_cells(q, n_drawn, stratify="stratify" in feats, antithetic="antithetic" in feats)
    sets = [make_masks(scheme, n, k, t, np.random.default_rng([11, d])) for d in range(draws)]
    for j in (0, 1, n_drawn - 1):
        cells = np.zeros((t - 1, n + 1))
        by_size: dict[int, dict[tuple, int]] = {}
        for ms in sets:
            h = ms.hidden[j]
            m = 0 if ms.drawn_empty()[j] else int(h.sum())
            cells[ms.rate_index[j], m] += 1
            key = tuple(np.flatnonzero(h))
            by_size.setdefault(int(h.sum()), {})
            by_size[int(h.sum())][key] = by_size[int(h.sum())].get(key, 0) + 1
        keep = dist[j] > 0
        assert cells[~keep].sum() == 0
        if keep.sum() > 1:
            assert chisquare(cells[keep], dist[j][keep] * draws).pvalue > 1e-4, (scheme, j)
        for m, counts in by_size.items():
            if 0 < m < n and sum(counts.values()) > 50:
                full = [counts.get(s, 0) for s in itertools.combinations(range(n), m)]
                assert chisquare(full).pvalue > 1e-4, (scheme, j, m, full)
    assert all(ms.weights().sum() == pytest.approx(1.0) for ms in sets) or scheme == "importance"


# ---------------------------------------------------------------------------------------------------- sampled
@pytest.mark.parametrize("weighting", ["mlp", "elbo"])
def test_new_schemes_monte_carlo_means_equal_the_exact_expectation(peaky, weighting):
    """The implementation end to end on the enumerated table: 1,500 seeded estimates of every scheme, within 4
    standard errors of the paper's exact expectation (4 tokens: 15 patterns)."""
    table, n = _pattern_logprobs(peaky, CAND)
    exact = exact_paper_expectation(table, n, 10, 10, weighting)
    for scheme in NEW:
        est = _simulate_weighted(table, n, scheme, 8, 10, weighting, draws=1500)
        se = est.std(ddof=1) / math.sqrt(len(est))
        assert se > 0 and abs(est.mean() - exact) < 4 * se, (scheme, est.mean(), exact, se)


def _simulate_weighted(table, n, scheme, k, t, weighting, draws):
    spec = EstimatorSpec(k, t, scheme, weighting)
    full = table[tuple(range(n))]
    out = np.empty(draws)
    for d in range(draws):
        ms = make_masks(scheme, n, k, t, np.random.default_rng([17, d]))
        sums = np.array([table[tuple(np.flatnonzero(h))].sum() for h in ms.hidden])
        out[d] = ms.weights() @ mask_values(sums, ms, spec, full)
    return out


def test_combined_has_under_half_the_papers_variance_at_8_passes(plain):
    """9 tokens (511 patterns), K = 8, T = 10: the default against the paper's estimator, MLP and ELBO."""
    table, n = _pattern_logprobs(plain, TEXT9)
    for weighting, bound in (("mlp", 0.5), ("elbo", 0.2)):
        paper = _simulate(table, n, "independent", 8, 10, weighting, draws=1500)
        comb = _simulate_weighted(table, n, "combined", 8, 10, weighting, draws=1500)
        exact = exact_paper_expectation(table, n, 10, 10, weighting)
        assert abs(comb.mean() - exact) < 4 * comb.std(ddof=1) / math.sqrt(len(comb))
        assert comb.var() < bound * paper.var(), (weighting, comb.var() / paper.var())


def test_scorer_default_is_combined_and_its_weights_reach_the_score(peaky):
    """The default scorer's score is the weighted sum of its masks' values, recomputed by hand; the control
    variate reads the t = 1 row; the signature names the scheme, so the default's runs are new runs."""
    table, n = _pattern_logprobs(peaky, CAND)
    s = DiffScorer(peaky, n_masks=8, n_rates=10)
    assert s.spec.scheme == "combined" and EstimatorSpec().scheme == "combined"
    cfg = s.run_config("marginal")
    assert cfg["scheme"] == "combined" and "control variate" in cfg["masking"] and cfg["preset"] is None
    assert DiffScorer(peaky).run_config("marginal")["preset"] == "standard"
    bal = DiffScorer(peaky, n_masks=8, n_rates=10, scheme="balanced")
    assert s.signature("marginal").run_id != bal.signature("marginal").run_id
    ms = s._masks_for("x1", "candidate", n)
    assert isinstance(ms, MaskSet) and ms.control == ms.n_masks - 1 and ms.hidden[ms.control].all()
    b = table[tuple(range(n))]
    hand = 0.0
    for h, w in zip(ms.hidden, ms.weights(), strict=True):
        lp = table[tuple(np.flatnonzero(h))]
        hand += w * (lp.mean() - CONTROL_BETA * (b[h].mean() - b.mean()))
    got = float(s.score([CAND], config="marginal", item_ids=["x1"])["score"][0])
    assert got == pytest.approx(hand, abs=1e-4)
    assert s.rows_scored <= 8
