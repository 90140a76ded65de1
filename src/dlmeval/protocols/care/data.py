"""The items of a Care sweep's downstream checks, from the shipped stand-ins or from a hub id / local dataset
(:mod:`dlmeval.data.rows`), and what the run configuration records of them.

GSM8K's few-shot exemplars: the source's ``exemplar_split`` (lm-eval's ``fewshot_split: train``) when the
source has it: the first ``shots`` items of that split, the same for every question (lm-eval draws a fresh
random set per question from ``random.Random(1234)``; a fixed set keeps each record independent of item order).
Without such a split (the shipped test file, a single local file) the last ``shots`` items of the evaluated
split stand in and leave the evaluated pool, so no item is its own exemplar; :func:`gsm8k_work` says which.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.care.spec import DownstreamSpec


@dataclass(frozen=True)
class TaskData:
    items: tuple  # the evaluated items, in order (at most n)
    identity: dict[str, Any] | None  # the rows' provenance (a source), None for a shipped file
    shots: tuple = ()  # GSM8K exemplars
    shots_from: str = ""  # where the exemplars came from (one line, for the plan and the run warnings)


def _task(name: str):
    from dlmeval.tasks import get_task

    return get_task(name)


def _load(kind: str, src, data_dir, allow_download: bool, limit: int | None):
    from dlmeval.data.hub import source_stamp

    return _cached(kind, src, data_dir, allow_download, limit, source_stamp(src.source))


@functools.lru_cache(maxsize=16)
def _cached(kind: str, src, data_dir, allow_download: bool, limit: int | None, stamp: tuple):
    if kind == "humaneval":
        from dlmeval.data.rows import humaneval_items, read_source
        from dlmeval.data.tasks import load_humaneval

        if src.shipped:
            items = load_humaneval(data_dir)
            return tuple(items[:limit] if limit else items), None
        rows = read_source("humaneval", src, allow_download=allow_download, limit=limit,
                           what="downstream.humaneval.source")  # fmt: skip
        return tuple(humaneval_items(rows)), rows.provenance
    if kind == "bbh":  # one subtask per config; a local source is one subtask, named by the config
        from dlmeval.data.hub import is_hub_id
        from dlmeval.data.rows import DataSource, bbh_items, read_source

        sub = src.config or "bbh"
        hub = is_hub_id(src.source)
        rows = read_source("bbh", src if hub else DataSource(src.source, src.split), allow_download=allow_download,
                           limit=limit, what="downstream.bbh.source")  # fmt: skip
        return tuple(bbh_items(rows, subtask=sub)), {**rows.provenance, "subtask": sub}
    task = _task(kind)
    items, ident = task.load_source(
        src, data_dir=data_dir, limit=limit, allow_download=allow_download, what=f"downstream.{kind}.source"
    )
    return tuple(items), (None if src.shipped else ident)


def task_data(d: DownstreamSpec, task: str, data_dir=None, *, allow_download: bool = False) -> TaskData:
    """The items of one downstream task (``humaneval``, ``gsm8k``, ``arc``, ``hellaswag``, ``bbh``)."""
    if task == "gsm8k":
        return gsm8k_work(d, data_dir, allow_download=allow_download)
    t = getattr(d, task)
    if task == "bbh":
        from dlmeval.data.hub import is_hub_id

        if not is_hub_id(t.source) and len(t.configs) > 1:
            raise InputError(
                "downstream.bbh: a local source is one subtask: give one config (its name) or a hub id"
            )
        items, idents = [], {}
        for cfg in t.configs:
            its, ident = _load("bbh", t.data_source(cfg), data_dir, allow_download, t.n)
            items += its
            idents[cfg] = ident
        return TaskData(tuple(items), idents)
    kind = "arc_challenge" if task == "arc" else task
    items, ident = _load(kind, t.data_source(), data_dir, allow_download, t.n)
    return TaskData(items, ident)


def gsm8k_work(d: DownstreamSpec, data_dir=None, *, allow_download: bool = False) -> TaskData:
    g = d.gsm8k
    src = g.data_source()
    items, ident = _load("gsm8k", src, data_dir, allow_download, None)
    if g.shots and not src.shipped:
        from dataclasses import replace

        try:
            shots, _ = _load("gsm8k", replace(src, split=g.exemplar_split), data_dir, allow_download, g.shots)
        except InputError:  # no such split (a single file, a dataset without it): the stand-in rule below
            shots = None
        if shots is not None:
            if len(shots) < g.shots:
                raise InputError(
                    f"downstream.gsm8k: the {g.exemplar_split} split has {len(shots)} items, shots = {g.shots}"
                )
            return TaskData(
                items[: g.n], ident, shots, f"the first {g.shots} items of the {g.exemplar_split} split"
            )
    shots = items[len(items) - g.shots :] if g.shots else ()
    pool = items[: len(items) - g.shots]
    where = (
        f"the last {g.shots} items of the evaluated split (no {g.exemplar_split} split), left out of the pool"
        if g.shots
        else "none (zero-shot)"
    )
    return TaskData(pool[: g.n], ident, tuple(shots), where)


ENABLED = ("humaneval", "gsm8k", "arc", "hellaswag", "bbh")


__all__ = ["ENABLED", "TaskData", "gsm8k_work", "task_data"]
