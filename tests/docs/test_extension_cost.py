"""The extension cost, measured (#39): docs/architecture.md "What an extension costs" adds a re-masking strategy
(at most 20 lines) and a model family (at most 50 lines) through the public API; the docs state their line counts,
and both run through a Care sweep, the leaderboard and its verification."""

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
        r"a re-masking strategy is (\d+) lines, a model family with its own adapter and loader is (\d+)", text
    )
    assert m and (int(m[1]), int(m[2])) == (lines(block("toy strategy")), lines(block("toy family")))
    # through the public API only: nothing reaches into a private name
    for kind in LIMITS:
        assert not re.search(r"import _|\._[a-z]", block(kind)), kind


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
