"""The plan of a robustness spec: :func:`resolve` turns a spec and where its data lives (:class:`RobustOptions`)
into one frozen :class:`RobustPlan`, which ``dlmeval robust SPEC --plan`` prints (:func:`describe`) and
:func:`~dlmeval.protocols.robust.run.run_robust` executes. Resolved here once: the models (each distinct model once,
with its role, label and sampler) and the pairs' labels, every (task, mode, condition, perturbation seed) cell, the
probes that run, and each task object with the spec's options; the task data (every task's items, the probes' tasks
included, and their identity) is read on first use and kept in the plan, so the check before the store opens and
the run read each file once between them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlmeval.protocols.robust.evaluate import Data, ModelEntry, clean_seeds, model_entries, plan_cells
from dlmeval.protocols.robust.probes import PROBES
from dlmeval.protocols.robust.spec import RobustSpec


@dataclass(frozen=True)
class RobustOptions:
    """Where a plan's task data is read from: ``data_dir`` (the shipped files) and whether a hub source may be
    downloaded."""

    data_dir: Any = None
    allow_download: bool = False


@dataclass(frozen=True, eq=False)
class RobustPlan:
    """A robustness spec resolved once (:func:`resolve`): ``entries`` (the distinct models, in spec order),
    ``pair_labels`` (pair name -> its DLM and AR labels), ``cells`` (every (task, mode, condition, perturbation
    seed) of one model, in run order), ``probes`` (the probes that run), ``data`` (the task files, each read once)."""

    spec: RobustSpec
    options: RobustOptions
    entries: tuple[ModelEntry, ...]
    pair_labels: Mapping[str, tuple[str, str]]
    cells: tuple[tuple[str, str, str, int | None], ...]
    probes: tuple[str, ...]
    data: Data
    reads: dict = field(default_factory=dict, repr=False)

    def task(self, name: str):
        """The task object of ``name`` with the spec's options (a probe-only task: its defaults), built once."""
        key = ("task", name)
        if key not in self.reads:
            self.reads[key] = self.spec.task_or_default(name).task()
        return self.reads[key]

    def items(self, name: str) -> list:
        """The evaluated items of one of the spec's tasks (its first ``n``)."""
        return self.data.items(name, self.data.path_of(self.spec, name), self.spec.task(name).n)

    def identity(self) -> dict[str, dict]:
        """The data identity of every task the spec reads (its tasks and those only a probe uses); reading it is
        where a sourced task is first read, so a bad source fails before any run opens."""
        if "identity" not in self.reads:
            self.reads["identity"] = self.data.identity(self.spec)
        return self.reads["identity"]


def resolve(spec: RobustSpec, options: RobustOptions | None = None) -> RobustPlan:
    """The plan of ``spec`` (see the module docstring); reads no data."""
    options = options or RobustOptions()
    entries, pair_labels = model_entries(spec)
    return RobustPlan(
        spec=spec,
        options=options,
        entries=tuple(entries),
        pair_labels=pair_labels,
        cells=tuple(plan_cells(spec)),
        probes=tuple(name for name in PROBES if spec.probe(name).enabled),
        data=Data(
            options.data_dir,
            sources={t.name: t.data_source() for t in spec.tasks},
            allow_download=options.allow_download,
        ),
    )


def as_plan(
    spec_or_plan: RobustSpec | RobustPlan, *, data_dir=None, allow_download: bool = False
) -> RobustPlan:
    """A plan as given, or the plan of a spec under ``data_dir`` / ``allow_download``. A plan keeps its own data
    options: another ``data_dir`` or a download it does not allow is refused."""
    if isinstance(spec_or_plan, RobustPlan):
        o = spec_or_plan.options
        if (data_dir is not None and data_dir != o.data_dir) or (allow_download and not o.allow_download):
            raise ValueError(
                "a RobustPlan reads its data as resolve() was told: give data_dir / allow_download there"
            )
        return spec_or_plan
    return resolve(spec_or_plan, RobustOptions(data_dir, allow_download))


def describe(plan: RobustPlan) -> tuple[dict[str, Any], str]:
    """What ``dlmeval robust SPEC --plan`` prints: the payload (``--json``) and the text. Reads no data."""
    from dlmeval.protocols.published import plan_lines as published_lines
    from dlmeval.protocols.published import plan_records
    from dlmeval.protocols.robust.readings import analyses, paper_tables, readings
    from dlmeval.protocols.robust.tables import recipe_table
    from dlmeval.store import frame_records

    spec, entries = plan.spec, plan.entries
    per_model = sum(spec.task(t).n for t, _, _, _ in plan.cells)
    rows = []
    for t in spec.tasks:
        gen, steps = t.budget()
        if any(spec.sampler_for(p).steps for p in spec.pairs):
            steps = "per pair (recipe)"  # a pair's sampler sets the steps
        rows.append(
            {
                "task": t.name,
                "n": t.n,
                "modes": list(t.modes),
                "gen_tokens": gen,
                "steps": steps,
                "ar_max_new_tokens": t.ar_tokens,
                "data": t.describe(),
                "evaluations_per_model_and_mode": t.n
                * (len(clean_seeds(spec)) + len(spec.conditions) * len(spec.perturbation_seeds)),
            }
        )
    recipe = recipe_table(spec)
    payload = {
        "spec": spec.name,
        "pairs": [{"dlm": p.dlm, "ar": p.ar, "label": p.name} for p in spec.pairs],
        "models": [{"label": e.label, "role": e.role} for e in entries],
        "conditions": list(spec.conditions),
        "perturbation_seeds": list(spec.perturbation_seeds),
        "tasks": rows,
        "item_evaluations_per_model": per_model,
        "item_evaluations_total": per_model * len(entries),
        "probes": {k: getattr(spec, k).enabled for k in ("ipm", "dgcg", "probes")},
        "analyses": analyses(spec),
        "readings": readings(spec),
        "recipe": frame_records(recipe),
        "paper_tables": paper_tables(spec),
        "published": plan_records(spec.published),
    }
    lines = [
        f"spec {spec.name}: {len(spec.pairs)} pair(s), {len(entries)} model(s), {len(spec.conditions)} conditions "
        f"x {len(spec.perturbation_seeds)} perturbation seed(s) + clean"
    ]
    for r in rows:
        lines.append(
            f"  {r['task']}: n={r['n']} modes={','.join(r['modes'])} gen_tokens={r['gen_tokens']} "
            f"steps={r['steps']} ar_max_new_tokens={r['ar_max_new_tokens']} data={r['data']}: "
            f"{r['evaluations_per_model_and_mode']} item evaluations per model and mode"
        )
    lines.append(f"item evaluations in all: {payload['item_evaluations_total']}")
    for r in recipe.to_dict("records"):
        if r["role"] == "dlm":
            lines.append(
                f"  recipe {r['pair']} / {r['task']}: {r['model']} {r['strategy']} steps={r['steps']} "
                f"block={r['block_length']} temperature={r['temperature']} top_p={r['top_p']} eos={r['eos']} "
                f"(applied: {r['applied']})"
            )
    lines.append("analyses:" if payload["analyses"] else "analyses: none")
    for a in payload["analyses"]:
        lines.append(
            f"  {a['analysis']} ({a['title']}): models {', '.join(a['models']) or 'none of this role'}; tasks "
            f"{', '.join(a['tasks'])}; n={a['n']}; conditions {', '.join(a['conditions']) or 'clean only'}; cost: {a['cost']}"
        )
    lines.append("readings:")
    lines += [f"  {k}: {v}" for k, v in payload["readings"].items()]
    lines.append("the paper's tables each part fills:")
    lines += [f"  {r['table']:<26} {r['paper']}" for r in payload["paper_tables"]]
    lines += published_lines(spec.published)
    return payload, "\n".join(lines)


__all__ = ["RobustOptions", "RobustPlan", "as_plan", "describe", "resolve"]
