import numpy as np
import pytest
import torch

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models import length_sorted_batches, load_causal_lm, load_diffusion, tiny_model

DIFFUSION = ["bert", "llada", "dream"]
TEXTS = ["the cat sat on the big red house .", "a dog", "paris is the capital of france", "one two three"]


@pytest.mark.parametrize("kind", DIFFUSION)
def test_forward_counter_is_exact(kind):
    m = tiny_model(kind)
    ids, attn = m.pad([m.encode(t) for t in TEXTS])
    assert m.nfe == 0
    m.logits(ids, attn)
    m.logits(ids[:2], attn[:2])
    m.score_positions(ids, attn, attn.bool(), ids)
    m.hidden_states(ids[:1], attn[:1])
    assert m.nfe == 4
    assert m.rows_forwarded == 4 + 2 + 4 + 1
    m.reset_nfe()
    assert (m.nfe, m.rows_forwarded) == (0, 0)


def test_dream_shift_scores_position_i_from_raw_logits_at_i_minus_1():
    m = tiny_model("dream")
    ids, attn = m.pad([m.encode(TEXTS[0])])
    am = attn.bool()
    n = ids.shape[1]
    mask4 = (am[:, None, :, None] & am[:, None, None, :]) | torch.eye(n, dtype=torch.bool)
    with torch.no_grad():
        raw = m.module(
            input_ids=ids, attention_mask=mask4, position_ids=(attn.cumsum(-1) - 1).clamp(min=0)
        ).logits
    aligned = m.logits(ids, attn)
    v = len(
        m.tokenizer
    )  # ids past the tokenizer (the padded vocabulary) are masked; see the vocab-padding test
    torch.testing.assert_close(aligned[:, 1:, :v], raw[:, :-1, :v].float())
    torch.testing.assert_close(aligned[:, 0, :v], raw[:, 0, :v].float())
    # the lean path uses the same alignment
    pos = torch.zeros_like(attn, dtype=torch.bool)
    pos[0, 3] = True
    sc = m.score_positions(ids, attn, pos, ids)
    want = torch.log_softmax(raw[0, 2, :v].float(), -1)[ids[0, 3]]
    assert abs(float(sc.logprob[0]) - float(want)) < 1e-5


def test_llada_like_pads_left_and_bert_right():
    assert tiny_model("llada").padding_side == "left"
    assert tiny_model("bert").padding_side == "right"


@pytest.mark.parametrize("kind", DIFFUSION)
def test_logits_invariant_to_batch_composition_and_padding(kind):
    m = tiny_model(kind)
    seqs = [m.encode(t) for t in TEXTS]
    ids, attn = m.pad(seqs)
    batched = m.logits(ids, attn)
    for i, s in enumerate(seqs):
        a_ids, a_attn = m.pad([s])
        alone = m.logits(a_ids, a_attn)[0]
        rows = attn[i].bool()
        torch.testing.assert_close(batched[i][rows], alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", DIFFUSION)
def test_lean_path_matches_full_logits(kind):
    m = tiny_model(kind)
    ids, attn = m.pad([m.encode(t) for t in TEXTS])
    full = torch.log_softmax(m.logits(ids, attn), -1)
    pos = attn.bool() & (torch.arange(ids.shape[1]) % 2 == 0)
    targets = torch.randint(0, m.vocab_size, ids.shape, generator=torch.Generator().manual_seed(0))
    sc = m.score_positions(ids, attn, pos, targets, entropy=True, top_k=3, max_logprob=True, chunk=3)
    bi, pi = pos.nonzero(as_tuple=True)
    torch.testing.assert_close(
        sc.logprob, full[bi, pi].gather(1, targets[bi, pi, None])[:, 0], atol=1e-5, rtol=0
    )
    ent = -(full.exp() * full).sum(-1)[bi, pi]
    torch.testing.assert_close(sc.entropy, ent, atol=1e-5, rtol=0)
    torch.testing.assert_close(sc.top_logprobs, full[bi, pi].topk(3, -1).values, atol=1e-5, rtol=0)
    torch.testing.assert_close(sc.max_logprob, full[bi, pi].max(-1).values, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", DIFFUSION)
def test_logits_at_positions_equal_the_full_logits_there(kind):
    # the sampler's path: the head runs on the gathered positions only (Dream: shifted), one forward pass
    m = tiny_model(kind)
    ids, attn = m.pad([m.encode(t) for t in TEXTS])
    full = m.logits(ids, attn)
    pos = attn.bool() & (torch.arange(ids.shape[1]) % 3 != 1)
    n0 = m.nfe
    at = m.logits_at(ids, attn, pos)
    assert m.nfe == n0 + 1
    bi, pi = pos.nonzero(as_tuple=True)
    torch.testing.assert_close(at, full[bi, pi], atol=1e-5, rtol=0)
    order = torch.randperm(bi.numel(), generator=torch.Generator().manual_seed(0))  # any order, as pairs
    torch.testing.assert_close(m.logits_at(ids, attn, (bi[order], pi[order])), at[order], atol=1e-5, rtol=0)
    with pytest.raises(InputError, match="boolean mask of shape"):
        m.logits_at(ids, attn, pos[:, :-1])


@pytest.mark.parametrize("kind", DIFFUSION)
def test_embeddings_path_equals_ids_path_and_carries_gradients(kind):
    m = tiny_model(kind)
    ids, attn = m.pad([m.encode(TEXTS[0])])
    emb = m.input_embeddings()(ids).detach().requires_grad_(True)
    out = m.forward(None, attn, inputs_embeds=emb).logits
    torch.testing.assert_close(out, m.logits(ids, attn), atol=1e-5, rtol=0)
    out[0, 1].logsumexp(-1).backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0


def test_window_is_enforced():
    m = tiny_model("bert")
    ids = torch.zeros(1, m.max_length + 1, dtype=torch.long)
    with pytest.raises(InputError, match="exceed"):
        m.logits(ids)


def test_identity_hash_is_a_function_of_weights():
    a, b, c = tiny_model("bert", seed=0), tiny_model("bert", seed=0), tiny_model("bert", seed=1)
    assert a.identity().weights_sha256 == b.identity().weights_sha256 != c.identity().weights_sha256
    d = a.identity().as_dict()
    assert d["family"] == "hf-mlm" and d["mask_token_id"] == a.mask_token_id


def test_length_sorted_batches_cover_all_items_once():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    got = list(length_sorted_batches(lengths, batch_size=3))
    assert sorted(i for b in got for i in b) == list(range(7))
    assert got[0] == [2, 5, 0]
    tok = list(length_sorted_batches(lengths, max_tokens=10))
    assert all(max(lengths[i] for i in b) * len(b) <= 10 or len(b) == 1 for b in tok)


def test_length_sorted_batches_are_a_rule_of_the_lengths_and_bounds():
    lengths = [int(x) for x in np.random.default_rng(0).integers(1, 40, 37)]
    for kw in (
        {"batch_size": 5},
        {"max_tokens": 90},
        {"batch_size": 4, "max_tokens": 60},
        {"max_tokens": 20},
    ):
        got = list(length_sorted_batches(lengths, **kw))
        assert got == list(length_sorted_batches(list(lengths), **kw))  # the same inputs, the same cut
        flat = [i for b in got for i in b]
        assert flat == sorted(
            range(len(lengths)), key=lambda i: (-lengths[i], i)
        )  # longest first, ties by index
        for b in got:
            assert len(b) <= kw.get("batch_size", len(lengths))
            assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= kw.get("max_tokens", 10**9)
    assert list(length_sorted_batches([50, 3], max_tokens=20)) == [[0], [1]]  # too long for the bound: alone
    assert [len(b) for b in length_sorted_batches([1] * 40)] == [16, 16, 8]  # neither bound: 16 rows


def test_registry_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="unknown model spec"):
        load_diffusion("nonsense")
    with pytest.raises(InputError, match="autoregressive"):
        load_diffusion("tiny-causal")
    with pytest.raises(InputError, match="diffusion model"):
        load_causal_lm("tiny-bert")
    with pytest.raises(ModelNotFoundError, match="not on disk"):
        load_diffusion(f"hf:{tmp_path}/missing")
    with pytest.raises(ModelNotFoundError, match="not on disk"):
        load_diffusion("llada:/no/such/dir")
    with pytest.raises(InputError, match="trust-remote-code"):
        load_diffusion(f"llada:{tmp_path}")
    with pytest.raises(InputError, match="empty model spec"):
        load_diffusion("  ")


def test_hf_masked_lm_loads_from_disk_and_refuses_causal_dirs(tmp_path):
    m = tiny_model("bert")
    m.module.save_pretrained(tmp_path / "bert")
    m.tokenizer.save_pretrained(tmp_path / "bert")
    again = load_diffusion(f"hf:{tmp_path / 'bert'}")
    ids, attn = m.pad([m.encode(TEXTS[0])])
    torch.testing.assert_close(again.logits(ids, attn), m.logits(ids, attn))
    c = tiny_model("causal")
    c.module.save_pretrained(tmp_path / "causal")
    c.tokenizer.save_pretrained(tmp_path / "causal")
    with pytest.raises(InputError, match="causal LM"):
        load_diffusion(f"hf:{tmp_path / 'causal'}")
    ar = load_causal_lm(f"causal:{tmp_path / 'causal'}")
    assert ar.identity().weights_sha256 == c.identity().weights_sha256


def test_causal_continuation_logprobs_match_manual_computation():
    c = tiny_model("causal")
    [lp] = c.continuation_logprobs(["the cat"], [" sat on the mat"])
    ids = c.encode("the cat sat on the mat")
    n_ctx = len(c.encode("the cat"))
    with torch.no_grad():
        logits = c.module(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    want = [float(logp[i - 1, ids[i]]) for i in range(n_ctx, len(ids))]
    assert len(lp) == len(ids) - n_ctx == 4  # "mat" is unknown -> [UNK], still one token
    assert max(abs(a - b) for a, b in zip(lp, want)) < 1e-5
    # batching and order do not change values
    many = c.continuation_logprobs(
        ["a dog", "the cat", "one"], [" runs fast", " sat on the mat", " two three"], batch_size=2
    )
    assert max(abs(a - b) for a, b in zip(many[1], lp)) < 1e-5


def test_shared_context_logprobs_equal_separate_passes_in_two_forward_calls():
    # multiple choice: the context runs once, its KV cache serves every choice (different lengths, padding)
    c = tiny_model("causal")
    ctx = "the cat sat on the"
    choices = [" mat", " big red house", " dog", " one two three four"]
    want = c.continuation_logprobs([ctx] * len(choices), choices)
    n0 = c.nfe
    got = c.shared_context_logprobs(ctx, choices)
    assert c.nfe - n0 == 2
    for a, b in zip(got, want):
        assert len(a) == len(b) > 0
        assert np.abs(a - b).max() < 1e-5
    # an empty context starts at BOS like continuation_logprobs; one choice falls back to the plain path
    for cx, ch in (("", choices), (ctx, choices[:1])):
        for a, b in zip(c.shared_context_logprobs(cx, ch), c.continuation_logprobs([cx] * len(ch), ch)):
            assert len(a) == len(b) and np.abs(a - b).max() < 1e-5
    assert c.shared_context_logprobs(ctx, []) == []


def test_tail_logprobs_equal_the_full_pass_with_and_without_last_position_logits(monkeypatch):
    c = tiny_model("causal")
    seqs = [c.encode("the cat sat on the mat"), c.encode("a dog"), c.encode("one two three four five six")]
    starts = [3, 1, 6]
    ids, attn = c.pad(seqs, side="right")
    full = c.token_logprobs(ids, attn).double().numpy()
    with torch.no_grad():
        lp = torch.log_softmax(c.forward(ids, attn).logits.float(), dim=-1).max(-1).values.double().numpy()
    lean = c.tail_logprobs(seqs, starts, batch_size=3)
    monkeypatch.setattr(type(c), "keeps_last_logits", lambda self: False)
    plain = c.tail_logprobs(seqs, starts, batch_size=2)
    for i, (s, a) in enumerate(zip(seqs, starts)):
        for chosen, mx in (lean[i], plain[i]):
            assert len(chosen) == len(s) - a > 0
            np.testing.assert_allclose(chosen, full[i, a : len(s)], atol=1e-5)
            np.testing.assert_allclose(mx, lp[i, a - 1 : len(s) - 1], atol=1e-5)
    with pytest.raises(InputError, match="start positions"):
        c.tail_logprobs(seqs, starts[:2])
    with pytest.raises(InputError, match="padding side"):
        c.pad(seqs, side="middle")


def test_choice_logprobs_batch_requests_with_different_prefixes_in_two_calls_per_batch():
    # many items' multiple-choice requests: left-padded prefixes of different lengths in one pass, then every
    # remainder of every request in one pass; equal to separate plain passes, whatever the batch size
    c = tiny_model("causal")
    reqs = [
        ("the cat sat on the", [" mat", " big red house", " dog"]),
        ("a", [" one two three four", " b"]),
        ("one two three four five six seven", [" eight", " nine ten", " x", " y z"]),
        ("the dog", [" runs"]),  # a single choice: the plain path
        ("", [" a b", " c"]),  # an empty context starts at BOS
        ("the sun", []),
    ]
    want = [c.continuation_logprobs([cx] * len(ch), ch) for cx, ch in reqs]
    for bs in (1, 2, 16):
        n0 = c.nfe
        got = c.choice_logprobs(reqs, batch_size=bs)
        shared = 4  # requests with a shared prefix and two or more choices
        assert c.nfe - n0 == 2 * -(-shared // bs) + 1  # + the single choice's plain pass
        assert [len(g) for g in got] == [len(ch) for _, ch in reqs]
        for g, w in zip(got, want):
            for a, b in zip(g, w):
                assert len(a) == len(b) > 0
                assert np.abs(a - b).max() < 1e-5
    # a token budget below any prefix puts every request in its own batch, whatever batch_size allows
    n0 = c.nfe
    c.choice_logprobs(reqs, batch_size=16, max_tokens=1)
    assert c.nfe - n0 == 2 * 4 + 1
    with pytest.raises(InputError, match="batch_size"):
        c.choice_logprobs(reqs, batch_size=0)


def test_choice_logprobs_without_a_cache_probe_once_then_take_the_plain_path(monkeypatch):
    import dlmeval.models.causal as causal_mod

    c = tiny_model("causal")
    reqs = [
        ("the cat sat on the", [" mat", " big red house"]),
        ("a", [" b c", " d"]),
        ("one two", [" x", " y"]),
    ]
    want = [c.continuation_logprobs([cx] * len(ch), ch) for cx, ch in reqs]
    monkeypatch.setattr(
        causal_mod, "_cache_kw", lambda: "no_such_cache"
    )  # the module's output carries no cache
    n0 = c.nfe
    got = c.choice_logprobs(reqs, batch_size=1)
    assert c.nfe - n0 == 1 + 6  # one prefix pass finds no cache; then six plain rows, one per batch
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert np.abs(a - b).max() < 1e-5


def test_causal_generation_is_seeded_per_item_and_batch_invariant():
    c = tiny_model("causal")
    prompts = ["the cat", "a dog runs", "one two"]
    a = c.generate(prompts, max_new_tokens=6, temperature=1.0, seed=3, item_ids=["x", "y", "z"], batch_size=3)
    b = c.generate(prompts[1:2], max_new_tokens=6, temperature=1.0, seed=3, item_ids=["y"])
    assert a[1] == b[0]
    g1 = c.generate(prompts, max_new_tokens=6, temperature=0.0, batch_size=1)
    g3 = c.generate(prompts, max_new_tokens=6, temperature=0.0, batch_size=3)
    assert g1 == g3


@pytest.mark.slow
def test_default_ar_loads_from_cache_with_a_stable_hash():
    ar = load_causal_lm("default-ar")
    again = load_causal_lm("default-ar")
    assert ar.identity().weights_sha256 == again.identity().weights_sha256
    [lp] = ar.continuation_logprobs(["The capital of France is"], [" Paris"])
    assert lp.sum() > -3.0


def test_lean_path_computes_the_vocabulary_max_only_when_asked():
    # DiffScore reads the targets' log-probabilities only; the max over the vocabulary is calibration's (#36)
    m = tiny_model("llada")
    ids, attn = m.pad([m.encode(t) for t in TEXTS])
    pos = attn.bool()
    plain = m.score_positions(ids, attn, pos, ids)
    both = m.score_positions(ids, attn, pos, ids, max_logprob=True)
    assert plain.max_logprob is None and both.max_logprob is not None
    assert torch.equal(plain.logprob, both.logprob)
    assert bool((both.max_logprob >= both.logprob).all())
