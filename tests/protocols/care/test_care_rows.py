"""Care specs that produce every paper row: Table 16's seven strategies and their NFE, HumanEval at Table 11's two
lengths, Table 18 on the Instruct model, per-seed prompts and the MAUVE sample size as spec fields."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dlmeval.protocols.care import load_spec, parse_spec


def test_care_strategies_plan_prints_table_16(capsys):
    from dlmeval.cli.main import main

    assert main(["--json", "care", "care-strategies", "--plan"]) == 0
    out = json.loads(capsys.readouterr().out)
    nfe = {c["cell"].split("|")[1]: c["nfe_per_sample"] for c in out["cells"]}
    assert nfe == {"none": 128, "random": 129, "high_entropy": 219, "low_confidence": 219,
                   "running_confidence": 257, "conf_entropy": 219, "agreement": 219}  # fmt: skip
    spec = load_spec("care-strategies")
    assert spec.generation.prefix_tokens == 32 and spec.sweep.steps == (128,) and spec.sweep.seeds == (1,)


def test_care_paper_plan_has_random_rows_and_both_humaneval_lengths(capsys):
    from dlmeval.cli.main import main

    assert main(["--json", "care", "care-paper", "--plan"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["models"][0]  # the plan lists each model's cells (under its own family's schedule)
    random_nominal = [c for c in out["cells"] if "|random|s" in c["cell"] and c["model"] == first]
    assert len(random_nominal) == 2 * 3 * 4 * 3  # two sources x 3 steps x 4 temperatures x 3 seeds
    he = {(r["unit"].split()[0], r["unit"].split("|")[1], r["unit"].split("|")[2]): r
          for r in out["downstream"] if r["unit"].startswith("humaneval")}  # fmt: skip
    # Table 11 at 128 tokens: none@256 = 128 NFE, high_entropy@256 = 437, none* at 437 out of reach
    assert he[("humaneval@128", "none", "s256")]["nfe_per_item"] == 128
    assert he[("humaneval@128", "high_entropy", "s256")]["nfe_per_item"] == 437
    assert he[("humaneval@128", "none", "nfe437")]["nfe_target_reached"] is False
    # at 512 tokens none* reaches 437, and none@256 spends 256, not Table 11's 128
    assert he[("humaneval@512", "none", "nfe437")]["nfe_per_item"] == 437
    assert he[("humaneval@512", "none", "s256")]["nfe_per_item"] == 256
    assert "mauve" in out["readings"] and "500 accepted generations" in out["readings"]["mauve"]
    inst = load_spec("care-instruct")
    assert inst.generation.sources == () and inst.downstream.steps == (128, 256)
    assert "Instruct" in inst.models[0] and inst.downstream.gsm8k.source == "openai/gsm8k"


def test_leaderboard_reports_the_longest_humaneval():
    from dlmeval.protocols.care.comparisons import _longest

    down = pd.DataFrame({"task": ["humaneval@128", "humaneval@512", "gsm8k", "arc"]})
    assert _longest(down, "humaneval") == "humaneval@512" and _longest(down, "gsm8k") == "gsm8k"
    with pytest.raises(Exception, match="gen_tokens"):
        parse_spec({"sweep": {}, "downstream": {"humaneval": {"gen_tokens": [8, "x"]}}})


def test_prompts_per_seed_and_mauve_samples(tmp_path):
    from dlmeval.models import tiny_model
    from dlmeval.protocols.care.plan import CareOptions, resolve
    from tests.protocols.care.test_care import make_data

    def cell_prompts(spec, model, data):
        return resolve(spec, CareOptions(data)).prompts(model)

    data = make_data(tmp_path / "data")
    base = {"preset": "tiny", "generation": {"n_prompts": 3, "sources": ["webtext"]},
            "sweep": {"seeds": [1, 2, 3]}}  # fmt: skip
    m = tiny_model("llada", seed=0)
    fixed = cell_prompts(parse_spec(base), m, data)
    assert list(fixed) == ["webtext"] and len(fixed["webtext"]) == 3
    raw = {**base, "generation": {**base["generation"], "resample_prompts": True}}
    per = cell_prompts(parse_spec(raw), m, data)
    ids = {k: [p.item_id for p in v] for k, v in per.items()}
    assert set(ids) == {("webtext", 1), ("webtext", 2), ("webtext", 3)}
    assert all(len(v) == 3 for v in ids.values()) and len({tuple(v) for v in ids.values()}) > 1
    assert ids == {k: [p.item_id for p in v] for k, v in cell_prompts(parse_spec(raw), m, data).items()}
    assert parse_spec(raw).config()["generation"]["resample_prompts"] is True
    assert "resample_prompts" not in parse_spec(base).config()["generation"]
    assert parse_spec({**base, "metrics": {"mauve_samples": 2}}).config()["metrics"]["mauve_samples"] == 2


def test_downstream_only_spec_loads_no_evaluator(tmp_path, monkeypatch):
    """care-instruct's shape: no corpus, GSM8K only; the PPL / MAUVE models are never loaded."""
    from dlmeval.protocols import care
    from dlmeval.protocols.care import metrics as cm
    from dlmeval.store import RunStore
    from tests.protocols.care.test_care import make_data

    def refuse(*a, **k):
        raise AssertionError("the evaluator was loaded")

    monkeypatch.setattr(cm.Evaluators, "__init__", refuse)
    data = make_data(tmp_path / "data")
    spec = parse_spec({"preset": "tiny", "models": {"diffusion": ["tiny-llada"], "evaluator": "tiny-causal"},
                       "generation": {"n_prompts": 2, "sources": []}, "sweep": {"steps": [8]},
                       "downstream": {"steps": [8], "strategies": ["none"],
                                      "gsm8k": {"n": 2, "shots": 1, "gen_tokens": 8}}})  # fmt: skip
    with RunStore(tmp_path / "s.sqlite") as store:
        res = care.run_care(spec, store, data_dir=data, progress=False)
    assert list(res.tables) == ["downstream"] and int(res.tables["downstream"]["n_items"].iloc[0]) == 2
    assert any("the last 1 items of the evaluated split" in w for w in res.warnings)
