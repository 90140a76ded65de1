import json

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
