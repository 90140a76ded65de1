"""A newcomer's first commands (#26): help without the heavy stack, `score` on plain sentences without sources,
scores with their texts, `sample` runs in the store, warnings through the rich console."""

from __future__ import annotations

import csv
import io
import json
import logging
import subprocess
import sys

import pytest

from dlmeval.cli.main import COMMANDS, main

SUBCOMMANDS = [m.replace("_", "-") for m, _ in COMMANDS]


def test_help_of_every_command_imports_no_torch():
    """`dlmeval --help` and every `dlmeval CMD --help` build and print their parser without torch, transformers
    or pandas (the 7 s of CPU #26 measured came from those imports)."""
    code = f"""
import sys
from dlmeval.cli.main import main
for cmd in [[]] + [[c] for c in {SUBCOMMANDS!r}]:
    try:
        main(cmd + ["--help"])
    except SystemExit as e:
        assert e.code == 0, (cmd, e.code)
heavy = sorted(m for m in ("torch", "transformers", "pandas", "sklearn", "scipy") if m in sys.modules)
print("HEAVY", heavy)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HEAVY []" in r.stdout
    # the analyses' choices are still listed in meta-eval's help
    assert "prompt-templates" in r.stdout and "families" in r.stdout


def test_spelled_out_choices_match_their_registries():
    from dlmeval.cli.sample import STRATEGY_CHOICES
    from dlmeval.protocols.diffscore.analyses import registry
    from dlmeval.sampling.strategies import STRATEGIES

    assert STRATEGY_CHOICES == tuple(STRATEGIES)
    assert registry.declared_names() == [a.name for a in registry.analyses()]


def test_score_plain_sentences_without_sources(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    f = tmp_path / "sentences.txt"
    f.write_text("The cat sat on the mat.\nMat the on sat cat the.\n")
    args = ["--store", str(store), "score", "--model", "tiny-llada", "--candidates", str(f), "--fast"]
    assert main([*args, "--preset", "paper"]) == 0
    cap = capsys.readouterr()
    assert "config: marginal (no sources given" in cap.err
    out = cap.out
    assert "The cat sat on the mat." in out and "Mat the on sat cat the." in out
    # the paper's K=5 over T=5 gives no standard error: the column is left out with the reason
    assert "se not shown: 5 mask(s) over 5 rate(s)" in out and " nan " not in out
    run_id = next(line.split()[1] for line in out.splitlines() if line.startswith("run: "))
    # the default's Fast (combined: 4 stratified draws and the exact t = 1 pass) has one
    assert main(args) == 0
    out = capsys.readouterr().out
    assert " se " in out.splitlines()[1] and "se not shown" not in out
    # the default estimator has a standard error: shown
    assert main(["--store", str(store), "score", "--model", "tiny-llada", "--candidates", str(f)]) == 0
    out = capsys.readouterr().out
    assert " se " in out.splitlines()[1] and "se not shown" not in out
    # runs export gives each score with its text
    assert main(["--store", str(store), "runs", "export", run_id]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert "score" in rows[0]
    assert sorted(r["candidate"] for r in rows) == ["Mat the on sat cat the.", "The cat sat on the mat."]


def test_score_with_sources_defaults_to_cond(tmp_path, capsys):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"candidate": "a cat", "source": "the cat sat"}) + "\n")
    assert (
        main(["--json", "score", "--no-store", "--model", "tiny-llada", "--candidates", str(f), "--fast"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["config"]["config"] == "cond"
    # ids from the file: the stored keys carry a digest of the texts, and the export still finds each text
    g = tmp_path / "ids.jsonl"
    g.write_text(
        "".join(json.dumps({"id": f"x{i}", "candidate": c}) + "\n" for i, c in enumerate(["a cat", "b"]))
    )
    store = str(tmp_path / "s.sqlite")
    assert main(["--store", store, "score", "--model", "tiny-llada", "--candidates", str(g), "--fast"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "runs", "export", "last"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["key"].split("#")[0], r["candidate"]) for r in rows] == [("x0", "a cat"), ("x1", "b")]
    assert (
        main(["score", "--no-store", "--model", "tiny-llada", "--candidates", "x", "--text", "--fast"]) == 0
    )
    assert "config: marginal" in capsys.readouterr().err


def test_sample_runs_are_stored_and_listed(tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    base = ["--store", store, "sample", "--model", "tiny-llada", "--length", "6", "--steps", "6"]
    assert main([*base, "--prompt", "the cat", "-n", "2"]) == 0
    out = capsys.readouterr().out
    run_id = next(line.split()[1] for line in out.splitlines() if line.startswith("run: "))
    assert main([*base, "--prompt", "a dog"]) == 0
    out2 = capsys.readouterr().out
    run_id2 = next(line.split()[1] for line in out2.splitlines() if line.startswith("run: "))
    assert run_id2 != run_id  # other prompts, another run
    assert main(["--store", store, "--json", "runs", "list"]) == 0
    runs = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs[run_id]["kind"] == "sample" and runs[run_id]["n_items"] == 2
    assert runs[run_id]["status"] == "done" and runs[run_id2]["n_items"] == 1
    assert main(["--store", store, "runs", "export", run_id, "--format", "json", "-o", "-"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert [i["key"] for i in items] == ["0:0", "0:1"]
    assert all(i["result"]["prompt"] == "the cat" and isinstance(i["result"]["text"], str) for i in items)
    # --no-store records nothing
    assert main([*base, "--prompt", "a bird", "--no-store"]) == 0
    assert "run: " not in capsys.readouterr().out
    assert main(["--store", store, "--json", "runs", "list"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 2


def test_warnings_go_through_the_rich_console(tmp_path, capsys):
    logging.basicConfig()  # as a library might: raw "WARNING:name:" lines on the root logger
    assert main(["--store", str(tmp_path / "s.sqlite"), "runs", "list"]) == 0
    capsys.readouterr()
    logging.getLogger("dlmeval.store").warning("run abc: texts cut to the model window")
    err = capsys.readouterr().err
    assert "texts cut to the model window" in err
    assert "WARNING:dlmeval.store" not in err
    main(["--store", str(tmp_path / "s.sqlite"), "runs", "list"])  # a second main adds no second handler
    capsys.readouterr()
    logging.getLogger("dlmeval.store").warning("once")
    assert capsys.readouterr().err.count("once") == 1


@pytest.mark.parametrize("field", ["license", "license-files"])
def test_pyproject_license_is_the_pep639_form(field):
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    proj = meta["project"]
    assert proj["license"] == "Apache-2.0"  # an SPDX string, not the deprecated table
    assert all((root / f).is_file() for f in proj["license-files"])
    req = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    # the first setuptools that reads PEP 639 fields; setuptools-scm gives the version from git (issue 32)
    assert req == ["setuptools>=77", "setuptools-scm>=8,<10"]
    assert proj["dynamic"] == ["version"] and "version" not in proj
    assert field in proj


def test_every_dependency_has_both_bounds_and_each_package_appears_once():
    """An install that resolves at once (#36): every requirement names a lower and an upper bound (or one exact
    version), so pip never walks back through a package's releases, and no package is listed twice (two
    requirements on one package were how the datasets bound got lost before)."""
    import re
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    reqs = [Requirement(r) for r in meta["project"]["dependencies"]]
    for extra in meta["project"]["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra if not r.startswith(("pytest", "ruff", "hypothesis"))]
    for r in reqs:
        ops = {s.operator for s in r.specifier}
        assert "==" in ops or ({">=", "<"} <= ops or {">=", "<="} <= ops), (
            f"{r} lacks a lower or an upper bound"
        )
    names = [re.sub(r"[-_.]+", "-", Requirement(r).name.lower()) for r in meta["project"]["dependencies"]]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    # datasets 5.1+ needs huggingface-hub >= 1.31, which the pinned transformers (hub < 1.0) refuses
    (ds,) = [r for r in reqs if r.name == "datasets"]
    assert not ds.specifier.contains("5.1.0") and ds.specifier.contains("5.0.1")
