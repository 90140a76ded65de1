"""Calibration confidences (dlmeval.robustness.calibration) against hand-computed values on tiny models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.robustness.calibration import (
    CommitRecorder,
    TokenProbs,
    aggregate,
    ar_token_probs,
    calibration,
    choice_confidence,
    confidence_key,
    dlm_token_probs,
)


@pytest.fixture(scope="module")
def bert():
    from dlmeval.models import tiny_model

    return tiny_model("bert", seed=3)


@pytest.fixture(scope="module")
def causal():
    from dlmeval.models import tiny_model

    return tiny_model("causal", seed=4)


# ------------------------------------------------------------------------------------------------ arithmetic
def test_aggregations_golden():
    lp = np.log([0.5, 0.8])
    assert aggregate(lp, "geo") == pytest.approx(math.sqrt(0.4), abs=1e-12)  # 0.632456
    assert aggregate(lp, "mean") == pytest.approx(0.65, abs=1e-12)
    assert aggregate(lp, "min") == pytest.approx(0.5, abs=1e-12)
    assert math.isnan(aggregate([], "geo"))
    assert math.isnan(aggregate([-0.1, float("nan")], "mean"))
    with pytest.raises(InputError, match="aggregation"):
        aggregate(lp, "median")
    with pytest.raises(InputError, match="<= 0"):
        aggregate([0.5], "geo")
    with pytest.raises(InputError, match="basis"):
        confidence_key("argmax", "geo")


def test_token_probs_confidences_cover_the_grid():
    tp = TokenProbs(max=np.log([0.9, 0.6]), chosen=np.log([0.9, 0.3]), commit=None, n_tokens=2)
    c = tp.confidences()
    assert len(c) == 9
    assert c["max/geo"] == pytest.approx(math.sqrt(0.54))
    assert c["chosen/mean"] == pytest.approx(0.6)
    assert c["chosen/min"] == pytest.approx(0.3)
    assert math.isnan(c["commit/geo"])  # not recorded


def test_choice_confidence_is_softmax_at_the_argmax():
    assert choice_confidence(np.log([0.5, 0.3, 0.2])) == pytest.approx(0.5)
    assert choice_confidence([0.0, float("nan"), 0.0]) == pytest.approx(0.5)  # NaN counts as -inf
    assert math.isnan(choice_confidence([float("nan")] * 4))
    with pytest.raises(InputError):
        choice_confidence([])


def test_calibration_row_by_hand():
    # 15 bins: 0.9 -> (0.867, 0.933], 0.8 -> (0.733, 0.8], 0.3 -> (0.267, 0.333]: one item per bin
    row = calibration([0.9, 0.8, 0.3, float("nan")], [True, False, False, True])
    assert (row.n, row.n_nan) == (3, 1)
    assert row.ece == pytest.approx((0.1 + 0.8 + 0.3) / 3)
    assert row.auroc == pytest.approx(1.0)  # the right answer has the highest confidence
    assert row.accuracy == pytest.approx(1 / 3)
    assert row.mean_confidence == pytest.approx(2.0 / 3)
    assert math.isnan(calibration([0.9, 0.8], [True, True]).auroc)  # one class
    with pytest.raises(InputError):
        calibration([0.5], [True, False])


# ------------------------------------------------------------------------------------------------ DLM
def _hand_dlm(model, prompt, answer_and_tail, scored):
    """log max-prob and log chosen-prob at ``scored`` positions of one unpadded sequence, by full logits."""
    seq = prompt + answer_and_tail
    ids, attn = model.pad([seq])
    lp = torch.log_softmax(model.logits(ids, attn)[0].double(), dim=-1)
    pos = [len(prompt) + k for k in scored]
    mx = np.array([float(lp[p].max()) for p in pos])
    ch = np.array([float(lp[p, seq[p]]) for p in pos])
    return mx, ch


def test_dlm_confidence_matches_one_bidirectional_pass(bert):
    sep = bert.eos_token_ids[0]
    prompt = bert.encode("the cat sat on the")[:-1]  # [CLS] ... without the trailing [SEP]
    a = bert.encode("red house", add_special_tokens=False)
    b = bert.encode("dog", add_special_tokens=False)
    gens = [
        a + [sep] + b,  # tokens after the first EOS are not part of the answer, nor of the pass
        [sep] + a,  # empty answer: scored by its end token
        b + a,  # no EOS at all
    ]
    tps = dlm_token_probs(bert, [prompt] * 3, gens, batch_size=2)
    mx, ch = _hand_dlm(bert, prompt, a + [sep], range(len(a)))
    np.testing.assert_allclose(tps[0].max, mx, atol=1e-5)
    np.testing.assert_allclose(tps[0].chosen, ch, atol=1e-5)
    assert tps[0].n_tokens == len(a)
    assert tps[0].confidence("max", "geo") == pytest.approx(math.exp(mx.mean()), abs=1e-5)
    assert tps[0].confidence("chosen", "min") == pytest.approx(math.exp(ch.min()), abs=1e-5)
    mx1, ch1 = _hand_dlm(bert, prompt, [sep], [0])
    assert tps[1].n_tokens == 0 and tps[1].note
    np.testing.assert_allclose(tps[1].max, mx1, atol=1e-5)
    np.testing.assert_allclose(tps[1].chosen, ch1, atol=1e-5)
    mx2, _ = _hand_dlm(bert, prompt, b + a, range(len(b + a)))
    np.testing.assert_allclose(tps[2].max, mx2, atol=1e-5)
    # max >= chosen everywhere, and the batch does not matter
    assert all((t.max >= t.chosen - 1e-9).all() for t in tps)
    alone = dlm_token_probs(bert, [prompt], [gens[2]], batch_size=1)[0]
    np.testing.assert_allclose(alone.max, tps[2].max, atol=1e-5)


def test_dlm_confidence_rejects_bad_input(bert):
    with pytest.raises(InputError, match="generations"):
        dlm_token_probs(bert, [[2, 10]], [[11], [12]])
    with pytest.raises(InputError, match="commit"):
        dlm_token_probs(bert, [[2, 10]], [[11, 12]], commit=[np.zeros(3)])
    with pytest.raises(InputError, match="window"):
        dlm_token_probs(bert, [[10] * 127], [[11, 12]])


def test_commit_time_probabilities_replayed_by_hand(bert):
    """With one token committed per step at temperature 0, the commit-time log-prob of each token is the max of
    the sampler's distribution (mask id banned) on the state before that step; replay those states by hand."""
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    cfg = SamplerConfig(length=5, steps=5, strategy="none", temperature=0.0, seed=1)
    prompts = [
        "the cat sat on the",
        "a king",
    ]  # different lengths: right padding, rows may stop at different steps
    rec = CommitRecorder(bert, top_k=8)
    res = RemaskingSampler(rec, cfg).sample(prompts, item_ids=["a", "b"])
    commit = rec.commit_logprobs(res)
    assert rec.misses == 0
    mask = bert.mask_token_id
    for b in range(2):
        p = res.prompt_ids[b]
        final = list(res.tokens[b])
        steps = res.history.decided_step[b]
        for i, tok in enumerate(res.token_ids[b]):
            t = steps[i]
            state = [final[j] if 0 <= steps[j] < t else mask for j in range(5)]
            ids, attn = bert.pad([p + state])
            z = bert.logits(ids, attn)[0, len(p) + i].double()
            z[mask] = -math.inf
            lp = torch.log_softmax(z, dim=-1)
            assert int(lp.argmax()) == tok
            assert commit[b][i] == pytest.approx(float(lp[tok]), abs=1e-5)
    tps = dlm_token_probs(bert, res.prompt_ids, [list(r) for r in res.tokens], commit=commit)
    for b in range(2):
        if tps[b].n_tokens:
            assert tps[b].confidence("commit", "geo") == pytest.approx(math.exp(np.mean(commit[b])), abs=1e-9)


def test_commit_recorder_refuses_a_mismatched_history(bert):
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    rec = CommitRecorder(bert)
    res = RemaskingSampler(rec, SamplerConfig(length=4, steps=4)).sample(["the cat"], item_ids=["a"])
    rec.calls.append({})  # a pass the sampler did not make
    with pytest.warns(RuntimeWarning, match="unavailable"):
        assert rec.commit_logprobs(res) == [None]
    with pytest.raises(InputError):
        CommitRecorder(bert, top_k=0)


# ------------------------------------------------------------------------------------------------ AR
def test_ar_confidence_matches_causal_logprobs(causal):
    prompt, outputs = "the cat sat", [" on the big", ""]
    tps = ar_token_probs(causal, [prompt, prompt], outputs, batch_size=2)
    chosen = causal.continuation_logprobs([prompt], [outputs[0]])[0]
    np.testing.assert_allclose(tps[0].chosen, chosen, atol=1e-5)
    np.testing.assert_allclose(
        tps[0].commit, chosen
    )  # a causal model commits from the rescoring distribution
    # max basis by hand from full logits
    ids = causal.encode(prompt + outputs[0])
    n_ctx = len(causal.encode(prompt))
    x, a = causal.pad([ids])
    with torch.no_grad():
        lp = torch.log_softmax(causal.forward(x, a).logits[0].double(), dim=-1)
    mx = [float(lp[j - 1].max()) for j in range(n_ctx, len(ids))]
    np.testing.assert_allclose(tps[0].max, mx, atol=1e-5)
    assert tps[0].n_tokens == len(ids) - n_ctx == 3
    assert tps[0].confidence("chosen", "geo") == pytest.approx(math.exp(np.mean(chosen)), abs=1e-5)
    # empty output: the probability of ending right after the prompt
    eos = causal.eos_token_ids[0]
    x, a = causal.pad([causal.encode(prompt)])
    with torch.no_grad():
        lp0 = torch.log_softmax(causal.forward(x, a).logits[0, -1].double(), dim=-1)
    assert tps[1].n_tokens == 0
    np.testing.assert_allclose(tps[1].chosen, [float(lp0[eos])], atol=1e-5)
    with pytest.raises(InputError):
        ar_token_probs(causal, [prompt], [])


def test_ar_confidences_from_the_generation_equal_the_rescoring(causal):
    # generate_scored keeps each token's log-prob; ar_token_probs uses them instead of a second pass over the
    # prompt where the re-encoded answer is the generated prefix, and rescores the rest
    # (trailing spaces: the tiny word-level tokenizer decodes without a leading space; a generated [PAD] id
    # vanishes from the decoded text, so that row's re-encoded answer differs and it is rescored)
    prompts = ["the cat sat ", "a dog ", "one two three four five ", "the "]
    gens = causal.generate_scored(prompts, max_new_tokens=5, temperature=0.0, stop=["house"], batch_size=3)
    outputs = [g.text for g in gens]
    assert all(len(g.chosen) == len(g.max) == len(g.token_ids) for g in gens)
    n0 = causal.nfe
    fast = ar_token_probs(causal, prompts, outputs, generated=gens, batch_size=1)
    n_fast, n0 = causal.nfe - n0, causal.nfe
    slow = ar_token_probs(causal, prompts, outputs, batch_size=1)
    assert causal.nfe - n0 == 4 and n_fast < 4  # one rescoring pass per row without the generation's numbers
    used = 0
    for g, a, b in zip(gens, fast, slow):
        assert a.n_tokens == b.n_tokens and len(a.chosen) == len(b.chosen)
        np.testing.assert_allclose(a.chosen, b.chosen, atol=1e-5)
        np.testing.assert_allclose(a.max, b.max, atol=1e-5)
        used += bool(a.n_tokens > 0 and np.array_equal(a.chosen, g.chosen[: a.n_tokens]))
    assert used == 4 - n_fast >= 1
    # a temperature samples other tokens but the log-probs stay the model's own (untempered) ones
    hot = causal.generate_scored(prompts, max_new_tokens=4, temperature=1.5, seed=2, batch_size=4)
    texts = [g.text for g in hot]
    for a, b in zip(
        ar_token_probs(causal, prompts, texts, generated=hot), ar_token_probs(causal, prompts, texts)
    ):
        np.testing.assert_allclose(a.chosen, b.chosen, atol=1e-5)
    with pytest.raises(InputError, match="generations for"):
        ar_token_probs(causal, prompts, outputs, generated=gens[:1])


def test_ar_token_probs_last_positions_path_equals_the_full_pass(causal, monkeypatch):
    # left padding + logits of the last K positions only: the same numbers as right padding + every position,
    # for rows of different prompt and answer lengths in one batch
    prompts, outputs = ["the cat sat", "a dog", "one two three four five"], [" on the big", " runs", ""]
    assert causal.keeps_last_logits()
    lean = ar_token_probs(causal, prompts, outputs, batch_size=3)
    monkeypatch.setattr(type(causal), "keeps_last_logits", lambda self: False)
    full = ar_token_probs(causal, prompts, outputs, batch_size=3)
    alone = [ar_token_probs(causal, [p], [o])[0] for p, o in zip(prompts, outputs)]
    for a, b, c in zip(lean, full, alone):
        assert len(a.chosen) == len(b.chosen) == len(c.chosen) > 0
        np.testing.assert_allclose(a.chosen, b.chosen, atol=1e-5)
        np.testing.assert_allclose(a.max, b.max, atol=1e-5)
        np.testing.assert_allclose(a.chosen, c.chosen, atol=1e-5)
