"""Planning and the per-item evaluation: the models of a spec, the cells of one model, and the records of a cell
(generation or likelihood), computed in fixed chunks where missing and read back otherwise."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.parallel.work import fixed_chunks
from dlmeval.protocols.robust.keys import data_identity, record_key
from dlmeval.protocols.robust.spec import RobustSpec, SamplerSpec
from dlmeval.seeding import derive_seed


# ================================================================================================ planning
@dataclass(frozen=True)
class ModelEntry:
    """One model as the protocol runs it: its role, spec string, table label and (DLM) sampler settings."""

    role: str
    spec: str
    label: str
    sampler: SamplerSpec | None = None


def model_entries(spec: RobustSpec) -> tuple[list[ModelEntry], dict[str, tuple[str, str]]]:
    """The distinct models of the spec (a model in two pairs with the same settings runs once) and, per pair
    name, the labels of its DLM and AR entries."""
    entries: dict[tuple, ModelEntry] = {}
    pair_labels: dict[str, tuple[str, str]] = {}
    for p in spec.pairs:
        labs = []
        for role, ms in (("dlm", p.dlm), ("ar", p.ar)):
            sampler = spec.sampler_for(p) if role == "dlm" else None
            k = (role, ms, sampler)
            if k not in entries:
                taken = {e.label for e in entries.values()}
                label = ms if ms not in taken else f"{ms}@{p.name}"
                entries[k] = ModelEntry(role, ms, label, sampler)
            labs.append(entries[k].label)
        pair_labels[p.name] = (labs[0], labs[1])
    return list(entries.values()), pair_labels


def clean_seeds(spec: RobustSpec) -> list[int | None]:
    """The seeds of the clean cells: one (None) or, with ``clean_seeds = "per_seed"``, each perturbation seed."""
    return list(spec.perturbation_seeds) if spec.clean_seeds == "per_seed" else [None]


def plan_cells(spec: RobustSpec) -> list[tuple[str, str, str, int | None]]:
    """Every (task, mode, condition, perturbation seed) cell of one model, in run order (clean first)."""
    cells = []
    for t in spec.tasks:
        for mode in t.modes:
            for s in clean_seeds(spec):
                cells.append((t.name, mode, "clean", s))
            for c in spec.conditions:
                for s in spec.perturbation_seeds:
                    cells.append((t.name, mode, c, s))
    return cells


@dataclass
class Data:
    """Task files, each read once per run (TriviaQA's takes seconds to parse), and their identities."""

    data_dir: Any = None
    files: dict[tuple[str, str | None], list] = field(default_factory=dict)
    sources: dict[str, Any] = field(default_factory=dict)  # task -> DataSource (a hub id or local dataset)
    allow_download: bool = False
    provenance: dict[str, dict] = field(default_factory=dict)  # task -> the rows' provenance (a source)

    def all_items(self, task_name: str, path: str | None) -> list:
        from dlmeval.tasks import get_task

        task = get_task(task_name)
        key = (task.name, path)
        if key not in self.files:
            self.files[key] = source_items(self, task, path)
        return self.files[key]

    def items(self, task_name: str, path: str | None, n: int) -> list:
        return self.all_items(task_name, path)[:n]

    def identity(self, spec: RobustSpec) -> dict[str, dict]:
        """The data identity of every task the spec reads: its tasks and those only a probe uses."""
        names = [t.name for t in spec.tasks]
        names += [n for _, p in spec.probes_ if p.enabled for n in p.tasks if n not in names]
        out = {}
        for name in dict.fromkeys(names):
            path = self.path_of(spec, name)
            out[name] = data_identity(path, self.all_items(name, path))
            if name in self.provenance:
                out[name]["source"] = self.provenance[name]
        return out

    def path_of(self, spec: RobustSpec, task_name: str) -> str | None:
        return next((t.path for t in spec.tasks if t.name == task_name and t.path), None)


def source_items(data: Data, task, path: str | None) -> list:
    """A task's items: from its spec source (a hub id or local dataset; provenance kept in ``data``), from
    ``path`` (the shipped format), or the shipped file."""
    src = data.sources.get(task.name)
    if src is not None and not src.shipped:
        items, prov = task.load_source(
            src, allow_download=data.allow_download, what=f"tasks.{task.name}.source"
        )
        data.provenance[task.name] = prov
        return items
    return task.items(path=path) if path else task.items(data_dir=data.data_dir)


# ================================================================================================ records
def perturbation(cond: str):
    from dlmeval.robustness import Perturbation

    return None if cond == "clean" else Perturbation.from_key(cond)


def base_record(item_id: str, cond: str, seed: int | None, pr) -> dict[str, Any]:
    p = perturbation(cond)
    return {
        "item_id": item_id,
        "condition": cond,
        "type": None if p is None else p.type_key,
        "rate": 0.0 if p is None else p.rate,
        "seed": seed,
        "changed": pr.changed if pr else 0,
        "eligible": pr.eligible if pr else 0,
    }


def judged(task, item, output: str, tp) -> dict[str, Any]:
    return {
        "output": output,
        "prediction": task.extract(output, item),
        "gold": task.gold(item),
        "correct": bool(task.is_correct(item, output)),
        "confidence": tp.confidences(),
        "n_answer_tokens": tp.n_tokens,
    }


def generation_seed(spec: RobustSpec, task_name: str, cond: str, seed: int | None) -> int:
    return derive_seed(spec.seed, "robust-generate", task_name, cond, seed)


def generation_chunk(spec, resp, task, cond, seed, chunk, state) -> list[dict]:
    pert = perturbation(cond)
    pseed = 0 if seed is None else seed
    msgs = [task.user_message(it, pert, seed=pseed, scope=spec.scope) for it in chunk]
    prompts = [resp.wrap(m.text) for m in msgs]
    ans = resp.generate(
        task, prompts, [it.item_id for it in chunk], generation_seed(spec, task.name, cond, seed)
    )
    out = []
    for it, m, p, o, tp, ex in zip(chunk, msgs, prompts, ans.outputs, ans.probs, ans.extra):
        r = base_record(it.item_id, cond, seed, m.perturbation)
        r.update(prompt=p, **judged(task, it, o, tp), **ex)
        out.append(r)
    return out


def likelihood_chunk(spec, resp, task, cond, seed, chunk, state) -> list[dict]:
    from dlmeval.robustness.calibration import choice_confidence
    from dlmeval.tasks import evaluate_choices

    pert = perturbation(cond)
    results = evaluate_choices(
        chunk,
        resp.choice_scorer(state),
        perturbation=pert,
        seed=0 if seed is None else seed,
        scope=spec.scope,
        wrap=resp.choice_wrap,
        task=task,
    )
    out = []
    for it, r in zip(chunk, results):
        rec = base_record(it.item_id, cond, seed, None)
        rec.update(
            changed=r.changed,
            eligible=r.eligible,
            prompt=r.prompt,
            output="",
            prediction=r.prediction,
            gold=r.gold,
            correct=bool(r.correct),
            scores=list(r.scores),
            confidence={"choice/softmax": choice_confidence(r.scores)},
        )
        out.append(rec)
    return out


CHUNKS = {"generation": generation_chunk, "likelihood": likelihood_chunk}


def _chunk_records(spec, resp, chunk, states: dict, task=None) -> list[dict]:
    """The records of one work chunk (``chunk.meta``: task, mode, condition, seed); ``task``: the task object
    as a plan resolved it (else built from the spec)."""
    task_name, mode, cond, seed = chunk.meta
    task = task or spec.task_or_default(task_name).task()
    state = states.setdefault(f"{task_name}/{mode}", {})
    recs = CHUNKS[mode](spec, resp, task, cond, seed, list(chunk.items), state)
    for r in recs:
        r.update(task=task_name, mode=mode, model=resp.entry.label, role=resp.entry.role)
    return recs


def _cell_chunks(resp, task_name, mode, cond, seed, items) -> tuple[list[str], list]:
    keys = [record_key(task_name, mode, cond, seed, it.item_id) for it in items]
    meta = (task_name, mode, cond, seed)
    return keys, fixed_chunks(items, keys, resp.batch_size, meta=meta, info=f"{task_name}/{mode}/{cond}")


def evaluate_model(plan, resp, run, progress: bool, say) -> list[dict]:
    """Every (task, mode, condition, seed, item) record of one model: computed where missing, read back
    otherwise. Returns the records of ``plan`` (a :class:`~dlmeval.protocols.robust.plan.RobustPlan`: its cells,
    items and task objects) in plan order.

    The chunks of all cells form one work list (:func:`dlmeval.parallel.work_loop`); in a data-parallel job
    (``torchrun``) every rank computes its share of the pending ones (chunks are fixed slices of each cell's
    items, and every draw is seeded per item, so a record does not depend on the rank or the world size)."""
    from dlmeval.parallel import work_loop

    spec = plan.spec
    keys_in_order: list[str] = []
    work = []
    for task_name, mode, cond, seed in plan.cells:
        keys, cell = _cell_chunks(resp, task_name, mode, cond, seed, plan.items(task_name))
        keys_in_order += keys
        work += cell
    states: dict[str, dict] = {}
    label = resp.entry.label
    t0 = time.perf_counter()
    got = work_loop(
        run,
        work,
        lambda c: _chunk_records(spec, resp, c, states, plan.task(c.meta[0])),
        label=f"robust {label}",
        progress=progress,
    )
    if got.pending_chunks:
        say(f"robust: {label}: {got.pending_units} records computed in {time.perf_counter() - t0:.1f} s")
    stored = run.results()
    missing = [k for k in keys_in_order if k not in stored]
    if missing:  # cannot happen unless the store was edited under us
        raise InputError(f"run {run.run_id} lacks {len(missing)} records after evaluation, e.g. {missing[0]}")
    return [stored[k] for k in keys_in_order]


def ensure(spec, resp, run, task_name: str, mode: str, cond: str, seed, items: Sequence) -> list[dict]:
    """Standard records (the main plan's keys) for ``items``: computed where missing (a probe's missing
    records, shared among the ranks too), then read back."""
    from dlmeval.parallel import work_loop

    keys, work = _cell_chunks(resp, task_name, mode, cond, seed, items)
    states: dict[str, dict] = {}
    work_loop(run, work, lambda c: _chunk_records(spec, resp, c, states))
    return [run.get(k) for k in keys]


def user_span(prompt: str, user: str) -> tuple[int, int] | None:
    at = prompt.rfind(user)
    return None if at < 0 else (at, at + len(user))
