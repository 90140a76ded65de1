"""The tests mirror the source tree (#35): ``tests/<package>/test_<module>.py`` tests
``src/dlmeval/<package>/<module>.py``, so a change to a module has one obvious test file. A test file's name is
``test_<module>`` or ``test_<module>_<topic>`` where ``<module>`` is a module of the package the folder mirrors, a
sub-package of it, or the package itself (a file that tests a package's public surface across its modules, e.g.
``tests/stats/test_stats.py``). Tests that cut across packages live in the named folders of :data:`CROSS_CUTTING`,
directly under ``tests/``. Every folder is a package (``__init__.py``), so two packages may each have a
``test_<module>.py`` of the same name."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "dlmeval"

#: folders of tests that cut across packages, and what each holds
CROSS_CUTTING = {
    "bad_inputs": "the bad-input battery: every careless or hostile input through the CLI and the API",
    "docs": "the README's and the docs' examples and claims run as written",
    "e2e": "end-to-end runs across packages (reproducibility, first steps, hub sources, score identity)",
    "guard": "the guard digest of the tiny runs' numbers",
    "parity": "numbers and tokens against other projects' code (values recorded from it)",
}
#: folders that hold data the tests read, no tests
DATA_FOLDERS = {"fixtures"}
#: test files at the top of tests/ that test no module: the layout itself, the tests' own conftest.py
TOP_LEVEL_EXTRA = {"test_layout.py", "test_conftest.py"}
#: Python files that are not tests
HELPERS = {"__init__.py", "conftest.py", "hub_data.py"}


def _modules(pkg: Path) -> set[str]:
    """The names a test file in the folder mirroring ``pkg`` may start with: its modules, its sub-packages (a file
    that tests a sub-package's public surface) and the package's own name."""
    names = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    return names | {pkg.name}


def _names_a_module(stem: str, modules: set[str]) -> bool:
    x = stem.removeprefix("test_")
    return any(x == m or x.startswith(m + "_") for m in modules)


def layout_problems(tests: Path, src: Path) -> list[str]:
    """Every way ``tests`` departs from mirroring ``src``: a folder with no package behind it, a test file that
    names no module of its package, a folder that is not a package."""
    problems = []
    for d in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        rel = d.relative_to(tests)
        if rel.parts[0] in DATA_FOLDERS:
            continue
        if not (d / "__init__.py").is_file():
            problems.append(f"{rel}/ has no __init__.py")
        if rel.parts[0] in CROSS_CUTTING:
            if len(rel.parts) > 1:
                problems.append(f"{rel}/: cross-cutting folders have no sub-folders")
            continue
        if not (src / rel).is_dir():
            problems.append(f"{rel}/ mirrors no package: {src.name}/{rel} does not exist")
    for f in sorted(tests.rglob("*.py")):
        rel = f.relative_to(tests)
        if "__pycache__" in rel.parts or f.name in HELPERS and len(rel.parts) == 1 or f.name == "__init__.py":
            continue
        if rel.parts[0] in DATA_FOLDERS:
            problems.append(f"{rel}: a Python file in a data folder")
            continue
        if not f.name.startswith("test_"):
            problems.append(f"{rel}: not a test file (test_<module>.py) nor a known helper")
            continue
        if rel.parts[0] in CROSS_CUTTING or len(rel.parts) == 1 and f.name in TOP_LEVEL_EXTRA:
            continue
        pkg = src.joinpath(*rel.parts[:-1])
        if pkg.is_dir() and not _names_a_module(f.stem, _modules(pkg)):
            problems.append(
                f"{rel}: names no module of {src.name}/{'/'.join(rel.parts[:-1]) or '.'} "
                f"(test_<module>[_<topic>].py, or a cross-cutting folder: {', '.join(sorted(CROSS_CUTTING))})"
            )
    return problems


def test_the_tests_mirror_the_source_tree():
    assert layout_problems(TESTS, SRC) == []


def test_the_cross_cutting_folders_exist_and_hold_tests():
    for name in CROSS_CUTTING:
        assert list((TESTS / name).glob("test_*.py")), name


def test_a_misplaced_test_file_or_folder_is_reported(tmp_path):
    src = tmp_path / "src" / "pkg"
    (src / "scoring" / "core").mkdir(parents=True)
    (src / "scoring" / "core" / "__init__.py").write_text("")
    (src / "scoring" / "estimator.py").write_text("")
    (src / "errors.py").write_text("")
    tests = tmp_path / "tests"
    for d in ("", "scoring", "ghost", "e2e", "e2e/deep"):
        (tests / d).mkdir(exist_ok=True)
        (tests / d / "__init__.py").write_text("")
    good = ["scoring/test_estimator.py", "scoring/test_estimator_paper.py", "scoring/test_scoring.py"]
    good += ["scoring/test_core.py"]  # a sub-package's public surface
    good += ["test_errors.py", "test_layout.py", "e2e/test_anything.py", "conftest.py"]
    bad = ["scoring/test_estimators.py", "scoring/test_masks.py", "test_foo.py", "scoring/helper.py"]
    for f in good + bad:
        (tests / f).write_text("")
    (tests / "scoring" / "__init__.py").unlink()
    got = layout_problems(tests, src)
    assert got == [
        "e2e/deep/: cross-cutting folders have no sub-folders",
        "ghost/ mirrors no package: pkg/ghost does not exist",
        "scoring/ has no __init__.py",
        "scoring/helper.py: not a test file (test_<module>.py) nor a known helper",
        "scoring/test_estimators.py: names no module of pkg/scoring (test_<module>[_<topic>].py, or a cross-cutting "
        "folder: bad_inputs, docs, e2e, guard, parity)",
        "scoring/test_masks.py: names no module of pkg/scoring (test_<module>[_<topic>].py, or a cross-cutting "
        "folder: bad_inputs, docs, e2e, guard, parity)",
        "test_foo.py: names no module of pkg/. (test_<module>[_<topic>].py, or a cross-cutting folder: bad_inputs, "
        "docs, e2e, guard, parity)",
    ]
