"""dlmeval.metrics: hand-computed golden values, determinism under seeds, batch invariance, bad input."""

import json
import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.metrics import (
    acceptance_rate,
    ar_featurizer,
    auto_buckets,
    char_shares,
    distinct_n,
    ece,
    english_filter,
    mauve_score,
    minilm_featurizer,
    perplexity,
    reliability_bins,
    selective_auroc,
    self_bleu,
)


# ------------------------------------------------------------------------------------------ Distinct-n
def test_distinct_n_hand_computed():
    texts = ["the cat sat", "The cat ran"]
    # bigrams: (the cat) (cat sat) (the cat) (cat ran) -> 3 unique / 4 (lower-cased, so "The" == "the")
    assert distinct_n(texts, 2) == pytest.approx(0.75)
    assert distinct_n(texts, 3) == pytest.approx(1.0)
    assert distinct_n(texts, 1) == pytest.approx(4 / 6)


def test_distinct_n_never_crosses_texts_and_is_nan_without_ngrams():
    assert math.isnan(distinct_n(["a b", "c d"], 3))
    assert distinct_n(["a b", "a b c"], 3) == 1.0
    with pytest.raises(InputError):
        distinct_n("a single string", 3)
    with pytest.raises(InputError):
        distinct_n(["a b c"], 0)


# ------------------------------------------------------------------------------------------ Self-BLEU
def test_self_bleu_identical_and_disjoint():
    assert self_bleu(["the cat sat on the mat"] * 3) == pytest.approx(100.0)
    assert self_bleu(["a b c d", "e f g h", "i j k l"]) == 0.0


def test_self_bleu_never_uses_the_hypothesis_as_its_own_reference():
    # if a text were among its own references each would score 100
    assert self_bleu(["alpha beta gamma delta", "one two three four"]) == 0.0


def test_self_bleu_hand_computed_with_floor_smoothing():
    # "a b c d" vs "a b x y": p1 = 2/4, p2 = 1/3, p3 = 0 -> 0.1/2, p4 = 0 -> 0.1/1, BP = 1; symmetric pair
    expected = 100 * (0.5 * (1 / 3) * 0.05 * 0.1) ** 0.25
    assert self_bleu(["a b c d", "a b x y"]) == pytest.approx(expected)
    # max_order 2 uses only p1, p2
    assert self_bleu(["a b c d", "a b x y"], max_order=2) == pytest.approx(100 * math.sqrt(0.5 / 3))


def test_self_bleu_subsampling_is_seeded():
    texts = [f"the cat number {i} sat on mat {i % 3}" for i in range(12)]
    full = self_bleu(texts)
    a = self_bleu(texts, max_hypotheses=5, seed=1)
    assert a == self_bleu(texts, max_hypotheses=5, seed=1)
    assert 0 < a <= 100 and 0 < full <= 100
    assert self_bleu(texts, max_hypotheses=50) == full
    with pytest.raises(InputError, match="at least 2"):
        self_bleu(["only one"])


# ------------------------------------------------------------------------------------------ English filter
def test_english_filter_golden_values():
    assert english_filter("Hello, world!")
    assert not english_filter("héllo")  # 4 of 5 non-space characters ASCII = 0.80 < 0.85
    assert english_filter("héllo wörld and more plain ascii text")
    assert not english_filter("")
    assert not english_filter("   \n")
    assert not english_filter("这是中文")


def test_english_filter_cjk_boundary_is_inclusive():
    base = "a" * 98
    assert char_shares(base + "中文")[1] == pytest.approx(0.02)
    assert english_filter(base + "中文")  # 2 / 100 = 0.02 <= 0.02
    assert not english_filter(base + "中文字")  # 3 / 101 > 0.02, although ASCII 98/101 = 0.97 passes
    assert not english_filter("a" * 97 + "ひらがな"[:3])  # kana count as CJK
    assert english_filter("a" * 85 + "é" * 15)  # ASCII exactly 0.85
    assert not english_filter("a" * 84 + "é" * 16)


def test_acceptance_rate():
    assert acceptance_rate(["hello there", "你好世界", "fine"]) == pytest.approx(2 / 3)
    assert math.isnan(acceptance_rate([]))
    with pytest.raises(InputError):
        acceptance_rate("hello")


# ------------------------------------------------------------------------------------------ perplexity
@pytest.fixture(scope="module")
def tiny_ar():
    from dlmeval.models.tiny import tiny_model

    return tiny_model("causal", seed=0)


def test_perplexity_scores_only_continuation_tokens(tiny_ar):
    prefixes = ["the cat", "a dog ran to", ""]
    gens = [" sat on the red house", " the river", "one two three"]
    r = perplexity(tiny_ar, prefixes, gens, batch_size=2)
    for i, (p, g) in enumerate(zip(prefixes, gens, strict=True)):
        whole = tiny_ar.encode(p + g)
        n_ctx = len(tiny_ar.encode(p)) if p else 1  # empty prefix -> the <bos> the tokenizer adds
        ids, attn = tiny_ar.pad([whole])
        lp = tiny_ar.token_logprobs(ids, attn)[0].double().numpy()
        assert r.n_tokens[i] == len(whole) - n_ctx
        assert r.nll[i] == pytest.approx(-lp[n_ctx:].sum(), rel=1e-5)
    assert r.ppl == pytest.approx(math.exp(r.nll.sum() / r.n_tokens.sum()))
    assert r.mean_item_ppl == pytest.approx(np.mean(np.exp(r.nll / r.n_tokens)))
    assert r.item_ppl.shape == (3,)


def test_perplexity_does_not_depend_on_batch_size(tiny_ar):
    prefixes = ["the cat", "one", "a man went to paris and", "she"]
    gens = [" ran", " two three four five", " saw the king", " was happy"]
    a = perplexity(tiny_ar, prefixes, gens, batch_size=1)
    b = perplexity(tiny_ar, prefixes, gens, batch_size=4)
    np.testing.assert_allclose(a.nll, b.nll, rtol=1e-5)
    np.testing.assert_array_equal(a.n_tokens, b.n_tokens)


def test_perplexity_rejects_unpaired_input(tiny_ar):
    with pytest.raises(InputError, match="one prefix per item"):
        perplexity(tiny_ar, ["a"], ["b", "c"])
    with pytest.raises(InputError):
        perplexity(tiny_ar, "a", "b")


# ------------------------------------------------------------------------------------------ MAUVE
def _bow(texts):
    """A cheap deterministic featurizer for tests: hashed bag of words."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return (
        HashingVectorizer(n_features=64, alternate_sign=False).transform(texts).toarray().astype(np.float32)
    )


@pytest.fixture(scope="module")
def webtext(data_root):
    with open(data_root / "reference-text" / "webtext_test.jsonl") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(120), fh, strict=False)]


def test_mauve_self_high_different_low_and_seeded(webtext):
    rng = np.random.default_rng(0)
    numbers = [" ".join(str(x) for x in rng.integers(1000, 9999, size=12)) for _ in range(60)]
    same = mauve_score(webtext[:60], webtext[:60], _bow, seed=3)
    other = mauve_score(webtext[:60], numbers, _bow, seed=3)
    assert same.mauve == pytest.approx(1.0, abs=1e-6)
    assert other.mauve < 0.3  # disjoint clusters; MAUVE with 6 buckets does not reach 0
    assert same.num_buckets == 6 and same.seed == 3 and same.n_p == 60
    again = mauve_score(webtext[:60], webtext[60:120], _bow, seed=3)
    assert again == mauve_score(webtext[:60], webtext[60:120], _bow, seed=3)
    assert other.mauve < again.mauve - 0.3
    pre = mauve_score(None, None, p_features=_bow(webtext[:60]), q_features=_bow(webtext[60:120]), seed=3)
    assert pre.mauve == again.mauve


def test_mauve_drops_faiss_clustering_warnings_but_keeps_other_native_stderr(capfd):
    import os

    from dlmeval.metrics.mauve_metric import _filtered_native_stderr

    x = np.random.default_rng(0).normal(size=(30, 4))
    mauve_score(None, None, p_features=x, q_features=x + 0.1, num_buckets=3, seed=1)  # 60 points, 3 clusters
    with _filtered_native_stderr(("WARNING clustering ",)):
        os.write(2, b"WARNING clustering 58 points to 2 centroids: please provide at least 78\n")
        os.write(2, b"something else\n")
    err = capfd.readouterr().err
    assert "WARNING clustering" not in err and "something else" in err


def test_mauve_buckets_and_bad_input():
    assert auto_buckets(5000, 5000) == 500 and auto_buckets(12, 300) == 2 and auto_buckets(64, 70) == 6
    x = np.random.default_rng(0).normal(size=(10, 4))
    with pytest.raises(InputError, match="equal d"):
        mauve_score(None, None, p_features=x, q_features=x[:, :3])
    with pytest.raises(InputError, match="featurizer"):
        mauve_score(["a", "b"], ["c", "d"], featurizer="gpt2")
    with pytest.raises(InputError, match="ar="):
        mauve_score(["a", "b"], ["c", "d"], featurizer="ar")
    with pytest.raises(InputError, match="num_buckets"):
        mauve_score(None, None, p_features=x, q_features=x, num_buckets=1)


def test_minilm_featurizer_unit_norm_batch_invariant_and_semantic():
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on a mat.",
        "Quarterly revenue rose by four percent on strong bond trading.",
        "short",
    ]
    a = minilm_featurizer(batch_size=4)(texts)
    b = minilm_featurizer(batch_size=1)(texts)
    assert a.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert a[0] @ a[1] > a[0] @ a[2] + 0.3


def test_ar_featurizer_reads_the_last_token(tiny_ar):
    texts = ["the cat sat on the mat", "one two", "a big red house by the river"]
    f = ar_featurizer(tiny_ar, batch_size=3)
    feats = f(texts)
    assert feats.shape == (3, 32)
    for i, t in enumerate(texts):
        ids = torch.tensor([tiny_ar.encode(t)])
        h = tiny_ar.hidden_states(ids, torch.ones_like(ids))[-1][0, -1].numpy()
        np.testing.assert_allclose(feats[i], h, atol=1e-5)
    np.testing.assert_allclose(ar_featurizer(tiny_ar, batch_size=1)(texts), feats, atol=1e-5)
    r = mauve_score(texts * 4, texts * 4, featurizer="ar", ar=tiny_ar, seed=0)
    assert r.featurizer == "ar:tiny-causal" and r.mauve == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow
def test_mauve_with_minilm_on_real_text(webtext, data_root):
    with open(data_root / "tasks" / "gsm8k_test.jsonl") as fh:
        math_q = [json.loads(line)["question"] for _, line in zip(range(40), fh, strict=False)]
    f = minilm_featurizer()
    web = f(webtext[:80])
    gsm = f(math_q)
    same = mauve_score(None, None, p_features=web[:40], q_features=web[40:80], seed=0)
    diff = mauve_score(None, None, p_features=web[:40], q_features=gsm, seed=0)
    assert same.mauve > 0.8 and diff.mauve < same.mauve - 0.3


# ------------------------------------------------------------------------------------------ calibration
def test_ece_hand_computed():
    conf = [0.9, 0.9, 0.6, 0.6, 0.2]
    corr = [1, 0, 1, 1, 0]
    # 5 bins: (0.8,1]: conf .9 acc .5 (2 items); (0.4,0.6]: conf .6 acc 1 (2); (0,0.2]: conf .2 acc 0 (1)
    assert ece(conf, corr, n_bins=5) == pytest.approx(2 / 5 * 0.4 + 2 / 5 * 0.4 + 1 / 5 * 0.2)
    assert ece([1.0, 1.0], [True, True]) == 0.0
    assert ece([0.0, 0.0], [False, False]) == 0.0


def test_reliability_bins_edges_are_closed_above():
    r = reliability_bins([0.0, 0.2, 0.4, 0.41, 1.0], [0, 1, 1, 0, 1], n_bins=5)
    np.testing.assert_array_equal(r.count, [2, 1, 1, 0, 1])  # 0 and 0.2 in (0, 0.2]; 0.4 in (0.2, 0.4]
    assert np.isnan(r.confidence[3]) and np.isnan(r.accuracy[3])
    assert r.accuracy[0] == pytest.approx(0.5) and r.confidence[0] == pytest.approx(0.1)
    assert r.lower[1] == pytest.approx(0.2) and r.upper[1] == pytest.approx(0.4)


def test_ece_matches_guo_reference_loop():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.01, 1, size=500)
    corr = rng.uniform(size=500) < conf**2
    edges = np.linspace(0, 1, 16)
    ref = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            ref += m.mean() * abs(corr[m].mean() - conf[m].mean())
    assert ece(conf, corr) == pytest.approx(ref)


def test_selective_auroc():
    assert selective_auroc([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(0.75)
    assert selective_auroc([0.5, 0.5, 0.5], [1, 0, 1]) == pytest.approx(0.5)
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(selective_auroc([0.9, 0.8], [1, 1]))


def test_calibration_rejects_bad_input():
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        ece([1.2], [1])
    with pytest.raises(InputError, match="0/1"):
        ece([0.5], [2])
    with pytest.raises(InputError, match="equal length"):
        selective_auroc([0.5, 0.6], [1])
