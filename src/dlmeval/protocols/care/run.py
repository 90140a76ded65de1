"""Running a Care sweep: :func:`run_care` executes a sweep's plan (:class:`~dlmeval.protocols.care.plan.CarePlan`,
the spec resolved once), opening one store run per diffusion model (kind ``care``) and one ``care-sweep`` run over
all of them (through the protocols' one run skeleton,
:func:`dlmeval.protocols.skeleton.run_protocol`), and :func:`run_model` hands a model's work to the run loop
(:func:`dlmeval.protocols.care.loop.run_units`). The package docstring (:mod:`dlmeval.protocols.care`) says what
a sweep computes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.parallel import current
from dlmeval.protocols import common
from dlmeval.protocols.care import tables as ct
from dlmeval.protocols.care.cells import canonical_cell, effective_cell, model_schedule, sampler_config
from dlmeval.protocols.care.downstream import downstream_units
from dlmeval.protocols.care.loop import Unit, run_units
from dlmeval.protocols.care.markdown import table_markdown
from dlmeval.protocols.care.metrics import Evaluators, cell_metrics
from dlmeval.protocols.care.plan import CarePlan, as_plan
from dlmeval.protocols.care.prompts import PromptItem, continuation_text, model_label
from dlmeval.protocols.care.spec import CareSpec
from dlmeval.protocols.skeleton import Hooks, run_entries, run_protocol

RUN_KIND = "care"
SWEEP_KIND = "care-sweep"


@dataclass
class CareResult:
    spec: CareSpec
    model_runs: dict[str, str] = field(default_factory=dict)  # model spec -> run id
    sweep_run: str | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    out_dir: Path | None = None
    signature: str = ""
    warnings: list[str] = field(default_factory=list)
    plan: CarePlan | None = None


def run_care(
    plan: CarePlan | CareSpec,
    store,
    *,
    out_dir: str | Path | None = None,
    device: str | None = "auto",
    evaluator_device: str | None = None,
    dtype: str | None = "auto",
    trust_remote_code: bool = False,
    allow_download: bool = False,
    data_dir=None,
    command_line: str | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    models: Mapping[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
) -> CareResult:
    """Run (or resume) the whole sweep of ``plan`` into ``store``; returns the tables over all models. A spec is
    resolved into its plan here (:func:`~dlmeval.protocols.care.plan.resolve` under ``data_dir`` and
    ``allow_download``); a plan is run as resolved.

    ``models`` maps a model spec string (a sampled model or the evaluator) to an already loaded model; other
    models are loaded from their spec strings. ``shard = (i, n)``: an independent job's part of every model's
    generations (:func:`run_shard`): no summaries, tables or sweep run."""
    plan = as_plan(plan, data_dir=data_dir, allow_download=allow_download)
    spec = plan.spec
    models = dict(models or {})
    from dlmeval.models import load_diffusion

    say = (echo if current().is_main else None) or (lambda s: None)
    # no corpus (a downstream-only spec such as care-instruct): no PPL or MAUVE, so no evaluator is loaded
    metrics = (
        Evaluators(
            plan,
            device=evaluator_device or device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
            models=models,
        )
        if plan.sources
        else NoEvaluators()
    )
    data = plan.data_identity()
    note = data_note(plan)  # every table's data_source (#34), from the corpora as the plan resolved them
    if "humaneval" in plan.tasks:
        from dlmeval.sandbox import require_isolation

        require_isolation()  # a sandbox that would refuse HumanEval code fails before any run opens

    def load(model_spec: str):
        return load_diffusion(
            model_spec,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            allow_download=allow_download,
        )

    def compute(model_spec: str, model, run) -> tuple[list[dict], list[dict]]:
        cells, down = run_model(
            plan,
            model_label(model_spec),
            model,
            run,
            metrics,
            progress,
            say,
            model_spec=model_spec,
            shard=shard,
        )
        if shard is None:  # a shard job computes generations only: the tables come from the merged records
            for name, df in _tables(spec, cells, down, note).items():
                run.put_table(name, df)
        return cells, down

    hooks = Hooks(
        kind=RUN_KIND,
        whole_kind=SWEEP_KIND,
        load=load,
        config=lambda model_spec: {**spec.config(model_spec), "data": data},
        compute=compute,
        whole_config={**spec.config(), "data": data},
        tables=lambda done: _tables(
            spec,
            [c for cells, _ in done.records for c in cells],
            [d for _, down in done.records for d in down],
            note,
        ),
        seed=spec.seed,
        announce=lambda model_spec: f"care: model {model_spec}",
        identities=metrics.identities(),
        write=lambda tables, out, sig: write_tables(
            tables, out, header=f"Care sweep {spec.name}: {sig}", data=note
        ),
    )
    if shard is not None:
        return run_shard(hooks, plan, store, shard, models, command_line, say)
    done = run_protocol(
        hooks, spec.models, store, models=models, command_line=command_line, say=say, out_dir=out_dir
    )
    return CareResult(
        spec,
        model_runs=done.run_ids,
        sweep_run=done.whole.run_id,
        tables=done.tables,
        out_dir=done.out_dir,
        signature=done.signature,
        warnings=done.warnings,
        plan=plan,
    )


def run_shard(hooks, plan, store, shard, models, command_line, say) -> CareResult:
    """Part ``i`` of ``n`` of every model's generations (``--shard i/n``), each into the model's own run (the
    run a single job opens: the shard is not part of the signature), through the skeleton's per-model loop; each
    run finishes as ``shard i/n``. Importing the ``n`` jobs' bundles into one store and rerunning the command there
    without ``--shard`` computes the summaries and tables from the merged records."""
    from dlmeval.store.shard import shard as check

    check((), *shard)  # validates i and n
    done = run_entries(
        dataclasses.replace(hooks, announce=lambda m: f"care: model {m} shard {shard[0]}/{shard[1]}"),
        plan.spec.models,
        store,
        models=models,
        command_line=command_line,
        say=say,
        finish=f"shard {shard[0]}/{shard[1]}",
    )
    out = CareResult(plan.spec, model_runs=done.run_ids, warnings=done.warnings, plan=plan)
    if done.run_ids and current().is_main:
        out.signature = store.get_run(list(done.run_ids.values())[-1]).signature.short()
    return out


def _tables(
    spec: CareSpec, cells: list[dict], down: list[dict], note: str | None = None
) -> dict[str, pd.DataFrame]:
    """The tables, each with the column ``data_source`` (``note``, default :func:`data_note` of ``spec``: the
    stand-in or the dataset and its held-out slice), so that a CSV export or a re-rendered table names its data
    (#34)."""
    tables = ct.all_tables(ct.cells_frame(cells), ct.down_frame(down), _labelled(spec))
    return common.with_data_sources(tables, data_note(spec) if note is None else note)


def model_tables(spec: CareSpec, cells: list[dict], down: list[dict]) -> dict[str, pd.DataFrame]:
    """The tables of a run from its cell and downstream rows (as :func:`run_care` puts them on each model's run;
    verification recomputes them from the stored records)."""
    return _tables(spec, cells, down)


class NoEvaluators:
    """Stands in for :class:`Evaluators` when no cell is generated: nothing loaded, no identity in the runs."""

    def identities(self) -> list[Any]:
        return []


def _labelled(spec: CareSpec) -> CareSpec:
    """The spec with its models as table labels (the leaderboard keeps the spec's model order)."""
    return spec.replace(models=tuple(model_label(m) for m in spec.models))


def run_model(
    plan: CarePlan,
    label,
    model,
    run,
    metrics,
    progress,
    say,
    *,
    model_spec: str | None = None,
    shard: tuple[int, int] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Every record of one model in ``run``: the sweep cells (:func:`sweep_units`), then the downstream checks
    (:func:`~dlmeval.protocols.care.downstream.downstream_units`), all through the one run loop
    (:func:`~dlmeval.protocols.care.loop.run_units`). Returns the cell rows and the downstream rows.
    ``model_spec``: the spec's name of the model (its ``[models."<spec>"]`` override applies)."""
    units = sweep_units(plan, label, model, plan.prompts(model), metrics, model_spec=model_spec)
    if plan.tasks:
        units += downstream_units(plan, label, model, model_spec=model_spec)
    rows = run_units(run, units, say=say, progress=progress, label=label, shard=shard)
    return rows.get("cells", []), rows.get("down", [])


def sweep_units(
    plan: CarePlan,
    label: str,
    model,
    prompts: dict[str, list[PromptItem]],
    metrics,
    *,
    model_spec: str | None = None,
) -> list[Unit]:
    """One unit per cell of the plan (:func:`~dlmeval.protocols.care.cells.plan_cells`), computed as its canonical
    cell: a provably identical cell shares its records (run once, reported as ``same_as``). With ``model_spec``,
    each cell runs as that model's override says (:func:`~dlmeval.protocols.care.cells.effective_cell`; the
    cells keep the spec's names, the run signature holds the override)."""
    spec = plan.spec
    tc = bool(getattr(model, "time_conditioned", False))
    native = model_schedule(spec, model_spec, str(getattr(model, "native_schedule", "linear")))
    units = []
    for cell in plan.cells:
        eff = effective_cell(spec, cell, model_spec)
        canon = canonical_cell(spec, eff, time_conditioned=tc, native_schedule=native)
        canon = dataclasses.replace(canon, strategy=cell.strategy, temperature=cell.temperature)
        items = prompts.get((canon.source, canon.seed)) or prompts[canon.source]
        same = canon.key != cell.key
        units.append(
            Unit(
                key=f"cell/{canon.key}",
                name=cell.key,
                table="cells",
                items=items,
                item_keys=[f"gen/{canon.key}/{p.item_id}" for p in items],
                chunk_size=spec.generation.batch_size,
                generate=_generator(spec, model, canon, model_spec),
                finish=lambda gens, warn, canon=canon: cell_metrics(spec, canon, gens, metrics, warn),
                row=_cell_row(label, cell, canon),
                describe=lambda rec, canon=canon: (
                    f"care: {canon.key}: nfe {rec['nfe']:.1f}, accepted {rec['n_accepted']}/{rec['n']}, "
                    f"ppl {rec['ppl']:.2f}, mauve {rec['mauve']:.3f} ({rec['seconds']:.0f} s)"
                ),
                note=f"care: {cell.key} is the same cell as {canon.key} (run once)" if same else None,
                timed=True,
            )
        )
    return units


def _cell_row(label: str, cell, canon) -> Callable[[dict], dict]:
    def row(rec: dict) -> dict:
        if canon.key != cell.key:  # provably the same generations: run once, reported as the same cell
            rec = {**rec, **cell.fields(), "cell": cell.key, "same_as": canon.key}
        return {"model": label, **{k: rec.get(k) for k in ct.CELL_COLUMNS if k != "model"}}

    return row


def _generator(
    spec: CareSpec, model, cell, model_spec: str | None = None
) -> Callable[[list, Callable], list[dict]]:
    """The generation records of a chunk of a cell's prompts (the sampler is built on first use)."""
    sampler: list = []

    def generate(chunk: list[PromptItem], warn) -> list[dict]:
        from dlmeval.sampling import RemaskingSampler

        if not sampler:
            sampler.append(RemaskingSampler(model, sampler_config(spec, cell, model=model_spec)))
        res = sampler[0].sample([p.ids for p in chunk], item_ids=[p.item_id for p in chunk])
        rows = []
        for p, rec in zip(chunk, res.records()):
            gen_ids = rec["token_ids"]
            rows.append(
                {
                    "cell": cell.key,
                    "item": p.item_id,
                    "prefix": p.text,
                    "text": continuation_text(model, p.ids, gen_ids, rec["text"]),
                    "n_tokens": len(gen_ids),
                    "nfe": rec["nfe"],
                    "steps_taken": rec["steps_taken"],
                    "stopped_at_eos": rec["stopped_at_eos"],
                    "remasks": rec["remasks"],
                    "replacements": rec["replacements"],
                    "stable_cells": rec["stable_cells"],
                    "replacement_rate": rec["replacement_rate"],
                    "resolved_steps": int(res.config["steps"]),
                    "nfe_predicted": int(res.nfe_predicted),
                }
            )
        return rows

    return generate


def data_note(spec) -> str:
    """Where the prompts and MAUVE references of ``spec``'s tables came from: each generation source and its
    corpus (the shipped stand-in, or the dataset with its held-out slice). ``spec``: a spec, or a resolved plan
    (its corpora as resolved, no spec lookup)."""
    if isinstance(spec, CarePlan):
        return "; ".join(f"{src}: {spec.corpus(src).describe()}" for src in spec.sources)
    return "; ".join(f"{src}: {spec.corpus(src).describe()}" for src in spec.generation.sources)


def write_tables(
    tables: dict[str, pd.DataFrame], out_dir: str | Path, header: str = "", data: str = ""
) -> Path:
    """Each table as ``<name>.csv`` and ``<name>.md`` in ``out_dir``, and all of them in ``tables.md``; every CSV
    has the table's ``data_source`` column and every Markdown table the line ``Data: SOURCE`` under it
    (``published`` names its own in its ``data`` column); ``data`` (:func:`data_note`) stands in for a table stored
    without the column."""
    md = common.with_data_note(table_markdown, data, skip=("published",))
    return common.write_tables(tables, out_dir, order=ct.TABLE_ORDER, markdown=md, header=header, data=data)


def load_tables(store, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables stored on a run (a ``care`` or ``care-sweep`` run), in :data:`TABLE_ORDER`."""
    return common.load_tables(store, run_id, ct.TABLE_ORDER)


__all__ = [
    "RUN_KIND",
    "SWEEP_KIND",
    "CareResult",
    "load_tables",
    "model_tables",
    "run_care",
    "run_model",
    "run_shard",
    "sweep_units",
    "write_tables",
]
