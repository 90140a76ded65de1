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
