"""Input prompt masking: exact flag sets from known surprisals, detection NFE = batches, infill, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import length_sorted_batches
from dlmeval.models.tiny import tiny_model
from dlmeval.robustness.ipm import (
    DetectionPass,
    EditDistanceFlagger,
    IPMConfig,
    infill,
    masked_surprisal,
    run_ipm,
    select_threshold,
    select_topk,
    select_uniform,
    tokenize_prompt,
)
from dlmeval.seeding import numpy_rng

TEXT = "the cat sat on the big red house"
# tokens: <bos> the cat sat on the big red house -> positions 0..8; "on" (4) has 2 characters (< l_min = 3)
SURPRISAL = np.array([np.nan, 0.5, 3.0, 1.0, 9.0, 2.5, 0.1, 3.0, 2.0])


@pytest.fixture(scope="module")
def llada():
    return tiny_model("llada", seed=0)


def fake_scorer(values):
    calls = []

    def score(model, ids, eligible):
        calls.append([list(x) for x in ids])
        return DetectionPass([np.array(values, dtype=float) for _ in ids], nfe=0, batches=0, rows=0)

    score.calls = calls
    return score


def test_tokenize_prompt_eligibility(llada):
    tp = tokenize_prompt(llada, TEXT)
    assert tp.surface == ["", "the", "cat", "sat", "on", "the", "big", "red", "house"]
    assert tp.eligible.tolist() == [False, True, True, True, False, True, True, True, True]
    # a span restricts eligibility (the user message inside a template)
    tp2 = tokenize_prompt(llada, TEXT, span=(4, 11))  # "cat sat"
    assert np.flatnonzero(tp2.eligible).tolist() == [2, 3]
    # an unknown word is [UNK] but still real text: eligible
    tp3 = tokenize_prompt(llada, "the capiral city")
    assert tp3.surface[2] == "capiral" and tp3.eligible[2]


def test_selectors_exact():
    el = np.array([False, True, True, True, False, True, True, True, True])
    # tau = 0.1: surprisal > -log 0.1 = 2.302...; "on" (9.0) is not eligible
    assert select_threshold(SURPRISAL, el, 0.1).tolist() == [2, 5, 7]
    assert select_threshold(SURPRISAL, el, 0.05).tolist() == [2, 7]  # -log 0.05 = 2.996 < 3.0
    assert select_threshold(SURPRISAL, el, 0.04).tolist() == []  # -log 0.04 = 3.219
    # top-k: ties (3.0 at 2 and 7) go to the lower position
    assert select_topk(SURPRISAL, el, 1).tolist() == [2]
    assert select_topk(SURPRISAL, el, 2).tolist() == [2, 7]
    assert select_topk(SURPRISAL, el, 3).tolist() == [2, 5, 7]
    assert select_topk(SURPRISAL, el, 50).tolist() == [1, 2, 3, 5, 6, 7, 8]
    # uniform: stochastic rounding of rho * E, positions drawn from the eligible ones
    u = select_uniform(el, 0.5, numpy_rng(1, "u"))
    assert len(u) in (3, 4) and set(u) <= {1, 2, 3, 5, 6, 7, 8}
    assert select_uniform(el, 0.5, numpy_rng(1, "u")).tolist() == u.tolist()


def test_threshold_and_topk_flags_with_injected_scorer(llada):
    for cfg, want in (
        (IPMConfig("threshold", tau=0.1, infill_steps=4), [2, 5, 7]),
        (IPMConfig("topk", k=2, infill_steps=4), [2, 7]),
        (IPMConfig("topk", k=1, min_chars=4), [8]),  # only "house" has 4+ characters
    ):
        out = run_ipm(llada, [TEXT], cfg, item_ids=["a"], scorer=fake_scorer(SURPRISAL))
        r = out.results[0]
        assert r.flagged == want, cfg.key
        assert r.flagged_tokens == [r.text.split()[i - 1] for i in want]
        # only flagged positions may change; the infill took min(T_d, |C|) forward passes
        assert all(a == b for i, (a, b) in enumerate(zip(r.ids, r.patched_ids)) if i not in want)
        assert out.nfe_infill == min(cfg.infill_steps, len(want))
        assert llada.mask_token_id not in r.patched_ids


def test_hybrid_is_union_and_iterative_stops(llada):
    text = (
        "the capiral cat sat"  # "capiral" is [UNK] in the tiny vocabulary: tokens <bos> the capiral cat sat
    )
    fl = EditDistanceFlagger(["the", "capital", "cat", "sat"], max_distance=2)
    s = np.array([np.nan, 0.1, 0.2, 5.0, 0.3])
    out = run_ipm(llada, [text], IPMConfig("hybrid", k=1), scorer=fake_scorer(s), flagger=fl)
    assert out.results[0].flagged == [2, 3]
    assert out.results[0].flagged_words == [(4, 11)]
    out = run_ipm(llada, [text], IPMConfig("editdist"), flagger=fl)
    assert out.results[0].flagged == [2] and out.nfe_detect == 0

    # iterative: round 1 flags position 3, round 2 sees low surprisal everywhere and stops
    rounds = iter([s, np.array([np.nan, 0.1, 0.2, 0.3, 0.3]), s])

    def scorer(model, ids, eligible):
        return DetectionPass([next(rounds) for _ in ids], nfe=1, batches=1, rows=0)

    out = run_ipm(llada, [text], IPMConfig("iterative", tau=0.1, max_iter=3), scorer=scorer)
    assert out.results[0].iterations == 1 and out.results[0].flagged == [3]
    assert out.nfe_detect == 2  # two detection rounds, the second flagged nothing


def test_detection_nfe_is_number_of_batches_and_batch_invariant(llada):
    prompts = [TEXT, "a dog ran", "the king and the queen were happy", "one two three four five six"]
    toks = [tokenize_prompt(llada, p) for p in prompts]
    ids = [t.ids for t in toks]
    el = [t.eligible for t in toks]
    lengths = [len(ids[p]) for p, e in enumerate(el) for _ in range(int(e.sum()))]
    for bs in (1, 3, 7):
        nfe0 = llada.nfe
        det = masked_surprisal(llada, ids, el, batch_size=bs)
        want = len(list(length_sorted_batches(lengths, batch_size=bs)))
        assert det.batches == want and det.nfe == want and llada.nfe - nfe0 == want
        assert det.rows == sum(int(e.sum()) for e in el)
        if bs == 1:
            ref = det.surprisal
        else:
            for a, b in zip(ref, det.surprisal):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
                assert np.array_equal(np.isnan(a), np.isnan(b))
    # position 2 of the first prompt by hand: mask it, -log softmax at its token
    x = torch.tensor([ids[0]])
    x[0, 2] = llada.mask_token_id
    want = -torch.log_softmax(llada.logits(x), dim=-1)[0, 2, ids[0][2]].item()
    assert ref[0][2] == pytest.approx(want, rel=1e-5)
    assert math.isnan(ref[0][0]) and math.isnan(ref[0][4])  # <bos> and "on" are not scored


def test_infill_schedule_and_bans(llada):
    ids = tokenize_prompt(llada, TEXT).ids
    nfe0 = llada.nfe
    patched, nfe = infill(llada, [ids], [[2, 5, 7]], steps=2)
    assert nfe == 2 == llada.nfe - nfe0  # ceil(1/2*3)=2 then 3: two passes
    banned = set(llada.tokenizer.all_special_ids)
    assert not banned & {patched[0][i] for i in (2, 5, 7)}
    # more steps than flags: one pass per flag, the same greedy result order-free for a single flag
    _, nfe = infill(llada, [ids], [[2, 5, 7]], steps=16)
    assert nfe == 3
    # batch of prompts = each alone
    other = tokenize_prompt(llada, "a dog ran to the river").ids
    together, _ = infill(llada, [ids, other], [[2, 5], [3]], steps=4)
    alone = [infill(llada, [ids], [[2, 5]], steps=4)[0][0], infill(llada, [other], [[3]], steps=4)[0][0]]
    assert together == alone


def test_run_ipm_determinism(llada):
    prompts = [TEXT, "the dog went to the city at night"]
    for cfg in (IPMConfig("uniform", rho=0.3), IPMConfig("topk", k=2), IPMConfig("threshold", tau=0.5)):
        a = run_ipm(llada, prompts, cfg, item_ids=["x", "y"], seed=3)
        b = run_ipm(llada, prompts, cfg, item_ids=["x", "y"], seed=3)
        assert [r.patched_ids for r in a.results] == [r.patched_ids for r in b.results]
        assert [r.flagged for r in a.results] == [r.flagged for r in b.results]
        assert (a.nfe_detect, a.nfe_infill) == (b.nfe_detect, b.nfe_infill)
    # uniform draws depend on the seed and item id only (not on the other prompts)
    u1 = run_ipm(llada, prompts, IPMConfig("uniform", rho=0.5), item_ids=["x", "y"], seed=3).results[1]
    u2 = run_ipm(llada, prompts[1:], IPMConfig("uniform", rho=0.5), item_ids=["y"], seed=3).results[0]
    assert u1.flagged == u2.flagged
    assert a.results[0].as_dict()["variant"] == "ipm.threshold[tau=0.5,Td=16,lmin=3]"


def test_edit_distance_flagger():
    fl = EditDistanceFlagger(["what", "is", "the", "capital", "of", "france"], max_distance=2)
    text = "Whay is the capiral of Frnace? zzzzzzz x2y qz France"
    spans = fl.flag_words(text)
    assert [text[s:e] for s, e in spans] == ["Whay", "capiral", "Frnace"]
    assert fl.nearest("capiral") == ("capital", 1)
    assert fl.nearest("frnace") == ("france", 1)  # an adjacent swap is one edit
    assert fl.nearest("cpaitl") == ("capital", 2)
    assert fl.nearest("zzzzzzz") is None
    assert not fl.flags("capital") and not fl.flags("Whay", min_chars=5)
    one = EditDistanceFlagger(["capital"], max_distance=1)
    assert one.nearest("cpaitl") is None
    with pytest.raises(InputError):
        EditDistanceFlagger(["a"], max_distance=3)


def test_default_flagger_uses_vocabulary_and_wordnet(llada):
    from dlmeval.robustness.wordnet import wordnet_available

    fl = EditDistanceFlagger(model=llada)
    assert fl.is_known("queen") and fl.is_known("the")  # tiny vocabulary, stopwords
    assert fl.flags("qeen")
    if wordnet_available():
        assert fl.is_known("photosynthesis") and fl.is_known("questions")  # WordNet lemma, morphy
        assert fl.flags("capiral") and not fl.flags("capital")


def test_bad_config_rejected():
    with pytest.raises(InputError, match="variant"):
        IPMConfig("magic")
    with pytest.raises(InputError, match="tau"):
        IPMConfig("threshold", tau=0)
    with pytest.raises(InputError, match="infill_steps"):
        IPMConfig(infill_steps=0)


def test_tokenize_prompt_on_a_slow_tokenizer_matches_the_fast_one(llada):
    """tiny-dream's tokenizer is slow (like Dream's): the spans come from incremental decoding, and they equal the
    fast tokenizer's offsets of the same words."""
    dream = tiny_model("dream")
    assert not dream.tokenizer.is_fast
    with pytest.raises((NotImplementedError, ValueError, TypeError)):
        dream.tokenizer(TEXT, return_offsets_mapping=True)["offset_mapping"]
    for text in (TEXT, "The Capiral city, big!", "the capiral city"):
        slow, fast = tokenize_prompt(dream, text), tokenize_prompt(llada, text)
        assert slow.offsets[0] == (0, 0) and slow.ids[0] == dream.bos_token_id  # BOS prepended by the adapter
        assert slow.offsets == fast.offsets
        assert slow.surface == fast.surface and slow.eligible.tolist() == fast.eligible.tolist()
