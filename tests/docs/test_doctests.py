"""Every ``>>>`` example in a docstring of the package runs (doctest), so the examples say what the code does."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "dlmeval"
MODULES = sorted(
    ".".join(("dlmeval", *p.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
    for p in SRC.rglob("*.py")
    if ">>> " in p.read_text(encoding="utf-8")
)


def test_the_examples_were_found():
    assert "dlmeval.registry" in MODULES and "dlmeval.parallel.work" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    res = doctest.testmod(module, optionflags=flags, report=True, verbose=False)
    assert res.attempted > 0 and res.failed == 0, f"{res.failed} of {res.attempted} examples of {name} failed"
