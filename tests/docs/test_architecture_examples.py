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
    "analysis",
    "probe",
    "report section",
    "command",
)
#: the blocks that load a model or run a protocol (5 to 15 s each on two cores): the slow suite
SLOW = {"strategy", "model family", "benchmark", "metric family", "analysis", "probe", "toy family"}


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


# ---- every path and name the doc cites is real (#35)

SRC = ROOT / "src" / "dlmeval"
TICKS = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"\b(dlmeval(?:\.[A-Za-z_]\w*)+)")
PATHLIKE = re.compile(r"^[\w./-]+\.(?:py|md|toml|json|txt)(?:::\w+)?$|^[\w.-]+(?:/[\w.-]+)*/$")


def prose(text: str) -> str:
    """The doc without its ```python blocks (those run as written, above)."""
    return FENCE.sub("", text)


def packages() -> set[str]:
    """The top-level modules and packages of dlmeval (``models``, ``registry``, ...)."""
    return {p.stem for p in SRC.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())} - {
        "__init__"
    }


def cited_names(text: str) -> set[str]:
    """Dotted names the prose cites: every ``dlmeval.x.y``, and a backticked ``x.y`` whose first part is a
    dlmeval package or module (``models.family.FAMILIES``); call parentheses dropped, templates (``<name>``,
    ``{a,b}``, ``*``) left out."""
    out = set(DOTTED.findall(prose(text)))
    tops = packages()
    for span in TICKS.findall(prose(text)):
        head = re.split(r"[\s(\[=,]", span.strip())[0]
        if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", head) and head.split(".")[0] in tops:
            out.add(f"dlmeval.{head}")
    return {n.rstrip(".") for n in out}


def resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def cited_paths(text: str) -> set[str]:
    """Paths the prose cites: every ``src/...`` path, and every backticked file or folder path (``report/fmt.py``,
    ``tests/docs/test_extension_cost.py``, ``meta_eval/work.py::run_chunks``); templates left out."""
    out = set(re.findall(r"\b(src/dlmeval/[\w./-]*\w/?)", prose(text)))
    for span in TICKS.findall(prose(text)):
        span = span.strip()
        if PATHLIKE.match(span) and "/" in span.split("::")[0]:
            out.add(span)
    return out


def path_exists(cited: str) -> bool:
    """A cited path names a file or folder of the checkout: from the repository root, from ``src/dlmeval``, or as
    the tail of one path under ``src/dlmeval`` (``meta_eval/work.py``); ``file::name`` also needs ``name``
    defined at the top of that file."""
    path, _, name = cited.partition("::")
    where = [ROOT / path, SRC / path] + [
        p for p in SRC.rglob(path.rstrip("/")) if "__pycache__" not in p.parts
    ]
    hits = [p for p in where if p.exists()]
    if not hits or not name:
        return bool(hits)
    pattern = re.compile(rf"^(?:def|class) {re.escape(name)}\b|^{re.escape(name)}\s*[:=]", re.M)
    return any(p.is_file() and pattern.search(p.read_text(encoding="utf-8")) for p in hits)


DOC_TEXT = DOC.read_text(encoding="utf-8")


def test_doc_cites_real_names():
    names = cited_names(DOC_TEXT)
    assert {
        "dlmeval.parallel.work_loop",
        "dlmeval.models.family.FAMILIES",
        "dlmeval.registry.Registry",
    } <= names
    missing = sorted(n for n in names if not resolves(n))
    assert not missing, f"docs/architecture.md cites names that do not exist (rename them there): {missing}"


def test_doc_cites_real_paths():
    paths = cited_paths(DOC_TEXT)
    assert {
        "src/dlmeval/report/figures/",
        "tests/docs/test_extension_cost.py",
        "models/diffullama.py",
    } <= paths
    missing = sorted(p for p in paths if not path_exists(p))
    assert not missing, f"docs/architecture.md cites paths that do not exist (fix them there): {missing}"


def test_doc_reference_checks_catch_a_wrong_name_and_path():
    text = "`dlmeval.parallel.work_loop` `models.family.NO_SUCH` `src/dlmeval/no_such/` `report/no_such.py`"
    assert not all(resolves(n) for n in cited_names(text))
    assert sorted(p for p in cited_paths(text) if not path_exists(p)) == [
        "report/no_such.py",
        "src/dlmeval/no_such/",
    ]
    assert not path_exists("protocols/diffscore/meta_eval/work.py::no_such_function")
    assert path_exists("meta_eval/work.py::run_chunks")


def defined_in(name: str, where: str) -> bool:
    """``name`` is defined at the top of the file ``where`` (relative to src/dlmeval), or of a module of the folder."""
    base = SRC / where.rstrip("/")
    files = sorted(base.glob("*.py")) if base.is_dir() else [base]
    pattern = re.compile(rf"^(?:def|class) {re.escape(name)}\b|^{re.escape(name)}\s*[:=]", re.M)
    return any(f.is_file() and pattern.search(f.read_text(encoding="utf-8")) for f in files)


def test_extension_table_names_its_registries_where_they_live():
    """Each row of "Extending dlmeval": the registry and the ``register_*`` function it names exist, in the file
    of its "where" column (a bare name) or at the dotted path it gives."""
    table = DOC_TEXT[DOC_TEXT.index("| to add |") : DOC_TEXT.index("### Strategy")]
    rows = [r.split("|")[1:-1] for r in table.splitlines()[2:] if r.startswith("|")]
    checked = 0
    for kind, where, registry, _ in rows:
        homes = [w for w in TICKS.findall(where) if "<" not in w]
        for span in TICKS.findall(registry):
            name = re.split(r"[\s(]", span.lstrip("@"))[0]
            if "." in name:
                ok = resolves(f"dlmeval.{name}")
            else:
                ok = any(defined_in(name, h) for h in homes)
            assert ok, f"docs/architecture.md, extending {kind.strip()!r}: `{span}` is not defined in {homes}"
            checked += 1
    assert len(rows) >= 10 and checked >= 15
