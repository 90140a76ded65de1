"""The paper's estimator (``--preset paper``) and the default's claim to estimate the same quantity.

Every expectation here is computed exactly, by enumerating every mask pattern of a short text with its probability
under the paper's mask distribution (each token hidden with probability t_k; an empty draw hides one uniform
token) and the log-probabilities of the tiny model for every pattern, brute force.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.scoring import PRESETS, SCHEMES, WEIGHTINGS, DiffScorer, EstimatorSpec, resolve_estimator
from dlmeval.scoring.masks import MaskSet, hidden_count, make_masks, masks_per_rate, rate_grid
from dlmeval.scoring.spec import mask_values
from tests.scoring.test_scoring import _subset_logprobs

CAND = "the cat sat on"  # L = 4 candidate tokens on the tiny LLaDA tokenizer: 15 non-empty patterns


@pytest.fixture(scope="module")
def plain():
    return tiny_model("llada", seed=1)


def _pattern_logprobs(model, text):
    """{pattern (tuple of hidden positions): log p of each hidden token} for every non-empty pattern (the brute
    force of tests/scoring/test_scoring.py)."""
    layout = DiffScorer(model).formatter.layout("marginal", text, None)
    sub, n = _subset_logprobs(model, layout)
    return {tuple(sorted(s)): v for s, v in sub.items()}, n


def _paper_pattern_probs(n, rate):
    """P(pattern) of one mask at ``rate`` under the paper's distribution, and P(drawn empty)."""
    probs = {s: rate ** len(s) * (1 - rate) ** (n - len(s)) for s in _patterns(n)}
    return probs, (1 - rate) ** n


def _patterns(n):
    return [s for r in range(1, n + 1) for s in itertools.combinations(range(n), r)]


def exact_paper_expectation(table, n, k, t, weighting):
    """E[score] of the paper's estimator: sum over rates (share K_k / K) and patterns of P(pattern) * value."""
    total = 0.0
    for r_i, rate in enumerate(rate_grid(t)):
        probs, p_empty = _paper_pattern_probs(n, rate)
        e = 0.0
        for s, p in probs.items():
            if weighting == "mlp":  # an empty draw becomes a uniformly chosen single token
                e += (p + (p_empty / n if len(s) == 1 else 0.0)) * table[s].mean()
            else:  # 1/t (1/(t L)); an empty draw is the empty sum 0
                e += p * table[s].sum() / (rate * (n if weighting == "elbo_norm" else 1))
        total += masks_per_rate(k, t)[r_i] / k * e
    return total


def exact_count_expectation(table, n, k, t):
    """E[score] of exact-count masks (MLP): the mean log-prob over every pattern of the mask's fixed size
    (round(t L) below 1/2, the complement's L - round((1 - t) L) above)."""
    rates = rate_grid(t)
    total = 0.0
    for r_i, rate in enumerate(rates):
        low = t - 2 - r_i  # the partner rate 1 - t (0-based), when there is one
        m = hidden_count(rate, n)
        if 0 <= low < r_i and n - hidden_count(rates[low], n) >= 1:
            m = n - hidden_count(rates[low], n)
        vals = [table[s].mean() for s in _patterns(n) if len(s) == m]
        total += masks_per_rate(k, t)[r_i] / k * float(np.mean(vals))
    return total


def _simulate(table, n, scheme, k, t, weighting, draws):
    """Estimates from ``draws`` independent mask sets, read off the enumerated table (no model calls)."""
    spec = EstimatorSpec(k, t, scheme, weighting)
    out = np.empty(draws)
    for d in range(draws):
        ms = make_masks(scheme, n, k, t, np.random.default_rng([17, d]))
        sums = np.array([table[tuple(np.flatnonzero(h))].sum() for h in ms.hidden])
        out[d] = mask_values(sums, ms, spec).mean()
    return out


# ---------------------------------------------------------------------------------------------------- presets
def test_paper_preset_is_the_papers_estimator(plain):
    # DiffScore appendix D.5: K = 20 patterns over T = 10 evenly spaced rates in (0, 1], drawn independently and
    # uniformly at random; DiffScore-Fast K = 5, T = 5; MLP weighting by default (section 6.5, appendix R.1)
    assert EstimatorSpec.paper() == EstimatorSpec(20, 10, "independent", "mlp") == PRESETS["paper"]
    assert EstimatorSpec.paper(fast=True) == EstimatorSpec(5, 5, "independent", "mlp")
    assert rate_grid(10).tolist() == pytest.approx([k / 10 for k in range(1, 11)])
    assert masks_per_rate(20, 10).tolist() == [2] * 10 and masks_per_rate(5, 5).tolist() == [1] * 5
    s = DiffScorer.paper(plain)
    assert s.spec == EstimatorSpec.paper() and DiffScorer.paper(plain, fast=True).spec.n_masks == 5
    assert DiffScorer.from_preset(plain, "default").spec == EstimatorSpec() == PRESETS["standard"]
    rec = s.run_config("cond")
    assert (
        rec["preset"] == "paper" and rec["masking"] == "bernoulli, independent" and rec["weight"] == "1/|M|"
    )
    # the same settings spelled out are the same run (the record is the settings, not the flag)
    same = DiffScorer(plain, scheme="independent")
    assert same.signature("cond").run_id == s.signature("cond").run_id
    assert DiffScorer(plain).signature("cond").run_id != s.signature("cond").run_id


def test_resolve_estimator_overrides_and_refusals():
    assert resolve_estimator("paper", fast=True) == PRESETS["paper-fast"]
    assert resolve_estimator(None, fast=True) == PRESETS["fast"]
    over = resolve_estimator("paper", weighting="elbo", n_masks=40)
    assert over == EstimatorSpec(40, 10, "independent", "elbo") and over.preset_name() is None
    assert resolve_estimator("PAPER").preset_name() == "paper"
    with pytest.raises(InputError, match="unknown estimator preset 'papr'"):
        resolve_estimator("papr")
    with pytest.raises(InputError, match="weighting"):
        resolve_estimator("paper", weighting="elbo2")
    with pytest.raises(InputError, match="n_masks"):
        resolve_estimator("paper", n_masks=0)
    with pytest.raises(InputError, match="set by the estimator spec"):
        DiffScorer.from_spec(object(), EstimatorSpec(), scheme="pll")


def test_cli_choices_match_the_estimator():
    """The command line's choices are the estimator's names (dlmeval.scoring.names, the one list of each)."""
    import argparse

    from dlmeval.cli.options import add_estimator_group

    p = argparse.ArgumentParser()
    add_estimator_group(p)
    choices = {a.dest: tuple(a.choices) for a in p._actions if a.choices is not None}
    assert choices["preset"] == ("default", *PRESETS)
    assert choices["scheme"] == SCHEMES and choices["weighting"] == WEIGHTINGS


# ---------------------------------------------------------------------------------------------------- masks
@pytest.mark.parametrize("scheme", ["independent", "balanced"])
@pytest.mark.parametrize("n,k,t", [(3, 10, 5), (4, 20, 10)])
def test_every_mask_has_the_papers_bernoulli_distribution(scheme, n, k, t):
    """Chi-square of the pattern frequencies of the first and the last mask at each rate over 3000 seeded mask
    sets against the paper's probabilities (an empty draw counted as the single token that replaces it)."""
    draws = 3000
    sets = [make_masks(scheme, n, k, t, np.random.default_rng([5, d])) for d in range(draws)]
    pats = _patterns(n)
    index = {s: i for i, s in enumerate(pats)}
    for r_i, rate in enumerate(rate_grid(t)):
        probs, p_empty = _paper_pattern_probs(n, rate)
        want = np.array([probs[s] + (p_empty / n if len(s) == 1 else 0.0) for s in pats])
        for pick in (0, -1):
            got = np.zeros(len(pats))
            for ms in sets:
                h = ms.hidden[np.flatnonzero(ms.rate_index == r_i)[pick]]
                got[index[tuple(np.flatnonzero(h))]] += 1
            keep = want > 0
            if keep.sum() == 1:  # t = 1: one pattern, certain
                assert got[keep][0] == draws
                continue
            p = chisquare(got[keep], want[keep] * draws).pvalue
            assert p > 1e-4, (scheme, rate, pick, p)


def test_exact_count_masks_fail_the_bernoulli_check():
    """The check above can fail: exact-count masks (the former default) have fixed sizes."""
    sets = [make_masks("exact-count", 4, 20, 10, np.random.default_rng([5, d])) for d in range(300)]
    sizes = {int(ms.hidden[np.flatnonzero(ms.rate_index == 4)[0]].sum()) for ms in sets}
    assert sizes == {2}  # t = 0.5 of 4 tokens: always 2, never the Binomial(4, 0.5) spread


# ---------------------------------------------------------------------------------------------------- expectation
@pytest.mark.parametrize("weighting", ["mlp", "elbo", "elbo_norm"])
@pytest.mark.parametrize("k,t", [(20, 10), (5, 5)])
def test_paper_and_balanced_expectations_equal_exact_enumeration(peaky, weighting, k, t):
    table, n = _pattern_logprobs(peaky, CAND)
    assert n == 4
    exact = exact_paper_expectation(table, n, k, t, weighting)
    for scheme in ("independent", "balanced"):
        est = _simulate(table, n, scheme, k, t, weighting, draws=1500)
        se = est.std(ddof=1) / math.sqrt(len(est))
        assert se > 0 and abs(est.mean() - exact) < 4 * se, (scheme, est.mean(), exact, se)


def test_exact_count_estimates_another_quantity(peaky):
    """Why exact-count cannot be the default: its expectation (also exact) is not the paper's, and its Monte
    Carlo mean is many standard errors away from the paper's expectation."""
    table, n = _pattern_logprobs(peaky, CAND)
    paper = exact_paper_expectation(table, n, 20, 10, "mlp")
    ec = exact_count_expectation(table, n, 20, 10)
    est = _simulate(table, n, "exact-count", 20, 10, "mlp", draws=600)
    se = est.std(ddof=1) / math.sqrt(len(est))
    assert abs(est.mean() - ec) < 4 * se
    assert abs(ec - paper) > 0.5 and abs(est.mean() - paper) > 10 * se


def test_scorer_monte_carlo_mean_converges_to_exact_enumeration(peaky):
    """End to end through DiffScorer.paper and the default scorer: 60 independent estimates (one per item id)
    against the exact expectation of the paper's estimator, within 3.5 standard errors of their mean."""
    table, n = _pattern_logprobs(peaky, CAND)
    exact = exact_paper_expectation(table, n, 20, 10, "mlp")
    ids = [f"r{i}" for i in range(60)]
    for scorer in (DiffScorer.paper(peaky, seed=2), DiffScorer(peaky, seed=2)):
        est = scorer.score([CAND] * len(ids), config="marginal", item_ids=ids)["score"].to_numpy()
        se = est.std(ddof=1) / math.sqrt(len(est))
        assert est.std() > 1e-3 and abs(est.mean() - exact) < 3.5 * se, (scorer.spec, est.mean(), exact, se)


def test_balanced_has_lower_variance_than_the_paper_on_a_longer_text(plain):
    """The default's reason to exist: same expectation, smaller variance (9 tokens, every pattern enumerated)."""
    table, n = _pattern_logprobs(plain, "the cat sat on the mat in the house")
    assert n == 9
    ind = _simulate(table, n, "independent", 20, 10, "mlp", draws=1500)
    bal = _simulate(table, n, "balanced", 20, 10, "mlp", draws=1500)
    exact = exact_paper_expectation(table, n, 20, 10, "mlp")
    for est in (ind, bal):
        assert abs(est.mean() - exact) < 4 * est.std(ddof=1) / math.sqrt(len(est))
    assert bal.var() < 0.85 * ind.var(), (bal.var(), ind.var())


# ---------------------------------------------------------------------------------------------------- weighting
def test_mlp_elbo_and_elbo_norm_on_fixed_masks_by_hand():
    # L = 4, T = 5 (rates 0.2 .. 1.0); masks: {0} at 0.2, {1, 2} at 0.4, {0} at 0.2 drawn empty, all at 1.0
    hidden = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    ms = MaskSet(
        hidden, np.array([0, 1, 0, 4]), np.arange(4), np.array([0, 1, 0, 4]), np.array([0, 0, 1, 0], bool)
    )
    sums = np.array([-2.0, -3.0, -2.0, -8.0])
    mlp = mask_values(sums, ms, EstimatorSpec(4, 5, "independent", "mlp"))
    elbo = mask_values(sums, ms, EstimatorSpec(4, 5, "independent", "elbo"))
    norm = mask_values(sums, ms, EstimatorSpec(4, 5, "independent", "elbo_norm"))
    np.testing.assert_allclose(mlp, [-2.0, -1.5, -2.0, -2.0])  # sum / |M|
    np.testing.assert_allclose(elbo, [-10.0, -7.5, 0.0, -8.0])  # sum / t; the empty draw is 0
    np.testing.assert_allclose(norm, np.array([-10.0, -7.5, 0.0, -8.0]) / 4)  # sum / (t L)
    # the two weightings differ by exactly |M| / t per mask (where the mask was not drawn empty)
    ok = ~ms.drawn_empty()
    np.testing.assert_allclose(elbo[ok], mlp[ok] * hidden[ok].sum(axis=1) / rate_grid(5)[ms.rate_index[ok]])


def test_scorer_weightings_match_hand_computation_on_its_own_masks(peaky):
    """The scores of one item under mlp / elbo / elbo_norm (same masks: the weighting is not in the mask seed),
    recomputed by hand from its masks and the enumerated log-probs; the item has a mask drawn empty."""
    table, n = _pattern_logprobs(peaky, CAND)
    item = next(
        f"e{i}"
        for i in range(200)
        if DiffScorer(peaky, n_masks=10, n_rates=5, scheme="independent")
        ._masks_for(f"e{i}", "candidate", n)
        .drawn_empty()
        .any()
    )
    got = {}
    for w in ("mlp", "elbo", "elbo_norm"):
        s = DiffScorer(peaky, n_masks=10, n_rates=5, scheme="independent", weighting=w)
        ms = s._masks_for(item, "candidate", n)
        hand = []
        for h, r, e in zip(ms.hidden, ms.rate_index, ms.drawn_empty(), strict=True):
            lp = table[tuple(np.flatnonzero(h))]
            t = rate_grid(5)[r]
            hand.append(
                {
                    "mlp": lp.mean(),
                    "elbo": 0.0 if e else lp.sum() / t,
                    "elbo_norm": 0.0 if e else lp.sum() / (t * n),
                }[w]
            )
        got[w] = float(s.score([CAND], config="marginal", item_ids=[item])["score"][0])
        assert got[w] == pytest.approx(float(np.mean(hand)), abs=1e-4)
    assert got["elbo"] == pytest.approx(n * got["elbo_norm"], rel=1e-9)
    assert abs(got["elbo"] - n * got["mlp"]) > 1.0  # under Bernoulli masks the ELBO is not L x MLP


# ---------------------------------------------------------------------------------------------------- CLIs
def test_cli_score_preset_paper_records_the_resolved_settings(capsys):
    from dlmeval.cli.main import main

    base = ["--no-progress", "score", "--model", "tiny-bert", "--config", "marginal", "--text", "--no-store"]
    assert main([*base, "--candidates", "the cat sat on the mat", "--preset", "paper", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg = out["config"]
    assert out["preset"] == "paper" and cfg["preset"] == "paper"
    assert (cfg["n_masks"], cfg["n_rates"], cfg["scheme"], cfg["weighting"]) == (20, 10, "independent", "mlp")
    assert cfg["masking"] == "bernoulli, independent" and len(out["rates"]) == 10
    assert main([*base, "--candidates", "the cat", "--preset", "paper", "--fast", "-K", "6", "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert (cfg["n_masks"], cfg["n_rates"], cfg["scheme"], cfg["preset"]) == (6, 5, "independent", None)
    assert main([*base, "--candidates", "the cat", "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert (cfg["scheme"], cfg["preset"]) == ("combined", "standard")
    with pytest.raises(SystemExit):  # argparse refuses an unknown preset
        main([*base, "--candidates", "the cat", "--preset", "papr"])


def test_meta_eval_preset_reaches_the_suite_options():
    from dlmeval.cli.main import build_parser
    from dlmeval.cli.meta_eval import _options
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    def opts(*flags):
        return _options(build_parser().parse_args(["meta-eval", *flags]))

    assert opts("--preset", "paper").estimator() == {
        "n_masks": 20,
        "n_rates": 10,
        "scheme": "independent",
        "weighting": "mlp",
    }
    assert opts("--preset", "paper", "--fast", "--weighting", "elbo").estimator() == {
        "n_masks": 5,
        "n_rates": 5,
        "scheme": "independent",
        "weighting": "elbo",
    }
    assert opts().estimator()["scheme"] == "combined" and opts("--fast").estimator()["n_masks"] == 5
    with pytest.raises(InputError, match="unknown estimator preset"):
        SuiteOptions(preset="nope").check()
