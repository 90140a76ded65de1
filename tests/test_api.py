"""The Python API: `import dlmeval` stays light, help lists the surface, and every example of docs/python.md runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def test_import_is_light_and_help_lists_the_api():
    # help() reads every exported name (and so imports them); the import alone must not
    code = "import sys, dlmeval; print('HEAVY', sorted(m for m in ('torch', 'pandas') if m in sys.modules)); help(dlmeval)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout
    for name in (
        "load_model",
        "score",
        "sample",
        "run_spec",
        "runs",
        "run_items",
        "DiffScorer",
        "register_plugin",
    ):
        assert name in r.stdout


def test_unknown_names_are_refused():
    import dlmeval

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dlmeval.nope  # noqa: B018


def test_score_without_sources_is_unconditional_and_cond_still_needs_them():
    from dlmeval.errors import InputError
    from dlmeval.models import tiny_model
    from dlmeval.scoring import DiffScorer

    s = DiffScorer.fast(tiny_model("bert"))
    assert s.score(["the cat sat"])["config"].tolist() == ["marginal"]
    with pytest.raises(InputError, match="needs a source"):
        s.score(["the cat sat"], config="cond")


@pytest.mark.parametrize(
    "spec, runner",
    [
        ("care-tiny", "dlmeval.protocols.care.run_care"),
        ("robust-tiny", "dlmeval.protocols.robust.run_robust"),
        # a leaderboard spec's name starts with "care" too: it is told by its kind, not its name
        ("care-leaderboard-tiny", "dlmeval.protocols.care.leaderboard.run_leaderboard"),
    ],
)
def test_run_spec_routes_each_spec_kind_to_its_protocol(spec, runner, tmp_path, monkeypatch):
    import importlib

    import dlmeval

    module, name = runner.rsplit(".", 1)
    seen = []
    monkeypatch.setattr(importlib.import_module(module), name, lambda s, st, **kw: seen.append(s) or "ran")
    assert dlmeval.run_spec(spec, store=tmp_path / "store") == "ran"
    assert seen[0].name == spec


def test_run_spec_refuses_a_spec_of_no_protocol(tmp_path):
    import dlmeval
    from dlmeval.errors import InputError

    bad = tmp_path / "other.toml"
    bad.write_text('name = "other"\n', encoding="utf-8")
    with pytest.raises(InputError, match="starts with 'care'"):
        dlmeval.run_spec(bad, store=tmp_path / "store")


@pytest.mark.slow
def test_the_docs_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 4
    code = "\n".join(blocks)
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr[-3000:]
