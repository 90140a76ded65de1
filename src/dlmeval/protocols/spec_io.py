"""Reading and validating protocol spec files (TOML / YAML), shared by the Care and robustness specs.

The validators raise :class:`~dlmeval.errors.InputError` with the dotted key that is wrong (``spec: sweep.steps[1]
must be an integer, got 'x'``); :func:`read_spec` finds a file or a shipped spec by name and parses it.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dlmeval.errors import InputError


def dotted(ctx: str, key: str) -> str:
    return f"{ctx}.{key}" if ctx else key


def as_int(v: Any, at: str, *, minimum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"spec: {at} must be an integer, got {v!r}")
    if minimum is not None and v < minimum:
        raise InputError(f"spec: {at} must be at least {minimum}, got {v}")
    return int(v)


def as_float(v: Any, at: str, *, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
        raise InputError(f"spec: {at} must be a number, got {v!r}")
    v = float(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InputError(f"spec: {at} must lie in [{lo}, {hi}], got {v}")
    return v


def as_str(v: Any, at: str, choices: Sequence[str] | None = None) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"spec: {at} must be a non-empty string, got {v!r}")
    if choices is not None and v not in choices:
        raise InputError(f"spec: {at} = {v!r} is not one of {', '.join(choices)}")
    return v


def as_bool(v: Any, at: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"spec: {at} must be true or false, got {v!r}")
    return v


def as_list(v: Any, at: str, item: Callable[[Any, str], Any], *, allow_empty: bool = False) -> tuple:
    """A list of ``item(x, where)`` values without repeats; a scalar is a one-element list."""
    if isinstance(v, str | int | float) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list | tuple):
        raise InputError(f"spec: {at} must be a list, got {v!r}")
    if not v and not allow_empty:
        raise InputError(f"spec: {at} must not be empty")
    out = tuple(item(x, f"{at}[{i}]") for i, x in enumerate(v))
    if len(set(out)) != len(out):
        raise InputError(f"spec: {at} repeats a value: {list(out)}")
    return out


def as_table(raw: Any, at: str, allowed: set[str] | None) -> dict[str, Any]:
    """A ``[table]`` as a dict (``{}`` when absent); keys outside ``allowed`` (unless None) are an error."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"spec: [{at}] must be a table of keys, got {type(raw).__name__}")
    if allowed is not None:
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise InputError(
                f"spec: unknown key(s) {', '.join(dotted(at, k) for k in unknown)}; "
                f"[{at}] takes {', '.join(sorted(allowed))}"
            )
    return dict(raw)


def field_names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def shipped_spec_path(name: str) -> Path:
    """The path of a spec shipped in ``dlmeval/specs`` (``care-demo``, ``robust-tiny``, ...)."""
    stem = name[:-5] if name.endswith(".toml") else name
    return Path(str(importlib.resources.files("dlmeval") / "specs" / f"{stem}.toml"))


def read_spec(ref: str | os.PathLike, shipped: Sequence[str]) -> tuple[Mapping[str, Any], Path]:
    """The top-level mapping of a ``.toml`` / ``.yaml`` / ``.yml`` spec file, or of a shipped spec given by name,
    and the file's path. ``shipped`` lists the names the error message offers."""
    p = Path(ref)
    if not p.exists():
        if isinstance(ref, str) and os.sep not in ref and shipped_spec_path(ref).exists():
            p = shipped_spec_path(ref)
        else:
            raise InputError(
                f"no spec file {str(ref)!r}; pass a .toml/.yaml path or one of the shipped specs: "
                f"{', '.join(shipped)}"
            )
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read spec {p}: {e.strerror or e}") from None
    suffix = p.suffix.lower()
    if suffix == ".toml":
        import tomllib

        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{p}: not valid TOML: {e}") from None
    elif suffix in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise InputError(f"{p}: not valid YAML: {e}") from None
    else:
        raise InputError(f"spec {p} must end in .toml, .yaml or .yml")
    if not isinstance(raw, Mapping):
        raise InputError(f"{p}: a spec is a table of keys at the top level")
    return raw, p
