"""Helpers the protocols share (Care, robustness): freeing CUDA memory between
models, a mean that is NaN over nothing, the stop-string cut, ARC-Challenge by conditional DiffScore, and writing / reading a run's tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError


def empty_cuda() -> None:
    """Release cached CUDA memory (between two models of a run); nothing on a CPU."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def mean_or_nan(xs: Iterable[Any], *, skip_missing: bool = False) -> float:
    """The mean of ``xs`` as a float, NaN when there is nothing to average; ``skip_missing``: None and NaN values
    are left out first (a cell whose probe had nothing to compare)."""
    import math

    vals = list(xs)
    if skip_missing:
        vals = [x for x in vals if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.mean(vals)) if vals else float("nan")


def cut_at(text: str, stops: Iterable[str]) -> str:
    """``text`` up to the first occurrence of any of ``stops`` (all of it when none occurs)."""
    cut = len(text)
    for s in stops:
        i = text.find(s) if s else -1
        if i != -1:
            cut = min(cut, i)
    return text[:cut]


def diffscore_choice_scores(
    scorer: Any,
    requests: Sequence[tuple[str, Sequence[str]]],
    *,
    item_ids: Sequence[str] | None = None,
    strip_leading_space: bool = False,
) -> list[list[float]]:
    """Conditional DiffScore (``config="cond"``) of every choice of every ``(context, choices)`` request, in one
    scorer call so that it packs all options into large batches (the scores as the scorer gives them; the
    argmax of :func:`dlmeval.tasks.argmax_choice` reads NaN as -inf). ``item_ids[i]`` names request ``i``; its choices are scored as ``<id>/<j>``.
    ``strip_leading_space``: the options follow the context as their own text (a chat model's assistant turn)."""
    cands = [c.lstrip(" ") if strip_leading_space else c for _, conts in requests for c in conts]
    ctxs = [ctx for ctx, conts in requests for _ in conts]
    kw = {}
    if item_ids is not None:
        kw["item_ids"] = [
            f"{iid}/{j}" for iid, (_, conts) in zip(item_ids, requests) for j in range(len(conts))
        ]
    flat = [float(x) for x in scorer.score(cands, ctxs, config="cond", **kw)["score"]] if cands else []
    out, i = [], 0
    for _, conts in requests:
        out.append(flat[i : i + len(conts)])
        i += len(conts)
    return out


def write_tables(
    tables: Mapping[str, pd.DataFrame],
    out_dir: str | Path,
    *,
    order: Sequence[str],
    markdown: Callable[[str, pd.DataFrame], str],
    header: str = "",
    preface: Sequence[str] = (),
    data: str = "",
) -> Path:
    """Each table of ``order`` present in ``tables`` as ``<name>.csv`` and ``<name>.md`` in ``out_dir``, and all
    of them in ``tables.md`` (after ``header`` and the ``preface`` paragraphs). Every CSV carries the column
    ``data_source`` (:data:`dlmeval.report.fmt.DATA_SOURCE`): the table's own (the protocols store it with each
    table), else ``data`` (a run stored before tables carried it)."""
    from dlmeval.report.fmt import with_data_source

    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create output directory {d}: {e.strerror or e}") from None
    parts = [f"# {header}\n"] if header else []
    parts += list(preface)
    for name in order:
        if name not in tables:
            continue
        df = with_data_source(tables[name], data)
        df.to_csv(d / f"{name}.csv", index=False)
        md = markdown(name, df)
        (d / f"{name}.md").write_text(md, encoding="utf-8")
        parts.append(md)
    (d / "tables.md").write_text("\n".join(parts), encoding="utf-8")
    return d


def with_data_note(
    markdown: Callable[[str, pd.DataFrame], str], note: str = "", *, skip: Sequence[str] = ()
) -> Callable[[str, pd.DataFrame], str]:
    """``markdown`` with a line ``Data: SOURCE`` under every table (but those in ``skip``, which say it
    themselves), so that each table, read alone, names the data it was computed on. SOURCE is the table's own
    ``data_source`` column (:data:`dlmeval.report.fmt.DATA_SOURCE`, left out of the table body), else ``note``."""
    from dlmeval.report.fmt import split_data_source

    def render(name: str, df: pd.DataFrame) -> str:
        body, source = split_data_source(df)
        md = markdown(name, body)
        source = source or note
        return md if name in skip or not source else md.rstrip("\n") + f"\n\nData: {source}\n"

    return render


def with_data_sources(tables: Mapping[str, pd.DataFrame], note: str) -> dict[str, pd.DataFrame]:
    """Every table with the column ``data_source`` = ``note`` (where the run's data came from; none when
    ``note`` is empty), as the protocols store them."""
    from dlmeval.report.fmt import with_data_source

    return {name: with_data_source(df, note) for name, df in tables.items()}


def load_tables(store, run_id: str, order: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The tables stored on a run, in ``order`` (names outside it are left out)."""
    run = store.get_run(run_id)
    have = set(run.tables())
    return {n: run.get_table(n) for n in order if n in have}


__all__ = [
    "cut_at",
    "diffscore_choice_scores",
    "empty_cuda",
    "load_tables",
    "mean_or_nan",
    "with_data_note",
    "with_data_sources",
    "write_tables",
]
