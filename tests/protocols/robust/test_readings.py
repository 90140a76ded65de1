"""The robustness paper's ambiguous readings, each one spec switch from the other: masked-position DLM confidence
(every token in turn, or the K-mask estimate), clean passes per sampling seed, D-GCG absolute / relative
degradation, the probes' scaler and the paper's layer set."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dlmeval.errors import InputError


@pytest.fixture(scope="module")
def dlm():
    from dlmeval.models import tiny_model

    return tiny_model("llada", seed=3)


def _manual(model, seq, masked, pos):
    """log p at ``pos`` with ``masked`` positions replaced by the mask token, the mask token excluded."""
    s = list(seq)
    for p in masked:
        s[p] = model.mask_token_id
    ids, attn = model.pad([s])
    off = int(model.offset(attn)[0])
    lg = model.logits(ids, attn)[0, off + pos].double()
    lg[model.mask_token_id] = float("-inf")
    lp = torch.log_softmax(lg, -1)
    return float(lp.max()), float(lp[seq[pos]])


def test_masked_confidence_by_hand(dlm):
    from dlmeval.robustness.calibration import dlm_token_probs
    from dlmeval.robustness.masked_confidence import mask_groups, masked_token_probs

    eos = dlm.eos_token_ids[0]
    prompts = [
        dlm.encode("the cat is", add_special_tokens=False),
        dlm.encode("a dog", add_special_tokens=False),
    ]
    gens = [
        dlm.encode("big and red", add_special_tokens=False) + [eos],
        dlm.encode("small", add_special_tokens=False),
    ]
    each = masked_token_probs(dlm, prompts, gens, item_ids=["a", "b"])
    P = len(prompts[0])
    seq = prompts[0] + gens[0]
    for j in range(3):  # each answer token masked alone, the rest visible
        mx, ch = _manual(dlm, seq, [P + j], P + j)
        assert each[0].max[j] == pytest.approx(mx, abs=1e-5) and each[0].chosen[j] == pytest.approx(
            ch, abs=1e-5
        )
    assert each[0].n_tokens == 3 and each[1].n_tokens == len(gens[1])
    # K >= length is the per-token reading; K = 1 masks the whole answer in one pass
    big = masked_token_probs(dlm, prompts, gens, item_ids=["a", "b"], groups=50)
    assert np.allclose(big[0].max, each[0].max)
    one = masked_token_probs(dlm, prompts, gens, item_ids=["a", "b"], groups=1)
    for j in range(3):
        mx, _ = _manual(dlm, seq, [P, P + 1, P + 2], P + j)
        assert one[0].max[j] == pytest.approx(mx, abs=1e-5)
    # the unmasked pass reads another distribution (a visible token is near-certain there)
    plain = dlm_token_probs(dlm, prompts, gens)
    assert not np.allclose(plain[0].max, each[0].max)
    g = mask_groups(7, 3, seed=1, item_id="x")
    assert sorted(np.concatenate(g).tolist()) == list(range(7)) and [len(x) for x in g] == [3, 2, 2]
    assert [x.tolist() for x in g] == [x.tolist() for x in mask_groups(7, 3, seed=1, item_id="x")]


def _raw(arc_rows, **over):
    raw = {
        "name": "readings",
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal", "sampler": {"temperature": 0.5}}],
        "conditions": {"keys": ["char.keyboard@0.20"]},
        "perturbation_seeds": [0, 1],
        "tasks": {"triviaqa": {"n": 2, "modes": ["generation"], "gen_tokens": 4, "path": arc_rows}},
        "dlm": {"batch_size": 2}, "ar": {"batch_size": 2},
        "stats": {"bootstrap_resamples": 100}, "calibration": {"plots": False},
    }  # fmt: skip
    raw.update(over)
    return raw


@pytest.fixture
def tq_file(tmp_path):
    p = tmp_path / "tq.tsv"
    p.write_text("the cat is ?\t['big']\nthe dog is ?\t['small']\n")
    return str(p)


def test_clean_seeds_and_confidence_readings_run(tmp_path, tq_file):
    from dlmeval.protocols import robust as rb
    from dlmeval.protocols.robust.evaluate import model_entries, plan_cells
    from dlmeval.store import RunStore

    once = rb.parse_spec(_raw(tq_file))
    per = rb.parse_spec(_raw(tq_file, clean_seeds="per_seed", calibration={"plots": False, "confidence": "kmask",
                                                                            "confidence_masks": 2}))  # fmt: skip
    assert [c for c in plan_cells(once) if c[2] == "clean"] == [("triviaqa", "generation", "clean", None)]
    assert [c[3] for c in plan_cells(per) if c[2] == "clean"] == [0, 1]
    e = model_entries(once)[0][0]
    assert "confidence" not in once.model_config(e) and "clean_seeds" not in once.config()
    assert per.model_config(model_entries(per)[0][0])["confidence"] == {"reading": "kmask", "masks": 2}
    with RunStore(tmp_path / "r.sqlite") as store:
        res = rb.run_robust(per, store, progress=False)
        run = store.get_run(res.model_runs["tiny-bert"])
        keys = set(run.results())
    assert {"triviaqa/generation/clean/s0/triviaqa/0", "triviaqa/generation/clean/s1/triviaqa/0"} <= keys
    acc = res.tables["accuracy"]
    clean = acc[(acc["condition"] == "clean") & (acc["model"] == "tiny-bert")]
    assert int(clean["n"].iloc[0]) == 4  # two items x two seeds, pooled
    with pytest.raises(InputError, match="clean_seeds"):
        rb.parse_spec(_raw(tq_file, clean_seeds="twice"))
    with pytest.raises(InputError, match="calibration.confidence"):
        rb.parse_spec(_raw(tq_file, calibration={"confidence": "half"}))


def test_dgcg_degradation_absolute_or_relative():
    from dlmeval.protocols.robust.probe_dgcg import DGCGProbe

    def recs(correct_clean, correct_attack):
        base = {"task": "triviaqa", "kind": "d-gcg", "suffix_length": 4, "loss": [1.0, 2.0],
                "candidate_loss": [1.5, 2.5], "grad_norm": [1.0], "initial_eval_loss": 1.0, "final_eval_loss": 2.0}  # fmt: skip
        return [{"part": "clean", "task": "triviaqa", "correct": c} for c in correct_clean] + [
            {**base, "part": "attack", "correct": c} for c in correct_attack
        ]

    def rows(deg):
        probe = SimpleNamespace(kwargs=lambda: {"threshold": 0.3, "degradation": deg}, tasks=("triviaqa",))
        ctx = SimpleNamespace(
            probe=probe, collected={"m": recs([1, 1, 0, 0], [1, 0, 0, 0])}, roles={"m": "dlm"}
        )
        return DGCGProbe().rows(ctx)[0]

    rel, ab = rows("relative"), rows("absolute")
    assert rel["degradation"] == pytest.approx(0.5) and ab["degradation"] == pytest.approx(0.25)
    assert rel["min_len"] == 4 and ab["min_len"] == "none"  # the threshold 0.3 is reached only relatively
    spec = SimpleNamespace(kwargs=lambda: {"degradation": "percent"})
    with pytest.raises(InputError, match="degradation"):
        DGCGProbe.validate(spec, "dgcg")


def test_probe_scaler_and_paper_layers():
    from dlmeval.robustness.probes import PAPER_LAYERS, linear_probe

    assert (
        PAPER_LAYERS == (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 31)
        and len(PAPER_LAYERS) == 17
    )
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 100)
    # one informative feature on a tiny scale beside loud noise: C = 1 needs the scaler to find it
    X = np.c_[(y - 0.5) * 1e-4 + rng.normal(0, 1e-6, 200), rng.normal(0, 10, (200, 3))]
    off = linear_probe(X, y, seed=0)  # the default: raw features, as the paper's probes (#34)
    on = linear_probe(X, y, seed=0, scaler=True)
    assert on.accuracy == 1.0 and off.accuracy < 0.8
    assert linear_probe(X, y, seed=0, scaler=False) == off


def test_robust_paper_plan_names_every_reading(capsys):
    from dlmeval.cli.main import main
    from dlmeval.protocols.robust import parse_spec

    assert main(["--json", "robust", "robust-paper", "--plan"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    r = out["readings"]
    assert set(r) >= {
        "dlm_confidence",
        "clean_seeds",
        "dgcg_degradation",
        "probe_layers",
        "probe_scaler",
        "ipm_T_d",
    }
    assert "nothing masked" in r["dlm_confidence"] and "relative" in r["dgcg_degradation"]
    assert "Sec. 6.6: 64" in r["ipm_T_d"] and "Dream-7B vs Qwen2.5-7B" in r["clean_seeds"]
    assert {a["analysis"] for a in out["analyses"]} == {"ipm", "dgcg", "probes", "trajectory", "attention"}
    assert all(a["cost"] for a in out["analyses"])
    base = {"tasks": {"triviaqa": {"n": 5}}, "probes": {"n": 5, "conditions": ["char.keyboard@0.20"]}}
    ok = parse_spec({**base, "probes": {**base["probes"], "layers": "paper", "scaler": False}})
    assert ok.probes.kwargs()["layers"] == "paper"
    with pytest.raises(InputError, match="layers"):
        parse_spec({**base, "probes": {**base["probes"], "layers": "odd"}})
    with pytest.raises(InputError, match="scaler"):
        parse_spec({**base, "probes": {**base["probes"], "scaler": "no"}})
