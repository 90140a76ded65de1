"""The extension cost, measured (#39): docs/architecture.md "What an extension costs" adds a re-masking strategy
(at most 20 lines) and a model family (at most 50 lines) through the public API; the docs state their line counts,
and both run through a Care sweep, the leaderboard and its verification. The toy family is one new module with one
registration, and the option it declares works from the command line (#35)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.docs.test_architecture_examples import BLOCKS, DOC, ROOT

LIMITS = {"toy strategy": 20, "toy family": 50}


def block(kind: str) -> str:
    (code,) = [c for k, c in BLOCKS if k == kind]
    return code


def lines(code: str) -> int:
    """The block's lines without its ``# example:`` marker."""
    return len(code.splitlines()) - 1


def test_toy_extensions_fit_the_papers_budget_and_the_docs_state_their_size():
    text = DOC.read_text(encoding="utf-8")
    for kind, limit in LIMITS.items():
        assert lines(block(kind)) <= limit, f"{kind}: {lines(block(kind))} lines"
    m = re.search(
        r"a re-masking strategy is (\d+) lines, a model family with its own adapter, loader and option is (\d+)",
        text,
    )
    assert m and (int(m[1]), int(m[2])) == (lines(block("toy strategy")), lines(block("toy family")))
    # through the public API only: nothing reaches into a private name
    for kind in LIMITS:
        assert not re.search(r"import _|\._[a-z]", block(kind)), kind


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["HF_HUB_OFFLINE"] = "1"
    return env


#: several ``dlmeval`` command lines in one interpreter (the CLI's own ``main``): stdout, stderr and exit status
#: of each, so that one import of torch serves them all
CLI_CALLS = """
import contextlib, io, json, sys
from dlmeval.cli.main import main
out = []
for argv in json.loads(sys.argv[1]):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(argv)
    out.append({"rc": rc, "stdout": o.getvalue(), "stderr": e.getvalue()})
print(json.dumps(out))
"""


def test_a_toy_family_is_one_module_and_one_registration_and_its_option_works_from_the_cli(tmp_path):
    """The docs' toy family, written to one new file and given to the CLI with ``--include``: nothing else in the
    tree knows it. Its declared option ``layers`` reaches its loader from ``--model toy:...?layers=N``, makes a run
    of its own (the identity names it; the default is the same run as no option), and a bad value or an unknown
    option is refused with one line (exit status 2, no traceback) before anything loads."""
    code = block("toy family")
    assert code.count("register_family(") == 1 and "FAMILY_MODULES" not in code
    module = tmp_path / "toy_family.py"
    module.write_text(code, encoding="utf-8")
    store = tmp_path / "runs.sqlite"
    common = [
        "--include",
        str(module),
        "score",
        "--text",
        "--candidates",
        "the cat sat on the mat",
        "--device",
    ]
    common += ["cpu", "--masks", "4", "--rates", "2", "--store", str(store), "--json"]
    good = ("toy:toy-1", "toy:toy-1?layers=3", "toy:toy-1?layers=2")
    bad = {
        "toy:toy-1?layers=9": "option layers='9' is not 1 to 4",
        "toy:toy-1?depth=3": "toy has no option 'depth'; it takes layers",
        "toy:toy-1?layers": "'layers' is not NAME=VALUE",
    }
    argvs = [[*common, "--model", spec] for spec in (*good, *bad)]
    r = subprocess.run(
        [sys.executable, "-c", CLI_CALLS, json.dumps(argvs)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    calls = dict(zip((*good, *bad), json.loads(r.stdout.strip().splitlines()[-1])))

    runs = {}
    for spec in good:
        assert calls[spec]["rc"] == 0, calls[spec]["stderr"][-3000:]
        runs[spec] = json.loads(calls[spec]["stdout"])
    from dlmeval.store import RunStore

    with RunStore(str(store)) as st:
        models = {s: st.get_run(out["run_id"]).signature.models[0] for s, out in runs.items()}
    assert models["toy:toy-1?layers=3"]["options"] == {"layers": 3}
    assert models["toy:toy-1"]["options"] == {"layers": 2} and models["toy:toy-1"]["family"] == "toy"
    # the option reached the loader: other weights, another run, another score; the default is the same run
    assert models["toy:toy-1?layers=3"]["weights_sha256"] != models["toy:toy-1"]["weights_sha256"]
    assert runs["toy:toy-1?layers=2"]["run_id"] == runs["toy:toy-1"]["run_id"]
    assert runs["toy:toy-1?layers=3"]["run_id"] != runs["toy:toy-1"]["run_id"]
    score = {s: out["items"][0]["score"] for s, out in runs.items()}
    assert score["toy:toy-1?layers=3"] != score["toy:toy-1"] == score["toy:toy-1?layers=2"]
    for spec, says in bad.items():
        lines = calls[spec]["stderr"].strip().splitlines()
        assert calls[spec]["rc"] == 2 and len(lines) == 1 and says in lines[0], calls[spec]["stderr"][-2000:]
        assert calls[spec]["stdout"] == ""

    # and as a process: one line on stderr, exit status 2, no traceback
    p = subprocess.run(
        [sys.executable, "-m", "dlmeval", *common, "--model", "toy:toy-1?layers=three"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        "dlmeval: error: model 'toy:toy-1?layers=three': option layers='three' is not a valid int (invalid "
        "literal for int() with base 10: 'three'); toy's layers: transformer layers, 1 to 4 (default 2)"
    ]


SWEEP = """
import json, tomllib
from dlmeval.protocols.care import parse_spec, run_care
from dlmeval.protocols.care.spec import shipped_spec_path
from dlmeval.protocols.care.verify import verify_care_run
from dlmeval.report.leaderboard import leaderboard_frame
from dlmeval.store import RunStore

raw = tomllib.loads(shipped_spec_path("care-tiny").read_text())
raw["models"]["diffusion"] = ["toy:toy-1"]
for table in ("sweep", "compute_matched"):
    raw[table]["strategies"] = ["none", "toy_margin"]
raw["dose_response"]["strategy"] = raw["headline"]["strategy"] = "toy_margin"
spec = parse_spec(raw, name="care-toy")
with RunStore("runs.sqlite") as store:
    res = run_care(spec, store, device="cpu", progress=False)
    rid = res.model_runs["toy:toy-1"]
    before = leaderboard_frame(store).to_dict("records")
    ver = verify_care_run(store, store.get_run(rid), sample=4, seed=0, device="cpu")
    after = leaderboard_frame(store).to_dict("records")
    nfe = store.get_run(rid).get_table("nfe").to_dict("records")
print(json.dumps({"run": rid, "before": before, "after": after, "verify": ver, "nfe": nfe}, default=str))
"""


@pytest.mark.slow
def test_toy_strategy_and_family_run_through_care_and_the_leaderboard(tmp_path, data_root):
    code = "\n".join([block("toy strategy"), block("toy family"), SWEEP])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "DLMEVAL_DATA": str(data_root),
        "HF_HUB_OFFLINE": "1",
    }
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    (row,) = out["before"]
    assert row["model"] == "toy:toy-1" and row["strategy"] == "toy_margin" and row["status"] == "pending"
    assert row["run_id"] == out["run"] and "model:toy:toy-1@" in row["signature"]
    # the toy strategy re-masked: it spent more forward passes than the baseline at the same steps
    assert row["nfe_strategy"] > row["nfe_baseline"] == 16.0
    assert {r["strategy"] for r in out["nfe"]} == {"none", "toy_margin"}
    assert (
        out["verify"]["status"] == "verified" and out["verify"]["units"] == 4 and out["verify"]["identical"]
    )
    assert [r["status"] for r in out["after"]] == ["verified"]
