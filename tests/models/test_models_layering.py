"""A family is one module and one registration (#35): inside ``models/`` the family modules import the base pieces
and never the other way, so the package has no import circle; nothing above ``models/`` imports a family's module;
a stand-in builder is registered by its family's module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "dlmeval"
MODELS = SRC / "models"
#: the modules of the diffusion families the issue names, and the stand-in recipes that lived outside them
FAMILY_MODULES = ("llada", "dream", "a2d", "diffullama", "bert_chat", "lladamoe")


def imports_of(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports anywhere (top level or inside a function)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == package:
                out.update(a.name for a in node.names)
            elif node.module.startswith(package + "."):
                out.add(node.module[len(package) + 1 :].split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(
                a.name[len(package) + 1 :].split(".")[0]
                for a in node.names
                if a.name.startswith(package + ".")
            )
    return out


def models_graph() -> dict[str, set[str]]:
    mods = {p.stem for p in MODELS.glob("*.py")}
    return {p.stem: (imports_of(p, "dlmeval.models") & mods) - {p.stem} for p in MODELS.glob("*.py")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_models_has_no_import_circle():
    graph = models_graph()
    assert {"family", "base", "registry", "tiny", *FAMILY_MODULES} <= set(graph)
    assert cycles(graph) == []


@pytest.mark.parametrize("base", ["family", "base", "tiny", "standins", "standin_families", "remote", "hub"])
def test_the_base_pieces_import_no_family_module(base):
    assert not imports_of(MODELS / f"{base}.py", "dlmeval.models") & set(FAMILY_MODULES)


def test_nothing_above_models_imports_a_family_module():
    bad = []
    for path in SRC.rglob("*.py"):
        if MODELS in path.parents:
            continue
        named = imports_of(path, "dlmeval.models") & {*FAMILY_MODULES, "standin_families", "standins"}
        if named:
            bad.append(f"{path.relative_to(SRC)}: {sorted(named)}")
    assert bad == []


def test_every_stand_in_is_registered_by_its_family_module():
    from dlmeval.models import standin_families, standins, tiny
    from dlmeval.models.family import FAMILIES

    kinds = tiny.standin_kinds()
    assert {"bert", "causal", "llada", "dream", "a2d", "a2d-qwen3", "a2d-bd3lm"} <= set(kinds)
    recipes = {kind: Path(standin_families._STANDINS[kind].source).stem for kind in standin_families.kinds()}
    assert recipes == {
        "a2d": "a2d",
        "a2d-qwen3": "a2d",
        "a2d-bd3lm": "a2d",
        "diffullama": "diffullama",
        "bert-chat": "bert_chat",
        "lladamoe": "lladamoe",
    }
    remote = {kind: Path(standins._RECIPES[kind].source).stem for kind in standins.kinds()}
    assert remote == {"llada": "llada", "dream": "dream"}
    for fam in FAMILIES.values():
        if fam.standin:
            assert fam.load_standin is not None, fam.name


def test_the_shared_stand_in_builder_names_no_family():
    """What differs between the ``auto_map`` stand-ins (LLaDA, Dream) is their recipe, in the family's module: the
    shared build / cache / training code holds no ``if kind == ...`` branch and no family's tokens or code files."""
    tree = ast.parse((MODELS / "standins.py").read_text(encoding="utf-8"))
    compared = [
        c.value
        for cmp in ast.walk(tree)
        if isinstance(cmp, ast.Compare)
        for c in ast.walk(cmp)
        if isinstance(c, ast.Constant) and isinstance(c.value, str)
    ]
    assert compared == []
    named = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".py", "|>"))
    }
    assert named == set()


def test_reading_every_family_loads_no_torch_nor_transformers():
    """``dlmeval models`` reads the families' facts (#36): importing the layer and every family module must load
    neither torch nor transformers; the adapters import them where a model is built or run."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dlmeval.models.family import FAMILIES, FAMILY_MODULES, load_families\n"
        "import dlmeval.models\n"
        "load_families()\n"
        "facts = [f.facts() for f in FAMILIES.values()]\n"
        "assert {f.module for f in FAMILIES.values()} >= set(FAMILY_MODULES), 'a family module registered nothing'\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers') if m in sys.modules), len(facts))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[:2] == ["HEAVY", "[]"], r.stdout
