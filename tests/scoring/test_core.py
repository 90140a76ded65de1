"""The masked-scoring core (dlmeval.scoring.core, #35): its values bit for bit those of a plain masked-forward loop
written here (the loop every caller had before the core), each caller's numbers equal to that loop's, and no caller
with a masked-forward loop of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.models.base import length_sorted_batches
from dlmeval.scoring.core import MaskedRow, iter_scores, score_rows

SRC = Path(__file__).resolve().parents[2] / "src" / "dlmeval"


@pytest.fixture(scope="module", params=["llada", "dream"])
def model(request):
    """tiny-llada (left padding, a padded vocabulary) and tiny-dream (right padding, logits shifted by one)."""
    return tiny_model(request.param, seed=2)


def _reference(
    model, rows, *, batch_size=None, max_tokens=None, exclude_mask=False, cfg=0.0, vocab_rows="tokenizer"
):
    """The loop the callers wrote by hand before the core: batches, padding, the mask token, the log-softmax
    (over the output rows ``vocab_rows`` names)."""
    kw = {} if vocab_rows == "tokenizer" else {"vocab_rows": vocab_rows}
    lengths = [len(r.ids) for r in rows]
    out = {}
    for batch in length_sorted_batches(lengths, batch_size=batch_size, max_tokens=max_tokens):
        seqs = []
        for i in batch:
            s = list(rows[i].ids)
            for p in rows[i].masked:
                s[int(p)] = model.mask_token_id
            seqs.append(s)
        ids, attn = model.pad(seqs)
        targets, _ = model.pad([list(rows[i].ids) for i in batch])
        off = model.offset(attn)
        where = torch.zeros_like(ids, dtype=torch.bool)
        un = torch.zeros_like(ids, dtype=torch.bool)
        for k, i in enumerate(batch):
            for p in rows[i].read():
                where[k, int(off[k]) + int(p)] = True
            for p in rows[i].unconditional or ():
                un[k, int(off[k]) + int(p)] = True
        with torch.no_grad():
            if cfg > 0:
                u = ids.clone()
                u[un] = model.mask_token_id
                z = model.logits_at(
                    torch.cat([ids, u]), torch.cat([attn, attn]), torch.cat([where, where]), **kw
                )
                c, uz = z.chunk(2)
                lp = torch.log_softmax(uz + (cfg + 1) * (c - uz), dim=-1)
            elif exclude_mask:
                z = model.logits_at(ids, attn, where, **kw).float()
                z[:, model.mask_token_id] = float("-inf")
                lp = torch.log_softmax(z, dim=-1)
            else:
                sc = model.score_positions(ids, attn, where, targets, max_logprob=True, top_k=2, **kw)
        bi, pi = where.nonzero(as_tuple=True)
        if cfg > 0 or exclude_mask:
            chosen = lp.gather(1, targets[bi, pi][:, None]).squeeze(1)
            best, top = lp.max(-1).values, lp.topk(2, dim=-1).indices
        else:
            chosen, best, top = sc.logprob, sc.max_logprob, sc.top_ids
        for k, i in enumerate(batch):
            sel = (bi == k).numpy()
            out[i] = (
                chosen.double().numpy()[sel],
                best.double().numpy()[sel],
                top.numpy()[sel],
                list(batch),
            )
    return out


def _rows(model):
    texts = ["the cat sat on the mat", "a dog", "the queen of the garden sat on the hill", "cat", "the king"]
    rows = []
    for t in texts:
        ids = model.encode(t)
        n = len(ids)
        rows.append(MaskedRow(ids, [n - 1]))
        rows.append(MaskedRow(ids, list(range(0, n, 2)), unconditional=[n - 1] if n > 1 else []))
        rows.append(MaskedRow(ids, (), scored=range(n)))  # nothing masked: the unmasked reading
    rows.append(
        MaskedRow(model.encode("a dog"), np.array([2, 1, 1]))
    )  # unsorted, repeated: read once, ascending
    return rows


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"batch_size": 3},
        {"max_tokens": 20},
        {"batch_size": 4, "exclude_mask": True},
        {"batch_size": 5, "cfg": 0.5},
    ],
    ids=["default", "batch3", "tokens20", "exclude-mask", "cfg"],
)
def test_core_equals_the_plain_loop_bit_for_bit(model, kw):
    rows = _rows(model)
    ref = _reference(model, rows, **kw)
    n0 = model.nfe
    got = score_rows(model, rows, max_logprob=True, top_k=2, **kw)
    assert model.nfe - n0 == len(got)  # one forward pass a batch (cfg: both halves in one)
    seen = []
    for b in got:
        seen += b.rows
        for r, lp, mx, top in zip(b.rows, b.logprob, b.max_logprob, b.top_ids, strict=True):
            want_lp, want_mx, want_top, want_batch = ref[r]
            assert b.rows == want_batch  # the same rows in the same order share a pass
            assert lp.dtype == np.float64 and np.array_equal(lp, want_lp)
            assert np.array_equal(mx, want_mx) and np.array_equal(top, want_top)
            assert len(lp) == len(set(int(p) for p in rows[r].read()))
    assert sorted(seen) == list(range(len(rows)))


def test_padded_vocabulary_rows_are_left_out_of_the_normalisation():
    m = tiny_model("llada", seed=2)
    n_tok = len(m.tokenizer)
    assert m.vocab_size > n_tok  # the stand-in pads its vocabulary, as LLaDA's release does
    ids = m.encode("the cat sat on the mat")
    (b,) = score_rows(m, [MaskedRow(ids, [2, 4])])
    x = torch.tensor([ids])
    x[0, [2, 4]] = m.mask_token_id
    with torch.no_grad():
        raw = m.module(input_ids=x).logits[0, [2, 4]].float()
    want = torch.log_softmax(raw[:, :n_tok], -1).gather(1, torch.tensor([[ids[2]], [ids[4]]])).squeeze(1)
    every_row = torch.log_softmax(raw, -1).gather(1, torch.tensor([[ids[2]], [ids[4]]])).squeeze(1)
    assert np.allclose(b.logprob[0], want.double().numpy(), atol=1e-5)
    assert not np.allclose(b.logprob[0], every_row.double().numpy(), atol=1e-3)


def test_bad_settings_are_refused():
    m = tiny_model("llada", seed=2)
    rows = [MaskedRow(m.encode("the cat"), [1])]
    with pytest.raises(InputError, match="cfg=-1"):
        list(iter_scores(m, rows, cfg=-1))
    with pytest.raises(InputError, match="cannot be combined"):
        list(iter_scores(m, rows, cfg=0.5, exclude_mask=True))


# ------------------------------------------------------------------------------------------- every caller's numbers
def test_diffscore_pll_token_scores_are_the_plain_loop_values(model):
    from dlmeval.scoring import DiffScorer

    sc = DiffScorer(model, scheme="pll", batch_size=3)
    text = "the queen of the garden sat on the hill"
    df = sc.score([text], config="marginal", token_scores=True)
    lay = sc.formatter.layout("marginal", text, None)
    a, b = lay.span("candidate")
    rows = [MaskedRow(lay.ids, [i]) for i in range(a, b)]
    ref = _reference(model, rows, batch_size=3)
    want = [float(ref[r][0][0]) for r in range(len(rows))]
    assert df.loc[0, "token_logprob"] == want
    assert df.loc[0, "score"] == pytest.approx(float(np.mean(want)), abs=1e-12)


def test_ipm_surprisal_and_answer_confidences_are_the_plain_loop_values(model):
    from dlmeval.robustness.calibration import dlm_token_probs
    from dlmeval.robustness.ipm import masked_surprisal
    from dlmeval.robustness.masked_confidence import masked_token_probs

    ids = [model.encode(t) for t in ("the cat sat on the mat", "a dog", "the queen of the hill")]
    el = [np.ones(len(x), dtype=bool) for x in ids]
    el[0][1] = False
    det = masked_surprisal(model, ids, el, batch_size=4)
    rows = [MaskedRow(ids[p], [i]) for p in range(3) for i in np.flatnonzero(el[p])]
    ref = _reference(model, rows, batch_size=4)
    flat = [-ref[r][0][0] for r in range(len(rows))]
    got = [v for p in range(3) for v in det.surprisal[p][el[p]]]
    assert got == flat and np.isnan(det.surprisal[0][1])
    assert det.batches == len({tuple(ref[r][3]) for r in ref})

    prompts = [model.encode(t) for t in ("the cat", "a dog sat", "the queen")]
    gens = [model.encode(t, add_special_tokens=False) for t in ("sat on the mat", "on", "of the hill and")]
    conf = masked_token_probs(model, prompts, gens, item_ids=["a", "b", "c"], batch_size=3)
    plain = dlm_token_probs(model, prompts, gens, batch_size=2)
    seqs = [p + g for p, g in zip(prompts, gens)]
    mrows = [MaskedRow(seqs[i], [len(prompts[i]) + j]) for i in range(3) for j in range(len(gens[i]))]
    mref = _reference(model, mrows, batch_size=3, exclude_mask=True)
    assert [v for tp in conf for v in tp.chosen] == [mref[r][0][0] for r in range(len(mrows))]
    assert [v for tp in conf for v in tp.max] == [mref[r][1][0] for r in range(len(mrows))]
    urows = [MaskedRow(s, (), scored=range(len(p), len(s))) for s, p in zip(seqs, prompts)]
    uref = _reference(model, urows, batch_size=2)
    for i, tp in enumerate(plain):
        assert np.array_equal(tp.chosen, uref[i][0]) and np.array_equal(tp.max, uref[i][1])


def test_llada_likelihood_sums_the_plain_loop_values(model):
    """LLaDA's likelihood sums the plain loop's values over the rows of the family's own rule (its default)."""
    from dlmeval.scoring.core import vocab_rows
    from dlmeval.scoring.llada_ll import _masked_nll

    seq = model.encode("the queen of the garden sat on the hill")
    masks = [[3, 5], [4], [3, 4, 5, 6]]
    rule = vocab_rows(model, "family")
    for cfg in (0.0, 0.5):
        outside = [p for p in range(len(seq)) if not 3 <= p < 7]
        rows = [MaskedRow(seq, m, unconditional=outside) for m in masks]
        ref = _reference(model, rows, batch_size=len(rows), cfg=cfg, vocab_rows=rule)
        want = []
        for r in range(len(rows)):
            v = 0.0
            for x in ref[r][0].tolist():
                v -= x
            want.append(v)
        assert _masked_nll(model, [seq] * 3, masks, cfg=cfg, span=(3, 7)) == want


def test_dgcg_candidate_losses_are_the_plain_loop_sums(model):
    from dlmeval.robustness.dgcg import AttackItem, _candidate_losses_dlm

    enc = lambda t: tuple(model.encode(t, add_special_tokens=False))  # noqa: E731
    item = AttackItem(
        "x", tuple(model.encode("the cat sat on")), enc("the mat"), enc("a dog ran to the hill")
    )
    suffixes = torch.randint(5, 100, (5, 3), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([True, False, True, True, False, True])
    got = _candidate_losses_dlm(model, item, suffixes, mask, batch=2)
    n_before = len(item.before) + 3 + len(item.after)
    cols = [n_before + j for j in range(6) if mask[j]]
    rows = [
        MaskedRow(list(item.before) + s + list(item.after) + list(item.target), cols)
        for s in suffixes.tolist()
    ]
    ref = _reference(model, rows, batch_size=2)
    want = []
    for r in range(len(rows)):
        v = 0.0
        for x in ref[r][0].tolist():
            v -= x
        want.append(v)
    assert got.tolist() == want


# ------------------------------------------------------------------------------------------- no loop of their own
#: the modules that score masked copies of texts; they reach the model only through dlmeval.scoring.core
CALLERS = (
    "scoring/estimator.py",
    "scoring/llada_ll.py",
    "scoring/diagnostics.py",
    "scoring/stratified.py",
    "scoring/masks.py",
    "baselines/likelihood.py",
    "integrations/lm_eval_ll.py",
    "robustness/ipm.py",
    "robustness/masked_confidence.py",
    "robustness/calibration.py",
    "robustness/probes.py",
    "robustness/dgcg.py",
)
#: what builds or runs a masked forward pass (model calls, padding, the batch cutter, the log-softmax)
FORWARD = {"score_positions", "logits_at", "logits", "forward", "pad", "offset", "log_softmax"}
#: the calls that remain, each for a reason that is not masked scoring
ALLOWED = {
    # a decoder: re-predicts the masked positions step by step from the core's masked batch (masked_batch)
    ("robustness/ipm.py", "infill"): {"length_sorted_batches", "logits"},
    # read-through proxies of the model for the sampler: they record what the sampler's own passes saw
    ("robustness/calibration.py", "CommitRecorder.logits"): {"logits"},
    ("robustness/calibration.py", "CommitRecorder.logits_at"): {"logits_at"},
    ("robustness/calibration.py", "CommitRecorder._record"): {"log_softmax"},
    # where the sampler's padded batch put each row's first generated position (no forward pass)
    ("robustness/calibration.py", "CommitRecorder.commit_logprobs"): {"pad", "offset"},
    ("robustness/probes.py", "_RecordingModel.logits"): {"logits"},
    ("robustness/probes.py", "_RecordingModel.logits_at"): {"logits"},
    # hidden states of unmasked texts (the probes' features), a causal LM's attention weights on unmasked texts
    ("robustness/probes.py", "probe_dataset"): {"length_sorted_batches", "pad", "offset"},
    ("robustness/probes.py", "attention_ratio"): {"length_sorted_batches", "pad", "forward", "offset"},
    # D-GCG's differentiable loss: one row, the suffix as relaxed one-hot embeddings, gradients kept
    ("robustness/dgcg.py", "dgcg_loss"): {"score_positions"},
    # GCG on a causal LM: next-token log-probs, nothing masked
    ("robustness/dgcg.py", "gcg_loss"): {"forward", "log_softmax"},
    ("robustness/dgcg.py", "_candidate_losses_ar"): {"forward", "log_softmax"},
}


def _forward_calls(path: Path) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    rel = str(path.relative_to(SRC))

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{scope}.{child.name}" if scope else child.name)
                continue
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in FORWARD or name == "length_sorted_batches":
                    found.setdefault((rel, scope), set()).add(name)
            visit(child, scope)

    visit(ast.parse(path.read_text()), "")
    return found


def test_callers_have_no_masked_forward_loop_of_their_own():
    found: dict[tuple[str, str], set[str]] = {}
    for c in CALLERS:
        found.update(_forward_calls(SRC / c))
    assert found == ALLOWED
    core = _forward_calls(SRC / "scoring" / "core.py")
    assert {n for names in core.values() for n in names} >= {
        "score_positions",
        "logits_at",
        "pad",
        "offset",
        "log_softmax",
        "length_sorted_batches",
    }


# ------------------------------------------------------------------------------------------- the family's vocabulary
def test_each_family_declares_the_rows_its_own_likelihood_code_normalises_over():
    from dlmeval.models.family import Family, families

    rule = {f.name: f.likelihood_vocab for f in families("diffusion")}
    # LLaDA's eval_llada.py / get_log_likelihood.py, Dream's harness, dllm's MDLM and BERT harnesses: every row
    assert {n for n, r in rule.items() if r == "all"} == {"llada", "dream", "a2d", "bert-chat"}
    assert rule["a2d-bd3lm"] == "tokenizer"  # dllm's BD3LM harness has no loglikelihood
    with pytest.raises(ValueError, match="likelihood_vocab"):
        Family(name="toy", kind="diffusion", description="", load=lambda p, o: None, likelihood_vocab="some")


def test_the_family_rule_normalises_over_every_row_of_the_head():
    m = tiny_model("llada", seed=2)
    assert m.likelihood_vocab == "all" and m.vocab_size > len(m.tokenizer)
    ids = m.encode("the cat sat on the mat")
    rows = [MaskedRow(ids, [2, 4])]
    x = torch.tensor([ids])
    x[0, [2, 4]] = m.mask_token_id
    with torch.no_grad():
        raw = m.module(input_ids=x).logits[0, [2, 4]].float()
    every_row = -torch.nn.functional.cross_entropy(raw, torch.tensor([ids[2], ids[4]]), reduction="none")
    for vocab in ("family", "all"):
        (b,) = score_rows(m, rows, vocab=vocab)
        assert np.allclose(b.logprob[0], every_row.double().numpy(), atol=1e-5)
        # the guided and the exclude-mask readings take the rule too
        guided = [MaskedRow(ids, [2, 4], unconditional=[0, 1])]
        for kw in ({"cfg": 0.5}, {"exclude_mask": True}):
            (r_all,) = score_rows(m, guided, vocab=vocab, **kw)
            (r_tok,) = score_rows(m, guided, **kw)
            assert np.all(r_tok.logprob[0] - r_all.logprob[0] > 1e-3)
    (t,) = score_rows(m, rows)
    assert not np.allclose(t.logprob[0], every_row.double().numpy(), atol=1e-3)
    with pytest.raises(InputError, match="vocab='rows'"):
        score_rows(m, rows, vocab="rows")


def test_llada_likelihood_with_the_family_rule_is_llada_s_cross_entropy():
    """LLaDA's get_loglikelihood, its loss written out here on the raw logits (``F.cross_entropy`` over every row),
    with the same draws: equal to ``llada_log_likelihood(vocab="family")``; ``vocab="tokenizer"`` leaves the
    stand-in's 43 untrained padded rows out and sits higher."""
    from dlmeval.scoring.llada_ll import llada_log_likelihood, stratified_counts

    m = tiny_model("llada", seed=2)
    seq = m.encode("the queen of the garden sat on the hill")
    a, b, rows, mc = 3, 8, 4, 8
    length = b - a
    gen = torch.Generator().manual_seed(11)
    losses = []
    for _ in range(mc // rows):
        k = int(torch.randint(1, length + 1, (), generator=gen))
        counts = stratified_counts(k, length, rows)
        x = torch.tensor([seq] * rows)
        where = torch.zeros_like(x, dtype=torch.bool)
        for r, c in enumerate(counts):
            perm = torch.randperm(length, generator=gen)
            where[r, a:b] = perm < c
        noisy = x.masked_fill(where, m.mask_token_id)
        with torch.no_grad():
            logits = m.module(input_ids=noisy).logits.float()
        ce = torch.nn.functional.cross_entropy(logits[where], x[where], reduction="none")
        p_mask = (torch.tensor(counts, dtype=torch.float32) / length)[:, None].expand_as(x)[where]
        losses.append(float((ce / p_mask).sum()) / rows)
    want = -sum(losses) / len(losses)
    got = {
        v: llada_log_likelihood(
            m, seq, (a, b), mc_num=mc, batch_size=rows, generator=torch.Generator().manual_seed(11), vocab=v
        )
        for v in ("family", "tokenizer")
    }
    assert got["family"] == pytest.approx(want, abs=1e-4)
    assert got["tokenizer"] - got["family"] > 0.01


def test_core_is_the_plain_loop_and_batch_size_invariant_on_300_mixed_length_rows():
    """300 rows of 2 to 61 tokens (a random masked subset each, seeded; every tenth read whole, unmasked) on
    tiny-llada at batch sizes 1, 7, 32, a token budget and the default: at each, the core's values are the plain
    loop's bit for bit (same batches); across them each row's log-probs agree within float32 rounding (measured:
    at most 6.7e-6 apart; 47 to 140 rows bit-equal) and its top ids are the same."""
    m = tiny_model("llada", seed=2)
    words = "the a cat dog sat ran on in mat park bird sun sea river hill tea we like green it rains often".split()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        ids = m.encode(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(1 + (i * 37) % 60)))
        n = len(ids)
        if i % 10 == 0:
            rows.append(MaskedRow(ids, (), scored=range(n)))
        else:
            rows.append(
                MaskedRow(ids, np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)))
            )
    assert len({len(r.ids) for r in rows}) > 40
    per_setting = []
    for kw in ({"batch_size": 1}, {"batch_size": 7}, {"batch_size": 32}, {"max_tokens": 512}, {}):
        ref = _reference(m, rows, **kw)
        got = {}
        for b in score_rows(m, rows, max_logprob=True, top_k=2, **kw):
            for r, lp, mx, top in zip(b.rows, b.logprob, b.max_logprob, b.top_ids, strict=True):
                want_lp, want_mx, want_top, want_batch = ref[r]
                assert b.rows == want_batch, kw
                assert np.array_equal(lp, want_lp) and np.array_equal(mx, want_mx), (kw, r)
                assert np.array_equal(top, want_top), (kw, r)
                got[r] = (lp, mx, top)
        assert sorted(got) == list(range(len(rows)))
        per_setting.append(got)
    one = per_setting[0]
    for got in per_setting[1:]:
        for r in range(len(rows)):
            assert np.allclose(got[r][0], one[r][0], rtol=0, atol=5e-5), r
            assert np.allclose(got[r][1], one[r][1], rtol=0, atol=5e-5), r
            assert np.array_equal(got[r][2], one[r][2]), r
