"""The robustness protocol end to end on tiny models (5 items, 2 conditions), resumption, the chance guard, the
spec parser and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dlmeval.errors import InputError
from dlmeval.protocols import robust as rb
from dlmeval.store import RunStore
from dlmeval.store.db import Run

# Five ARC-style items in the tiny models' vocabulary, so that the paper's ARC prompt fits their 128-token window.
ITEMS = [
    ("Question: which city is the capital of france?", ["paris", "london", "river", "house"], 0),
    ("Question: what does a cat eat?", ["car", "food", "book", "king"], 1),
    ("Question: who wrote the book?", ["the river", "the night", "a woman", "the water"], 2),
    ("Question: what is big and old?", ["a child", "a day", "the time", "the city"], 3),
    ("Question: where is london?", ["england", "france", "paris", "the house"], 0),
]
CONDITIONS = ["char.keyboard@0.20", "word.shuffle@0.30"]


@pytest.fixture(scope="module")
def arc_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "arc.jsonl"
    p.write_text("\n".join(json.dumps({"query": q, "choices": c, "gold": g}) for q, c, g in ITEMS) + "\n")
    return p


@pytest.fixture(scope="module")
def models():
    from dlmeval.models import tiny_model

    return {"tiny-bert": tiny_model("bert", seed=0), "tiny-causal": tiny_model("causal", seed=0)}


def raw_spec(arc_file, batch: int = 5, **over) -> dict:
    raw = {
        "name": "t",
        "seed": 0,
        "perturbation_seeds": [0],
        "pairs": [{"dlm": "tiny-bert", "ar": "tiny-causal"}],
        "conditions": {"keys": CONDITIONS},
        "tasks": {
            "arc_challenge": {
                "n": 5,
                "modes": ["likelihood", "generation"],
                "gen_tokens": 3,
                "path": str(arc_file),
            }
        },
        "dlm": {"batch_size": batch},
        "ar": {"batch_size": batch},
        "likelihood": {"n_masks": 2, "n_rates": 2},
        "stats": {"bootstrap_resamples": 200},
        "calibration": {"plots": False},
    }
    raw.update(over)
    return raw


def run(spec, path, models, **kw):
    with RunStore(path) as store:
        return rb.run_robust(spec, store, progress=False, models=models, **kw)


# ------------------------------------------------------------------------------------------------ end to end
def test_end_to_end_tables(tmp_path, arc_file, models):
    spec = rb.parse_spec(raw_spec(arc_file))
    res = run(spec, tmp_path / "s.sqlite", models, out_dir=tmp_path / "out")
    t = res.tables
    with RunStore(tmp_path / "s.sqlite") as store:
        recs = {m: store.get_run(r).results() for m, r in res.model_runs.items()}
    # per (model, condition, item) records: 2 modes x (clean + 2 conditions) x 5 items per model
    assert {m: len(r) for m, r in recs.items()} == {"tiny-bert": 30, "tiny-causal": 30}
    key = "arc_challenge/generation/char.keyboard@0.20/s0/arc_challenge/3"
    r = recs["tiny-bert"][key]
    assert r["condition"] == "char.keyboard@0.20" and r["role"] == "dlm" and r["mode"] == "generation"
    assert set(r["confidence"]) == {
        f"{b}/{a}" for b in ("max", "chosen", "commit") for a in ("geo", "mean", "min")
    }
    assert 0 < r["confidence"]["max/geo"] <= 1 and r["nfe"] >= 1
    assert r["confidence"]["max/geo"] >= r["confidence"]["chosen/geo"] - 1e-9
    lik = recs["tiny-causal"]["arc_challenge/likelihood/clean/s-/arc_challenge/0"]
    assert len(lik["scores"]) == 4 and lik["prediction"] == int(np.argmax(lik["scores"]))

    # accuracy = mean of the stored correctness, per (mode, model, condition)
    acc = t["accuracy"]
    assert len(acc) == 2 * 2 * 3
    for (mode, model, cond), g in acc.groupby(["mode", "model", "condition"]):
        want = np.mean(
            [v["correct"] for v in recs[model].values() if v["mode"] == mode and v["condition"] == cond]
        )
        assert g["accuracy"].iloc[0] == pytest.approx(want)
    # RDI is shown only for models above chance on clean input
    for _, row in acc.iterrows():
        assert math.isnan(row["rdi"]) != bool(row["meaningful"])
    guard = t["guard"].set_index(["mode", "model"])
    for (mode, model), g in acc.groupby(["mode", "model"]):
        assert bool(guard.loc[(mode, model), "above_chance"]) == bool(g["meaningful"].iloc[0])

    comp = t["comparison"]
    assert list(comp["mode"]) == ["likelihood", "generation"]
    assert (comp["n_conditions"] == 2).all()
    for _, row in comp.iterrows():
        if "undefined" in row["note"]:  # a model with clean accuracy 0: RDI is undefined, nothing to compare
            assert math.isnan(row["wins"]) and not row["meaningful"]
        else:
            assert row["wins"] + row["ties"] + row["losses"] == 2
    summ = t["summary"]
    assert len(summ) == 4 and set(summ["role"]) == {"dlm", "ar"}

    cal = t["calibration"]
    gen_dlm = cal[(cal["model"] == "tiny-bert") & (cal["mode"] == "generation")]
    assert list(gen_dlm["split"]) == ["clean", "noisy", *CONDITIONS]
    assert set(gen_dlm["confidence_def"]) == {"max/geo"}
    assert set(
        cal.loc[(cal["model"] == "tiny-causal") & (cal["mode"] == "generation"), "confidence_def"]
    ) == {"chosen/geo"}
    assert set(cal.loc[cal["mode"] == "likelihood", "confidence_def"]) == {"choice/softmax"}
    assert list(gen_dlm["n"]) == [5, 10, 5, 5]
    # ECE by hand from the stored clean DLM generations
    clean = [v for v in recs["tiny-bert"].values() if v["mode"] == "generation" and v["condition"] == "clean"]
    from dlmeval.metrics import ece

    want = ece([v["confidence"]["max/geo"] for v in clean], [v["correct"] for v in clean], 15)
    assert gen_dlm["ece"].iloc[0] == pytest.approx(want)
    abl = t["calibration_ablation"]
    assert len(abl) == 2 * 2 * 9  # generation only: 2 models x (clean, noisy) x 3 bases x 3 aggregations
    rel = t["reliability"]
    assert (
        set(rel["split"]) == {"clean", "noisy"}
        and (rel.groupby(["mode", "model", "split"]).size() == 15).all()
    )
    assert len(t["aurdi"]) == 2 * 2 * 2  # (mode, model) x 2 types

    out = tmp_path / "out"
    for name in ("summary", "comparison", "accuracy", "aurdi", "calibration", "guard"):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists()
        # every table, read alone, names where its tasks' items came from (here a file given in the spec)
        assert f"\n\nData: arc_challenge: file {arc_file}\n" in (out / f"{name}.md").read_text(), name
        # and the CSV and the stored table carry it in their last column (#34)
        csv = pd.read_csv(out / f"{name}.csv")
        assert list(csv.columns)[-1] == "data_source" and set(csv["data_source"]) == {
            f"arc_challenge: file {arc_file}"
        }, name
        assert set(t[name]["data_source"]) == {f"arc_challenge: file {arc_file}"}, name
    md = (out / "tables.md").read_text()
    if not acc["meaningful"].all():
        assert "n/m" in md and "Chance guard" in md
    # the spec run holds the tables; a tiny random model is not above chance, and the run says so
    with RunStore(tmp_path / "s.sqlite") as store:
        sr = store.get_run(res.spec_run)
        assert set(sr.tables()) >= {"summary", "comparison", "accuracy", "calibration", "guard", "runs"}
        if not t["guard"]["above_chance"].all():
            assert any("not above chance" in w for w in sr.warnings())


def test_resume_after_a_crash_gives_identical_tables(tmp_path, arc_file, models, monkeypatch):
    spec = rb.parse_spec(raw_spec(arc_file, batch=2))
    ref = run(spec, tmp_path / "ref.sqlite", models).tables
    real = Run.put_many
    calls = {"n": 0}

    def flaky(self, pairs):
        calls["n"] += 1
        if calls["n"] == 8:  # mid-way through the DLM's cells
            raise KeyboardInterrupt("injected")
        return real(self, pairs)

    monkeypatch.setattr(Run, "put_many", flaky)
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path / "crash.sqlite", models)
    with RunStore(tmp_path / "crash.sqlite") as store:
        runs = store.list_runs(rb.RUN_KIND)
        assert len(runs) == 1 and runs[0]["n_items"] == 5 + 5 + 2  # seven chunks (2, 2, 1 per cell) made it
    calls["n"] = 100  # no more crashes
    resumed = run(spec, tmp_path / "crash.sqlite", models).tables
    assert resumed.keys() == ref.keys()
    for name in ref:
        if name == "runs":
            continue
        pd.testing.assert_frame_equal(
            resumed[name], ref[name], check_exact=True
        )  # the same chunks: the same bits

    # a finished run recomputes nothing
    calls["n"] = 0
    again = run(spec, tmp_path / "crash.sqlite", models).tables
    assert calls["n"] == 0
    pd.testing.assert_frame_equal(again["calibration"], resumed["calibration"])


# ------------------------------------------------------------------------------------------------ chance guard
def _records(correct: dict[str, list[bool]], model: str, role: str, n: int = 20) -> list[dict]:
    out = []
    for cond, flags in correct.items():
        for i in range(n):
            out.append(
                {
                    "task": "arc_challenge",
                    "mode": "likelihood",
                    "model": model,
                    "role": role,
                    "condition": cond,
                    "item_id": f"arc_challenge/{i}",
                    "seed": None if cond == "clean" else 0,
                    "correct": flags[i],
                    "confidence": {"choice/softmax": 0.7},
                }
            )
    return out


def _flags(k: int, n: int = 20) -> list[bool]:
    return [i < k for i in range(n)]


def test_chance_guard_blanks_rdi_and_the_comparison(tmp_path):
    conds = ["char.keyboard@0.10", "char.keyboard@0.20", "word.deletion@0.10"]
    spec = rb.parse_spec(
        {
            "tasks": {"arc_challenge": {"n": 20, "modes": ["likelihood"]}},
            "conditions": {"keys": conds},
            "pairs": [{"dlm": "d", "ar": "a"}],
            "stats": {"bootstrap_resamples": 500},
        }
    )
    # DLM: clean 5/20 = chance 0.25 (binomial p = 0.59): not meaningful. AR: 16/20 (p < 1e-5).
    recs = _records(
        {"clean": _flags(5), conds[0]: _flags(4), conds[1]: _flags(3), conds[2]: _flags(5)}, "d", "dlm"
    )
    recs += _records(
        {"clean": _flags(16), conds[0]: _flags(12), conds[1]: _flags(8), conds[2]: _flags(14)}, "a", "ar"
    )
    t = rb.all_tables(recs, spec, {"d vs a": ("d", "a")})
    acc = t["accuracy"].set_index(["model", "condition"])
    assert math.isnan(acc.loc[("d", conds[0]), "rdi"]) and not acc.loc[("d", conds[0]), "meaningful"]
    assert acc.loc[("d", conds[0]), "accuracy"] == pytest.approx(0.2)  # accuracy itself is still reported
    assert acc.loc[("a", conds[0]), "rdi"] == pytest.approx((0.8 - 0.6) / 0.8)
    assert acc.loc[("a", conds[1]), "rdi"] == pytest.approx(0.5)
    comp = t["comparison"].iloc[0]
    assert not comp["meaningful"] and math.isnan(comp["mean_adv"]) and math.isnan(comp["wilcoxon_p"])
    assert "d not above chance" in comp["note"]
    g = t["guard"].set_index("model")
    assert not g.loc["d", "above_chance"] and g.loc["d", "p_value"] == pytest.approx(0.5852, abs=1e-3)
    assert "not above chance" in g.loc["d", "note"] and g.loc["a", "note"] == ""
    au = t["aurdi"].set_index(["model", "type"])
    assert math.isnan(au.loc[("d", "char.keyboard"), "aurdi"])
    # AURDI of the AR model, keyboard at r = 0.1, 0.2: right Riemann sum from 0, divided by 0.2
    assert au.loc[("a", "char.keyboard"), "aurdi"] == pytest.approx((0.25 * 0.1 + 0.5 * 0.1) / 0.2)
    md = rb.markdown("comparison", t["comparison"]) + rb.markdown("accuracy", t["accuracy"])
    assert "n/m" in md
    d = tmp_path / "o"
    rb.write_tables(t, d, header="x")
    assert "d on arc_challenge/likelihood: clean accuracy 5/20" in (d / "tables.md").read_text()


def test_comparison_matches_the_robustness_arithmetic():
    from dlmeval.robustness.metrics import compare, summarize

    conds = ["char.keyboard@0.10", "char.keyboard@0.20", "word.deletion@0.10", "word.shuffle@0.10"]
    spec = rb.parse_spec(
        {
            "seed": 7,
            "tasks": {"arc_challenge": {"n": 20, "modes": ["likelihood"]}},
            "conditions": {"keys": conds},
            "pairs": [{"dlm": "d", "ar": "a"}],
            "stats": {"bootstrap_resamples": 1000},
        }
    )
    dk, ak = [17, 15, 16, 12], [16, 10, 14, 9]
    dl = {"clean": _flags(18), **{c: _flags(k) for c, k in zip(conds, dk)}}
    ar = {"clean": _flags(17), **{c: _flags(k) for c, k in zip(conds, ak)}}
    t = rb.all_tables(_records(dl, "d", "dlm") + _records(ar, "a", "ar"), spec, {"p": ("d", "a")})
    sd = summarize(dl["clean"], {c: dl[c] for c in conds}, chance=0.25)
    sa = summarize(ar["clean"], {c: ar[c] for c in conds}, chance=0.25)
    c = compare(
        sd, sa, seed=rb.derive_seed(7, "robust-compare", "arc_challenge", "likelihood", "p"), n_resamples=1000
    )
    row = t["comparison"].iloc[0]
    assert row["meaningful"] and row["wins"] == c.wins == 4
    assert row["adv_rate"] == pytest.approx(1.0)
    assert row["mean_adv"] == pytest.approx(c.mean_advantage)
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx(c.ci)
    assert row["wilcoxon_p"] == pytest.approx(c.wilcoxon_p)
    s = t["summary"].set_index("model")
    assert s.loc["d", "adv_rate"] == pytest.approx(1.0) and math.isnan(s.loc["a", "adv_rate"])
    assert s.loc["d", "mean_rdi"] == pytest.approx(sd.mean_rdi)
    assert s.loc["a", "acc_r"] == pytest.approx(np.mean(ak) / 20)


# ------------------------------------------------------------------------------------------------ spec
def test_shipped_specs_load():
    demo = rb.load_spec("robust-demo")
    assert demo.pairs[0].dlm == "default" and demo.pairs[0].ar == "default-ar"
    assert len(demo.conditions) == 32
    arc = demo.task("arc_challenge")
    assert arc.n == 200 and set(arc.modes) == {"likelihood", "generation"}
    assert demo.dgcg.enabled and demo.dgcg.n == 10 and demo.ipm.enabled and demo.probes.enabled
    paper = rb.load_spec("robust-paper")
    assert {t.name for t in paper.tasks} == {"triviaqa", "gsm8k", "arc_challenge"}
    assert len(paper.conditions) == 32 and paper.perturbation_seeds == (0, 1, 2)
    assert paper.task("gsm8k").budget()[0] == 512
    rb.load_spec("robust-tiny")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": 1}, "unknown key"),
        ({"conditions": {"keys": ["char.typo@0.1"]}}, "unknown perturbation"),
        ({"conditions": {"keys": ["char.keyboard@0.1"], "types": ["keyboard"]}}, "either keys"),
        ({"tasks": {"gsm8k": {"modes": ["likelihood"]}}}, "multiple-choice"),
        ({"tasks": {"arc": {"gen_tokens": 10}}, "dlm": {"block_length": 4}}, "block_length 4 must divide"),
        ({"tasks": {"arc": {"n": 0}}}, "at least 1"),
        ({"tasks": {}}, "tasks"),
        ({"pairs": [{"dlm": "default"}]}, "needs a ar"),
        ({"dlm": {"strategy": "nope"}}, "strategy"),
        ({"scope": "all"}, "scope"),
    ],
)
def test_bad_specs_are_refused(change, message):
    raw = {"tasks": {"arc_challenge": {"n": 5}}}
    raw.update(change)
    with pytest.raises(InputError, match=message):
        rb.parse_spec(raw)


def test_model_config_leaves_out_what_record_keys_hold(arc_file):
    a = rb.parse_spec(raw_spec(arc_file))
    b = rb.parse_spec(raw_spec(arc_file, conditions={"keys": CONDITIONS[:1]}, perturbation_seeds=[0, 1]))
    ea, _ = rb.model_entries(a)
    eb, _ = rb.model_entries(b)
    assert [a.model_config(e) for e in ea] == [b.model_config(e) for e in eb]
    c = rb.parse_spec(raw_spec(arc_file, dlm={"batch_size": 3, "temperature": 0.5}))
    ec, _ = rb.model_entries(c)
    assert a.model_config(ea[0]) != c.model_config(ec[0])  # temperature changes a DLM's outputs
    assert a.model_config(ea[1]) == c.model_config(ec[1])  # and not the AR model's


def test_each_roles_batch_size_is_in_its_runs_signature(tmp_path, arc_file, models):
    """Which rows share a forward pass moves a padded row's scores and confidences in the last bits (robust-tiny,
    batch 5 vs 1: 18 of 78 records, at most 4.8e-7 apart: benchmarks/bench_batch_bits.py), so each role's batch
    size keys its model's run and the spec run: a store is never resumed into records of another batching."""
    a = rb.parse_spec(raw_spec(arc_file, batch=5))
    d = rb.parse_spec(raw_spec(arc_file, batch=5, dlm={"batch_size": 2}))
    r = rb.parse_spec(raw_spec(arc_file, batch=5, ar={"batch_size": 2}))
    (ea, _), (ed, _), (er, _) = rb.model_entries(a), rb.model_entries(d), rb.model_entries(r)
    assert [e.role for e in ea] == ["dlm", "ar"]
    assert a.model_config(ea[0])["batch_size"] == 5 and d.model_config(ed[0])["batch_size"] == 2
    assert a.model_config(ea[0]) != d.model_config(ed[0]) and a.model_config(ea[1]) == d.model_config(ed[1])
    assert a.model_config(ea[0]) == r.model_config(er[0]) and a.model_config(ea[1]) != r.model_config(er[1])
    assert len({repr(s.config()) for s in (a, d, r)}) == 3
    path = tmp_path / "s.sqlite"
    first = run(a, path, models)
    again = run(rb.parse_spec(raw_spec(arc_file, batch=2)), path, models)
    assert set(again.model_runs.values()).isdisjoint(first.model_runs.values())
    assert again.spec_run != first.spec_run
    with RunStore(path) as store:
        n = {x["run_id"]: x["n_items"] for x in store.list_runs(rb.RUN_KIND)}
    assert [n[first.model_runs[m]] for m in first.model_runs] == [30, 30]  # the batch-5 records are kept
    assert [n[again.model_runs[m]] for m in again.model_runs] == [30, 30]  # and batch 2 computed its own


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_plan_and_run(tmp_path, arc_file, capsys):
    import tomllib  # noqa: F401  (the spec is TOML)

    from dlmeval.cli.main import main

    spec = tmp_path / "s.toml"
    spec.write_text(
        f"""
name = "cli"
[[pairs]]
dlm = "tiny-bert"
ar = "tiny-causal"
[conditions]
keys = ["char.keyboard@0.20", "word.shuffle@0.30"]
[tasks.arc_challenge]
n = 5
modes = ["likelihood"]
path = "{arc_file}"
[likelihood]
n_masks = 1
n_rates = 2
[stats]
bootstrap_resamples = 100
[calibration]
plots = false
"""
    )
    db = tmp_path / "c.sqlite"
    assert main(["--json", "--store", str(db), "robust", str(spec), "--plan", "--n", "3"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["item_evaluations_total"] == 2 * 3 * 3 and len(plan["conditions"]) == 2
    out = tmp_path / "out"
    rc = main(
        ["--json", "--no-progress", "--store", str(db), "robust", str(spec), "--n", "3", "--out", str(out),
         "--conditions", "char.keyboard@0.20", "--device", "cpu"]
    )  # fmt: skip
    assert rc == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["model_runs"]) == {"tiny-bert", "tiny-causal"}
    assert len(payload["tables"]["accuracy"]["rows"]) == 2 * 2
    assert (out / "tables.md").exists()
    assert main(["--store", str(db), "robust", str(spec), "--conditions", "char.typo@0.1"]) == 2
    assert "unknown perturbation" in capsys.readouterr().err


def test_shipped_tiny_spec_runs_every_part(tmp_path):
    """robust-tiny on the real data: generation (TriviaQA), likelihood (ARC), IPM, D-GCG and linear probes."""
    spec = rb.load_spec("robust-tiny")
    res = run(spec, tmp_path / "t.sqlite", None, out_dir=tmp_path / "out", device="cpu")
    t = res.tables
    assert {"summary", "comparison", "calibration", "ipm", "dgcg", "probes", "guard"} <= set(t)
    ipm = t["ipm"]
    assert list(ipm["variant"]) == [
        "clean",
        "noisy baseline",
        "ipm.topk[k=1,Td=2,lmin=3]",
        "ipm.uniform[rho=0.2,Td=2,lmin=3]",
    ]
    assert (ipm["model"] == "tiny-bert").all()
    noisy = ipm.loc[ipm["variant"] == "noisy baseline", "accuracy"].iloc[0]
    assert ipm["delta"].iloc[2:].to_numpy() == pytest.approx(ipm["accuracy"].iloc[2:].to_numpy() - noisy)
    dg = t["dgcg"].set_index("model")
    assert set(dg.index) == {"tiny-bert", "tiny-causal"} and (dg["suffix_length"] == 2).all()
    assert dg.loc["tiny-bert", "kind"] == "dlm" and dg.loc["tiny-causal", "kind"] == "ar"
    assert dg.loc["tiny-causal", "transfer_from"] == "tiny-bert"  # the DLM's suffixes given to the AR model
    assert len(dg.loc["tiny-bert", "loss_trajectory"].split()) == 2
    pr = t["probes"].set_index("model")
    assert set(pr.index) == {"tiny-bert", "tiny-causal"}
    assert ((pr["best_accuracy"] >= 0) & (pr["best_accuracy"] <= 1)).all()
    assert len(pr.loc["tiny-bert", "layers"].split()) == 3
    # generation and likelihood records on the real files
    acc = t["accuracy"]
    assert set(zip(acc["task"], acc["mode"])) == {("triviaqa", "generation"), ("arc_challenge", "likelihood")}
    # a rerun resumes everything, probes included, to the same tables
    again = run(spec, tmp_path / "t.sqlite", None, device="cpu").tables
    for name in ("ipm", "dgcg", "probes", "comparison"):
        pd.testing.assert_frame_equal(again[name], t[name])


def test_a_pairs_sampler_sets_top_k_and_schedule_and_only_then_its_signature_has_them(arc_file):
    """Per-model sampler settings in a robustness spec: a pair's `sampler` table (#21)."""
    from dlmeval.protocols.robust.responders import DLMResponder

    plain = rb.parse_spec(raw_spec(arc_file))
    pairs = [{"dlm": "tiny-bert", "ar": "tiny-causal", "sampler": {"top_k": 5, "schedule": "dream"}}]
    tuned = rb.parse_spec(raw_spec(arc_file, pairs=pairs))
    ep, _ = rb.model_entries(plain)
    et, _ = rb.model_entries(tuned)
    assert "top_k" not in plain.model_config(ep[0])["sampler"]  # records made before top_k keep their runs
    assert tuned.model_config(et[0])["sampler"]["top_k"] == 5
    assert tuned.model_config(et[0]) != plain.model_config(ep[0])
    cfg = DLMResponder(tuned, et[0], None).sampler_config("arc_challenge", 1)
    assert (cfg.top_k, cfg.schedule) == (5, "dream")
    for bad, msg in (
        ({"top_k": 0}, "top_k"),
        ({"strategy": "high_entropy", "schedule": "dream"}, "never re-masks"),
    ):
        with pytest.raises(InputError, match=msg):
            rb.parse_spec(
                raw_spec(arc_file, pairs=[{"dlm": "tiny-bert", "ar": "tiny-causal", "sampler": bad}])
            )
