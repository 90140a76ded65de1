"""Mechanistic probes: planted signal vs noise, token labels from edit records, attention-mass arithmetic on a
hand-made tensor, trajectory metrics by hand, trajectory recording aligned with the sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError
from dlmeval.models.tiny import tiny_model
from dlmeval.robustness.perturb import Perturbation
from dlmeval.robustness.probes import (
    FeatureSet,
    Trajectory,
    attention_mass,
    attention_ratio,
    eager_attention,
    label_offsets,
    layer_indices,
    linear_probe,
    probe_dataset,
    probe_layers,
    record_trajectory,
    snapshot_steps,
    token_labels,
    trajectory_divergence,
)


@pytest.fixture(scope="module")
def llada():
    return tiny_model("llada", seed=0)


def _planted(seed, n=600, h=20, signal=2.5):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.normal(size=(n, h))
    X[:, 3] += signal * (2 * y - 1)
    return X, y


def test_probe_separates_planted_signal_and_is_at_chance_on_noise():
    X, y = _planted(0)
    r = linear_probe(X, y, seed=1)
    assert r.accuracy > 0.9 and r.auroc > 0.95
    assert (r.n_train, r.n_test) == (480, 120)
    noise = np.random.default_rng(1).normal(size=X.shape)
    r0 = linear_probe(noise, y, seed=1)
    assert abs(r0.accuracy - 0.5) < 0.12 and abs(r0.auroc - 0.5) < 0.12
    # the same seed gives the same split and fit
    assert linear_probe(X, y, seed=1) == r
    # per layer: the best layer is the one carrying the signal; a sequence split keeps groups apart
    fs = FeatureSet([0, 4], {0: noise, 4: X}, y, np.arange(len(y)) // 6, np.zeros(len(y), dtype=int))
    pr = probe_layers(fs, seed=2)
    assert pr.best_layer == 4 and pr.best_accuracy > 0.9 and pr.accuracy[0] < 0.65
    assert pr.max_auroc == max(pr.auroc) and (pr.n_corrupted, pr.n_clean) == (300, 300)
    ps = probe_layers(fs, seed=2, split="sequence")
    assert ps.best_layer == 4 and ps.n_test == 120
    with pytest.raises(InputError, match="both classes"):
        linear_probe(X, np.zeros(len(y), dtype=int))


def test_label_offsets_rules():
    offsets = [(0, 0), (0, 3), (4, 7), (8, 10)]
    assert label_offsets(offsets, [(5, 6)]).tolist() == [-1, 0, 1, 0]  # overlap
    assert label_offsets(offsets, [(8, 8)]).tolist() == [
        -1,
        0,
        0,
        1,
    ]  # deletion point: the token after the gap
    assert label_offsets(offsets, [(7, 7)]).tolist() == [-1, 0, 1, 0]  # deletion at a word's end
    assert label_offsets(offsets, [(3, 4)]).tolist() == [-1, 0, 0, 0]  # an edited space touches no token
    assert label_offsets(offsets, [(2, 5), (9, 10)]).tolist() == [-1, 1, 1, 1]


def test_token_labels_from_perturbation_edits(llada):
    text = "the king and the queen were happy in the big old city"
    res = Perturbation.of("keyboard", 0.3).perturb(text, seed=0, item_id="x")
    assert res.edits
    tl = token_labels(llada.tokenizer, res.text, res.edits)
    assert tl.labels[0] == -1  # <bos>
    words = res.text.split()
    starts = [res.text.index(w, sum(len(x) + 1 for x in words[:i])) for i, w in enumerate(words)]
    want = [int(any(s <= e.start < s + len(w) for e in res.edits)) for s, w in zip(starts, words)]
    assert tl.labels[1:].tolist() == want
    # a shift moves the edits (the message inside a template)
    wrapped = "q : " + res.text
    assert token_labels(llada.tokenizer, wrapped, res.edits, shift=4).labels[3:].tolist() == want
    with pytest.raises(InputError):
        token_labels(llada.tokenizer, "short", [(3, 40)])


def test_probe_dataset_shapes_and_balance(llada):
    texts, edits = [], []
    for i in range(6):
        r = Perturbation.of("keyboard", 0.2).perturb("the dog and the cat ran to the river at night", 0, i)
        texts.append(r.text)
        edits.append(r.edits)
    fs = probe_dataset(llada, texts, edits, seed=0, batch_size=4)
    assert fs.layers == layer_indices(3) == [0, 1, 2]
    n_pos = int((fs.y == 1).sum())
    assert n_pos == int((fs.y == 0).sum()) > 0
    assert all(fs.X[x].shape == (2 * n_pos, 32) for x in fs.layers)
    again = probe_dataset(llada, texts, edits, seed=0, batch_size=1)
    order = np.lexsort((fs.positions, fs.groups))
    order2 = np.lexsort((again.positions, again.groups))
    np.testing.assert_allclose(fs.X[2][order], again.X[2][order2], rtol=1e-4, atol=1e-5)
    assert layer_indices(33) == list(range(0, 33, 2)) and layer_indices(33, 5) == [0, 8, 16, 24, 32]


def test_attention_mass_by_hand():
    a = torch.tensor(
        [
            [[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.6, 0.2]],
            [[1.0, 0, 0], [0.9, 0.1, 0], [0.1, 0.1, 0.8]],
        ]
    )
    corrupted = [False, True, False]
    mass, base, nq = attention_mass(a, corrupted)
    # queries 1 and 2 see key 1; mass = (0.5 + 0.6 + 0.1 + 0.1) / 4, base = (1/2 + 1/3) / 2
    assert nq == 2
    assert mass == pytest.approx(0.325)
    assert base == pytest.approx(5 / 12)
    assert mass / base == pytest.approx(0.78)
    # bidirectional: every query sees key 1 (base 1/3 each)
    mass, base, nq = attention_mass(a, corrupted, causal=False)
    assert (
        nq == 3
        and mass == pytest.approx((0 + 0.5 + 0.6 + 0 + 0.1 + 0.1) / 6)
        and base == pytest.approx(1 / 3)
    )
    # padding: key/query 2 invalid
    mass, base, nq = attention_mass(a, corrupted, [True, True, False])
    assert nq == 1 and mass == pytest.approx((0.5 + 0.1) / 2) and base == pytest.approx(0.5)
    assert all(math.isnan(x) for x in attention_mass(a, [False] * 3)[:2])


def test_eager_attention_and_ratio():
    m = tiny_model("causal", seed=0)
    before = m.module.config._attn_implementation
    with eager_attention(m):
        assert m.module.config._attn_implementation == "eager"
    assert m.module.config._attn_implementation == before
    texts = ["the cat sat on the red house", "the dog ran", "a big old car"]
    edits = [[(4, 7)], [(4, 7)], []]
    one = attention_ratio(m, texts, edits, batch_size=1)
    two = attention_ratio(m, texts, edits, batch_size=3)
    assert len(one) == 3 and one[0].ratio.shape == (2,)
    for x, y in zip(one, two):
        np.testing.assert_allclose(x.ratio, y.ratio, rtol=1e-4)
    assert one[0].queries == 6 and np.isfinite(one[0].ratio).all()  # "cat" (position 2) seen by 2..7
    assert np.isnan(one[2].ratio).all()
    assert m.module.config._attn_implementation == before


def test_snapshot_steps_and_divergence_by_hand():
    assert snapshot_steps(128).tolist() == [0, 62, 94, 110, 119, 123, 126, 127]
    assert snapshot_steps(4, n=8).tolist() == [0, 2, 3]  # t = 4, 2.07, 1.07, 0.56, ... -> duplicates dropped
    c_ids = np.array([[1, 2, 3], [1, 2, 3], [1, 5, 3], [1, 5, 3]])
    n_ids = np.array([[1, 2, 4], [1, 2, 4], [7, 2, 4], [7, 5, 3]])
    c_conf = np.full((4, 3), 0.9)
    n_conf = np.array([[0.9, 0.9, 0.3], [0.1, 0.1, 0.1], [0.5, 0.5, 0.5], [0.9, 0.9, 0.9]])
    fwd = np.ones(4, dtype=bool)
    d = trajectory_divergence(Trajectory(c_ids, c_conf, fwd), Trajectory(n_ids, n_conf, fwd), steps=[0, 2, 3])
    assert d.id_divergence == pytest.approx(5 / 9)
    assert d.per_step_divergence == pytest.approx([1 / 3, 1, 1 / 3])
    assert d.confidence_drop == pytest.approx(0.2)
    assert d.per_step_confidence_drop == pytest.approx([0.2, 0.4, 0.0])
    assert d.stability_clean == pytest.approx(5 / 6) and d.stability_noisy == pytest.approx(0.5)
    assert d.stability_drop == pytest.approx(1 / 3)
    with pytest.raises(InputError):
        trajectory_divergence(Trajectory(c_ids, c_conf, fwd), Trajectory(n_ids[:3], n_conf[:3], fwd[:3]))


def test_record_trajectory_matches_sampler(llada):
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    cfg = SamplerConfig(length=8, steps=8, seed=0, stop_at_eos=False)
    sampler = RemaskingSampler(llada, cfg)
    res, tr = record_trajectory(sampler, "the cat sat", "a")
    plain = RemaskingSampler(llada, cfg).sample(["the cat sat"], item_ids=["a"])
    assert np.array_equal(res.tokens, plain.tokens)
    assert tr.ids.shape == (8, 8) and tr.forwarded.all()
    # the prediction at the step a position was decided is the token committed there
    ds = res.history.decided_step[0]
    for i in range(8):
        assert tr.ids[ds[i], i] == res.tokens[0, i]
    assert ((tr.confidence > 0) & (tr.confidence <= 1)).all()
    _, tr2 = record_trajectory(sampler, "the cat sat", "a")
    same = trajectory_divergence(tr, tr2)
    assert same.id_divergence == 0 and same.confidence_drop == 0 and same.stability_drop == 0
    _, tr3 = record_trajectory(sampler, "the dog ran", "a")
    other = trajectory_divergence(tr, tr3)
    assert other.id_divergence > 0 or other.confidence_drop != 0


def test_token_labels_on_a_slow_tokenizer_model(llada):
    """Dream ships a slow tokenizer (no offsets): token_labels takes the model and gets its spans from the models
    layer; the labels equal those of the fast-tokenizer stand-in."""
    from dlmeval.models.tiny import tiny_model

    dream = tiny_model("dream")
    text = "the king and the queen were happy in the big old city"
    res = Perturbation.of("keyboard", 0.3).perturb(text, seed=0, item_id="x")
    slow, fast = token_labels(dream, res.text, res.edits), token_labels(llada, res.text, res.edits)
    assert slow.offsets == fast.offsets and slow.labels.tolist() == fast.labels.tolist()
    assert slow.labels.max() == 1 and slow.labels[0] == -1
