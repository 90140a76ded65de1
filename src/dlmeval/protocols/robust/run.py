"""Running a spec's plan (:class:`~dlmeval.protocols.robust.plan.RobustPlan`, the spec resolved once): the model phase (every DLM, then every AR model: records, then each probe's model phase), the
tables phase (every table from the records and the probes' collected records), and the output, through the
protocols' one run skeleton (:func:`dlmeval.protocols.skeleton.run_protocol`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.parallel import current
from dlmeval.protocols import common
from dlmeval.protocols.robust.evaluate import ModelEntry, evaluate_model
from dlmeval.protocols.robust.output import data_note, guard_notes, plot_reliability, write_tables
from dlmeval.protocols.robust.plan import RobustPlan, as_plan
from dlmeval.protocols.robust.probes import PROBES, ProbeContext, phase_order
from dlmeval.protocols.robust.responders import responder
from dlmeval.protocols.robust.spec import RobustSpec
from dlmeval.protocols.robust.tables import all_tables, table_accuracy
from dlmeval.protocols.skeleton import Hooks, run_protocol
from dlmeval.report.fmt import with_data_source

RUN_KIND = "robust"
SPEC_KIND = "robust-spec"


@dataclass
class RobustResult:
    spec: RobustSpec
    spec_run: str | None = None
    model_runs: dict[str, str] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    signature: str = ""
    out_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    plan: RobustPlan | None = None


def _load(entry: ModelEntry, *, device, dtype, trust_remote_code, allow_download):
    from dlmeval.models import load_causal_lm, load_diffusion

    kw = dict(device=device, dtype=dtype, trust_remote_code=trust_remote_code, allow_download=allow_download)
    return (load_diffusion if entry.role == "dlm" else load_causal_lm)(entry.spec, **kw)


def run_robust(
    plan: RobustPlan | RobustSpec,
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
) -> RobustResult:
    """Run (or resume) ``plan`` into ``store``; returns the tables over all pairs. A spec is resolved into its plan
    here (:func:`~dlmeval.protocols.robust.plan.resolve` under ``data_dir`` and ``allow_download``); a plan is run
    as resolved.

    ``models`` maps a model spec string to an already loaded model (tests, or a model built in code such as the
    untrained default start); other models are loaded from their spec strings.
    """
    plan = as_plan(plan, data_dir=data_dir, allow_download=allow_download)
    spec, entries, pair_labels = plan.spec, list(plan.entries), dict(plan.pair_labels)
    main = current().is_main
    say = (echo if main else None) or (lambda s: None)
    identity = plan.identity()
    contexts = {
        name: ProbeContext(spec, spec.probe(name), plan.data, pair_labels, say) for name in plan.probes
    }
    probes = {name: PROBES[name]() for name in contexts}
    given = {e.label: models[e.spec] for e in entries if models is not None and e.spec in models}

    def compute(entry: ModelEntry, model, run) -> list[dict]:
        resp = responder(spec, entry, model)
        recs = evaluate_model(plan, resp, run, progress, say)
        for name, probe in probes.items():
            ctx = contexts[name]
            ctx.roles[entry.label] = entry.role
            if entry.role in probe.roles:
                ctx.collected[entry.label] = probe.run(ctx, resp, run)
        for w in resp.warnings:
            run.warn(w)
        run.put_table("accuracy", with_data_source(table_accuracy(recs, spec), data_note(spec)))
        return recs

    def tables(done) -> dict[str, pd.DataFrame]:
        records = [r for recs in done.records for r in recs]
        extras = {name: probes[name].rows(ctx) for name, ctx in contexts.items()}
        out = all_tables(records, spec, pair_labels, extras)
        out["runs"] = pd.DataFrame(
            [
                {"model": e.label, "role": e.role, "spec": e.spec, "run_id": done.run_ids[e.label]}
                for e in entries
            ]
        )
        return common.with_data_sources(out, data_note(spec))  # every table names its data (#34)

    kw = dict(dtype=dtype, trust_remote_code=trust_remote_code, allow_download=allow_download)
    done = run_protocol(
        Hooks(
            kind=RUN_KIND,
            whole_kind=SPEC_KIND,
            load=lambda e: _load(e, device=(evaluator_device or device) if e.role == "ar" else device, **kw),
            config=lambda e: spec.model_config(e, identity),
            compute=compute,
            whole_config={**spec.config(), "data": identity},
            tables=tables,
            seed=spec.seed,
            name=lambda e: e.label,
            announce=lambda e: f"robust: {e.role} {e.label}",
            notes=lambda tables: guard_notes(tables.get("guard")),
            write=lambda tables, out, sig: write_tables(
                tables, out, header=f"Robustness {spec.name}: {sig}", data=data_note(spec)
            ),
        ),
        phase_order(entries),
        store,
        models=given,
        command_line=command_line,
        say=say,
        out_dir=out_dir,
    )
    result = RobustResult(
        spec,
        spec_run=done.whole.run_id,
        model_runs=done.run_ids,
        tables=done.tables,
        signature=done.signature,
        out_dir=done.out_dir,
        warnings=done.warnings,
        seconds=done.seconds,
        plan=plan,
    )
    if main and result.out_dir is not None and spec.calibration.plots:  # rank 0 draws the figures
        try:
            from dlmeval.protocols.robust.figures import draw_figures

            result.figures = plot_reliability(result.tables["reliability"], result.out_dir)
            result.figures += draw_figures(result.tables, result.out_dir)
        except ImportError as e:  # matplotlib is optional for the tables
            result.warnings.append(f"figures not drawn: {e}")
    return result
