"""LLaDA's own log-likelihood estimator (get_log_likelihood.py) as an lm-eval option, and what it estimates (#21)."""

from __future__ import annotations

import statistics

import pytest

from dlmeval.models import tiny_model
from dlmeval.scoring import DiffScorer
from dlmeval.scoring.llada_ll import (
    count_weights,
    exact_elbo,
    llada_greedy,
    llada_log_likelihood,
    stratified_counts,
)
from dlmeval.seeding import torch_generator


@pytest.fixture(scope="module")
def llada():
    return tiny_model("llada")


def _layout(model, context: str, continuation: str):
    lay = DiffScorer(model, n_masks=1, n_rates=1).formatter.layout("cond", continuation, context)
    return lay.ids, lay.candidate


def test_stratified_counts_follow_llada_rounding_by_hand():
    # linspace(3, 3 + 3 * 8/4, 4) = 3, 5, 7, 9 -> 9 wraps to ((9 - 1) mod 8) + 1 = 1
    assert stratified_counts(3, 8, 4) == [3, 5, 7, 1]
    # linspace(1, 1 + 5/2, 2) = 1, 3.5 -> torch.round is half to even: 4; linspace(2, 4.5) -> 2, 4
    assert stratified_counts(1, 5, 2) == [1, 4] and stratified_counts(2, 5, 2) == [2, 4]
    assert count_weights(8, 8) == pytest.approx({m: 1 / 8 for m in range(1, 9)})
    # a spacing of 0.5 (8 tokens, 16 rows): even counts three times as likely as odd ones
    q = count_weights(8, 16)
    assert q == pytest.approx({m: (3 if m % 2 == 0 else 1) / 16 for m in range(1, 9)})


def test_one_token_answers_are_exact(llada):
    ids, span = _layout(llada, "the a an of to in", " on")
    assert span[1] - span[0] == 1
    got = llada_log_likelihood(llada, ids, span, mc_num=32, batch_size=8, generator=torch_generator(0))
    assert got == pytest.approx(exact_elbo(llada, ids, span), abs=1e-5)


def test_the_estimate_targets_the_elbo_or_its_rounded_count_weights(llada):
    """Each batch size's mean estimate lies within half the distance between the two estimands of its own one, so
    the two acceptance windows are disjoint: no value passes for both. Over 12 seeds of 512 samples the means are
    0.003 from their targets (one run's spread: 0.14 at batch 4, 0.22 at batch 8; half the distance: 0.23)."""
    ids, span = _layout(llada, "the a an of to in", " on at for with")
    assert span[1] - span[0] == 4
    elbo = exact_elbo(llada, ids, span)
    rounded = exact_elbo(llada, ids, span, weights=count_weights(4, 8))
    tol = abs(rounded - elbo) / 2
    assert tol > 0.2  # the two estimands differ on this answer

    def mean(batch):
        runs = [
            llada_log_likelihood(llada, ids, span, mc_num=512, batch_size=batch, generator=torch_generator(s))
            for s in range(12)
        ]
        return statistics.mean(runs)

    assert abs(mean(4) - elbo) < tol  # spacing 1: uniform counts, the ELBO
    assert abs(mean(8) - rounded) < tol  # spacing 0.5: the rounded counts' value


def test_bad_sizes_are_refused(llada):
    ids, span = _layout(llada, "the a", " on")
    with pytest.raises(ValueError, match="mc_num"):
        llada_log_likelihood(llada, ids, span, mc_num=4, batch_size=8, generator=torch_generator(0))
    with pytest.raises(ValueError, match="outside 1..16"):
        exact_elbo(llada, list(range(40)), (0, 20))


def test_lm_eval_option(llada):
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from dlmeval.errors import InputError
    from dlmeval.integrations.lm_eval import DlmevalLM, _request_id
    from dlmeval.seeding import derive_seed

    lm = DlmevalLM(lm=llada, ll_estimator="llada", mc_num=32, mc_batch=8, seed=4)
    reqs = [
        Instance(request_type="loglikelihood", doc={}, arguments=a, idx=i)
        for i, a in enumerate([("the a an of", " to in"), ("he she", " they")])
    ]
    got = lm.loglikelihood(reqs)
    assert got == lm.loglikelihood(list(reversed(reqs)))[::-1]  # seeded per request
    ids, span = _layout(llada, "the a an of", " to in")
    gen = torch_generator(derive_seed(4, "lm-eval-llada", _request_id("ll", "the a an of", " to in")))
    want = llada_log_likelihood(llada, ids, span, mc_num=32, batch_size=8, generator=gen)
    assert got[0][0] == pytest.approx(want, abs=1e-6)
    assert [r["nfe"] for r in lm.nfe_records[:2]] == [4, 4]  # mc_num / mc_batch passes per request
    default = DlmevalLM(lm=llada, seed=4).loglikelihood(reqs[:1])[0][0]
    assert default != got[0][0]
    with pytest.raises(InputError, match="ll_estimator"):
        DlmevalLM(lm=llada, ll_estimator="exact")
    with pytest.raises(InputError, match="mc_num"):
        DlmevalLM(lm=llada, ll_estimator="llada", mc_num=4, mc_batch=8)


def test_the_default_is_the_familys_vocabulary_rule_and_the_tokenizer_one_keyword_away(llada):
    """LLaDA declares ``likelihood_vocab="all"`` (its get_log_likelihood.py: F.cross_entropy over every row) and the
    stand-in pads its 117-token vocabulary to 160 rows: the default estimate, greedy check and exact ELBO equal the
    explicit ``vocab="all"`` computation with the same draws, and ``vocab="tokenizer"`` (the padded rows left out)
    gives another value."""
    assert llada.likelihood_vocab == "all" and llada.vocab_size > len(llada.tokenizer)
    ids, span = _layout(llada, "the a an of to in", " on at for")

    def est(**kw):
        return llada_log_likelihood(
            llada, ids, span, mc_num=16, batch_size=8, generator=torch_generator(5), **kw
        )

    default, every, tok = est(), est(vocab="all"), est(vocab="tokenizer")
    assert default == every and est(vocab="family") == every
    assert tok - every > 0.01  # the untrained padded rows take probability mass only under the family's rule
    assert exact_elbo(llada, ids, span) == exact_elbo(llada, ids, span, vocab="all")
    assert exact_elbo(llada, ids, span, vocab="tokenizer") - exact_elbo(llada, ids, span) > 0.01
    assert llada_greedy(llada, ids, span) is llada_greedy(llada, ids, span, vocab="all")


def test_the_harness_layout_refuses_an_empty_or_too_long_request_naming_it(llada):
    """:func:`harness_pair` (lm-eval's ``likelihood=llada`` and Care's ``likelihood = "llada"`` checks): the
    continuation's span in lm-eval's token split; no own tokens or past the model's length: one line naming the
    request."""
    from dlmeval.errors import InputError
    from dlmeval.scoring.llada_ll import harness_pair, llada_encode_pair

    ids, span = harness_pair(llada, "the cat ", "sat on the", "request 3")
    p, x = llada_encode_pair(llada, "the cat ", "sat on the")
    assert ids == p + x and span == (len(p), len(p) + len(x)) and span[1] > span[0]
    with pytest.raises(InputError, match=r"^request 3: the continuation '' has no tokens of its own$"):
        harness_pair(llada, "the cat", "", "request 3")
    with pytest.raises(
        InputError, match=r"^item 7: context \+ continuation are \d+ tokens, past the model's \d+$"
    ):
        harness_pair(llada, "the cat " * llada.max_length, "sat", "item 7")
