import json
from pathlib import Path

import pytest

from dlmeval.cli.demo import STAGES
from dlmeval.cli.main import main
from dlmeval.store import RunStore


def test_help_shows_the_three_pillars_and_utilities(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for word in ("scoring", "sampling", "robustness", "score", "care", "robust", "models", "runs", "demo"):
        assert word in out


def test_models_json_lists_every_spec(capsys):
    assert main(["--json", "models"]) == 0
    rows = json.loads(capsys.readouterr().out)
    specs = {r["spec"] for r in rows}
    assert {
        "default",
        "default-ar",
        "hf:PATH",
        "llada:PATH",
        "dream:PATH",
        "causal:PATH",
        "tiny-bert",
    } <= specs
    assert all(isinstance(r["available"], bool) for r in rows)


def test_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path, capsys):
    rc = main(["--store", str(tmp_path / "s.sqlite"), "demo", "--quick", "--dlm", "nonsense-model"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("dlmeval: error: unknown model spec") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_quick_demo_records_a_run_with_its_signature(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    args = [
        "--store",
        str(store),
        "--json",
        "demo",
        "--quick",
        "--dlm",
        "tiny-bert",
        "--ar",
        "tiny-causal",
        "--out",
        str(tmp_path / "out"),
    ]
    assert main(args) == 0
    res = json.loads(capsys.readouterr().out)
    stage = res["stages"]["sentences"]
    assert stage["signature"].startswith("dlmeval:") and "tiny-bert@" in stage["signature"]
    run = RunStore(store).get_run(stage["run_id"])
    assert len(run.done_keys()) == 12 and run.status == "done"
    # a second run reopens the same run and recomputes nothing
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)["stages"]["sentences"]
    assert (
        again["run_id"] == stage["run_id"]
        and again["diffscore_prefers_original"] == stage["diffscore_prefers_original"]
    )
    # the sample stage: one stored run of the demo's prompts with the readable settings, the same on a rerun
    first = res["stages"]["sample"]
    sample = RunStore(store).get_run(first["run_id"])
    assert sample.signature.kind == "sample" and len(sample.done_keys()) == 3
    assert sample.signature.config["temperature"] == 1.0 and sample.signature.config["block_length"] == 4
    assert sample.signature.config["top_p"] == 0.8 and 1 <= first["longest_run"] <= 32
    assert main(args) == 0
    third = json.loads(capsys.readouterr().out)["stages"]["sample"]
    assert third["run_id"] == first["run_id"] and third["distinct_2"] == first["distinct_2"]


@pytest.mark.slow
def test_full_demo_runs_every_pillar_stage_and_reports_them(tmp_path, capsys, monkeypatch):
    """`dlmeval demo` on the tiny models: every stage stores its runs and the report shows each pillar."""
    import dlmeval.cli.demo as demo

    # the tiny specs: ARC prompts do not fit the tiny models' 128-token window
    monkeypatch.setattr(demo, "CARE_SPEC", "care-tiny")
    monkeypatch.setattr(demo, "ROBUST_SPEC", "robust-tiny")
    store = tmp_path / "s.sqlite"
    args = [
        "--store",
        str(store),
        "--json",
        "--no-progress",
        "demo",
        "--dlm",
        "tiny-bert",
        "--ar",
        "tiny-causal",
    ]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert list(res["stages"]) == ["sentences", "sample", *(name for name, _ in STAGES)]
    kinds = {"meta-eval": "meta-eval", "Care": "care-sweep", "robustness": "robust-spec", "sample": "sample"}
    with RunStore(store, must_exist=True) as st:
        for name, stage in res["stages"].items():
            run = st.get_run(stage["run_id"])
            want = next((k for w, k in kinds.items() if name.startswith(w)), "demo")
            assert run.signature.kind == want and run.signature.short() == stage["signature"]
            assert all(st.get_run(r).signature.kind for r in stage.get("run_ids", []))
    html = Path(res["report"]).read_text()
    for section in ("Scoring", "Sampling", "Robustness"):
        assert section in html
    assert "tiny-bert" in html and "<svg" in html
