"""docs/architecture.md's code blocks run as written (#24): every ```python block, each in its own fresh
interpreter and scratch directory, on the embedded tiny models and the shared data; and adding each pluggable kind
of "Extending dlmeval" is one worked example (a block marked ``# example: <kind>``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
FENCE = re.compile(r"^```(?:python|py)\n(?P<code>.*?)\n```", re.S | re.M)
MARKER = re.compile(r"^# example: (?P<kind>[a-z ]+)$", re.M)
KINDS = (
    "strategy",
    "model family",
    "perturbation",
    "task",
    "benchmark",
    "metric family",
    "probe",
    "report section",
    "command",
)
#: the blocks that load a model or run a protocol (5 to 15 s each on two cores): the slow suite
SLOW = {"strategy", "model family", "benchmark", "metric family", "probe", "toy family"}


def blocks(text: str) -> list[tuple[str, str]]:
    """(marker kind or "", code) of each fenced python block."""
    out = []
    for m in FENCE.finditer(text):
        code = m.group("code")
        kind = MARKER.search(code)
        out.append((kind.group("kind") if kind else "", code))
    return out


BLOCKS = blocks(DOC.read_text(encoding="utf-8"))


def test_each_kind_is_one_worked_example():
    kinds = [k for k, _ in BLOCKS]
    assert all(kinds), "every python block of docs/architecture.md carries a `# example: <kind>` marker"
    for kind in KINDS:
        assert kinds.count(kind) == 1, f"{kind}: {kinds.count(kind)} blocks"
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| to add |") : text.index("### Strategy")]
    for kind in KINDS:
        assert f"(`# example: {kind}`)" in table, f"the table's runnable version of {kind} names its block"


@pytest.mark.parametrize(
    "kind, code",
    [
        pytest.param(k, c, id=k.replace(" ", "-"), marks=[pytest.mark.slow] if k in SLOW else [])
        for k, c in BLOCKS
    ],
)
def test_block_runs(kind, code, tmp_path, data_root):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "DLMEVAL_DATA": str(data_root),
        "DLMEVAL_STORE": str(tmp_path / "runs.sqlite"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, (
        f"docs/architecture.md block `{kind}` failed:\n{code}\n--- stdout\n{r.stdout[-3000:]}\n"
        f"--- stderr\n{r.stderr[-5000:]}"
    )
