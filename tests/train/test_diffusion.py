import json

import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models import tiny_model
from dlmeval.seeding import torch_generator
from dlmeval.train.diffusion import (
    Example,
    TrainConfig,
    Trainer,
    apply_lora,
    collate,
    conditional_examples,
    diffusion_loss,
    pack_documents,
    sample_masks,
    sample_rates,
)

DOCS = [
    "the cat sat on the big red house .",
    "a dog runs to the river and eats food .",
    "paris is the capital of france and london is the capital of england .",
    "one two three four five six seven eight nine ten",
    "the old king wrote a book in the year one .",
    "she saw the small blue car at night .",
] * 3


def _rows(m, seq_len=12):
    return pack_documents(m, DOCS, seq_len)


def test_rates_are_stratified_and_in_range():
    r = sample_rates(8, torch_generator(0), eps=1e-3)
    assert ((r > 1e-3) & (r <= 1)).all()
    # exactly one rate in each stratum [k/8, (k+1)/8)
    strata = sorted(int(((x - 1e-3) / (1 - 1e-3) * 8).floor()) for x in r)
    assert strata == list(range(8))


def test_masks_hide_only_eligible_tokens_and_at_least_one():
    elig = torch.tensor([[False, True, True, True, False], [False, True, False, False, False]])
    h = sample_masks(elig, torch.tensor([1e-6, 1e-6]), torch_generator(1))
    assert (h & ~elig).sum() == 0
    assert h.sum(1).tolist() == [1, 1]


@pytest.mark.parametrize("weighting", ["mean", "elbo"])
def test_loss_counts_only_hidden_positions_with_the_documented_weighting(weighting):
    m = tiny_model("bert")
    rows = _rows(m)[:4]
    ids, attn, elig = collate(m, rows)
    g = torch_generator(3)
    rates = sample_rates(len(rows), g)
    hidden = sample_masks(elig, rates, g)
    loss, _ = diffusion_loss(m, ids, attn, elig, hidden, rates, weighting=weighting)
    noisy = torch.where(hidden, torch.full_like(ids, m.mask_token_id), ids)
    logp = torch.log_softmax(m.logits(noisy, attn), -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    ce = -logp * hidden  # zero outside hidden positions
    if weighting == "mean":
        want = ce.sum() / hidden.sum()
    else:
        want = (ce.sum(1) / rates / elig.sum(1)).mean()
    assert abs(loss.item() - want.item()) < 1e-4
    # changing the target at a position that is neither hidden nor visible-context-relevant... i.e. padding:
    # the loss of a batch is unchanged when a non-hidden, non-attended position changes
    ids2 = ids.clone()
    pad_pos = (attn == 0).nonzero()
    if len(pad_pos):
        ids2[pad_pos[0, 0], pad_pos[0, 1]] = 7
        loss2, _ = diffusion_loss(m, ids2, attn, elig, hidden, rates, weighting=weighting)
        assert abs(float(loss2) - float(loss)) < 1e-5


def test_bad_weighting_is_rejected():
    m = tiny_model("bert")
    ids, attn, elig = collate(m, _rows(m)[:2])
    with pytest.raises(InputError, match="weighting"):
        diffusion_loss(m, ids, attn, elig, elig, torch.ones(2), weighting="sqrt")


def _train(tmp, steps, stop_at=None, **kw):
    m = tiny_model("bert", seed=0)
    rows = _rows(m)
    cfg = TrainConfig(
        steps=steps, batch_size=4, lr=1e-3, warmup=2, eval_every=100, checkpoint_every=2, seq_len=12, **kw
    )
    tr = Trainer(m, rows, rows[:4], cfg, tmp, log=lambda s: None)
    tr.try_resume()
    while tr.step < (stop_at or steps):
        tr.train_step()
        if tr.step % cfg.checkpoint_every == 0:
            tr.save_checkpoint()
    return m, tr


def test_resume_after_a_kill_ends_where_an_uninterrupted_run_ends(tmp_path):
    full, tr_full = _train(tmp_path / "a", 6)
    # "killed" after step 5: the last checkpoint is step 4; a fresh process (fresh model) resumes from it
    _train(tmp_path / "b", 6, stop_at=5)
    resumed, tr_res = _train(tmp_path / "b", 6)
    assert tr_res.step == 6
    for (k, a), (_, b) in zip(full.module.state_dict().items(), resumed.module.state_dict().items()):
        assert torch.equal(a, b), k
    assert [h["loss"] for h in tr_full.history] == [h["loss"] for h in tr_res.history]


def test_resume_refuses_a_different_configuration(tmp_path):
    _train(tmp_path / "c", 2)
    with pytest.raises(InputError, match="another configuration"):
        _train(tmp_path / "c", 4, lr_head=5e-3)


def test_fit_writes_history_and_evaluates(tmp_path):
    m = tiny_model("bert")
    rows = _rows(m)
    cfg = TrainConfig(steps=4, batch_size=4, eval_every=2, checkpoint_every=2, seq_len=12, eval_batches=1)
    hist = Trainer(m, rows, rows[:4], cfg, tmp_path, log=lambda s: None).fit(progress=False)
    assert len(hist) == 4 and "eval" in hist[1] and set(hist[1]["eval"]) == {"0.15", "0.5", "0.9"}
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 4 and json.loads(saved["config"])["steps"] == 4


def test_conditional_mode_hides_only_target_tokens():
    m = tiny_model("bert")
    ex = conditional_examples(m, [{"source": "the cat sat on the big red house", "target": "a cat sat"}], 32)
    tok = m.tokenizer
    assert tok.convert_ids_to_tokens([i for i, e in zip(ex[0].ids, ex[0].eligible) if e]) == [
        "a",
        "cat",
        "sat",
    ]
    ids, attn, elig = collate(m, ex * 4)
    h = sample_masks(elig, torch.ones(4), torch_generator(0))
    assert h.sum() == 12 and (h & ~elig).sum() == 0
    # the source is truncated from its end so that the target fits
    long = conditional_examples(m, [{"source": "one two three four five six seven", "target": "a dog"}], 7)
    assert len(long[0].ids) == 7 and sum(long[0].eligible) == 2
    with pytest.raises(InputError, match="target"):
        conditional_examples(m, [{"source": "x"}], 16)


def test_lora_trains_only_adapters(tmp_path):
    m = tiny_model("bert")
    base = {k: v.clone() for k, v in m.module.state_dict().items()}
    rows = _rows(m)
    cfg = TrainConfig(
        steps=3,
        batch_size=4,
        lr=1e-2,
        warmup=1,
        lora=True,
        lora_r=2,
        seq_len=12,
        eval_every=100,
        checkpoint_every=100,
    )
    tr = Trainer(m, rows, [], cfg, tmp_path, log=lambda s: None)
    trainable = [n for n, p in m.module.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    lora_before = {n: p.detach().clone() for n, p in m.module.named_parameters() if p.requires_grad}
    for _ in range(3):
        tr.train_step()
    after = {k.replace(".base_layer", ""): v for k, v in m.module.state_dict().items() if "lora_" not in k}
    assert set(after) == set(base)
    for k, v in base.items():
        assert torch.equal(after[k], v), k  # base weights untouched
    assert any(not torch.equal(p, lora_before[n]) for n, p in m.module.named_parameters() if p.requires_grad)


def test_lora_rejects_unknown_targets():
    m = tiny_model("bert")
    with pytest.raises(ValueError):
        apply_lora(m, TrainConfig(lora=True, lora_targets=("no_such_layer",)))


def test_pack_documents_makes_full_rows():
    m = tiny_model("bert")
    rows = pack_documents(m, DOCS, 12)
    assert all(len(r.ids) == 12 for r in rows[:-1])
    assert all(r.ids[0] == m.tokenizer.cls_token_id and not r.eligible[0] for r in rows)
    assert isinstance(rows[0], Example)


def test_dropout_is_seeded_and_leaves_the_global_rng_alone(tmp_path):
    def run(d):
        m = tiny_model("bert")
        rows = conditional_examples(m, [{"source": "the cat sat", "target": "a dog ran"}] * 4)
        cfg = TrainConfig(steps=2, batch_size=2, lr=1e-2, warmup=1, eval_every=9, checkpoint_every=9)
        cfg = TrainConfig(**{**cfg.__dict__, "lora": True, "lora_r": 2, "lora_dropout": 0.5})
        tr = Trainer(m, rows, [], cfg, d, log=lambda s: None)
        return [tr.train_step()["loss"] for _ in range(2)]

    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a = run(tmp_path / "a")
    assert torch.equal(torch.random.get_rng_state(), state)  # no draw from the global generator
    torch.manual_seed(7)  # another global state: the same losses (dropout 0.5 draws from the seeded fork)
    assert run(tmp_path / "b") == a
