"""RDI, AURDI, the chance guard and the DLM-vs-AR comparison against hand-computed values."""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.robustness.metrics import accuracy, aurdi, clean_guard, compare, rdi, summarize
from dlmeval.robustness.perturb import Perturbation


def bools(k: int, n: int) -> list[bool]:
    return [True] * k + [False] * (n - k)


def test_rdi_is_relative_degradation_and_not_clipped():
    assert rdi(0.8, 0.6) == pytest.approx(0.25)
    assert rdi(0.625, 0.434) == pytest.approx(
        0.3056, abs=1e-4
    )  # LLaDA GSM8K, Table 1: clean 0.625, Acc_r 0.434
    assert rdi(0.5, 0.6) == pytest.approx(-0.2)  # better under noise: negative, kept
    assert rdi(0.4, 0.0) == 1.0
    assert math.isnan(rdi(0.0, 0.0))
    with pytest.raises(InputError, match="must lie in"):
        rdi(1.2, 0.5)


def test_aurdi_riemann_is_eq3_normalised_by_the_largest_rate():
    rates, rdis = (0.05, 0.10, 0.20, 0.30), (0.1, 0.2, 0.4, 0.6)
    # 0.1*0.05 + 0.2*0.05 + 0.4*0.1 + 0.6*0.1 = 0.115; / 0.3
    assert aurdi(rates, rdis, normalize=False) == pytest.approx(0.115)
    assert aurdi(rates, rdis) == pytest.approx(0.115 / 0.3)
    # trapezoid from (0, 0): 0.0025 + 0.0075 + 0.03 + 0.05 = 0.09; / 0.3
    assert aurdi(rates, rdis, rule="trapezoid", normalize=False) == pytest.approx(0.09)
    assert aurdi(rates, rdis, rule="trapezoid") == pytest.approx(0.3)
    # word-level rates: the Riemann AURDI is the plain mean of the RDIs
    assert aurdi((0.1, 0.2, 0.3), (0.3, 0.6, 0.9)) == pytest.approx(0.6)
    assert aurdi((0.3, 0.1, 0.2), (0.9, 0.3, 0.6)) == pytest.approx(0.6)  # order does not matter
    assert aurdi((0.05, 0.1, 0.2, 0.3), (0.5,) * 4) == pytest.approx(0.5)  # a constant RDI keeps its value
    assert math.isnan(aurdi((0.1, 0.2), (float("nan"), 0.2)))


@pytest.mark.parametrize(
    "rates, rdis, rule, msg",
    [
        ((0.1, 0.2), (0.1,), "riemann", "one RDI per rate"),
        ((0.0, 0.2), (0.1, 0.2), "riemann", "distinct and lie in"),
        ((0.2, 0.2), (0.1, 0.2), "riemann", "distinct"),
        ((0.1,), (0.1,), "simpson", "unknown AURDI rule"),
    ],
)
def test_aurdi_rejects_bad_input(rates, rdis, rule, msg):
    with pytest.raises(InputError, match=msg):
        aurdi(rates, rdis, rule=rule)


def test_accuracy_checks_its_input():
    assert accuracy([True, False, True, True]) == 0.75
    assert accuracy([1, 0]) == 0.5
    with pytest.raises(InputError, match="empty"):
        accuracy([])
    with pytest.raises(InputError, match="0/1"):
        accuracy([0.5, 1])


def test_chance_guard_is_an_exact_one_sided_binomial_test():
    # P(X >= 30 | Bin(100, 0.25)) by hand
    p30 = sum(math.comb(100, k) * 0.25**k * 0.75 ** (100 - k) for k in range(30, 101))
    g = clean_guard(30, 100, 0.25)
    assert g.p_value == pytest.approx(p30, rel=1e-9) and round(p30, 4) == 0.1495
    assert not g.above_chance and "not above chance" in g.warning and "0.300" in g.warning
    p35 = sum(math.comb(100, k) * 0.25**k * 0.75 ** (100 - k) for k in range(35, 101))
    g = clean_guard(35, 100, 0.25)
    assert g.p_value == pytest.approx(p35, rel=1e-9) and p35 < 0.05 and g.above_chance and g.warning is None
    # open-answer tasks: chance 0; any correct answer is above it
    assert not clean_guard(0, 200, 0.0).above_chance and clean_guard(0, 200, 0.0).p_value == 1.0
    assert clean_guard(1, 200, 0.0).above_chance
    with pytest.raises(InputError, match="chance accuracy"):
        clean_guard(1, 10, 1.0)
    with pytest.raises(InputError):
        clean_guard(11, 10, 0.25)


def test_summary_of_a_sweep_by_hand():
    clean = bools(8, 10)  # 0.8
    perturbed = {
        "char.keyboard@0.05": bools(8, 10),  # RDI 0
        "char.keyboard@0.10": bools(6, 10),  # 0.25
        "char.keyboard@0.20": bools(4, 10),  # 0.5
        Perturbation.of("keyboard", 0.3): bools(2, 10),  # 0.75
        "word.repetition@0.10": bools(7, 10),  # 0.125
        "word.repetition@0.20": bools(8, 10),  # 0
        "word.repetition@0.30": bools(9, 10),  # -0.125
    }
    s = summarize(clean, perturbed, chance=0.0)
    assert s.clean_accuracy == 0.8 and s.clean_n == 10 and s.meaningful and s.warnings == ()
    r = s.rdi_by_key()
    assert r["char.keyboard@0.30"] == pytest.approx(0.75) and r["word.repetition@0.30"] == pytest.approx(
        -0.125
    )
    # (0*0.05 + 0.25*0.05 + 0.5*0.1 + 0.75*0.1) / 0.3
    assert s.aurdi["char.keyboard"] == pytest.approx(0.1375 / 0.3)
    assert s.aurdi["word.repetition"] == pytest.approx(0.0, abs=1e-12)
    assert s.mean_rdi == pytest.approx(1.5 / 7)
    assert s.mean_accuracy == pytest.approx(4.4 / 7)
    d = s.as_dict()
    assert d["meaningful"] is True and len(d["conditions"]) == 7 and d["aurdi_rule"] == "riemann"
    t = summarize(clean, perturbed, chance=0.0, aurdi_rule="trapezoid")
    # trapezoid from (0,0): (0+0)/2*0.05 + (0+0.25)/2*0.05 + (0.25+0.5)/2*0.1 + (0.5+0.75)/2*0.1 = 0.10625
    assert t.aurdi["char.keyboard"] == pytest.approx(0.10625 / 0.3)


def test_summary_flags_a_model_at_chance():
    # ARC with 27/100 correct: indistinguishable from guessing among 4 options
    s = summarize(bools(27, 100), {"char.keyboard@0.10": bools(20, 100)}, chance=0.25)
    assert not s.meaningful and len(s.warnings) == 1 and "not meaningful" in s.warnings[0]
    assert s.rdi_by_key()["char.keyboard@0.10"] == pytest.approx(7 / 27)  # still computed, but flagged


def test_summary_rejects_duplicate_conditions():
    with pytest.raises(InputError, match="twice"):
        summarize(
            bools(5, 10), {"char.keyboard@0.10": bools(5, 10), "keyboard@0.1": bools(4, 10)}, chance=0.0
        )


def _sweep(accs: list[float], n: int = 20):
    keys = ["char.keyboard@0.05", "char.keyboard@0.10", "char.keyboard@0.20", "char.keyboard@0.30"]
    return summarize(bools(n, n), {k: bools(round(a * n), n) for k, a in zip(keys, accs)}, chance=0.0)


def test_dlm_advantage_rate_and_paired_tests():
    dlm = _sweep([0.9, 0.8, 0.7, 0.6])  # RDI 0.1 0.2 0.3 0.4
    ar = _sweep([0.8, 0.6, 0.75, 0.6])  # RDI 0.2 0.4 0.25 0.4
    c = compare(dlm, ar, seed=1, n_resamples=2000)
    assert c.advantage == pytest.approx((0.1, 0.2, -0.05, 0.0))
    assert (c.wins, c.ties, c.losses) == (2, 1, 1)
    assert c.advantage_rate == 0.5 and c.mean_advantage == pytest.approx(0.0625)
    assert c.ci[0] <= 0.0625 <= c.ci[1]
    assert c.wilcoxon_p == pytest.approx(sps.wilcoxon([0.2, 0.4, 0.25, 0.4], [0.1, 0.2, 0.3, 0.4]).pvalue)
    assert compare(dlm, ar, seed=1, n_resamples=2000).ci == c.ci  # seeded
    assert c.meaningful and c.as_dict()["keys"][0] == "char.keyboard@0.05"


def test_compare_refuses_undefined_rdi_and_disjoint_conditions():
    zero = summarize(bools(0, 10), {"char.keyboard@0.10": bools(0, 10)}, chance=0.0)
    ok = summarize(bools(5, 10), {"char.keyboard@0.10": bools(4, 10)}, chance=0.0)
    other = summarize(bools(5, 10), {"word.shuffle@0.10": bools(4, 10)}, chance=0.0)
    with pytest.raises(InputError, match="undefined"):
        compare(zero, ok)
    with pytest.raises(InputError, match="share no"):
        compare(ok, other)


def test_summarize_results_pools_seeds_per_condition():
    from dlmeval.robustness.metrics import summarize_results

    recs = [{"condition": "clean", "correct": c} for c in bools(4, 5)]
    recs += [{"condition": "char.keyboard@0.1", "correct": c} for c in bools(3, 5)]  # seed 0
    recs += [{"condition": "char.keyboard@0.10", "correct": c} for c in bools(1, 5)]  # seed 1
    s = summarize_results(recs, chance=0.0)
    [cond] = s.conditions
    assert cond.key == "char.keyboard@0.10" and cond.n == 10 and cond.accuracy == 0.4
    assert cond.rdi == pytest.approx(0.5)
    with pytest.raises(InputError, match="no clean results"):
        summarize_results(recs[5:], chance=0.0)


def test_keys_keep_rates_outside_the_papers_grid_exact():
    assert Perturbation.of("keyboard", 0.125).key == "char.keyboard@0.125"
    assert Perturbation.from_key("char.keyboard@0.125").rate == 0.125
    assert Perturbation.of("keyboard", 0.1).key == "char.keyboard@0.10"
