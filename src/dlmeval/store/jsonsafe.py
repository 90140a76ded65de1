"""Lossless, strict JSON for results and configs.

Standard JSON has no NaN or infinities (Python's ``json`` writes the non-standard tokens ``NaN``/``Infinity``,
which other readers reject). Here a non-finite float is written as the tagged object ``{"$float": "nan"}``
(``"inf"``, ``"-inf"``) and read back as the float, so every float round-trips and the text stays strict JSON.
numpy scalars and arrays, tuples, sets, paths, enums and dataclasses are converted to plain JSON values on the way
in; anything else is refused with a :class:`TypeError` that names the offending value.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from collections.abc import Mapping
from typing import Any

_TAG = "$float"
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _float(x: float) -> Any:
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return {_TAG: "nan"}
    return {_TAG: "inf" if x > 0 else "-inf"}


def to_jsonable(obj: Any, *, _path: str = "$") -> Any:
    """Plain JSON values (dict/list/str/int/float/bool/None) with non-finite floats tagged."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(f"JSON object keys must be strings; got {type(k).__name__} at {_path}")
            out[str(k)] = to_jsonable(v, _path=f"{_path}.{k}")
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, _path=f"{_path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        return [to_jsonable(v, _path=f"{_path}[]") for v in sorted(obj, key=repr)]
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value, _path=_path)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj), _path=_path)
    # numpy (and numpy-like: torch 0-d tensors have .item()) without importing numpy here
    mod = type(obj).__module__ or ""
    if mod.startswith("numpy"):
        if hasattr(obj, "tolist"):
            return to_jsonable(obj.tolist(), _path=_path)
    if mod.startswith("torch") and hasattr(obj, "tolist"):
        return to_jsonable(obj.detach().cpu().tolist(), _path=_path)
    raise TypeError(
        f"cannot store a {type(obj).__name__} as JSON (at {_path}); convert it to numbers, "
        "strings, lists or dicts first"
    )


def _hook(d: dict) -> Any:
    if len(d) == 1 and _TAG in d and d[_TAG] in _NONFINITE:
        return _NONFINITE[d[_TAG]]
    return d


def from_jsonable(obj: Any) -> Any:
    """Undo the tagging of :func:`to_jsonable` on an already parsed value."""
    if isinstance(obj, dict):
        return _hook({k: from_jsonable(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return [from_jsonable(v) for v in obj]
    return obj


def dumps(obj: Any, *, canonical: bool = False, indent: int | None = None) -> str:
    """Strict JSON text; ``canonical=True`` sorts keys and drops whitespace (stable input for hashes)."""
    data = to_jsonable(obj)
    if canonical:
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    return json.loads(text, object_hook=_hook)
