"""A package's lazily read names (PEP 562), written once for every package that defers its imports."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], modules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name in ``exports`` is read from the submodule
    it maps to, a name in ``modules`` is that submodule; either is imported on first read and kept in the package's
    namespace, and any other name raises :class:`AttributeError`.

    Use in a package ``__init__``: ``__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _MODULES)``.
    """
    modules = tuple(modules)

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        elif name in modules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports, *modules})

    return __getattr__, __dir__
