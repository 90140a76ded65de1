"""The import contract (#35): pyproject.toml's ``[tool.importlinter]`` holds (imports run down the layers, never
up; no import cycle inside any package; building blocks and the report never import a protocol or the CLI), the
contract catches what it promises to catch, and docs/architecture.md lists the same layers."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

# import-linter (and grimp, its graph) is in the dev extra `make test` installs
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[2]
CONFIG = read_configuration(str(ROOT / "pyproject.toml"))  # as lint-imports reads it
CONTRACTS = {c["id"]: c for c in CONFIG["contracts_options"]}
ROOT_PACKAGES = CONFIG["session_options"]["root_packages"]
TYPES = {
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
    "forbidden": ForbiddenContract,
}
DOC = ROOT / "docs" / "architecture.md"


def test_import_contract_holds():
    """`lint-imports` over this checkout's source: every contract kept. A broken one names the import (file and
    line) that runs up a layer or closes a circle."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    r = subprocess.run(
        [sys.executable, "-c", code, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = (
        r.stdout[r.stdout.find("Broken contracts") :] if "Broken contracts" in r.stdout else r.stdout[-3000:]
    )
    assert r.returncode == 0, (
        "the import contract is broken (pyproject.toml [tool.importlinter]; the layers are drawn in "
        "docs/architecture.md). Move the import down a layer, or the code it needs into the lower layer:\n"
        f"{out}\n{r.stderr[-2000:]}"
    )
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken" in r.stdout


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(
        0, str(ROOT / "src")
    )  # this checkout's source, whatever the venv's editable install names
    try:
        return grimp.build_graph(*ROOT_PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT / "src"))


def check(contract_id: str, g):
    opts = CONTRACTS[contract_id]
    contract = TYPES[opts["type"]](
        name=opts["name"], session_options=CONFIG["session_options"], contract_options=opts
    )
    return contract.check(copy.deepcopy(g), verbose=False)


@pytest.mark.parametrize(
    "contract_id, importer, imported",
    [
        ("layers", "dlmeval.scoring.estimator", "dlmeval.protocols.score"),  # a building block reaching up
        ("layers", "dlmeval.models.checks", "dlmeval.sampling.sampler"),  # models below the sampler (#35)
        ("layers", "dlmeval.store.db", "dlmeval.parallel.context"),  # store below parallel
        ("building-blocks", "dlmeval.stats.paired", "dlmeval.cli.main"),
        ("building-blocks", "dlmeval.data.rows", "dlmeval.report.fmt"),
        ("report", "dlmeval.report.sections_scoring", "dlmeval.protocols.diffscore.paper_protocols"),  # (#35)
        ("no-cycles", "dlmeval.parallel.context", "dlmeval.errors"),  # kept: not a cycle (control)
        ("no-cycles", "dlmeval.parallel.inputs", "dlmeval.parallel.context"),  # the circle of #35
        (
            "no-cycles",
            "dlmeval.protocols.robust.probes",
            "dlmeval.protocols.robust.probe_ipm",
        ),  # the circle of #35
        ("no-cycles", "dlmeval.report.registry", "dlmeval.report.sections_scoring"),  # the circle of #35
        ("no-cycles", "dlmeval.sampling.state", "dlmeval.sampling.sampler"),  # the circle of #35
    ],
)
def test_contract_catches_an_import_that_breaks_it(graph, contract_id, importer, imported):
    """Each contract, on this tree plus one added import: kept without it, broken with it (an import that breaks
    no rule keeps it)."""
    assert check(contract_id, graph).kept
    g = copy.deepcopy(graph)
    g.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    breaks = (importer, imported) != ("dlmeval.parallel.context", "dlmeval.errors")
    assert check(contract_id, g).kept is not breaks, f"{contract_id}: {importer} -> {imported}"


def doc_layers(text: str) -> list[str]:
    """The layer lines of the ```text block under docs/architecture.md's "## Layers" that starts with
    ``layers (top to bottom)``: one layer a line, siblings joined as in the contract."""
    section = text[text.index("## Layers") :]
    m = re.search(r"^```text\nlayers \(top to bottom[^\n]*\n(?P<body>.*?)\n```", section, re.S | re.M)
    assert m, "docs/architecture.md: '## Layers' has a ```text block starting 'layers (top to bottom'"
    return [line.split("#")[0].strip() for line in m.group("body").splitlines() if line.split("#")[0].strip()]


def test_architecture_doc_lists_the_contracts_layers():
    layers = CONTRACTS["layers"]["layers"]
    assert doc_layers(DOC.read_text(encoding="utf-8")) == layers, (
        "docs/architecture.md's layer list differs from pyproject.toml's layers contract: make them the same"
    )
