"""Plugins: code that registers families, strategies, perturbations, benchmarks... from outside dlmeval.

Two ways in, both read by every ``dlmeval`` command before it builds its parser, so whatever a plugin registers is
usable from every command and listed by ``dlmeval --help`` / ``dlmeval models``:

* an installed package that declares an entry point in the group ``dlmeval.plugins``::

      [project.entry-points."dlmeval.plugins"]
      mine = "my_package.dlmeval_plugin"          # a module (importing it registers), or
      mine2 = "my_package.plugin:register"       # a callable, called with no arguments

* ``dlmeval --include FILE.py COMMAND ...`` (repeatable): a Python file imported as a module.

In Python: :func:`register_plugin` (a module name, a file path or a callable) and :func:`load_plugins`. Registering
uses each building block's own registry (``register_strategy``, ``register_perturbation``, ``register_family``,
...); a plugin that fails to load stops the command with one line naming it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlmeval.errors import InputError

GROUP = "dlmeval.plugins"
#: what was loaded, in order: (name, where from)
LOADED: list[tuple[str, str]] = []
_done_entry_points = False


def load_plugins() -> list[tuple[str, str]]:
    """Load every installed ``dlmeval.plugins`` entry point (once per process); returns :data:`LOADED`."""
    global _done_entry_points
    if _done_entry_points:
        return LOADED
    _done_entry_points = True
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type(sys)):
                obj()
        except Exception as e:  # noqa: BLE001 - any failure of third-party code is reported as one line
            raise InputError(
                f"plugin {ep.name!r} ({ep.value}, entry point group {GROUP}) failed to load: "
                f"{type(e).__name__}: {e}; fix or uninstall it"
            ) from None
        LOADED.append((ep.name, f"entry point {ep.value}"))
    return LOADED


def include(path: str | os.PathLike) -> Any:
    """Import the Python file ``path`` as a plugin module (``--include FILE.py``); returns the module."""
    p = Path(path).expanduser()
    if not p.is_file() or p.suffix != ".py":
        raise InputError(
            f"--include {path}: not a Python file; give the path of a .py file that registers plugins"
        )
    key = str(p.resolve())
    if any(src == f"file {key}" for _, src in LOADED):
        return sys.modules.get(f"dlmeval_include_{p.stem}")
    name = f"dlmeval_include_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001
        del sys.modules[name]
        raise InputError(f"--include {path} failed: {type(e).__name__}: {e}") from None
    LOADED.append((p.stem, f"file {key}"))
    return mod


def register_plugin(plugin: str | os.PathLike | Callable[[], Any]) -> None:
    """Load one plugin from Python: a module name (imported), a ``.py`` file path, or a callable (called)."""
    if callable(plugin):
        plugin()
        LOADED.append((getattr(plugin, "__name__", repr(plugin)), "python"))
    elif str(plugin).endswith(".py"):
        include(plugin)
    else:
        try:
            importlib.import_module(str(plugin))
        except ImportError as e:
            raise InputError(f"plugin module {plugin!r} cannot be imported: {e}") from None
        LOADED.append((str(plugin), "module"))


def includes_in(argv: list[str]) -> list[str]:
    """The ``--include`` values of a command line (before the parser exists: plugins shape its choices)."""
    out = []
    for i, tok in enumerate(argv):
        if tok == "--include" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif tok.startswith("--include="):
            out.append(tok.partition("=")[2])
    return out
