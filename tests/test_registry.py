"""The generic registry every pluggable kind uses: duplicates refused, aliases, listing in errors."""

import pytest

from dlmeval.errors import InputError
from dlmeval.registry import Registry


def test_duplicate_name_is_refused_and_same_object_is_a_no_op():
    r: Registry[int] = Registry("widget")
    obj = object()
    r.add("a", obj)
    assert r.add("A", obj) is obj  # the same object again: a module imported twice
    with pytest.raises(ValueError, match="widget named 'a' is registered already"):
        r.add("a", object())
    with pytest.raises(ValueError, match="alias 'a' already names 'a'"):
        r.add("b", object(), aliases=("a",))
    assert r.names() == ("a",)


def test_unknown_name_lists_entries_and_aliases_resolve():
    r = Registry("gizmo")
    r.add("Alpha", 1, aliases=("al",))
    r.add("beta", 2)
    assert r.get("AL") == 1 and r["alpha"] == 1 and r.canonical("al") == "Alpha"
    with pytest.raises(InputError, match="unknown gizmo 'gamma'; choose one of Alpha, beta"):
        r.get("gamma")
    r.remove("alpha")
    assert "al" not in r and r.names() == ("beta",)


def test_decorator_uses_name_attribute():
    r = Registry("thing")

    @r.register()
    class Foo:
        name = "foo"

    assert r.get("foo") is Foo
    with pytest.raises(TypeError, match="needs a name"):
        r.register()(object())


def test_order_pop_and_restore():
    """``order`` lists entries by a key (ties in registration order); pop / clear / update let a test restore
    a registry it extended."""
    r = Registry("family", order=lambda v: v[0])
    r.add("late", (9, "a"))
    r.add("early", (1, "b"))
    r.add("also-early", (1, "c"))
    assert r.names() == ("early", "also-early", "late")
    saved = dict(r)
    assert r.pop("EARLY") == (1, "b") and r.pop("early") is None and "early" not in r
    r.clear()
    assert len(r) == 0
    r.update(saved)
    assert r.names() == ("early", "also-early", "late")


def test_every_pluggable_kind_refuses_a_duplicate_name():
    from dlmeval.protocols.diffscore.meta_eval import METRIC_FAMILIES
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS
    from dlmeval.protocols.robust.probes import PROBES
    from dlmeval.report.registry import REGISTRY as SECTIONS
    from dlmeval.report.registry import renderers
    from dlmeval.robustness.perturb import PERTURBATIONS, register_perturbation
    from dlmeval.sampling.strategies import STRATEGIES
    from dlmeval.tasks import TASKS

    renderers()  # imports the report sections
    for reg in (METRIC_FAMILIES, BENCHMARKS, PROBES, SECTIONS, PERTURBATIONS, STRATEGIES, TASKS):
        assert isinstance(reg, Registry) and len(reg) > 0, reg
        name = reg.names()[0]
        with pytest.raises(ValueError, match="registered already"):
            reg.add(name, object())
    with pytest.raises(ValueError, match="char.keyboard"):
        register_perturbation("char", "keyboard", rates=(0.1,), description="", eligible="")(
            lambda *a: ([], 0, 0)
        )
    assert PERTURBATIONS["char.keyboard"].description.startswith("replace a letter by a QWERTY")
