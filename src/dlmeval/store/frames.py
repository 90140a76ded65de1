"""Summary tables as strict JSON: a DataFrame as column-oriented values with dtypes (no pickle: a store must be
safe to open). :mod:`dlmeval.store.db` stores tables with these; ``frame_records`` is the plain form for exports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _encode_frame(df: pd.DataFrame) -> dict[str, Any]:
    """A DataFrame as column-oriented strict JSON with dtypes (no pickle: a store must be safe to open)."""
    import pandas as pd

    plain_index = (
        isinstance(df.index, pd.RangeIndex)
        and df.index.start == 0
        and df.index.step == 1
        and df.index.name is None
    )
    frame = df if plain_index else df.reset_index()
    n_index = 0 if plain_index else df.index.nlevels
    columns, dtypes, data = [], [], []
    for i in range(frame.shape[1]):
        s = frame.iloc[:, i]
        kind = s.dtype.kind
        if kind == "M":
            values = [None if pd.isna(x) else x.isoformat() for x in s]
        elif kind == "m":
            values = [None if pd.isna(x) else str(x) for x in s]
        else:
            values = s.tolist()
        label = frame.columns[i]
        columns.append(list(label) if isinstance(label, tuple) else label)
        dtypes.append(str(s.dtype))
        data.append(values)
    return {
        "columns": columns,
        "dtypes": dtypes,
        "data": data,
        "n_index": n_index,
        "multi_columns": isinstance(frame.columns, pd.MultiIndex),
    }


def _decode_frame(obj: Mapping[str, Any]) -> pd.DataFrame:
    import pandas as pd

    cols = []
    for values, dtype in zip(obj["data"], obj["dtypes"]):
        s = pd.Series(values, dtype=object if not values else None)
        try:
            if dtype.startswith("datetime64"):
                s = pd.to_datetime(s, utc="UTC" in dtype or "+" in dtype)
                if s.dtype != dtype:
                    s = s.astype(dtype)
            elif dtype.startswith("timedelta64"):
                s = pd.to_timedelta(s)
            elif dtype != "object":
                s = s.astype(dtype)
        except (TypeError, ValueError):  # an exotic dtype that cannot be rebuilt from JSON: keep the values
            pass
        cols.append(s.reset_index(drop=True))
    labels = [tuple(c) if isinstance(c, list) else c for c in obj["columns"]]
    df = pd.concat(cols, axis=1) if cols else pd.DataFrame()
    if cols:
        df.columns = pd.MultiIndex.from_tuples(labels) if obj.get("multi_columns") else labels
    n_index = int(obj.get("n_index", 0))
    if n_index:
        df = df.set_index(list(df.columns[:n_index]))
        if n_index == 1 and df.index.name == "index":
            df.index.name = None  # reset_index named an unnamed index "index"
    return df


def frame_records(df: pd.DataFrame) -> dict[str, Any]:
    """A DataFrame as ``{"columns": [...], "rows": [[...], ...]}`` of plain JSON values (for exports)."""
    enc = _encode_frame(df)
    return {"columns": enc["columns"], "rows": [list(r) for r in zip(*enc["data"])] if enc["data"] else []}
