"""D-GCG / GCG: gradient through the one-hot suffix = finite differences, ids path = embeddings path,
determinism under a seed, NFE accounting, degradation arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models.tiny import tiny_model
from dlmeval.robustness.dgcg import (
    AttackItem,
    GCGConfig,
    _candidate_losses_ar,
    _candidate_losses_dlm,
    allowed_tokens,
    append_suffix,
    attack_item,
    degradation,
    dgcg_loss,
    gcg_loss,
    min_suffix_length,
    run_gcg,
    sample_target_mask,
    summarize_gcg,
)
from dlmeval.seeding import torch_generator


@pytest.fixture(scope="module")
def llada():
    return tiny_model("llada", seed=1)


@pytest.fixture(scope="module")
def causal():
    return tiny_model("causal", seed=2)


def _sharpened(kind, seed):
    # float64 weights, and an output head 30x the random init so that predictions are far from uniform and the
    # gradient is large against float32 rounding (RMSNorm and score_positions' log-softmax work in float32)
    m = tiny_model(kind, seed=seed)
    m.module.double()
    with torch.no_grad():
        m.module.get_output_embeddings().weight.mul_(30.0)
    return m


@pytest.fixture(scope="module")
def llada64():
    return _sharpened("llada", 3)


@pytest.fixture(scope="module")
def causal64():
    return _sharpened("causal", 4)


def _item(model, target="on the red house"):
    return attack_item(model, "the cat sat", target, "i0")


def _fd_check(loss_fn, onehot, entries, eps=1e-2):
    """Central differences on the relaxed one-hot matrix, entry by entry, against the autograd gradient."""
    x = onehot.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss_fn(x), x)
    scale = float(g.abs().max())
    for k, v in entries:
        plus, minus = onehot.clone(), onehot.clone()
        plus[k, v] += eps
        minus[k, v] -= eps
        with torch.no_grad():
            fd = (loss_fn(plus).item() - loss_fn(minus).item()) / (2 * eps)
        assert fd == pytest.approx(g[k, v].item(), rel=1e-2, abs=1e-2 * scale + 1e-4), (
            k,
            v,
            fd,
            g[k, v].item(),
        )
    return g


def test_dgcg_gradient_matches_finite_differences(llada64):
    item = _item(llada64)
    k, v = 3, llada64.vocab_size
    onehot = torch.zeros(k, v, dtype=torch.float64)
    suffix = [20, 31, 45]
    onehot[torch.arange(k), torch.tensor(suffix)] = 1.0
    mask = torch.tensor([True, False, True, True])
    entries = [(0, 20), (0, 7), (1, 31), (1, 60), (2, 45), (2, 12)]
    g = _fd_check(lambda x: dgcg_loss(llada64, item, x, mask), onehot, entries)
    assert float(g.abs().max()) > 1e-2  # the gradient is not trivially small


def test_ar_gcg_gradient_matches_finite_differences(causal64):
    item = _item(causal64)
    k, v = 3, causal64.module.config.vocab_size
    onehot = torch.zeros(k, v, dtype=torch.float64)
    onehot[torch.arange(k), torch.tensor([20, 31, 45])] = 1.0
    g = _fd_check(lambda x: gcg_loss(causal64, item, x), onehot, [(0, 20), (0, 9), (1, 50), (2, 45), (2, 70)])
    assert float(g.abs().max()) > 1e-2


def test_onehot_path_equals_ids_path(llada, causal):
    item = _item(llada)
    suffixes = torch.tensor([[20, 31, 45], [11, 12, 13], [40, 41, 42]])
    mask = torch.tensor([True, True, False, True])
    ids_losses = _candidate_losses_dlm(llada, item, suffixes, mask, batch=2)
    for s, want in zip(suffixes, ids_losses):
        onehot = torch.nn.functional.one_hot(s, llada.vocab_size).float()
        assert dgcg_loss(llada, item, onehot, mask).item() == pytest.approx(want, rel=1e-5)
    item = _item(causal)
    ids_losses = _candidate_losses_ar(causal, item, suffixes, batch=2)
    v = causal.module.config.vocab_size
    for s, want in zip(suffixes, ids_losses):
        onehot = torch.nn.functional.one_hot(s, v).float()
        assert gcg_loss(causal, item, onehot).item() == pytest.approx(want, rel=1e-5)
    # the AR loss is the sum of the target's next-token log-probs
    ids = torch.tensor([[*item.before, 20, 31, 45, *item.target]])
    lp = causal.token_logprobs(ids, torch.ones_like(ids))[0, -len(item.target) :]
    assert ids_losses[0] == pytest.approx(-lp.sum().item(), rel=1e-5)


def test_target_mask_sampling():
    seen = set()
    for s in range(50):
        t, m = sample_target_mask(4, torch_generator(s))
        assert 0 <= t <= 1 and m.dtype == torch.bool and bool(m.any())
        seen.add(int(m.sum()))
        t2, m2 = sample_target_mask(4, torch_generator(s))
        assert t == t2 and torch.equal(m, m2)
    assert seen == {1, 2, 3, 4}


def test_run_gcg_deterministic_and_nfe(llada, causal):
    cfg = GCGConfig(
        suffix_length=3,
        steps=3,
        top_k=8,
        search_width=6,
        eval_batch_size=4,
        retokenize_filter=False,
        eval_samples=2,
    )
    items = [
        _item(llada),
        AttackItem(
            "i1",
            tuple(llada.encode("a dog ran")),
            (),
            tuple(llada.encode("to the city", add_special_tokens=False)),
        ),
    ]
    a = run_gcg(llada, items, cfg, seed=5)
    b = run_gcg(llada, items, cfg, seed=5)
    for n, (x, y) in enumerate(zip(a, b)):
        assert x.suffix_ids == y.suffix_ids and x.init_ids == y.init_ids
        assert x.loss == y.loss and x.candidate_loss == y.candidate_loss and x.grad_norm == y.grad_norm
        assert x.timestep == y.timestep
        # per step: one gradient pass + ceil(6 / 4) candidate passes; evaluation: 2 masks x 1 pass
        assert x.nfe == 3 * (1 + 2) + 2
        assert x.kind == "dlm" and len(x.loss) == 3 and all(g > 0 for g in x.grad_norm)
        assert x.prompt_ids == [*items[n].before, *x.suffix_ids]
    # an item's result does not depend on the other items
    alone = run_gcg(llada, items[1:], cfg, seed=5)[0]
    assert alone.suffix_ids == a[1].suffix_ids and alone.loss == a[1].loss
    c = run_gcg(llada, items[:1], cfg, seed=6)[0]
    assert c.init_ids != a[0].init_ids or c.timestep != a[0].timestep
    allowed = set(allowed_tokens(llada).tolist())
    assert set(a[0].suffix_ids) <= allowed and llada.mask_token_id not in allowed

    # AR: deterministic loss, so the chosen candidate's loss is next step's current loss
    r = run_gcg(causal, [_item(causal, "on the red house")], cfg, seed=5)[0]
    assert r.kind == "ar" and all(math.isnan(t) for t in r.timestep)
    np.testing.assert_allclose(r.loss[1:], r.candidate_loss[:-1], rtol=1e-5)
    assert r.final_eval_loss == pytest.approx(r.candidate_loss[-1], rel=1e-5)
    assert r.nfe == 3 * (1 + 2) + 1
    s = summarize_gcg([r])
    assert s["n"] == 1 and len(s["loss_trajectory"]) == 3 and s["mean_grad_norm"] > 0


def test_attack_item_with_template(llada):
    wrap = lambda u: f"question {u} answer"  # noqa: E731
    it = attack_item(llada, "the cat sat", "on the red house", "q", wrap=wrap)
    assert it.before[0] == llada.bos_token_id and llada.decode(list(it.before)) == "question the cat sat"
    assert llada.decode(list(it.after)) == "answer"
    assert llada.decode(list(it.target)) == "on the red house"
    with pytest.raises(InputError, match="no tokens"):
        attack_item(llada, "the cat", "", "q")


def test_degradation_and_min_length():
    assert degradation(0.5, 0.3) == pytest.approx(0.4)
    assert degradation(0.5, 0.3, relative=False) == pytest.approx(0.2)
    assert degradation(0.5, 0.6) == pytest.approx(-0.2)
    assert math.isnan(degradation(0.0, 0.0))
    with pytest.raises(InputError):
        degradation(1.2, 0.3)
    assert min_suffix_length({4: 0.1, 8: 0.25, 16: 0.5}) == 8
    assert min_suffix_length({4: 0.2, 8: 0.25}) == 4
    assert min_suffix_length({4: 0.05, 8: float("nan")}) is None
    assert append_suffix("What is it? ", " foo bar ") == "What is it? foo bar"
    with pytest.raises(InputError):
        GCGConfig(steps=0)


def test_attack_item_encodes_a_chat_prompt_as_the_responder_does():
    """A chat model that takes its template without a leading [CLS] (BERT-Chat): the attacked prompt starts as the
    clean prompt the responder encodes with ``encode_chat`` does, not with a [CLS] only the attack had."""
    from dlmeval.models import load_diffusion

    m = load_diffusion("tiny-bert-chat")
    wrap = lambda u: f"question {u} answer"  # noqa: E731
    it = attack_item(m, "the cat sat", "on the red house", "q", wrap=wrap)
    clean = m.encode_chat("question the cat sat")
    assert list(it.before) == list(clean) and it.before[0] != m.tokenizer.cls_token_id
    plain = attack_item(m, "the cat sat", "on the red house", "q")  # no template: the plain prompt encoding
    assert plain.before[0] == m.tokenizer.cls_token_id
