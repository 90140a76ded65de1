"""Baselines: hand-computed BLEU / ROUGE values, METEOR on local WordNet, greedy matching and exact EMD, AR scores."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dlmeval.baselines import bleu, meteor, rouge
from dlmeval.baselines.embedding import emd, greedy_match
from dlmeval.errors import InputError


def test_bleu_golden_value():
    # p1..p4 = 4/5, 3/4, 2/3, 1/2, equal lengths (BP = 1): BLEU = (4/5 * 3/4 * 2/3 * 1/2) ** (1/4) = 0.2 ** 0.25
    assert bleu("a b c d e", ["a b c d f"]) == pytest.approx(100 * 0.2**0.25, abs=1e-9)
    assert bleu("a b c d e", "a b c d e") == pytest.approx(100.0)
    # duplicate references change nothing (D2T repeats its references)
    assert bleu("a b c d e", ["a b c d f"] * 5) == bleu("a b c d e", ["a b c d f"])


def test_rouge_golden_values_and_best_reference():
    r = rouge("the cat sat", ["the cat ran"])
    assert r["rouge1"] == pytest.approx(2 / 3)
    assert r["rouge2"] == pytest.approx(1 / 2)  # bigrams {the cat, cat sat} vs {the cat, cat ran}
    assert r["rougeL"] == pytest.approx(2 / 3)
    best = rouge("the cat sat", ["dogs bark loudly", "the cat sat"])
    assert best == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    with pytest.raises(InputError, match="at least one reference"):
        rouge("x", [])


@pytest.mark.skipif(not Path("/usr/share/wordnet/data.noun").exists(), reason="needs Debian's wordnet-base")
def test_meteor_matches_nltk_reference_value(tmp_path, monkeypatch):
    hyp = "It is a guide to action which ensures that the military always obeys the commands of the party"
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    assert meteor(hyp, ref) == pytest.approx(0.6944, abs=1e-4)  # the value in nltk's meteor_score doctest
    assert meteor("the cat sat on the mat", "the cat sat on the mat") > 0.99
    # synonyms come from WordNet ('auto' and 'car' share the synset car.n.01; nltk looks synonyms up on the
    # Porter stem of the word, so 'automobile' -> 'automobil' finds none: nltk's behaviour, kept)
    assert meteor("the auto", "the car") > meteor("the banana", "the car")


def test_wordnet_staging_writes_lexnames(tmp_path):
    from dlmeval.baselines import lexical

    if not Path("/usr/share/wordnet/data.noun").exists():
        pytest.skip("needs Debian's wordnet-base")
    d = lexical._staged_wordnet(tmp_path)
    lines = (d / "lexnames").read_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1" and lines[44] == "44\tadj.ppl\t3"
    assert lexical._staged_wordnet(tmp_path) == d  # second call reuses the copy


def test_wordnet_missing_gives_clear_error(tmp_path, monkeypatch):
    from dlmeval.baselines import lexical

    monkeypatch.setenv("DLMEVAL_WORDNET", str(tmp_path))
    with pytest.raises(InputError, match="wordnet-base"):
        lexical._wordnet_source()


def test_greedy_match_hand_values():
    cand = np.array([[1.0, 0.0], [0.0, 1.0]])
    ref = np.array([[1.0, 0.0]])
    p, r, f = greedy_match(cand, ref)
    assert (p, r) == (0.5, 1.0)  # second candidate token has no match (cos 0)
    assert f == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert greedy_match(np.zeros((0, 2)), ref) == (0.0, 0.0, 0.0)


def test_emd_exact_values():
    # a single point: every unit of mass moves to it
    assert emd(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0]])) == pytest.approx(0.5)
    # 0 -> 0 and 1 -> 3 (cost 2) beats the crossing plan (cost 4): (0 + 2) / 2
    assert emd(np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])) == pytest.approx(1.0)


def test_emd_agrees_with_scipy_wasserstein():
    from scipy.stats import wasserstein_distance, wasserstein_distance_nd

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=7), rng.normal(size=4)
    assert emd(a[:, None], b[:, None]) == pytest.approx(wasserstein_distance(a, b), abs=1e-9)
    u, v = rng.normal(size=(6, 3)), rng.normal(size=(5, 3))
    assert emd(u, v) == pytest.approx(wasserstein_distance_nd(u, v), abs=1e-9)
    with pytest.raises(InputError, match="non-empty"):
        emd(np.zeros((0, 3)), v)


@pytest.fixture(scope="module")
def embedder():
    from dlmeval.baselines.embedding import TokenEmbedder

    return TokenEmbedder(device="cpu")


def test_token_embedder_windows_and_identity(embedder):
    from dlmeval.baselines.embedding import greedy_match_f1, mover_score

    long = " ".join(f"word{i}" for i in range(400))  # more word pieces than one 512-token window
    n_pieces = len(embedder.tokenizer(long, add_special_tokens=False)["input_ids"])
    assert n_pieces > 510
    e = embedder.embed([long])[0]
    assert e.shape == (n_pieces, 384)  # nothing truncated, specials dropped
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0)
    assert embedder.label == "all-MiniLM-L6-v2 L6"
    assert greedy_match_f1(embedder, "the cat sat on the mat", ["the cat sat on the mat"]) == pytest.approx(
        1.0
    )
    assert mover_score(
        embedder, "the cat sat on the mat", ["dogs bark", "the cat sat on the mat"]
    ) == pytest.approx(1.0, abs=1e-9)
    near = greedy_match_f1(embedder, "a cat was sitting on the mat", "the cat sat on the mat")
    far = greedy_match_f1(embedder, "stock markets fell sharply today", "the cat sat on the mat")
    assert near > far


@pytest.fixture(scope="module")
def tiny_ar():
    from dlmeval.models.tiny import tiny_model

    return tiny_model("causal", seed=0)


def test_ar_directions_are_mean_logprobs(tiny_ar):
    from dlmeval.baselines.likelihood import ARScorer, directional_scores

    sc = ARScorer(tiny_ar, batch_size=2)
    cands = ["the cat sat .", "a dog ran to the house ."]
    srcs = ["the cat sat on the big red house .", "the dog ran ."]
    refs = [("the cat sat .", "a cat sat ."), ("the dog ran .",)]
    got = directional_scores(sc, cands, sources=srcs, references=refs)
    lp = sc.token_logprobs([f"{s}" for s in srcs], cands)
    assert got["s2h"] == pytest.approx([float(x.mean()) for x in lp])
    assert got["mar"] == pytest.approx(sc.mean_logprobs([None, None], cands))
    # r2h / h2r take the best reference; f is the best reference's F (BARTScore's rule, as the bartscore family)
    r2h_each = sc.mean_logprobs(["the cat sat .", "a cat sat ."], [cands[0]] * 2)
    h2r_each = sc.mean_logprobs([cands[0]] * 2, ["the cat sat .", "a cat sat ."])
    assert got["r2h"][0] == pytest.approx(max(r2h_each))
    assert got["f"][0] == pytest.approx(max((a + b) / 2 for a, b in zip(r2h_each, h2r_each)))
    assert got["f"][1] == pytest.approx((got["r2h"][1] + got["h2r"][1]) / 2)
    assert all(math.isfinite(v) for d in got.values() for v in d)


def test_ar_cut_conditioning_text_is_counted(tiny_ar):
    """tiny-causal's window is 128 tokens: a 200-word source loses its start in s2h, and says how much."""
    from dlmeval.baselines.likelihood import ARScorer, directional_scores

    sc = ARScorer(tiny_ar)
    long_src = " ".join(["the cat sat on the mat ."] * 30)  # 210 tokens
    cuts: dict = {}
    directional_scores(
        sc,
        ["the cat sat .", "a dog ran ."],
        sources=[long_src, "the dog ran ."],
        directions=("s2h", "mar"),
        cuts=cuts,
    )
    ctx, cont = tiny_ar.split_tokens(sc.template.format(context=long_src), "the cat sat .")
    assert cuts["s2h"] == [len(ctx) + len(cont) - 128, 0] and cuts["s2h"][0] > 0
    assert "mar" not in cuts


def test_ar_bad_input(tiny_ar):
    from dlmeval.baselines.likelihood import ARScorer, directional_scores

    with pytest.raises(InputError, match="context"):
        ARScorer(tiny_ar, template="no placeholder")
    sc = ARScorer(tiny_ar)
    with pytest.raises(InputError, match="empty"):
        sc.mean_logprobs([None], [""])
    with pytest.raises(InputError, match="unknown AR direction"):
        directional_scores(sc, ["a"], sources=["b"], directions=["sideways"])
    with pytest.raises(InputError, match="one source per candidate"):
        directional_scores(sc, ["a"], directions=["s2h"])
