"""Optional probes as registered classes with explicit phases.

A probe is a :class:`Probe` subclass registered with :func:`register_probe`; a spec runs it when it has the
probe's table (``[<name>]``). The run proceeds in phases:

1. ``model`` phase, every DLM first, then every AR model (:func:`phase_order`): :meth:`Probe.run` with the
   model loaded writes the probe's per-item records into the model's run and returns them; it may read what the
   probe returned for models of an earlier phase (``ctx.collected``: the D-GCG transfer reads every DLM's suffixes
   while the AR partner is loaded, whatever the pair order, for every pair the AR model belongs to);
2. ``tables`` phase, after all models: :meth:`Probe.rows` builds the probe's table from the collected records
   only (a pure function of them).

Adding a probe is one file with a subclass plus its import in this package's ``__init__.py`` (this module is the
registry only: it imports no probe, so the probes import it one way).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dlmeval.errors import InputError
from dlmeval.registry import Registry

PHASES = ("model", "tables")


@dataclass
class ProbeContext:
    """What a probe sees: the spec, its own table, the task data, the pairs, and what earlier models left."""

    spec: Any
    probe: Any  # ProbeSpec
    data: Any  # evaluate.Data
    pair_labels: dict[str, tuple[str, str]]
    say: Callable[[str], None] = lambda s: None
    collected: dict[str, list[dict]] = field(default_factory=dict)  # model label -> records run() returned
    roles: dict[str, str] = field(default_factory=dict)  # model label -> role

    def items(self, task_name: str) -> list:
        return self.data.items(task_name, self.data.path_of(self.spec, task_name), self.probe.n)

    def task(self, task_name: str):
        return self.spec.task_or_default(task_name).task()

    def conditions(self) -> list[str]:
        """The conditions the probe runs on: its own ``conditions``, else the spec's first."""
        return self.probe.conditions or self.spec.conditions[:1]

    def groups(self) -> Iterator[tuple[str, str, str, list[dict]]]:
        """``(model label, task, condition, records)`` of every model's collected records grouped by task and
        condition, models in collection order and groups in first-seen order (what a per-condition table reads)."""
        for label, recs in self.collected.items():
            groups: dict[tuple[str, str], list[dict]] = {}
            for r in recs:
                groups.setdefault((r["task"], r["condition"]), []).append(r)
            for (task, cond), g in groups.items():
                yield label, task, cond, g

    def partners(self, ar_label: str) -> list[str]:
        """The DLM labels of every pair whose AR model is ``ar_label`` (each once, in pair order)."""
        out = []
        for dl, ar in self.pair_labels.values():
            if ar == ar_label and dl not in out:
                out.append(dl)
        return out


class Probe(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()  # the keys of its table besides enabled, task(s), n, conditions
    roles: ClassVar[tuple[str, ...]] = ("dlm", "ar")  # the models it runs on

    @classmethod
    def validate(cls, spec, where: str) -> None:
        """Refuse bad options at parse time (InputError naming the key); the base accepts every option."""
        return None

    @abstractmethod
    def run(self, ctx: ProbeContext, resp, run) -> list[dict]:
        """Model phase: this model's records (computed where missing, read back otherwise)."""

    @abstractmethod
    def rows(self, ctx: ProbeContext) -> list[dict]:
        """Tables phase: the probe's table rows from ``ctx.collected``."""


PROBES: Registry[type[Probe]] = Registry("probe")


def register_probe(cls: type[Probe]) -> type[Probe]:
    """Class decorator: make a probe available under its ``name`` (its spec table)."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a class attribute `name`")
    if cls.name in PROBES and PROBES[cls.name] is not cls:
        raise TypeError(f"a probe named {cls.name!r} is registered already")
    return PROBES.add(cls.name, cls)


def phase_order(entries: list) -> list:
    """Every DLM before every AR model (stable within a role): what the model phase of a probe may rely on."""
    return sorted(entries, key=lambda e: 0 if e.role == "dlm" else 1)


def unavailable(run, what: str, e: Exception, say) -> list[dict]:
    msg = f"{what} skipped: {e}"
    run.warn(msg)
    say(f"robust: {msg}")
    return []


def option_check(ok: Callable[[Any], bool], what: str):
    def check(spec, where: str, key: str) -> None:
        opts = spec.kwargs()
        if key in opts and not ok(opts[key]):
            raise InputError(f"spec: {where}.{key} must be {what}, got {opts[key]!r}")

    return check
