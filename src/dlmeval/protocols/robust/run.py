"""Running a spec: the model phase (every DLM, then every AR model: records, then each probe's model phase), the
tables phase (every table from the records and the probes' collected records), and the output."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.parallel import current, sync
from dlmeval.protocols.common import empty_cuda
from dlmeval.protocols.robust.evaluate import Data, ModelEntry, evaluate_model, model_entries
from dlmeval.protocols.robust.output import guard_notes, plot_reliability, write_tables
from dlmeval.protocols.robust.probes import PROBES, ProbeContext, phase_order
from dlmeval.protocols.robust.responders import responder
from dlmeval.protocols.robust.spec import RobustSpec
from dlmeval.protocols.robust.tables import all_tables, table_accuracy

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


def _load(entry: ModelEntry, *, device, dtype, trust_remote_code, allow_download):
    from dlmeval.models import load_causal_lm, load_diffusion

    kw = dict(device=device, dtype=dtype, trust_remote_code=trust_remote_code, allow_download=allow_download)
    return (load_diffusion if entry.role == "dlm" else load_causal_lm)(entry.spec, **kw)


def run_robust(
    spec: RobustSpec,
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
    """Run (or resume) ``spec`` into ``store``; returns the tables over all pairs.

    ``models`` maps a model spec string to an already loaded model (tests, or a model built in code such as the
    untrained default start); other models are loaded from their spec strings.
    """
    main = current().is_main
    say = (echo if main else None) or (lambda s: None)
    result = RobustResult(spec)
    data = Data(
        data_dir, sources={t.name: t.data_source() for t in spec.tasks}, allow_download=allow_download
    )
    items = {t.name: data.items(t.name, t.path, t.n) for t in spec.tasks}
    identity = data.identity(spec)
    entries, pair_labels = model_entries(spec)
    contexts = {
        name: ProbeContext(spec, spec.probe(name), data, pair_labels, say)
        for name in PROBES
        if spec.probe(name).enabled
    }
    probes = {name: PROBES[name]() for name in contexts}
    records: list[dict] = []
    identities = []
    for entry in phase_order(entries):
        t0 = time.perf_counter()
        own = models is not None and entry.spec in models
        model = (
            models[entry.spec]
            if own
            else _load(
                entry,
                device=(evaluator_device or device) if entry.role == "ar" else device,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                allow_download=allow_download,
            )
        )
        ident = model.identity()
        identities.append(ident)
        run = store.open_run(
            RUN_KIND, spec.model_config(entry, identity), [ident], seed=spec.seed, command_line=command_line
        )
        result.model_runs[entry.label] = run.run_id
        say(f"robust: {entry.role} {entry.label} -> run {run.run_id}")
        resp = responder(spec, entry, model)
        recs = evaluate_model(spec, resp, run, items, progress, say)
        records += recs
        for name, probe in probes.items():
            ctx = contexts[name]
            ctx.roles[entry.label] = entry.role
            if entry.role in probe.roles:
                ctx.collected[entry.label] = probe.run(ctx, resp, run)
        for w in resp.warnings:
            run.warn(w)
        # data parallel: the probes ran on every rank (they are not split); their records reach rank 0 here
        sync(run)
        run.put_table("accuracy", table_accuracy(recs, spec))
        run.finish()
        if main:
            result.warnings += [f"{entry.label}: {w}" for w in run.warnings()]
        result.seconds[entry.label] = round(time.perf_counter() - t0, 2)
        if not own:
            del model, resp
            gc.collect()
            empty_cuda()
    spec_run = store.open_run(
        SPEC_KIND, {**spec.config(), "data": identity}, identities, seed=spec.seed, command_line=command_line
    )
    result.spec_run = spec_run.run_id
    extras = {name: probes[name].rows(ctx) for name, ctx in contexts.items()}
    result.tables = all_tables(records, spec, pair_labels, extras)
    result.tables["runs"] = pd.DataFrame(
        [
            {"model": e.label, "role": e.role, "spec": e.spec, "run_id": result.model_runs[e.label]}
            for e in entries
        ]
    )
    for name, df in result.tables.items():
        spec_run.put_table(name, df)
    for w in guard_notes(result.tables.get("guard")):
        spec_run.warn(w)
    spec_run.finish()
    result.signature = spec_run.signature.short()
    if not main:
        return result  # rank 0 writes the outputs
    result.warnings += [w for w in spec_run.warnings() if w not in result.warnings]
    if out_dir is not None:
        result.out_dir = write_tables(
            result.tables, out_dir, header=f"Robustness {spec.name}: {result.signature}"
        )
        if spec.calibration.plots:
            try:
                from dlmeval.protocols.robust.figures import draw_figures

                result.figures = plot_reliability(result.tables["reliability"], result.out_dir)
                result.figures += draw_figures(result.tables, result.out_dir)
            except ImportError as e:  # matplotlib is optional for the tables
                result.warnings.append(f"figures not drawn: {e}")
    return result
