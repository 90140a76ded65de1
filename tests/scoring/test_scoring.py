"""DiffScore estimator: masks, exact expectations by enumeration, invariances, configurations, bad input, runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.protocols import score as score_protocol
from dlmeval.report.figures import plot_token_heatmap
from dlmeval.scoring import DiffScorer, PairFormatter, make_masks
from dlmeval.scoring.diagnostics import (
    apply_profile_weights,
    learn_profile_weights,
    profile_matrix,
    token_table,
)
from dlmeval.scoring.masks import (
    balanced_masks,
    exact_count_masks,
    hidden_count,
    independent_masks,
    masks_per_rate,
    rate_grid,
)

CANDS = ["the cat sat on the mat", "a dog ran", "the king of france wrote a book", "paris"]
SRCS = [
    "the cat sat on a mat in the house",
    "the dog runs fast in the city",
    "the king wrote a book in paris",
    "paris is the capital of france",
]


@pytest.fixture(scope="module")
def bert():
    return tiny_model("bert")


# ---------------------------------------------------------------------------------------------------- masks
@pytest.mark.parametrize("length,k,t", [(10, 20, 10), (7, 5, 5), (60, 20, 10), (9, 200, 10), (1, 20, 10)])
def test_exact_count_masks_hide_every_token_equally_often_with_exact_counts(length, k, t):
    m = exact_count_masks(length, k, t, np.random.default_rng(3))
    assert m.hidden.shape == (k, length)
    assert np.bincount(m.rate_index, minlength=t).tolist() == masks_per_rate(k, t).tolist()
    for j in range(k):
        want = hidden_count(rate_grid(t)[m.rate_index[j]], length)
        # a complement may differ from round((1 - t) L) by one (rounding); every mask hides >= 1 token
        assert abs(int(m.hidden[j].sum()) - want) <= 1 and m.hidden[j].sum() >= 1
    cov = m.hidden.sum(axis=0)
    assert cov.max() - cov.min() <= 1
    if (length, k, t) in ((10, 20, 10), (7, 5, 5), (60, 20, 10)):
        assert cov.min() == cov.max()  # exactly equal when the rate pairs complement exactly


def test_exact_count_masks_are_complementary_pairs():
    m = exact_count_masks(10, 20, 10, np.random.default_rng(0))
    # rate 0.1 (index 0) pairs with rate 0.9 (index 8): j-th masks are complements
    a, b = m.hidden[m.rate_index == 0], m.hidden[m.rate_index == 8]
    assert np.array_equal(a, ~b)
    assert not (a[0] & a[1]).any()  # the two 0.1-masks are disjoint windows of one permutation
    assert m.hidden[m.rate_index == 9].all()  # t = 1 hides everything
    # tiling: in one round the masks at 0.1, 0.2, 0.3, 0.4 partition the text (L = 10: 1 + 2 + 3 + 4 tokens)
    one = exact_count_masks(10, 10, 10, np.random.default_rng(1))
    low = one.hidden[one.rate_index < 4]
    assert low.sum(axis=1).tolist() == [1, 2, 3, 4] and (low.sum(axis=0) == 1).all()


@pytest.mark.parametrize("length,k,t", [(10, 20, 10), (7, 5, 5), (3, 40, 10), (1, 20, 10)])
def test_balanced_masks_are_complementary_pairs_of_bernoulli_masks(length, k, t):
    m = balanced_masks(length, k, t, np.random.default_rng(4))
    assert m.hidden.shape == (k, length) and (m.hidden.sum(axis=1) >= 1).all()
    assert np.bincount(m.rate_index, minlength=t).tolist() == masks_per_rate(k, t).tolist()
    assert m.hidden[m.rate_index == t - 1].all()  # t = 1 hides everything
    for a in range(t - 1):  # rates below 1/2 and their partners 1 - t
        b = t - 2 - a
        if b <= a:
            continue
        lo, hi = m.hidden[m.rate_index == a], m.hidden[m.rate_index == b]
        e_lo, e_hi = m.drawn_empty()[m.rate_index == a], m.drawn_empty()[m.rate_index == b]
        for j in range(min(len(lo), len(hi))):
            if not (e_lo[j] or e_hi[j]):  # a mask drawn empty is replaced by one token, its partner is full
                assert np.array_equal(lo[j], ~hi[j])
            elif e_lo[j]:
                assert hi[j].all() and lo[j].sum() == 1
    # an exactly-coupled estimator would not vary its sizes: here they are random (Binomial)
    if length == 10:
        many = [balanced_masks(length, k, t, np.random.default_rng(s)) for s in range(30)]
        sizes = {int(x.hidden[x.rate_index == 0][0].sum()) for x in many}
        assert len(sizes) > 1


def test_independent_masks_never_empty_and_pll_is_identity():
    m = independent_masks(3, 200, 10, np.random.default_rng(0))
    assert (m.hidden.sum(axis=1) >= 1).all()
    # the masks drawn empty are flagged, and hide one token each
    assert m.drawn_empty().any() and (m.hidden[m.drawn_empty()].sum(axis=1) == 1).all()
    assert np.array_equal(make_masks("pll", 4, 1, 1, np.random.default_rng(0)).hidden, np.eye(4, dtype=bool))
    with pytest.raises(InputError, match="scheme"):
        make_masks("nope", 4, 1, 1, np.random.default_rng(0))


# ---------------------------------------------------------------------------------------------------- exact expectation
def _subset_logprobs(model, layout, side="candidate"):
    """{frozenset M: log p of each hidden token (in token order)} for every non-empty subset M, by brute force."""
    a, b = layout.span(side)
    n = b - a
    out = {}
    subsets = [s for r in range(1, n + 1) for s in itertools.combinations(range(n), r)]
    seqs = []
    for s in subsets:
        ids = list(layout.ids)
        for i in s:
            ids[a + i] = model.mask_token_id
        seqs.append(ids)
    ids_t, attn = model.pad(seqs)
    orig, _ = model.pad([list(layout.ids)] * len(seqs))
    logp = torch.log_softmax(model.logits(ids_t, attn), -1)
    off = model.offset(attn)
    for r, s in enumerate(subsets):
        pos = [int(off[r]) + a + i for i in s]
        out[frozenset(s)] = np.array([float(logp[r, p, orig[r, p]]) for p in pos])
    return out, n


def _exact_expectation(sub, n, scheme, weighting, k, t):
    """The exact expectation of the estimator: every mask pattern with its probability (T divides K here)."""
    rates = rate_grid(t)
    counts = masks_per_rate(k, t)
    total = 0.0
    for r_i, rate in enumerate(rates):
        if scheme == "exact-count":
            m = hidden_count(rate, n)
            size_m = [s for s in sub if len(s) == m]
            probs = {s: 1.0 / len(size_m) for s in size_m}
            empty = 0.0
        else:  # balanced and independent: Bernoulli(rate); an empty mask becomes a uniformly chosen single token
            probs = {s: rate ** len(s) * (1 - rate) ** (n - len(s)) for s in sub}
            empty = (1 - rate) ** n
        e = 0.0
        for s, p in probs.items():
            if weighting == "mlp":
                e += (p + (empty / n if len(s) == 1 else 0.0)) * sub[s].mean()
            else:  # elbo: 1/t; elbo_norm: 1/(t L); a mask drawn empty is the empty sum, 0
                e += p * sub[s].sum() / (rate * (n if weighting == "elbo_norm" else 1))
        total += counts[r_i] / k * e
    return total


@pytest.mark.parametrize(
    "scheme,weighting,k,t",
    [
        ("balanced", "mlp", 10, 5),
        ("balanced", "elbo_norm", 6, 3),
        ("exact-count", "mlp", 10, 5),
        ("exact-count", "elbo", 6, 3),
        ("independent", "mlp", 10, 5),
        ("independent", "elbo", 8, 4),
    ],
)
def test_monte_carlo_converges_to_exact_expectation(peaky, scheme, weighting, k, t):
    cand = "the cat sat on"  # L = 4 candidate tokens: 15 non-empty subsets
    scorer = DiffScorer(peaky, n_masks=k, n_rates=t, scheme=scheme, weighting=weighting, seed=5)
    layout = scorer.formatter.layout("marginal", cand, None)
    sub, n = _subset_logprobs(peaky, layout)
    assert n == 4
    exact = _exact_expectation(sub, n, scheme, weighting, k, t)
    reps = 60  # independent estimates: the same text under 60 item ids (masks are seeded by the id)
    df = scorer.score([cand] * reps, config="marginal", item_ids=[f"r{i}" for i in range(reps)])
    est = df["score"].to_numpy()
    assert est.std() > 1e-3  # the estimator is random, the test is not vacuous
    se = est.std(ddof=1) / math.sqrt(reps)
    assert abs(est.mean() - exact) < 3 * se, (est.mean(), exact, se)
    # exact-count masks are more precise than independent masks here (same K); balanced masks are not at L = 4
    # on this sharpened head (tests/scoring/test_estimator_paper.py checks them on a longer text)
    if scheme == "exact-count" and weighting == "mlp":
        ind = DiffScorer(peaky, n_masks=k, n_rates=t, scheme="independent", seed=5)
        est_i = ind.score([cand] * reps, config="marginal", item_ids=[f"r{i}" for i in range(reps)])["score"]
        assert est.var() < 0.8 * est_i.to_numpy().var()


def test_pll_is_exact_and_deterministic(peaky):
    cand = "the cat sat on"
    scorer = DiffScorer(peaky, scheme="pll", seed=1)
    layout = scorer.formatter.layout("marginal", cand, None)
    sub, n = _subset_logprobs(peaky, layout)
    want = np.mean([sub[frozenset([i])][0] for i in range(n)])
    a = scorer.score([cand], config="marginal")
    b = DiffScorer(peaky, scheme="pll", seed=99).score([cand], config="marginal")
    assert a.loc[0, "score"] == pytest.approx(want, abs=1e-5)
    assert a.loc[0, "score"] == b.loc[0, "score"] and a.loc[0, "se"] == 0.0
    assert a.loc[0, "profile"] == [] and a.attrs["rates"] == []


# ---------------------------------------------------------------------------------------------------- invariances
@pytest.mark.parametrize("kind", ["bert", "llada", "dream"])
def test_scores_do_not_depend_on_batch_size_or_order(kind):
    m = tiny_model(kind)
    base = DiffScorer(m, n_masks=6, n_rates=3, seed=2).score(CANDS, SRCS, config="bidir")
    one = DiffScorer(m, n_masks=6, n_rates=3, seed=2, batch_size=1).score(CANDS, SRCS, config="bidir")
    tight = DiffScorer(m, n_masks=6, n_rates=3, seed=2, max_tokens=1).score(CANDS, SRCS, config="bidir")
    order = [2, 0, 3, 1]
    rev = DiffScorer(m, n_masks=6, n_rates=3, seed=2, batch_size=3).score(
        [CANDS[i] for i in order], [SRCS[i] for i in order], config="bidir"
    )
    for other in (one, tight):
        np.testing.assert_allclose(other["score"], base["score"], atol=1e-5, rtol=0)
        assert list(other["item_id"]) == list(base["item_id"])
    np.testing.assert_allclose(rev["score"], base["score"].to_numpy()[order], atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        np.stack(rev["profile"]), np.stack(base["profile"].to_numpy()[order]), atol=1e-5, rtol=0
    )


def test_seed_determinism_and_seed_dependence(peaky):
    a = DiffScorer(peaky, n_masks=4, n_rates=2, seed=7).score(CANDS, SRCS, config="cond")
    b = DiffScorer(peaky, n_masks=4, n_rates=2, seed=7).score(CANDS, SRCS, config="cond")
    c = DiffScorer(peaky, n_masks=4, n_rates=2, seed=8).score(CANDS, SRCS, config="cond")
    assert a["score"].tolist() == b["score"].tolist()
    assert a.attrs["signature"] == b.attrs["signature"] != c.attrs["signature"]
    assert not np.allclose(a["score"], c["score"])


def test_duplicate_items_are_computed_once(peaky):
    s = DiffScorer(
        peaky, n_masks=4, n_rates=2, scheme="exact-count", seed=0
    )  # fixed sizes: a known row count
    df = s.score(["the cat", "the cat", "a dog"], config="marginal")
    assert df.loc[0, "score"] == df.loc[1, "score"] and df.loc[0, "item_id"] == df.loc[1, "item_id"]
    # 2 unique items x 4 masks (rates 1/2, 1, 1/2, 1): the two t=1 masks of an item coincide -> 3 rows each
    assert s.rows_scored == 2 * 3


# ---------------------------------------------------------------------------------------------------- configurations
def test_pair_layouts(bert, peaky):
    f = PairFormatter(bert)
    lay = f.layout("cond", "the cat", "a dog ran")
    toks = bert.tokenizer.convert_ids_to_tokens(list(lay.ids))
    assert toks == ["[CLS]", "a", "dog", "ran", "[SEP]", "the", "cat", "[SEP]"]
    assert lay.candidate == (5, 7) and lay.source == (1, 4)
    assert f.layout("marginal", "the cat", None).ids == tuple(bert.encode("the cat"))
    # llama-style pair template has no separator: the first EOS is inserted (chat=False: tiny-llada, like
    # LLaDA-Instruct, ships a chat template)
    g = PairFormatter(peaky, chat=False)
    toks = peaky.tokenizer.convert_ids_to_tokens(list(g.layout("reverse", "the cat", "a dog").ids))
    assert toks == ["<|startoftext|>", "a", "dog", "<|endoftext|>", "the", "cat"]


def test_chat_template_layout():
    m = tiny_model("llada")
    m.tokenizer.chat_template = (
        "<bos>{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} <eos>{% endfor %}"
    )
    m.has_chat_template = True
    f = PairFormatter(m, prompt="summarize")
    lay = f.layout("cond", "the cat sat", "a dog ran")
    dec = lambda span: m.tokenizer.convert_ids_to_tokens(list(lay.ids[span[0] : span[1]]))  # noqa: E731
    assert dec(lay.candidate) == ["the", "cat", "sat"]
    assert dec(lay.source) == ["a", "dog", "ran"]
    assert "[UNK]" in m.tokenizer.convert_ids_to_tokens(list(lay.ids[: lay.source[0]]))  # role + prompt words
    marg = f.layout("marginal", "the cat sat", None)
    assert m.tokenizer.convert_ids_to_tokens(list(marg.ids[marg.candidate[0] : marg.candidate[1]])) == [
        "the",
        "cat",
        "sat",
    ]
    assert DiffScorer(m, n_masks=2, n_rates=2).run_config("cond")["chat"] is True
    with pytest.raises(InputError, match="chat template"):
        PairFormatter(tiny_model("bert"), chat=True)


def test_pmi_is_coupled_and_bidir_is_the_mean_of_directions(peaky):
    s = DiffScorer(peaky, n_masks=12, n_rates=3, seed=4)
    pmi = s.score(CANDS, SRCS, config="pmi", token_scores=True)
    cond = s.score(CANDS, SRCS, config="cond")
    marg = s.score(CANDS, config="marginal")  # separate call, no sources: same candidate masks
    assert pmi["coupled"].all()
    # scores are float32 sums of ~100 nats: 1e-5 alone is below their rounding, hence rtol
    np.testing.assert_allclose(pmi["score_cond"], cond["score"], atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(pmi["score_marginal"], marg["score"], atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(pmi["score"], cond["score"] - marg["score"], atol=1e-5, rtol=1e-6)
    # coupled differences carry less noise than the two standard errors combined
    assert (pmi["se"] < np.sqrt(cond["se"] ** 2 + marg["se"] ** 2)).mean() >= 0.5
    np.testing.assert_allclose(
        pmi.loc[0, "token_pmi"],
        np.array(pmi.loc[0, "token_logprob_cond"]) - np.array(pmi.loc[0, "token_logprob_marginal"]),
    )
    bi = s.score(CANDS, SRCS, config="bidir")
    rev = s.score(CANDS, SRCS, config="reverse")
    np.testing.assert_allclose(bi["score"], (cond["score"] + rev["score"]) / 2, atol=1e-5, rtol=0)
    assert (bi["n_tokens_reverse"] == rev["n_tokens"]).all()


def test_aliases_and_signature(bert):
    s = DiffScorer(bert, n_masks=2, n_rates=2)
    a = s.score(["the cat"], ["a dog"], config="conditional")
    assert a.loc[0, "config"] == "cond"
    assert a.attrs["config"]["scheme"] == "combined" and a.attrs["config"]["n_masks"] == 2
    assert a.loc[0, "signature"].startswith("dlmeval:") and "kind:diffscore" in a.loc[0, "signature"]
    assert DiffScorer.fast(bert).spec.n_masks == 5 and DiffScorer.fast(bert).spec.n_rates == 5


# ---------------------------------------------------------------------------------------------------- bad input
def test_empty_candidate_is_nan_with_reason(bert):
    df = DiffScorer(bert, n_masks=2, n_rates=2).score(
        ["", "the cat", "   "], ["a dog", "a dog", "x"], config="cond"
    )
    assert math.isnan(df.loc[0, "score"]) and df.loc[0, "reason"] == "empty candidate: no tokens to score"
    assert math.isnan(df.loc[2, "score"]) and "empty candidate" in df.loc[2, "reason"]
    assert not math.isnan(df.loc[1, "score"]) and df.loc[1, "reason"] is None
    rev = DiffScorer(bert, n_masks=2, n_rates=2).score(["the cat"], [""], config="reverse")
    assert math.isnan(rev.loc[0, "score"]) and "empty source" in rev.loc[0, "reason"]


def test_bad_input_raises_clear_errors(bert):
    s = DiffScorer(bert, n_masks=2, n_rates=2)
    with pytest.raises(InputError, match="needs a source"):
        s.score(["the cat"], config="cond")
    with pytest.raises(InputError, match="source 1 is missing"):
        s.score(["a", "b"], ["x", None], config="reverse")
    with pytest.raises(InputError, match="2 candidates but 1 sources"):
        s.score(["a", "b"], ["x"], config="cond")
    with pytest.raises(InputError, match="unknown DiffScore configuration"):
        s.score(["a"], config="fluent")
    with pytest.raises(InputError, match="candidate 0 is a float"):
        s.score([float("nan")], config="marginal")
    with pytest.raises(InputError, match="two different"):
        s.score(["a", "b"], config="marginal", item_ids=["x", "x"])
    with pytest.raises(InputError, match="weighting"):
        DiffScorer(bert, weighting="sum")
    with pytest.raises(InputError, match="n_masks"):
        DiffScorer(bert, n_masks=0)


def test_long_source_is_truncated_from_its_end_with_a_warning(bert, tmp_path):
    from dlmeval.store import RunStore

    long_src = " ".join(["the cat sat on the mat"] * 40)  # 240 words > 128-token window
    s = DiffScorer(bert, n_masks=2, n_rates=2)
    lay = s.formatter.layout("cond", "a dog ran", long_src)
    assert len(lay.ids) == bert.max_length and lay.n_tokens("candidate") == 3
    assert list(lay.ids[1:7]) == s.formatter.tokens(long_src)[:6]  # the beginning is kept
    with RunStore(tmp_path / "runs.sqlite") as store:
        run = score_protocol.open_run(store, s, "cond")
        df = score_protocol.score_run(s, run, ["a dog ran", "the cat"], [long_src, "a dog"], config="cond")
        assert "source truncated" in df.loc[0, "warning"] and df.loc[1, "warning"] is None
        assert any("truncated" in w for w in run.warnings())


def test_run_resumes_whole_canonical_chunks(peaky, tmp_path):
    """A resumed run reads stored items back and recomputes only the canonical chunks that lack one; the
    resumed scores are the bits of an uninterrupted run (the same chunks, the same batches)."""
    from dlmeval.store import RunStore

    s = DiffScorer(peaky, n_masks=4, n_rates=2, seed=3)
    computed: list[str] = []
    compute = s.compute
    s.compute = lambda prep, items, **kw: (computed.extend(prep.items[j][0] for j in items), compute(prep, items, **kw))[1]  # fmt: skip
    ids = ["a", "b", "c", "d"]
    with RunStore(tmp_path / "runs.sqlite") as store:
        run = score_protocol.open_run(store, s, "cond", chunk_items=1)
        first = score_protocol.score_run(
            s, run, CANDS[:2], SRCS[:2], config="cond", item_ids=ids[:2], chunk_items=1
        )
        assert sorted(computed) == ["a", "b"]
        computed.clear()
        again = score_protocol.score_run(s, run, CANDS, SRCS, config="cond", item_ids=ids, chunk_items=1)
        assert sorted(computed) == ["c", "d"]  # only the chunks of the two new items were forwarded
        assert again["score"].tolist()[:2] == first["score"].tolist()
        with RunStore(tmp_path / "other.sqlite") as other:
            fresh = score_protocol.score_run(
                s, score_protocol.open_run(other, s, "cond", chunk_items=1), CANDS, SRCS, config="cond",
                item_ids=ids, chunk_items=1,
            )  # fmt: skip
        assert again["score"].tolist() == fresh["score"].tolist()
        with pytest.raises(InputError, match="another configuration"):
            score_protocol.score_run(s, run, CANDS, SRCS, config="reverse", item_ids=ids, chunk_items=1)
        with pytest.raises(InputError, match="another configuration"):  # another chunking is another run
            score_protocol.score_run(s, run, CANDS, SRCS, config="cond", item_ids=ids, chunk_items=2)


# ---------------------------------------------------------------------------------------------------- diagnostics
def test_profile_weights_find_the_informative_rate():
    rng = np.random.default_rng(0)
    prof = rng.normal(size=(120, 5))
    human = 2.0 * prof[:, 3] + 0.1 * rng.normal(size=120)
    pw = learn_profile_weights(prof, human, folds=5, seed=0)
    assert pw.weights.sum() == pytest.approx(1.0)
    assert pw.weights[3] > 0.9 and pw.cv_spearman > 0.9 > pw.uniform_spearman
    assert pw.fold_weights.shape == (5, 5) and np.isfinite(pw.oof_prediction).all()
    groups = np.repeat(np.arange(30), 4)
    pg = learn_profile_weights(prof, human, folds=5, groups=groups)
    assert pg.details["grouped"] and pg.weights[3] > 0.9
    np.testing.assert_allclose(apply_profile_weights(prof, pw.weights), prof @ pw.weights)
    with pytest.raises(InputError, match="5-fold"):
        learn_profile_weights(prof[:3], human[:3])


def test_token_table_and_heatmap(peaky, tmp_path):
    s = DiffScorer(peaky, n_masks=6, n_rates=3, seed=1)
    df = s.score(CANDS[:2], SRCS[:2], config="cond", token_scores=True)
    assert profile_matrix(df).shape == (2, 3)
    tt = token_table(df)
    assert len(tt) == df["n_tokens"].sum()
    assert list(tt.columns[:5]) == ["item_id", "direction", "position", "token", "logprob"]
    assert tt.filter(like="lp@").shape[1] == 3
    # the token score is the mean over the masks that hid it; each token hidden equally often (balanced)
    row = df.iloc[0]
    assert np.isfinite(row["token_logprob"]).all()
    fig = plot_token_heatmap(df, 0, path=tmp_path / "heat.png")
    assert (tmp_path / "heat.png").stat().st_size > 1000 and fig.axes
    pmi = s.score(CANDS[:1], SRCS[:1], config="pmi", token_scores=True)
    assert set(token_table(pmi)["direction"]) == {"cond", "marginal"}
    plot_token_heatmap(pmi, pmi.loc[0, "item_id"], direction="marginal")


# ---------------------------------------------------------------------------------------------------- CLI
def test_cli_score_prints_scores_and_signature_and_resumes(tmp_path, capsys):
    import json

    from dlmeval.cli.main import main

    (tmp_path / "c.jsonl").write_text(
        "\n".join(
            json.dumps({"id": f"i{i}", "candidate": c, "source": s})
            for i, (c, s) in enumerate(zip(CANDS, SRCS))
        )
    )
    store = str(tmp_path / "runs.sqlite")
    argv = [
        "--store",
        store,
        "--no-progress",
        "score",
        "--model",
        "tiny-bert",
        "--config",
        "pmi",
        "--candidates",
    ]
    assert main([*argv, str(tmp_path / "c.jsonl"), "--fast", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["item_id"] for r in out["items"]] == ["i0", "i1", "i2", "i3"]
    assert out["config"]["n_masks"] == 5 and out["signature"].startswith("dlmeval:")
    assert all(math.isfinite(r["score"]) for r in out["items"])
    assert main([*argv, str(tmp_path / "c.jsonl"), "--fast", "-o", str(tmp_path / "o.csv")]) == 0
    text = capsys.readouterr().out
    assert "signature: dlmeval:" in text and f"run: {out['run_id']}" in text
    assert (tmp_path / "o.csv").read_text().count("\n") == 5
    # bad input: one line, exit code 2
    argv = ["score", "--model", "tiny-bert", "--candidates", "the cat", "--text", "--no-store"]
    assert main([*argv, "--config", "cond"]) == 2
    assert "needs --sources" in capsys.readouterr().err
    assert main(["score", "--model", "tiny-bert", "--candidates", "missing.txt", "--no-store"]) == 2


@pytest.mark.parametrize("scheme", ["balanced", "independent", "exact-count"])
@pytest.mark.parametrize("k,t", [(5, 10), (3, 10), (1, 4), (13, 10)])
def test_fewer_masks_than_rates_still_cover_every_rate(scheme, k, t):
    """K < T (or T not dividing K): the spare masks sit at systematically sampled rates, so every rate is scored
    across items and no rate is favoured (a round-robin layout scored only the lowest K rates)."""
    n_items = 400
    counts = np.zeros(t)
    for i in range(n_items):
        m = make_masks(scheme, 12, k, t, np.random.default_rng(i))
        assert m.n_masks == k
        per = np.bincount(m.rate_index, minlength=t)
        assert per.max() - per.min() <= 1  # never two spare masks at one rate
        counts += per
    share = counts / counts.sum()
    assert (counts > 0).all()  # every rate scored
    # each rate's expected share is 1/T; with 400 items the observed shares stay within a few binomial SEs
    extra = k % t
    if extra:
        se = np.sqrt((extra / t) * (1 - extra / t) / n_items) / k
        assert np.abs(share - 1 / t).max() < 5 * se + 1e-12


def test_diffscore_profile_with_fewer_masks_than_rates(bert):
    s = DiffScorer(bert, n_masks=5, n_rates=10, seed=0, scheme="balanced")
    df = s.score(["the cat sat on the mat"] * 40, config="marginal", item_ids=[f"i{i}" for i in range(40)])
    prof = np.array(df["profile"].tolist())
    assert (np.isfinite(prof).sum(axis=1) == 5).all()  # five rates per item ...
    assert np.isfinite(prof).any(axis=0).all()  # ... and over the items every one of the ten
    # the default (combined) estimates the score but not each S(t_k): it reports no per-rate value at all
    df = DiffScorer(bert, n_masks=5, n_rates=10, seed=0).score(
        ["the cat sat on the mat"] * 40,
        config="marginal",
        item_ids=[f"i{i}" for i in range(40)],
        token_scores=True,
    )
    prof = np.array(df["profile"].tolist())
    assert prof.shape == (40, 10) and np.isnan(prof).all() and np.isfinite(df["score"]).all()
    assert np.isnan(np.array(df["token_rate_logprob"].iloc[0], dtype=float)).all()
