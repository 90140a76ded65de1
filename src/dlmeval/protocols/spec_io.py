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


# ---------------------------------------------------------------------------------------------------- fields
# A spec dataclass declares each key once: its default and how it is validated, in the field's metadata
# (``spec_field``); :func:`read_dataclass` reads a ``[table]`` into the dataclass with those checks, so no parser
# repeats a default.
def spec_field(default: Any = dataclasses.MISSING, check: Callable[[Any, str], Any] | None = None, **kw: Any):
    """A dataclass field whose ``metadata["check"](value, where)`` validates (and may convert) a spec value."""
    md = {"check": check} if check is not None else {}
    if default is not dataclasses.MISSING and isinstance(default, list | dict | set):
        raise TypeError("use a tuple or a default_factory for mutable defaults")
    return dataclasses.field(default=default, metadata=md, **kw)


def table_field(cls) -> Any:
    """A field holding a nested ``[where.name]`` table of dataclass ``cls`` (read by :func:`read_dataclass` with
    ``cls``'s own fields; absent: ``cls()`` or the base's value)."""
    return dataclasses.field(default_factory=cls, metadata={"table": cls})


def int_check(minimum: int | None = None, *, none: Sequence[Any] = ()) -> Callable[[Any, str], Any]:
    """An integer of at least ``minimum``; values in ``none`` (e.g. ``0`` for "absent") read as None."""

    def check(v: Any, at: str) -> int | None:
        if v is None or (not isinstance(v, bool) and v in none):
            return None
        return as_int(v, at, minimum=minimum)

    return check


def float_check(lo: float | None = None, hi: float | None = None) -> Callable[[Any, str], float]:
    return lambda v, at: as_float(v, at, lo=lo, hi=hi)


def str_check(
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None,
) -> Callable[[Any, str], str]:
    """A non-empty string, one of ``choices`` (a sequence, or a callable returning one: a registry read late)."""
    return lambda v, at: as_str(v, at, tuple(choices()) if callable(choices) else choices)


def bool_check(v: Any, at: str) -> bool:
    return as_bool(v, at)


def list_check(item: Callable[[Any, str], Any], *, allow_empty: bool = False) -> Callable[[Any, str], tuple]:
    return lambda v, at: as_list(v, at, item, allow_empty=allow_empty)


def read_dataclass(cls, raw: Any, where: str, *, base: Any = None, skip: Sequence[str] = (), **given: Any):
    """``cls`` from the ``[where]`` table ``raw``: unknown keys are refused, each given key is validated by its
    field's ``check`` (a :func:`table_field` is read as its own nested table), absent keys take ``base``'s value
    (another instance: how a default that follows another table is written, once, by the caller) or the field
    default. ``skip``: fields the table may not set (filled from ``given`` or their defaults)."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    allowed = {f.name for f in fields} - set(skip) - set(given)
    t = as_table(raw, where, allowed)
    kw: dict[str, Any] = dict(given)
    for f in fields:
        if f.name in given:
            continue
        sub = f.metadata.get("table")
        if sub is not None and f.name in t:
            kw[f.name] = read_dataclass(
                sub,
                t[f.name],
                dotted(where, f.name),
                base=getattr(base, f.name) if base is not None else None,
            )
        elif f.name in t:
            kw[f.name] = _checked(f, t[f.name], where)
        elif base is not None:
            kw[f.name] = getattr(base, f.name)
    try:
        return cls(**kw)
    except TypeError as e:
        raise InputError(f"spec: [{where}]: {e}") from None


def read_fields(
    cls,
    raw: Mapping[str, Any],
    where: str,
    names: Sequence[str],
    *,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The values of the fields ``names`` of ``cls`` from the (already key-checked) table ``raw``: each given
    value through its field's ``check``; an absent one is ``defaults[name]`` when given, else the field default
    (a field without one must then be in ``raw`` or ``defaults``)."""
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for n in names:
        f = by_name[n]
        if n in raw:
            out[n] = _checked(f, raw[n], where)
        elif defaults is not None and n in defaults:
            out[n] = _checked(f, defaults[n], where)
        elif f.default is not dataclasses.MISSING:
            out[n] = f.default
        else:
            raise InputError(f"spec: {dotted(where, n)} is required")
    return out


def _checked(f: dataclasses.Field, v: Any, where: str) -> Any:
    check = f.metadata.get("check")
    return check(v, dotted(where, f.name)) if check else v
