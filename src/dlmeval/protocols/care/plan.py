"""The plan of a Care sweep: :func:`resolve` turns a spec and where its data lives (:class:`CareOptions`) into one
frozen :class:`CarePlan`, which ``dlmeval care SPEC --plan`` prints (:func:`describe`) and
:func:`~dlmeval.protocols.care.run.run_care` executes. Nothing during a run looks the spec's sources up again: the
corpus behind each generation source, the sweep and downstream cells, the seeds that draw prompts and the downstream
tasks are resolved here once; the data (every corpus's texts, the MAUVE references of each source, each downstream
task's items, the digest of all of it) is read on first use and kept in the plan. Prompts depend on a model's
tokenizer: :meth:`CarePlan.prompts` cuts them from the texts the plan read.

:func:`describe` lists, beyond the cells, every downstream unit with its predicted forward passes, the
log-likelihood checks, the data each corpus and task is read from, and the readings in force (prompts per seed,
MAUVE sample size and clusters, GSM8K exemplars). It loads nothing: a source is named, not read (its row count and
digest enter the run when it runs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.care.cells import Cell, downstream_cells, plan_cells
from dlmeval.protocols.care.data import ENABLED, TaskData, task_data
from dlmeval.protocols.care.prompts import (
    POOL_FACTOR,
    PromptItem,
    corpus_rows,
    prompts_from_texts,
    references_from_texts,
    source_texts,
)
from dlmeval.protocols.care.spec import LOGLIK_TASKS, CareSpec, CorpusSpec


@dataclass(frozen=True)
class CareOptions:
    """Where a plan's data is read from: ``data_dir`` (the shipped files; default DLMEVAL_DATA or
    ../shared/data) and whether a hub source may be downloaded."""

    data_dir: Any = None
    allow_download: bool = False


@dataclass(frozen=True, eq=False)
class CarePlan:
    """A Care spec resolved once (:func:`resolve`). ``corpora``: each generation source once, in the spec's
    order, with the corpus behind it; ``cells``: every sweep cell (:func:`~dlmeval.protocols.care.cells.plan_cells`);
    ``downstream_cells``: the cells of every generation task (none when no downstream task runs);
    ``prompt_seeds``: the sweep seeds that each draw their own prompts (``generation.resample_prompts``; else
    none); ``tasks``: the downstream tasks that run. The data is read on first use and kept in ``reads``, keyed by
    what decides it (a corpus by its name and :class:`CorpusSpec`, a task by its settings), so plans of one data
    (the rows of a leaderboard) may share it."""

    spec: CareSpec
    options: CareOptions
    corpora: tuple[tuple[str, CorpusSpec], ...]
    cells: tuple[Cell, ...]
    downstream_cells: tuple[Cell, ...]
    prompt_seeds: tuple[int, ...]
    tasks: tuple[str, ...]
    reads: dict = field(default_factory=dict, repr=False)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(s for s, _ in self.corpora)

    def corpus(self, source: str) -> CorpusSpec:
        for s, c in self.corpora:
            if s == source:
                return c
        raise InputError(f"source {source!r} is not one of the plan's ({', '.join(self.sources)})")

    def _once(self, key: tuple, make: Callable[[], Any]) -> Any:
        if key not in self.reads:
            self.reads[key] = make()
        return self.reads[key]

    def _corpus_read(self, source: str) -> tuple[tuple[str, ...], dict | None]:
        """A corpus's texts and, for one read from a source, the rows' provenance (read once)."""

        def read():
            c = self.corpus(source)
            if c.source is not None:
                return corpus_rows(c, source, allow_download=self.options.allow_download)
            return tuple(source_texts(source, self.options.data_dir, c)), None

        return self._once(("corpus", source, self.corpus(source)), read)

    def texts(self, source: str) -> tuple[str, ...]:
        """Every text of a generation source (prompts come from the first half, references from the second)."""
        return self._corpus_read(source)[0]

    def references(self, source: str) -> list[str]:
        """The human reference texts MAUVE compares a source's generations with (model-independent)."""
        m = self.spec.metrics
        return self._once(
            ("references", source, self.corpus(source), m.n_reference, m.reference_words),
            lambda: references_from_texts(source, self.texts(source), m.n_reference, m.reference_words),
        )

    def task(self, name: str) -> TaskData:
        """A downstream task's items (and GSM8K's exemplars), read once."""
        if name not in self.tasks:
            raise InputError(f"downstream task {name!r} does not run in this plan ({', '.join(self.tasks)})")
        o = self.options
        return self._once(
            ("task", name, getattr(self.spec.downstream, name)),
            lambda: task_data(self.spec.downstream, name, o.data_dir, allow_download=o.allow_download),
        )

    def source_prompts(self, model, source: str, n: int | None = None, *, at_least: int | None = None):
        """The first ``n`` (default ``generation.n_prompts``) prefixes of ``source`` under ``model``'s tokenizer
        (:func:`~dlmeval.protocols.care.prompts.prompts_from_texts` on the plan's texts)."""
        g = self.spec.generation
        docs = self.corpus(source).style == "documents"
        n = g.n_prompts if n is None else n
        return prompts_from_texts(
            model, source, self.texts(source), n, g.prefix_tokens, documents=docs, at_least=at_least
        )

    def prompts(self, model) -> dict:
        """The prompts of every source under ``model``'s tokenizer: ``{source: [...]}`` (the same for every seed,
        the paper's reading: "seed variance reflects sampling stochasticity only"), or with
        ``generation.resample_prompts`` ``{(source, seed): [...]}``: each sweep seed draws ``n_prompts`` of the
        first ``POOL_FACTOR x n_prompts`` prefixes (fewer when the corpus has fewer, at least ``n_prompts``)
        without replacement, from a generator seeded by (run seed, source, seed), in pool order."""
        from dlmeval.seeding import numpy_rng

        g = self.spec.generation
        n = g.n_prompts
        out: dict[Any, list[PromptItem]] = {}
        for src in self.sources:
            if not g.resample_prompts:
                out[src] = self.source_prompts(model, src)
                continue
            pool = self.source_prompts(model, src, POOL_FACTOR * n, at_least=n)
            for seed in self.prompt_seeds:
                pick = numpy_rng(self.spec.seed, "prompts", src, seed).choice(len(pool), n, replace=False)
                out[(src, seed)] = [pool[i] for i in sorted(pick.tolist())]
        return out

    def data_identity(self) -> dict[str, Any]:
        """A digest of every data file the sweep reads (prompt / reference sources, downstream tasks), for the run
        configurations: item keys are positional (``webtext/17``), so changed data must make another run. A
        corpus or task read from a hub id or a local dataset enters as its rows' provenance (kind, id / path,
        config, split, fields, row count, content digest: :mod:`dlmeval.data.hub`) under ``corpus:<name>`` /
        ``task:<name>``; this is where such data is first read (downloaded with ``allow_download``), so a bad
        source fails before any run opens."""
        return self._once(("identity", self.corpora, self.tasks, self.spec.downstream), self._data_identity)

    def _data_identity(self) -> dict[str, Any]:
        from dlmeval.data import tasks as T
        from dlmeval.data.paths import data_dir as resolve_dir
        from dlmeval.data.paths import file_digest

        files = {"webtext": T.WEBTEXT_FILE, "lm1b": T.LM1B_FILE}
        used, sourced = [], {}
        for s, c in self.corpora:
            if c.source is not None:
                sourced[f"corpus:{s}"] = self._corpus_read(s)[1]
            elif s in files:
                used.append(files[s])
        d = self.spec.downstream
        shipped = {"arc": T.ARC_CHALLENGE_FILE, "humaneval": T.HUMANEVAL_FILE, "gsm8k": T.GSM8K_FILE}
        used += [
            shipped[t]
            for t in ("arc", "humaneval", "gsm8k")
            if t in self.tasks and getattr(d, t).source is None
        ]
        for t in self.tasks:
            td = self.task(t)
            if td.identity is not None and getattr(d, t).source is not None:
                sourced[f"task:{t}"] = (
                    {**td.identity, "exemplars": td.shots_from} if t == "gsm8k" else td.identity
                )
        root = resolve_dir(self.options.data_dir)
        out: dict[str, Any] = {str(f): file_digest(root / f) for f in used if (root / f).is_file()}
        return {**out, **sourced}


def resolve(spec: CareSpec, options: CareOptions | None = None, *, share: CarePlan | None = None) -> CarePlan:
    """The plan of ``spec`` (see the module docstring); reads no data. ``share``: a plan under the same options
    whose reads this one shares (what both read is read once)."""
    options = options or CareOptions()
    if share is not None and share.options != options:
        raise ValueError("resolve(share=...): a plan under other data options shares no reads")
    g, d = spec.generation, spec.downstream
    seeds = sorted({*spec.sweep.seeds, *spec.compute_matched.seeds, *spec.dose_response.seeds})
    tasks = tuple(t for t in ENABLED if d.enabled and getattr(d, t).n)
    return CarePlan(
        spec=spec,
        options=options,
        corpora=tuple((s, spec.corpus(s)) for s in dict.fromkeys(g.sources)),
        cells=tuple(plan_cells(spec)),
        downstream_cells=tuple(downstream_cells(spec)) if d.enabled else (),
        prompt_seeds=tuple(seeds) if g.resample_prompts else (),
        tasks=tasks,
        reads=share.reads if share is not None else {},
    )


def as_plan(spec_or_plan: CareSpec | CarePlan, *, data_dir=None, allow_download: bool = False) -> CarePlan:
    """A plan as given, or the plan of a spec under ``data_dir`` / ``allow_download``. A plan keeps its own data
    options: another ``data_dir`` or a download it does not allow is refused."""
    if isinstance(spec_or_plan, CarePlan):
        o = spec_or_plan.options
        if (data_dir is not None and data_dir != o.data_dir) or (allow_download and not o.allow_download):
            raise ValueError(
                "a CarePlan reads its data as resolve() was told: give data_dir / allow_download there"
            )
        return spec_or_plan
    return resolve(spec_or_plan, CareOptions(data_dir, allow_download))


def data_identity(spec: CareSpec, data_dir=None, *, allow_download: bool = False) -> dict[str, Any]:
    """:meth:`CarePlan.data_identity` of ``spec``'s plan."""
    return resolve(spec, CareOptions(data_dir, allow_download)).data_identity()


def _where(src) -> str:
    if src.source is None:
        return "shipped stand-in"
    parts = [src.source]
    if src.config:
        parts.append(f"[{src.config}]")
    if src.split:
        parts.append(f"split {src.split}")
    return " ".join(parts)


def data_rows(plan: CarePlan) -> list[dict[str, Any]]:
    """One row per corpus and downstream task the plan reads: where from."""
    from dlmeval.data.rows import HUB
    from dlmeval.protocols.care.spec import CORPORA, STANDS_IN_FOR

    rows = []
    for s, c in plan.corpora:
        where = _where(c)
        if c.source is not None:
            default = HUB.get(s, (None, None, "the only split"))[2]
            where = c.describe() + ("" if c.split else f" (split: {default} or the only one)")
        elif s in STANDS_IN_FOR:
            paper = STANDS_IN_FOR[s]
            where += (
                f' (offline default) for {paper}: the paper\'s corpus is sources = ["{paper}"] with '
                f"--allow-download: {CORPORA[paper].describe()}"
            )
        rows.append({"data": f"corpus {s}", "style": c.style, "field": c.field, "from": where})
    d = plan.spec.downstream
    for task in ("humaneval", "gsm8k", *LOGLIK_TASKS):
        t = getattr(d, task)
        if task in plan.tasks:
            extra = f", subtasks {', '.join(t.configs)}" if task == "bbh" else ""
            rows.append({"data": f"task {task}", "n": t.n, "from": _where(t) + extra})
    return rows


def downstream_rows(plan: CarePlan) -> list[dict[str, Any]]:
    """Every downstream unit: generation tasks per cell (predicted NFE per item without EOS stops, forward
    calls over the items), then the log-likelihood checks (K masks x T rates scored per option)."""
    from dlmeval.sampling import predict_nfe, steps_for_nfe

    d, g = plan.spec.downstream, plan.spec.generation
    rows = []
    gen_tasks = []
    if "humaneval" in plan.tasks:
        lengths = d.humaneval.lengths
        for L in lengths:
            gen_tasks.append(("humaneval" if len(lengths) == 1 else f"humaneval@{L}", d.humaneval.n, L))
    if "gsm8k" in plan.tasks:
        gen_tasks.append(("gsm8k", d.gsm8k.n, d.gsm8k.gen_tokens))
    for task, n, length in gen_tasks:
        for c in plan.downstream_cells:
            kw = dict(strategy=c.strategy, remask_fraction=c.fraction, accounting=g.accounting)
            if c.steps is not None:
                steps, nfe = c.steps, predict_nfe(length, c.steps, **kw)
            else:
                steps, nfe = steps_for_nfe(c.nfe, length, **kw)
            rows.append(
                {
                    "unit": f"{task} {c.key}",
                    "gen_tokens": length,
                    "steps": steps,
                    "nfe_per_item": nfe,
                    "nfe_target_reached": None if c.nfe is None else nfe == c.nfe,
                    "forward_calls": nfe * -(-n // g.batch_size),
                }
            )
    for task in (t for t in LOGLIK_TASKS if t in plan.tasks):  # plan.tasks: those with items (n > 0)
        t = getattr(d, task)
        n = t.n * (len(t.configs) if task == "bbh" else 1)
        how = (
            f"LLaDA's harness, mc_num={t.mc_num} in passes of {t.mc_batch}, cfg={t.cfg:g}"
            if t.likelihood == "llada"
            else f"DiffScore K={t.n_masks} x T={t.n_rates}"
        )
        rows.append(
            {
                "unit": f"{task} (log-likelihood, {how})",
                "items": n,
                "scored_rows_per_option": t.mc_num if t.likelihood == "llada" else t.n_masks * t.n_rates,
            }
        )
    return rows


def readings(spec: CareSpec) -> dict[str, str]:
    """The readings in force, one line each (docs/care.md)."""
    g, m, d = spec.generation, spec.metrics, spec.downstream
    out = {
        "prompts": (
            "each seed draws its own prompts (generation.resample_prompts = true)"
            if g.resample_prompts
            else "the same prompts for every seed (the paper: seed variance is sampling only)"
        ),
        "mauve": (
            f"{'every accepted generation' if m.mauve_samples is None else f'{m.mauve_samples} accepted generations'}"
            f" vs {m.n_reference} references, clusters "
            + (f"{m.mauve_buckets}" if m.mauve_buckets != "auto" else "auto (samples / 10)")
        ),
    }
    if d.gsm8k.n:
        g8 = d.gsm8k
        out["gsm8k_exemplars"] = (
            f"{g8.shots} from the source's {g8.exemplar_split} split (else the last {g8.shots} evaluated items)"
            if g8.source is not None
            else f"the last {g8.shots} items of the shipped test file (no train split ships), out of the pool"
        )
    if d.humaneval.n and len(d.humaneval.lengths) > 1:
        out["humaneval"] = (
            f"generated at {', '.join(map(str, d.humaneval.lengths))} tokens (Table 11 is inconsistent: docs/care.md)"
        )
    return out


def plan_extras(plan: CarePlan) -> dict[str, Any]:
    """The plan's data, downstream and readings sections, for the CLI payload."""
    from dlmeval.protocols.published import plan_records

    return {
        "data": data_rows(plan),
        "downstream": downstream_rows(plan),
        "readings": readings(plan.spec),
        "published": plan_records(plan.spec.published),
    }


def plan_lines(extras: dict[str, Any]) -> list[str]:
    lines = ["data:"]
    for r in extras["data"]:
        lines.append(f"  {r['data']}: {r['from']}")
    if extras["downstream"]:
        lines.append("downstream:")
        for r in extras["downstream"]:
            if "nfe_per_item" in r:
                note = "  (target out of reach)" if r["nfe_target_reached"] is False else ""
                lines.append(
                    f"  {r['unit']:<52} gen {r['gen_tokens']:>4}  steps {r['steps']:>4}  NFE/item "
                    f"{r['nfe_per_item']:>4}  calls {r['forward_calls']}{note}"
                )
            else:
                lines.append(
                    f"  {r['unit']}: {r['items']} items x {r['scored_rows_per_option']} rows per option"
                )
    lines.append("readings:")
    lines += [f"  {k}: {v}" for k, v in extras["readings"].items()]
    if extras.get("published"):
        from dlmeval.protocols.published import parse_entries
        from dlmeval.protocols.published import plan_lines as published_lines

        lines += published_lines(parse_entries(extras["published"]))
    return lines


def _native_schedule(model_spec: str) -> str:
    """The family's own schedule of a model spec, from the family registry (nothing is loaded)."""
    from dlmeval.models.family import family_for_spec

    try:
        return family_for_spec(model_spec)[0].native_schedule
    except InputError:  # a bare path: its family is known only once loaded
        return "linear"


def cell_rows(plan: CarePlan) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Every (model, cell) with the forward passes it spends: each model's cells under its own family's schedule
    and its ``[models."<spec>"]`` override (Dream's ``none`` at 256 steps spends 256 passes, LLaDA's 128); and per
    model its distinct cells, forward calls and schedule."""
    from dlmeval.protocols.care.cells import canonical_cell, effective_cell, model_schedule
    from dlmeval.sampling import STRATEGIES, predict_nfe, steps_for_nfe

    spec = plan.spec
    g = spec.generation
    rows, per_model = [], {}
    kw = dict(block_length=g.block_length, accounting=g.accounting)
    for m in spec.models:
        sched = model_schedule(spec, m, _native_schedule(m))
        runs: set[str] = set()
        calls = 0
        for c in plan.cells:
            eff = effective_cell(spec, c, m)
            ckw = {**kw, "schedule": "linear" if STRATEGIES[eff.strategy].remasks else sched}
            if eff.steps is not None:
                steps = eff.steps
                nfe = predict_nfe(
                    g.gen_tokens, steps, strategy=eff.strategy, remask_fraction=eff.fraction, **ckw
                )
            else:
                steps, nfe = steps_for_nfe(
                    eff.nfe, g.gen_tokens, strategy=eff.strategy, remask_fraction=eff.fraction, **ckw
                )
            baseline = effective_cell(
                spec, dataclasses.replace(c, strategy=spec.headline.baseline), m
            ).strategy
            bkw = {**kw, "schedule": "linear" if STRATEGIES[baseline].remasks else sched}
            base = predict_nfe(g.gen_tokens, steps, strategy=baseline, **bkw)
            canon = canonical_cell(spec, eff, native_schedule=sched)
            canon = dataclasses.replace(canon, strategy=c.strategy, temperature=c.temperature)
            passes = nfe * -(-g.n_prompts // g.batch_size)
            if canon.key not in runs:  # a provably identical cell runs once
                calls += passes
                runs.add(canon.key)
            rows.append(
                {
                    "model": m,
                    "cell": c.key,
                    "runs_as": None if eff == c else f"{eff.strategy} t{eff.temperature:g}",
                    "schedule": ckw["schedule"],
                    "steps": steps,
                    "nfe_per_sample": nfe,
                    f"ratio_vs_{spec.headline.baseline}": round(nfe / base, 3),
                    "nfe_target_reached": None if c.nfe is None else nfe == c.nfe,
                    "same_as": canon.key if canon.key != c.key else None,
                    "forward_calls": passes,
                }
            )
        per_model[m] = {"distinct_cells": len(runs), "forward_calls": calls, "schedule": sched}
    return rows, per_model


def describe(plan: CarePlan) -> tuple[dict[str, Any], str]:
    """What ``dlmeval care SPEC --plan`` prints: the payload (``--json``) and the text."""
    spec, g = plan.spec, plan.spec.generation
    rows, per_model = cell_rows(plan)
    extras = plan_extras(plan)
    total = sum(pm["forward_calls"] for pm in per_model.values())
    first = per_model[spec.models[0]] if spec.models else {"distinct_cells": 0}
    payload = {
        "spec": spec.name,
        "models": list(spec.models),
        "accounting": g.accounting,
        "cells_per_model": len(plan.cells),
        "distinct_cells_per_model": first["distinct_cells"],
        "per_model": per_model,
        "downstream_cells_per_task": len(plan.downstream_cells),
        "prompts_per_cell": g.n_prompts,
        "batch_size": g.batch_size,
        "forward_calls_total": total,
        "cells": rows,
        **extras,
    }
    ratio = f"ratio_vs_{spec.headline.baseline}"
    lines = [
        f"spec {spec.name}: {len(spec.models)} model(s) x {len(plan.cells)} cells x {g.n_prompts} prompts (prefix "
        f"{g.prefix_tokens}, generate {g.gen_tokens} tokens, batch {g.batch_size}); NFE accounting: {g.accounting}"
    ]
    for m in spec.models:
        pm = per_model[m]
        lines.append(f"{m}: {pm['distinct_cells']} distinct cells, schedule {pm['schedule']}")
        for r in (r for r in rows if r["model"] == m):
            note = ""
            if r["runs_as"]:
                note += f"  runs as {r['runs_as']}"
            if r["nfe_target_reached"] is False:
                note += "  (target out of reach)"
            if r["same_as"]:
                note += f"  = {r['same_as']} (run once)"
            lines.append(
                f"  {r['cell']:<48} steps {r['steps']:>4}  NFE/sample {r['nfe_per_sample']:>4}  "
                f"x{r[ratio]:<5g} vs {spec.headline.baseline}  calls {r['forward_calls']}{note}"
            )
    lines.append(f"batched forward calls in all (sweep generation only, without stops at EOS): {total}")
    lines += plan_lines(extras)
    return payload, "\n".join(lines)


__all__ = [
    "CareOptions",
    "CarePlan",
    "as_plan",
    "cell_rows",
    "data_identity",
    "data_rows",
    "describe",
    "downstream_rows",
    "plan_extras",
    "plan_lines",
    "readings",
    "resolve",
]
