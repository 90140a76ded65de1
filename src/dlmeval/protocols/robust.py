"""The robustness protocol: a DLM and an AR model as a pair, clean and under every natural-noise condition.

>>> from dlmeval.protocols.robust import load_spec, run_robust
>>> from dlmeval.store import RunStore
>>> res = run_robust(load_spec("robust-demo"), RunStore("runs.sqlite"), out_dir="robust-out/robust-demo")
>>> res.tables["comparison"]

What it does (the robustness paper, Sec. 3 and 6, App. F, H and I):

1. items: the first ``n`` items of each task (TriviaQA, GSM8K, ARC-Challenge; :mod:`dlmeval.tasks`);
2. per model of every pair (one store run each, kind ``robust``; see *Store* below), per task, mode, condition
   (``clean`` and each perturbation key) and perturbation seed, one record per item:

   * ``generation``: the task's user message (App. D), perturbed as a whole (``scope = "prompt"``, the paper's
     sweep) or only its question (``"question"``, App. H), wrapped in the model's chat template when it has one;
     the DLM answers with :class:`~dlmeval.sampling.RemaskingSampler`, the AR model with ``CausalLM.generate``;
     correctness by the task's extractor; confidences of every basis x aggregation
     (:mod:`dlmeval.robustness.calibration`; the paper's: DLM ``max/geo``, AR ``chosen/geo``);
   * ``likelihood`` (ARC only): each option scored as the continuation of the (perturbed) question, by the DLM's
     conditional DiffScore (:class:`~dlmeval.scoring.DiffScorer`, mean log-probability over K masks x T rates)
     and by the AR model's mean token log-probability; argmax wins; confidence = softmax of the option scores at
     the chosen option (``choice/softmax``);

3. optional probes through hooks: IPM variants (DLM), D-GCG / GCG adversarial suffixes, linear probes of hidden
   states (:mod:`dlmeval.robustness.ipm`, ``.dgcg``, ``.probes``), skipped with a warning when not installed;
4. tables from the stored records only (so a resumed run gives identical tables): ``accuracy`` (per condition
   and model, with RDI), ``summary`` (Table 1: clean accuracy, Acc_r, mean RDI, DLM advantage rate), ``aurdi``
   (per type, Table 9), ``comparison`` (App. H: advantage = RDI_AR - RDI_DLM over conditions, paired bootstrap CI
   of the mean, Wilcoxon signed-rank), ``calibration`` (ECE with 15 bins, selective AUROC, mean confidence; clean,
   noisy = all conditions pooled, and per condition), ``calibration_ablation`` (App. I: every basis x
   aggregation, clean and noisy), ``reliability`` (reliability-diagram bins, clean and noisy), ``guard`` (is clean
   accuracy above chance? exact binomial test), and ``ipm`` / ``dgcg`` / ``probes`` when run.

Chance guard: RDI is a ratio to clean accuracy; when a model's clean accuracy is not above the task's chance
rate (one-sided exact binomial test at ``stats.alpha``), its RDI, mean RDI and AURDI are blanked (NaN, shown as
``n/m`` in Markdown) with a note in ``guard``, and a comparison involving it is marked not meaningful (its
numbers blanked as well).

Store. Each model's run has the signature of the settings that decide its per-item results (task generation
budgets, sampler / estimator settings, scope, seed) and NOT the number of items, the conditions or the
perturbation seeds: those are part of each record's key ``<task>/<mode>/<condition>/s<seed>/<item id>``, so a
larger ``n`` or more conditions reuse what is done. Records are written per chunk of ``batch_size`` items in one
transaction (fixed slices of the item list: a resumed run forwards exactly the batches an uninterrupted one
would). A ``robust-spec`` run (config = the whole spec) receives the tables.

Seeds. Perturbations use the perturbation seed as given (``dlmeval perturb --seed S --item-id ID`` shows what the
model saw); the sampler, the AR sampler and the DiffScore masks derive theirs from the run seed
(``derive_seed(seed, "robust-...", task, condition, perturbation seed)``, per item inside). DiffScore masks are
keyed by the option text, so every condition scores an option under the same masks (common random numbers).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.spec_io import (
    as_bool,
    as_float,
    as_int,
    as_list,
    as_str,
    as_table,
    field_names,
    read_spec,
    shipped_spec_path,
)
from dlmeval.seeding import derive_seed

log = logging.getLogger("dlmeval.robust")

RUN_KIND = "robust"
SPEC_KIND = "robust-spec"
PROTOCOL_VERSION = 1
MODES = ("generation", "likelihood")
ROLES = ("dlm", "ar")
SCOPES = ("prompt", "question")
SHIPPED = ("robust-demo", "robust-paper", "robust-tiny")
TABLE_ORDER = (
    "summary",
    "comparison",
    "accuracy",
    "aurdi",
    "calibration",
    "calibration_ablation",
    "reliability",
    "guard",
    "ipm",
    "dgcg",
    "probes",
    "runs",
)
TITLES = {
    "summary": "Clean accuracy and robustness (Table 1): Acc_r = mean accuracy under noise, RDI = mean relative "
    "degradation, Adv. = share of conditions where the DLM degrades less",
    "comparison": "DLM vs AR (App. H): advantage = RDI_AR - RDI_DLM per condition; paired bootstrap CI of the mean "
    "and Wilcoxon signed-rank test over conditions",
    "accuracy": "Accuracy per condition (perturbation seeds pooled) and RDI",
    "aurdi": "AURDI per perturbation type (lower = more robust)",
    "calibration": "Calibration (paper's confidences: DLM max/geo, AR chosen/geo; likelihood: choice/softmax): "
    "ECE (15 bins), selective AUROC",
    "calibration_ablation": "Confidence-definition ablation (App. I): ECE and AUROC per basis x aggregation",
    "reliability": "Reliability-diagram bins (paper's confidences)",
    "guard": "Chance guard: is clean accuracy above chance? (one-sided exact binomial test)",
    "ipm": "Input prompt masking (IPM) variants",
    "dgcg": "D-GCG / GCG adversarial suffix probe",
    "probes": "Linear probes: corrupted vs clean tokens from hidden states",
    "runs": "Store runs",
}


# ================================================================================================ the spec
@dataclass(frozen=True)
class TaskSpec:
    name: str  # canonical task name (dlmeval.tasks.get_task)
    n: int = 200
    modes: tuple[str, ...] = ("generation",)
    gen_tokens: int | None = None  # DLM generation length (None: the task's, 128 / 512)
    steps: int | None = None  # DLM nominal steps (None: gen_tokens)
    max_new_tokens: int | None = None  # AR generation budget (None: gen_tokens)
    path: str | None = None  # a data file instead of the shipped one (same format)

    def budget(self) -> tuple[int, int]:
        """(DLM generation length, DLM nominal steps)."""
        from dlmeval.tasks import get_task

        g = self.gen_tokens or get_task(self.name).max_new_tokens
        return g, self.steps or g

    @property
    def ar_tokens(self) -> int:
        return self.max_new_tokens or self.budget()[0]


@dataclass(frozen=True)
class SamplerSpec:
    """DLM generation settings (:class:`dlmeval.sampling.SamplerConfig`); ``batch_size`` never changes a number."""

    strategy: str = "none"  # "none" = confidence-ranked unmasking without re-masking (LLaDA's low-confidence)
    block_length: int | None = None
    temperature: float = 0.0
    remask_fraction: float = 0.15
    position_temperature: float = 0.0
    suppress_eos: bool = False
    batch_size: int = 16


@dataclass(frozen=True)
class ARGenSpec:
    temperature: float = 0.0
    top_p: float = 1.0
    batch_size: int = 8


@dataclass(frozen=True)
class LikelihoodSpec:
    n_masks: int = 5  # DiffScore K (the fast preset)
    n_rates: int = 5  # DiffScore T
    scheme: str = "balanced"
    weighting: str = "mlp"
    ar_aggregate: str = "mean"  # AR option score: mean (length-normalised) or sum of token log-probs


@dataclass(frozen=True)
class CalibrationSpec:
    n_bins: int = 15
    commit_top_k: int = 32  # top-k kept per masked position to look up commit-time probabilities
    plots: bool = True  # reliability diagrams as PNG in the output directory


@dataclass(frozen=True)
class StatsSpec:
    bootstrap_resamples: int = 10_000
    confidence: float = 0.95
    alpha: float = 0.05  # chance guard level
    aurdi_rule: str = "riemann"


@dataclass(frozen=True)
class ProbeSpec:
    """One optional probe (IPM, D-GCG, linear probes): run when ``enabled``; ``options`` go to the probe as
    keyword arguments (see docs/robustness.md for each probe's keys)."""

    enabled: bool = False
    task: str = "arc_challenge"
    n: int = 20
    conditions: tuple[str, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {k: _thaw(v) for k, v in self.options}


@dataclass(frozen=True)
class PairSpec:
    dlm: str
    ar: str
    label: str = ""
    sampler: tuple[tuple[str, Any], ...] = ()  # overrides of [dlm] for this pair's DLM

    @property
    def name(self) -> str:
        return self.label or f"{self.dlm} vs {self.ar}"


@dataclass(frozen=True)
class RobustSpec:
    name: str
    seed: int = 0
    perturbation_seeds: tuple[int, ...] = (0,)
    scope: str = "prompt"
    pairs: tuple[PairSpec, ...] = (PairSpec("default", "default-ar"),)
    conditions: tuple[str, ...] = ()  # perturbation keys ("char.keyboard@0.10"), in order
    tasks: tuple[TaskSpec, ...] = ()
    dlm: SamplerSpec = field(default_factory=SamplerSpec)
    ar: ARGenSpec = field(default_factory=ARGenSpec)
    likelihood: LikelihoodSpec = field(default_factory=LikelihoodSpec)
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)
    stats: StatsSpec = field(default_factory=StatsSpec)
    ipm: ProbeSpec = field(default_factory=ProbeSpec)
    dgcg: ProbeSpec = field(default_factory=ProbeSpec)
    probes: ProbeSpec = field(default_factory=ProbeSpec)
    path: str | None = field(default=None, compare=False)

    def replace(self, **changes: Any) -> RobustSpec:
        return dataclasses.replace(self, **changes)

    def task(self, name: str) -> TaskSpec:
        for t in self.tasks:
            if t.name == name:
                return t
        raise InputError(f"spec: no task {name!r} (tasks: {', '.join(t.name for t in self.tasks)})")

    def sampler_for(self, pair: PairSpec) -> SamplerSpec:
        return dataclasses.replace(self.dlm, **dict(pair.sampler)) if pair.sampler else self.dlm

    def config(self) -> dict[str, Any]:
        """Everything that decides a number of the spec's tables (the ``robust-spec`` run's signature)."""
        d = dataclasses.asdict(self)
        for k in ("path", "name"):
            d.pop(k)
        d["dlm"].pop("batch_size")
        d["ar"].pop("batch_size")
        d["protocol"] = PROTOCOL_VERSION
        return d

    def model_config(self, entry: ModelEntry) -> dict[str, Any]:
        """What decides one model's per-item records (its ``robust`` run's signature): not ``n``, the conditions
        or the perturbation seeds, which are in the record keys."""
        tasks = {
            t.name: {
                "modes": list(t.modes),
                "budget": list(t.budget()) if entry.role == "dlm" else t.ar_tokens,
            }
            for t in self.tasks
        }
        d: dict[str, Any] = {
            "protocol": PROTOCOL_VERSION,
            "role": entry.role,
            "scope": self.scope,
            "tasks": tasks,
        }
        if entry.role == "dlm":
            s = dataclasses.asdict(entry.sampler)
            s.pop("batch_size")
            d["sampler"] = s
            lk = dataclasses.asdict(self.likelihood)
            lk.pop("ar_aggregate")
            d["likelihood"] = lk
            d["commit_top_k"] = self.calibration.commit_top_k
        else:
            d["generation"] = {"temperature": self.ar.temperature, "top_p": self.ar.top_p}
            d["likelihood"] = {"aggregate": self.likelihood.ar_aggregate}
        return d


def _thaw(v: Any) -> Any:
    if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: _thaw(x) for k, x in v}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def _freeze(v: Any) -> Any:
    if isinstance(v, Mapping):
        return tuple(sorted((str(k), _freeze(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    return v


# ------------------------------------------------------------------------------------------------ parsing
def _condition_keys(c: Mapping[str, Any]) -> tuple[str, ...]:
    from dlmeval.robustness import Perturbation, conditions

    if "keys" in c:
        if "types" in c or "rates" in c:
            raise InputError("spec: [conditions] takes either keys or types/rates, not both")

        def key(v, w):
            try:
                return Perturbation.from_key(as_str(v, w)).key
            except InputError as e:
                raise InputError(f"spec: {w}: {e}") from None

        return as_list(c["keys"], "conditions.keys", key)
    types = c.get("types", "all")
    if types == "all" or types == ["all"]:
        names = None
    else:
        names = list(as_list(types, "conditions.types", as_str))
    rates = None
    if "rates" in c:
        rates = list(as_list(c["rates"], "conditions.rates", lambda v, w: as_float(v, w, lo=0.0, hi=1.0)))
        if any(r == 0 for r in rates):
            raise InputError("spec: conditions.rates must be > 0 (the clean condition is always run)")
    try:
        return tuple(p.key for p in conditions(names, rates))
    except InputError as e:
        raise InputError(f"spec: conditions: {e}") from None


def _sampler(raw: Mapping[str, Any], where: str, base: SamplerSpec | None = None) -> SamplerSpec:
    from dlmeval.sampling import STRATEGIES

    s = as_table(raw, where, field_names(SamplerSpec))
    b = base or SamplerSpec()
    bl = s.get("block_length", b.block_length)
    return SamplerSpec(
        strategy=as_str(s.get("strategy", b.strategy), f"{where}.strategy", tuple(STRATEGIES)),
        block_length=None if bl in (None, 0) else as_int(bl, f"{where}.block_length", minimum=1),
        temperature=as_float(s.get("temperature", b.temperature), f"{where}.temperature", lo=0.0),
        remask_fraction=as_float(
            s.get("remask_fraction", b.remask_fraction), f"{where}.remask_fraction", lo=0.0, hi=1.0
        ),
        position_temperature=as_float(
            s.get("position_temperature", b.position_temperature), f"{where}.position_temperature", lo=0.0
        ),
        suppress_eos=as_bool(s.get("suppress_eos", b.suppress_eos), f"{where}.suppress_eos"),
        batch_size=as_int(s.get("batch_size", b.batch_size), f"{where}.batch_size", minimum=1),
    )


#: the options each probe table takes besides enabled, task, n and conditions
PROBE_KEYS = {
    "ipm": ("variants", "steps", "min_chars", "batch_size", "max_distance", "hybrid_with"),
    "dgcg": (
        "suffix_lengths",
        "threshold",
        "steps",
        "top_k",
        "search_width",
        "eval_batch_size",
        "ascii_only",
        "retokenize_filter",
        "eval_samples",
    ),
    "probes": ("n_layers", "layers", "split", "balance", "batch_size"),
}


def _probe(raw: Any, where: str, tasks: Sequence[TaskSpec]) -> ProbeSpec:
    p = as_table(raw, where, {"enabled", "task", "n", "conditions", *PROBE_KEYS[where]})
    if not p:
        return ProbeSpec()
    if where == "ipm":
        _ipm_configs(p)  # validates the variants
    if where == "dgcg":
        as_list(p.get("suffix_lengths", [8]), "dgcg.suffix_lengths", lambda v, w: as_int(v, w, minimum=1))
    names = [t.name for t in tasks]
    from dlmeval.tasks import get_task

    task = get_task(as_str(p.pop("task", names[0] if names else "arc_challenge"), f"{where}.task")).name
    conds: tuple[str, ...] = ()
    if "conditions" in p:
        conds = _condition_keys({"keys": p.pop("conditions")})
    return ProbeSpec(
        enabled=as_bool(p.pop("enabled", True), f"{where}.enabled"),
        task=task,
        n=as_int(p.pop("n", 20), f"{where}.n", minimum=1),
        conditions=conds,
        options=_freeze(p),
    )


def parse_spec(raw: Mapping[str, Any], *, path: str | None = None, name: str | None = None) -> RobustSpec:
    """A :class:`RobustSpec` from a parsed TOML/YAML mapping (validated; layout in docs/robustness.md)."""
    from dlmeval.tasks import get_task

    top = as_table(
        raw,
        "",
        {
            "name",
            "seed",
            "perturbation_seeds",
            "scope",
            "pairs",
            "conditions",
            "tasks",
            "dlm",
            "ar",
            "likelihood",
            "calibration",
            "stats",
            "ipm",
            "dgcg",
            "probes",
        },
    )
    spec_name = as_str(top.get("name", name or "robust"), "name")
    seed = as_int(top.get("seed", 0), "seed", minimum=0)
    pseeds = as_list(
        top.get("perturbation_seeds", [0]), "perturbation_seeds", lambda v, w: as_int(v, w, minimum=0)
    )
    scope = as_str(top.get("scope", "prompt"), "scope", SCOPES)

    dlm = _sampler(top.get("dlm"), "dlm")
    a = as_table(top.get("ar"), "ar", field_names(ARGenSpec))
    ar = ARGenSpec(
        temperature=as_float(a.get("temperature", 0.0), "ar.temperature", lo=0.0),
        top_p=as_float(a.get("top_p", 1.0), "ar.top_p", lo=1e-6, hi=1.0),
        batch_size=as_int(a.get("batch_size", 8), "ar.batch_size", minimum=1),
    )

    raw_pairs = top.get("pairs", [{"dlm": "default", "ar": "default-ar"}])
    if isinstance(raw_pairs, Mapping):
        raw_pairs = [raw_pairs]
    if not isinstance(raw_pairs, list) or not raw_pairs:
        raise InputError("spec: pairs must be a non-empty list of {dlm = ..., ar = ...} tables ([[pairs]])")
    pairs = []
    for i, rp in enumerate(raw_pairs):
        w = f"pairs[{i}]"
        p = as_table(rp, w, {"dlm", "ar", "label", "sampler"})
        for k in ("dlm", "ar"):
            if k not in p:
                raise InputError(f"spec: {w} needs a {k} model spec")
        sampler = as_table(p.get("sampler"), f"{w}.sampler", field_names(SamplerSpec) - {"batch_size"})
        _sampler(sampler, f"{w}.sampler", dlm)  # validates
        pairs.append(
            PairSpec(
                as_str(p["dlm"], f"{w}.dlm"),
                as_str(p["ar"], f"{w}.ar"),
                as_str(p["label"], f"{w}.label") if "label" in p else "",
                tuple(sorted(sampler.items())),
            )
        )
    if len({p.name for p in pairs}) != len(pairs):
        raise InputError("spec: two pairs have the same label (or the same models); give each a label")

    conds = _condition_keys(as_table(top.get("conditions"), "conditions", {"types", "rates", "keys"}))

    raw_tasks = as_table(top.get("tasks"), "tasks", None)
    if not raw_tasks:
        raise InputError("spec: a [tasks.<name>] table is needed (arc_challenge, gsm8k, triviaqa)")
    tasks = []
    for tname, traw in raw_tasks.items():
        task = get_task(tname)
        w = f"tasks.{tname}"
        t = as_table(traw, w, field_names(TaskSpec) - {"name"})
        modes = as_list(t.get("modes", ["generation"]), f"{w}.modes", lambda v, ww: as_str(v, ww, MODES))
        if "likelihood" in modes and not hasattr(task, "choice_request"):
            raise InputError(f"spec: {w}: likelihood mode needs a multiple-choice task (arc_challenge)")
        ts = TaskSpec(
            name=task.name,
            n=as_int(t.get("n", 200), f"{w}.n", minimum=1),
            modes=modes,
            gen_tokens=as_int(t["gen_tokens"], f"{w}.gen_tokens", minimum=1) if "gen_tokens" in t else None,
            steps=as_int(t["steps"], f"{w}.steps", minimum=1) if "steps" in t else None,
            max_new_tokens=as_int(t["max_new_tokens"], f"{w}.max_new_tokens", minimum=1)
            if "max_new_tokens" in t
            else None,
            path=as_str(t["path"], f"{w}.path") if "path" in t else None,
        )
        gen, steps = ts.budget()
        for p in pairs:
            bl = dataclasses.replace(dlm, **dict(p.sampler)).block_length if p.sampler else dlm.block_length
            if "generation" in modes and bl is not None and (gen % bl or steps < gen // bl):
                raise InputError(
                    f"spec: {w}: block_length {bl} must divide gen_tokens {gen} and steps {steps} must be "
                    f"at least the number of blocks ({gen // bl if gen % bl == 0 else '?'})"
                )
        tasks.append(ts)
    if len({t.name for t in tasks}) != len(tasks):
        raise InputError("spec: a task appears twice (aliases such as arc and arc_challenge are one task)")

    lk = as_table(top.get("likelihood"), "likelihood", field_names(LikelihoodSpec))
    from dlmeval.scoring.estimator import WEIGHTINGS
    from dlmeval.scoring.masks import SCHEMES

    likelihood = LikelihoodSpec(
        n_masks=as_int(lk.get("n_masks", 5), "likelihood.n_masks", minimum=1),
        n_rates=as_int(lk.get("n_rates", 5), "likelihood.n_rates", minimum=1),
        scheme=as_str(lk.get("scheme", "balanced"), "likelihood.scheme", tuple(SCHEMES)),
        weighting=as_str(lk.get("weighting", "mlp"), "likelihood.weighting", WEIGHTINGS),
        ar_aggregate=as_str(lk.get("ar_aggregate", "mean"), "likelihood.ar_aggregate", ("mean", "sum")),
    )
    c = as_table(top.get("calibration"), "calibration", field_names(CalibrationSpec))
    calib = CalibrationSpec(
        n_bins=as_int(c.get("n_bins", 15), "calibration.n_bins", minimum=1),
        commit_top_k=as_int(c.get("commit_top_k", 32), "calibration.commit_top_k", minimum=1),
        plots=as_bool(c.get("plots", True), "calibration.plots"),
    )
    s = as_table(top.get("stats"), "stats", field_names(StatsSpec))
    from dlmeval.robustness.metrics import AURDI_RULES

    stats = StatsSpec(
        bootstrap_resamples=as_int(
            s.get("bootstrap_resamples", 10_000), "stats.bootstrap_resamples", minimum=100
        ),
        confidence=as_float(s.get("confidence", 0.95), "stats.confidence", lo=0.5, hi=0.999),
        alpha=as_float(s.get("alpha", 0.05), "stats.alpha", lo=1e-6, hi=0.5),
        aurdi_rule=as_str(s.get("aurdi_rule", "riemann"), "stats.aurdi_rule", AURDI_RULES),
    )
    return RobustSpec(
        name=spec_name,
        seed=seed,
        perturbation_seeds=pseeds,
        scope=scope,
        pairs=tuple(pairs),
        conditions=conds,
        tasks=tuple(tasks),
        dlm=dlm,
        ar=ar,
        likelihood=likelihood,
        calibration=calib,
        stats=stats,
        ipm=_probe(top.get("ipm"), "ipm", tasks),
        dgcg=_probe(top.get("dgcg"), "dgcg", tasks),
        probes=_probe(top.get("probes"), "probes", tasks),
        path=path,
    )


def load_spec(ref: str | os.PathLike) -> RobustSpec:
    """Read a spec from a ``.toml`` / ``.yaml`` / ``.yml`` file, or a shipped spec by name (``robust-demo``)."""
    raw, p = read_spec(ref, SHIPPED)
    return parse_spec(raw, path=str(p), name=p.stem)


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


def record_key(task: str, mode: str, condition: str, seed: int | None, item_id: str) -> str:
    return f"{task}/{mode}/{condition}/s{'-' if seed is None else seed}/{item_id}"


def plan(spec: RobustSpec) -> list[tuple[str, str, str, int | None]]:
    """Every (task, mode, condition, perturbation seed) cell of one model, in run order (clean first)."""
    cells = []
    for t in spec.tasks:
        for mode in t.modes:
            cells.append((t.name, mode, "clean", None))
            for c in spec.conditions:
                for s in spec.perturbation_seeds:
                    cells.append((t.name, mode, c, s))
    return cells


# ================================================================================================ running
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
    say = echo or (lambda s: None)
    result = RobustResult(spec)
    # what one model's probes leave for another's (D-GCG transfer), and each task file read once
    shared: dict[str, Any] = {"pairs": None, "files": {}, "data_dir": data_dir}
    items = {t.name: _task_items(shared, t.name, t.path, t.n) for t in spec.tasks}
    entries, pair_labels = model_entries(spec)
    shared["pairs"] = pair_labels
    records: list[dict] = []
    extras: dict[str, list[dict]] = {"ipm": [], "dgcg": [], "probes": []}
    identities = []
    for entry in entries:
        t0 = time.perf_counter()
        own = models is not None and entry.spec in models
        model = (
            models[entry.spec]
            if own
            else _load(
                entry,
                device=device,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                allow_download=allow_download,
            )
        )
        ident = model.identity()
        identities.append(ident)
        run = store.open_run(
            RUN_KIND, spec.model_config(entry), [ident], seed=spec.seed, command_line=command_line
        )
        result.model_runs[entry.label] = run.run_id
        say(f"robust: {entry.role} {entry.label} -> run {run.run_id}")
        recs = _evaluate_model(spec, entry, model, run, items, progress, say)
        records += recs
        for name, hook in (("ipm", _ipm), ("dgcg", _dgcg), ("probes", _probes)):
            probe = getattr(spec, name)
            if probe.enabled:
                extras[name] += hook(spec, probe, entry, model, run, data_dir, say, shared)
        run.put_table("accuracy", table_accuracy(recs, spec))
        run.finish()
        result.warnings += [f"{entry.label}: {w}" for w in run.warnings()]
        result.seconds[entry.label] = round(time.perf_counter() - t0, 2)
        if not own:
            del model
            gc.collect()
            _empty_cuda()
    spec_run = store.open_run(SPEC_KIND, spec.config(), identities, seed=spec.seed, command_line=command_line)
    result.spec_run = spec_run.run_id
    result.tables = all_tables(records, spec, pair_labels, extras)
    result.tables["runs"] = pd.DataFrame(
        [
            {"model": e.label, "role": e.role, "spec": e.spec, "run_id": result.model_runs[e.label]}
            for e in entries
        ]
    )
    for name, df in result.tables.items():
        spec_run.put_table(name, df)
    for w in _guard_notes(result.tables.get("guard")):
        spec_run.warn(w)
    spec_run.finish()
    result.signature = spec_run.signature.short()
    result.warnings += [w for w in spec_run.warnings() if w not in result.warnings]
    if out_dir is not None:
        result.out_dir = write_tables(
            result.tables, out_dir, header=f"Robustness {spec.name}: {result.signature}"
        )
        if spec.calibration.plots:
            try:
                plot_reliability(result.tables["reliability"], result.out_dir)
            except ImportError as e:  # matplotlib is optional for the tables
                result.warnings.append(f"reliability diagrams not drawn: {e}")
    return result


def _empty_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _chunks(xs: list, size: int) -> list[list]:
    return [xs[i : i + size] for i in range(0, len(xs), size)]


def _fill(spec, entry, model, run, task_name, mode, cond, seed, items, keys, done: set[str], state) -> int:
    """Compute the missing records of one cell in chunks of ``batch_size`` items (fixed slices of the item list),
    one transaction per chunk. Returns how many records were written."""
    batch = entry.sampler.batch_size if entry.role == "dlm" else spec.ar.batch_size
    fn = _generation_chunk if mode == "generation" else _likelihood_chunk
    n_new = 0
    for chunk, ckeys in zip(_chunks(items, batch), _chunks(keys, batch)):
        if all(k in done for k in ckeys):
            continue
        recs = fn(spec, entry, model, task_name, cond, seed, chunk, state)
        for r in recs:
            r.update(task=task_name, mode=mode, model=entry.label, role=entry.role)
        run.put_many(list(zip(ckeys, recs)))
        done.update(ckeys)
        n_new += len(ckeys)
    return n_new


def _evaluate_model(spec, entry: ModelEntry, model, run, items, progress, say) -> list[dict]:
    """Every (task, mode, condition, seed, item) record of one model: computed where missing, read back
    otherwise. Returns the records of the current plan in plan order."""
    from dlmeval.progress import progress_bar

    cells = plan(spec)
    done = run.done_keys()
    keys_in_order: list[str] = []
    states: dict[str, dict] = {}
    with progress_bar(f"robust {entry.label}", len(cells), enabled=progress) as bar:
        for task_name, mode, cond, seed in cells:
            its = items[task_name]
            keys = [record_key(task_name, mode, cond, seed, it.item_id) for it in its]
            keys_in_order += keys
            if not all(k in done for k in keys):
                t0 = time.perf_counter()
                state = states.setdefault(f"{task_name}/{mode}", {})
                n_new = _fill(spec, entry, model, run, task_name, mode, cond, seed, its, keys, done, state)
                say(
                    f"robust: {entry.label} {task_name}/{mode}/{cond}"
                    + ("" if seed is None else f"/s{seed}")
                    + f": {n_new} items in {time.perf_counter() - t0:.1f} s"
                )
            bar.update(1, f"{task_name}/{mode}/{cond}")
    stored = run.results()
    missing = [k for k in keys_in_order if k not in stored]
    if missing:  # cannot happen unless the store was edited under us
        raise InputError(f"run {run.run_id} lacks {len(missing)} records after evaluation, e.g. {missing[0]}")
    return [stored[k] for k in keys_in_order]


def _perturbation(cond: str):
    from dlmeval.robustness import Perturbation

    return None if cond == "clean" else Perturbation.from_key(cond)


def _cut(text: str, stops: Sequence[str]) -> str:
    for s in stops:
        k = text.find(s)
        if k >= 0:
            text = text[:k]
    return text


def _base_record(item, msg, cond: str, seed: int | None) -> dict[str, Any]:
    from dlmeval.robustness import Perturbation

    pr = msg.perturbation
    p = None if cond == "clean" else Perturbation.from_key(cond)
    return {
        "item_id": item.item_id,
        "condition": cond,
        "type": None if p is None else p.type_key,
        "rate": 0.0 if p is None else p.rate,
        "seed": seed,
        "changed": pr.changed if pr else 0,
        "eligible": pr.eligible if pr else 0,
    }


def _sampler_config(spec, entry: ModelEntry, task_name: str, rseed: int):
    from dlmeval.sampling import SamplerConfig

    gen_tokens, steps = _task_spec(spec, task_name).budget()
    s = entry.sampler
    return SamplerConfig(
        length=gen_tokens,
        steps=steps,
        block_length=s.block_length,
        strategy=s.strategy,
        remask_fraction=s.remask_fraction,
        temperature=s.temperature,
        position_temperature=s.position_temperature,
        suppress_eos=s.suppress_eos,
        stop_at_eos=True,
        seed=rseed,
    )


def _task_spec(spec, task_name: str) -> TaskSpec:
    """The spec's settings of a task, or the task's defaults for one only a probe uses."""
    return next((t for t in spec.tasks if t.name == task_name), TaskSpec(task_name))


def _answer(spec, entry: ModelEntry, model, task, prompts: list, item_ids: list[str], rseed: int):
    """Generate answers to ready prompts (texts after the chat template; for a DLM also token id lists) and
    their confidences. Returns ``(outputs, token_probs, extras)``: outputs cut at the task's stop strings."""
    from dlmeval.robustness.calibration import ar_token_probs, dlm_token_probs

    extra: list[dict[str, Any]] = [{} for _ in prompts]
    if entry.role == "dlm":
        from dlmeval.robustness.calibration import CommitRecorder
        from dlmeval.sampling import RemaskingSampler

        s = entry.sampler
        rec = CommitRecorder(model, suppress_eos=s.suppress_eos, top_k=spec.calibration.commit_top_k)
        res = RemaskingSampler(rec, _sampler_config(spec, entry, task.name, rseed)).sample(
            prompts, item_ids=item_ids
        )
        commit = rec.commit_logprobs(res)
        tps = dlm_token_probs(model, res.prompt_ids, [list(r) for r in res.tokens], commit=commit)
        outputs = [_cut(t, task.stop) for t in res.texts]
        for b in range(len(prompts)):
            extra[b] = {
                "nfe": int(res.nfe[b]),
                "stopped_at_eos": bool(res.stopped_at_eos[b]),
                "commit_misses": int(np.isnan(commit[b]).sum()) if commit[b] is not None else None,
            }
        return outputs, tps, extra
    if any(not isinstance(p, str) for p in prompts):
        raise InputError("an autoregressive model generates from prompt texts, not token ids")
    kw = dict(
        max_new_tokens=_task_spec(spec, task.name).ar_tokens,
        temperature=spec.ar.temperature,
        top_p=spec.ar.top_p,
        stop=task.stop,
        seed=rseed,
        item_ids=item_ids,
        batch_size=spec.ar.batch_size,
    )
    if hasattr(model, "generate_scored"):  # the confidences come with the generation: no rescoring pass
        gens = model.generate_scored(prompts, **kw)
        outputs = [g.text for g in gens]
        tps = ar_token_probs(model, prompts, outputs, batch_size=spec.ar.batch_size, generated=gens)
    else:
        outputs = model.generate(prompts, **kw)
        tps = ar_token_probs(model, prompts, outputs, batch_size=spec.ar.batch_size)
    return outputs, tps, extra


def _judged(task, item, output: str, tp) -> dict[str, Any]:
    return {
        "output": output,
        "prediction": task.extract(output, item),
        "gold": task.gold(item),
        "correct": bool(task.is_correct(item, output)),
        "confidence": tp.confidences(),
        "n_answer_tokens": tp.n_tokens,
    }


def _generation_chunk(spec, entry, model, task_name, cond, seed, chunk, state) -> list[dict]:
    from dlmeval.tasks import chat_formatter, get_task

    task = get_task(task_name)
    pert = _perturbation(cond)
    pseed = 0 if seed is None else seed
    msgs = [task.user_message(it, pert, seed=pseed, scope=spec.scope) for it in chunk]
    wrap = chat_formatter(model)
    prompts = [wrap(m.text) for m in msgs]
    rseed = derive_seed(spec.seed, "robust-generate", task_name, cond, seed)
    outputs, tps, extra = _answer(spec, entry, model, task, prompts, [it.item_id for it in chunk], rseed)
    out = []
    for it, m, p, o, tp, ex in zip(chunk, msgs, prompts, outputs, tps, extra):
        r = _base_record(it, m, cond, seed)
        r.update(prompt=p, **_judged(task, it, o, tp), **ex)
        out.append(r)
    return out


def _likelihood_chunk(spec, entry, model, task_name, cond, seed, chunk, state) -> list[dict]:
    from dlmeval.robustness.calibration import choice_confidence
    from dlmeval.tasks import ChoiceScorer, causal_choice_scorer, chat_formatter, evaluate_choices, get_task

    task = get_task(task_name)
    pert = _perturbation(cond)
    pseed = 0 if seed is None else seed
    if entry.role == "dlm":
        scorer = state.get("scorer")
        if scorer is None:
            from dlmeval.scoring import DiffScorer

            lk = spec.likelihood
            scorer = state["scorer"] = DiffScorer(
                model,
                n_masks=lk.n_masks,
                n_rates=lk.n_rates,
                scheme=lk.scheme,
                weighting=lk.weighting,
                seed=derive_seed(spec.seed, "robust-diffscore"),
            )
        chat = bool(getattr(model, "has_chat_template", False))

        def many(requests) -> list[list[float]]:
            # every item's options in one call, so the scorer packs them into large batches; the options follow
            # the question as its own text: the assistant turn for a chat model
            cands = [c.lstrip(" ") if chat else c for _, conts in requests for c in conts]
            ctxs = [ctx for ctx, conts in requests for _ in conts]
            flat = [float(x) for x in scorer.score(cands, ctxs, config="cond")["score"]] if cands else []
            out, i = [], 0
            for _, conts in requests:
                out.append(flat[i : i + len(conts)])
                i += len(conts)
            return out

        score = ChoiceScorer(many)
        results = evaluate_choices(chunk, score, perturbation=pert, seed=pseed, scope=spec.scope, task=task)
    else:
        score = causal_choice_scorer(
            model, aggregate=spec.likelihood.ar_aggregate, batch_size=spec.ar.batch_size
        )
        results = evaluate_choices(
            chunk,
            score,
            perturbation=pert,
            seed=pseed,
            scope=spec.scope,
            wrap=chat_formatter(model),
            task=task,
        )
    out = []
    for it, r in zip(chunk, results):
        rec = {
            "item_id": it.item_id,
            "condition": cond,
            "type": None if pert is None else pert.type_key,
            "rate": 0.0 if pert is None else pert.rate,
            "seed": seed,
            "changed": r.changed,
            "eligible": r.eligible,
            "prompt": r.prompt,
            "output": "",
            "prediction": r.prediction,
            "gold": r.gold,
            "correct": bool(r.correct),
            "scores": list(r.scores),
            "confidence": {"choice/softmax": choice_confidence(r.scores)},
        }
        out.append(rec)
    return out


# ================================================================================================ hooks
def _task_items(shared: dict[str, Any], task_name: str, path: str | None, n: int) -> list:
    """The first ``n`` items of a task; each file is read once per run (TriviaQA's takes seconds to parse)."""
    from dlmeval.tasks import get_task

    task = get_task(task_name)
    key = (task.name, path)
    if key not in shared["files"]:
        shared["files"][key] = task.items(path=path) if path else task.items(data_dir=shared["data_dir"])
    return shared["files"][key][:n]


def _probe_items(spec, probe: ProbeSpec, shared):
    from dlmeval.tasks import get_task

    task = get_task(probe.task)
    path = next((t.path for t in spec.tasks if t.name == task.name and t.path), None)
    return task, _task_items(shared, task.name, path, probe.n)


def _hook_unavailable(run, what: str, e: Exception, say) -> list[dict]:
    msg = f"{what} skipped: {e}"
    run.warn(msg)
    say(f"robust: {msg}")
    return []


def _ensure(spec, entry, model, run, task_name: str, mode: str, cond: str, seed, items) -> list[dict]:
    """Standard records (the main plan's keys) for ``items``: computed where missing, then read back."""
    keys = [record_key(task_name, mode, cond, seed, it.item_id) for it in items]
    _fill(spec, entry, model, run, task_name, mode, cond, seed, items, keys, run.done_keys(), {})
    return [run.get(k) for k in keys]


def _user_span(prompt: str, user: str) -> tuple[int, int] | None:
    at = prompt.rfind(user)
    return None if at < 0 else (at, at + len(user))


def _ipm_configs(opts: dict[str, Any]):
    """``variants`` ("topk:2", "threshold:0.1", "uniform:0.1", "iterative:0.1", "editdist", "hybrid:2" or tables
    of IPMConfig fields) with the shared settings (``steps`` = T_d, ``min_chars``, ``batch_size``,
    ``max_distance``, ``hybrid_with``)."""
    from dlmeval.robustness.ipm import IPMConfig

    shared = {
        "infill_steps": opts.get("steps", 16),
        "min_chars": opts.get("min_chars", 3),
        "batch_size": opts.get("batch_size", 16),
        "max_distance": opts.get("max_distance", 2),
        "hybrid_with": opts.get("hybrid_with", "topk"),
    }
    param = {"topk": "k", "threshold": "tau", "iterative": "tau", "uniform": "rho", "hybrid": "k"}
    out = []
    for v in opts.get("variants", ["topk:2"]):
        if isinstance(v, Mapping):
            try:
                out.append(IPMConfig(**{**shared, **v}))
            except TypeError as e:
                raise InputError(f"spec: ipm variant {dict(v)!r}: {e}") from None
            continue
        name, _, arg = str(v).partition(":")
        kw = dict(shared)
        if arg:
            if name not in param:
                raise InputError(f"spec: ipm variant {v!r}: {name} takes no argument")
            try:
                kw[param[name]] = int(arg) if param[name] == "k" else float(arg)
            except ValueError:
                raise InputError(f"spec: ipm variant {v!r}: {arg!r} is not a number") from None
        out.append(IPMConfig(variant=name, **kw))
    return out


def _ipm(spec, probe: ProbeSpec, entry: ModelEntry, model, run, data_dir, say, shared) -> list[dict]:
    """IPM variants on the DLM (the paper's Sec. 6.6, Table 5): the noisy prompt is patched, then answered with the
    same sampler (and sampler seed) as the noisy baseline; accuracy against that baseline and clean input."""
    if entry.role != "dlm":
        return []
    try:
        from dlmeval.robustness.ipm import run_ipm
    except ImportError as e:
        return _hook_unavailable(run, "IPM", e, say)
    from dlmeval.tasks import chat_formatter

    task, its = _probe_items(spec, probe, shared)
    opts = probe.kwargs()
    configs = _ipm_configs(opts)
    wrap = chat_formatter(model)
    batch = entry.sampler.batch_size
    clean = _ensure(spec, entry, model, run, task.name, "generation", "clean", None, its)
    base = {"model": entry.label, "role": entry.role, "task": task.name}
    rows = []
    for cond in probe.conditions or spec.conditions[:1]:
        pert = _perturbation(cond)
        noisy = [
            r
            for s in spec.perturbation_seeds
            for r in _ensure(spec, entry, model, run, task.name, "generation", cond, s, its)
        ]
        acc_noisy = float(np.mean([r["correct"] for r in noisy]))
        rows.append({**base, "condition": cond, "variant": "clean", "n": len(clean),
                     "accuracy": float(np.mean([r["correct"] for r in clean]))})  # fmt: skip
        rows.append({**base, "condition": cond, "variant": "noisy baseline", "n": len(noisy),
                     "accuracy": acc_noisy, "delta": 0.0})  # fmt: skip
        for cfg in configs:
            recs = []
            for seed in spec.perturbation_seeds:
                keys = [f"ipm/{cfg.key}/{task.name}/{cond}/s{seed}/{it.item_id}" for it in its]
                done = run.done_keys()
                for chunk, ckeys in zip(_chunks(its, batch), _chunks(keys, batch)):
                    if all(k in done for k in ckeys):
                        continue
                    msgs = [task.user_message(it, pert, seed=seed, scope=spec.scope) for it in chunk]
                    prompts = [wrap(m.text) for m in msgs]
                    iids = [it.item_id for it in chunk]
                    out = run_ipm(
                        model,
                        prompts,
                        cfg,
                        item_ids=iids,
                        seed=derive_seed(spec.seed, "robust-ipm", task.name, cond, seed),
                        spans=[_user_span(p, m.text) for p, m in zip(prompts, msgs)],
                    )
                    rseed = derive_seed(spec.seed, "robust-generate", task.name, cond, seed)  # the baseline's
                    outputs, tps, extra = _answer(
                        spec, entry, model, task, [r.patched_ids for r in out.results], iids, rseed
                    )
                    put = []
                    for it, k, r, o, tp, ex in zip(chunk, ckeys, out.results, outputs, tps, extra):
                        put.append(
                            (
                                k,
                                {
                                    "item_id": it.item_id,
                                    "variant": cfg.key,
                                    "condition": cond,
                                    "seed": seed,
                                    "flagged": len(r.flagged),
                                    "flagged_tokens": r.flagged_tokens,
                                    "changed_tokens": r.changed,
                                    "patched_text": r.patched_text,
                                    **_judged(task, it, o, tp),
                                    **ex,
                                },
                            )
                        )
                    run.put_many(put)
                recs += [run.get(k) for k in keys]
            acc = float(np.mean([r["correct"] for r in recs]))
            rows.append(
                {
                    **base,
                    "condition": cond,
                    "variant": cfg.key,
                    "n": len(recs),
                    "accuracy": acc,
                    "delta": acc - acc_noisy,
                    "mean_flagged": float(np.mean([r["flagged"] for r in recs])),
                    "mean_changed": float(np.mean([r["changed_tokens"] for r in recs])),
                }
            )
            say(f"robust: IPM {cfg.key} on {cond}: accuracy {acc:.3f} (noisy baseline {acc_noisy:.3f})")
    return rows


GCG_OPTIONS = (
    "steps",
    "top_k",
    "search_width",
    "eval_batch_size",
    "ascii_only",
    "retokenize_filter",
    "eval_samples",
)


def _target_text(task, item, chat: bool) -> str:
    """The answer whose loss the attack raises: ARC's gold letter, TriviaQA's first alias, GSM8K's ``#### N``;
    after a chat template's assistant header as it stands, after a plain ``Answer:`` with a space."""
    gold = task.gold(item)
    if task.name == "arc_challenge":
        t = "ABCD"[int(gold)]
    elif task.name == "triviaqa":
        t = str(gold[0])
    else:
        t = f"#### {gold}"
    return t if chat else " " + t


def _dgcg(spec, probe: ProbeSpec, entry: ModelEntry, model, run, data_dir, say, shared) -> list[dict]:
    """D-GCG (DLM) / GCG (AR) adversarial suffixes on clean prompts (the paper's Sec. 4, 6.4, Table 3): accuracy
    with the optimised suffix vs without, the shortest suffix reaching ``threshold`` degradation, mean gradient
    norms and loss trajectories; for the AR model also the transfer of its pair's DLM suffixes."""
    try:
        from dlmeval.robustness.dgcg import (
            GCGConfig,
            append_suffix,
            attack_item,
            degradation,
            min_suffix_length,
            run_gcg,
        )
    except ImportError as e:
        return _hook_unavailable(run, "D-GCG", e, say)
    from dlmeval.tasks import chat_formatter

    task, its = _probe_items(spec, probe, shared)
    opts = probe.kwargs()
    lengths = [int(x) for x in opts.get("suffix_lengths", [8])]
    threshold = float(opts.get("threshold", 0.2))
    kw = {k: opts[k] for k in GCG_OPTIONS if k in opts}
    wrap = chat_formatter(model)
    chat = bool(getattr(model, "has_chat_template", False))
    clean = _ensure(spec, entry, model, run, task.name, "generation", "clean", None, its)
    clean_acc = float(np.mean([r["correct"] for r in clean]))
    rseed = derive_seed(spec.seed, "robust-generate", task.name, "clean", None)
    gseed = derive_seed(spec.seed, "robust-dgcg", task.name)
    base = {
        "model": entry.label,
        "role": entry.role,
        "task": task.name,
        "n": len(its),
        "clean_accuracy": clean_acc,
    }
    rows, deg = [], {}
    for length in lengths:
        cfg = GCGConfig(suffix_length=length, **kw)
        keys = [f"dgcg/{cfg.key}/{task.name}/{it.item_id}" for it in its]
        done = run.done_keys()
        for it, k in zip(its, keys):
            if k in done:
                continue
            msg = task.user_message(it)
            res = run_gcg(model, [attack_item(model, msg.text, _target_text(task, it, chat), it.item_id, wrap=wrap)],
                          cfg, seed=gseed)[0]  # fmt: skip
            prompt = res.prompt_ids if entry.role == "dlm" else wrap(msg.text + res.suffix_text)
            outputs, tps, extra = _answer(spec, entry, model, task, [prompt], [it.item_id], rseed)
            rec = {
                "item_id": it.item_id,
                "kind": res.kind,
                "suffix_length": length,
                "suffix_text": res.suffix_text,
                "loss": res.loss,
                "candidate_loss": res.candidate_loss,
                "grad_norm": res.grad_norm,
                "initial_eval_loss": res.initial_eval_loss,
                "final_eval_loss": res.final_eval_loss,
                "attack_nfe": res.nfe,
                "seconds": res.seconds,
                **_judged(task, it, outputs[0], tps[0]),
            }
            run.put(k, rec)
        recs = [run.get(k) for k in keys]
        acc = float(np.mean([r["correct"] for r in recs]))
        deg[length] = degradation(clean_acc, acc)
        loss = np.array([r["loss"] for r in recs], dtype=float)
        cand = np.array([r["candidate_loss"] for r in recs], dtype=float)
        row = {
            **base,
            "kind": recs[0]["kind"],
            "suffix_length": length,
            "attacked_accuracy": acc,
            "degradation": deg[length],
            "mean_grad_norm": float(np.mean([np.mean(r["grad_norm"]) for r in recs])),
            "mean_loss_increase": float(
                np.mean([r["final_eval_loss"] - r["initial_eval_loss"] for r in recs])
            ),
            "step_improvement_rate": float((cand > loss).mean()),
            "loss_trajectory": " ".join(f"{x:.3f}" for x in loss.mean(0)),
        }
        shared.setdefault("dgcg", {})[(entry.label, length)] = {r["item_id"]: r["suffix_text"] for r in recs}
        if entry.role == "ar":  # transfer: the pair's DLM suffixes given to this AR model (as text)
            for dl, ar in shared.get("pairs", {}).values():
                sfx = shared.get("dgcg", {}).get((dl, length))
                if ar != entry.label or not sfx:
                    continue
                tkeys = [
                    f"dgcg-transfer/{derive_seed(dl) % 10**8}/{cfg.key}/{task.name}/{it.item_id}"
                    for it in its
                ]
                tdone = run.done_keys()
                for it, k in zip(its, tkeys):
                    if k in tdone:
                        continue
                    msg = task.user_message(it)
                    outputs, tps, _ = _answer(
                        spec,
                        entry,
                        model,
                        task,
                        [wrap(append_suffix(msg.text, sfx[it.item_id]))],
                        [it.item_id],
                        rseed,
                    )
                    run.put(k, {"item_id": it.item_id, "source": dl, **_judged(task, it, outputs[0], tps[0])})
                tacc = float(np.mean([run.get(k)["correct"] for k in tkeys]))
                row.update(
                    transfer_from=dl,
                    transfer_accuracy=tacc,
                    transfer_degradation=degradation(clean_acc, tacc),
                )
        rows.append(row)
        say(f"robust: {entry.label} {cfg.key}: accuracy {clean_acc:.3f} -> {acc:.3f}")
    ml = min_suffix_length(deg, threshold)
    for r in rows:
        r["min_len"] = ml if ml is not None else "none"
    return rows


PROBE_OPTIONS = ("n_layers", "layers", "split", "balance", "batch_size")


def _probes(spec, probe: ProbeSpec, entry: ModelEntry, model, run, data_dir, say, shared) -> list[dict]:
    """Linear probes (the paper's Sec. 5, 6.5, Table 4): corrupted vs clean tokens of perturbed prompts from the
    hidden states of evenly spaced layers; best-layer accuracy and AUROC."""
    try:
        from dlmeval.robustness.probes import probe_dataset, probe_layers
    except ImportError as e:
        return _hook_unavailable(run, "linear probes", e, say)
    from dlmeval.store.signature import config_hash
    from dlmeval.tasks import chat_formatter

    task, its = _probe_items(spec, probe, shared)
    opts = probe.kwargs()
    split = opts.get("split", "token")
    build = {k: opts[k] for k in ("n_layers", "layers", "balance", "batch_size") if k in opts}
    wrap = chat_formatter(model)
    seed = spec.perturbation_seeds[0]
    rows = []
    for cond in probe.conditions or spec.conditions[:1]:
        key = (
            f"probes/{task.name}/{cond}/s{seed}/n{len(its)}/{config_hash({**opts, 'scope': spec.scope})[:12]}"
        )
        rec = run.get(key)
        if rec is None:
            pert = _perturbation(cond)
            if pert is None:
                raise InputError(
                    "spec: probes.conditions must be perturbation keys (clean has no corrupted tokens)"
                )
            msgs = [task.user_message(it, pert, seed=seed, scope=spec.scope) for it in its]
            texts = [wrap(m.text) for m in msgs]
            fs = probe_dataset(
                model,
                texts,
                [m.perturbation.edits for m in msgs],
                seed=derive_seed(spec.seed, "robust-probe", task.name, cond),
                shifts=[max(t.rfind(m.text), 0) for t, m in zip(texts, msgs)],
                **build,
            )
            pr = probe_layers(
                fs, seed=derive_seed(spec.seed, "robust-probe-split", task.name, cond), split=split
            )
            rec = {"condition": cond, **pr.as_dict()}
            run.put(key, rec)
        rows.append(
            {
                "model": entry.label,
                "role": entry.role,
                "task": task.name,
                "condition": cond,
                "n_sequences": len(its),
                "best_layer": rec["best_layer"],
                "best_accuracy": rec["best_accuracy"],
                "auroc_at_best": rec["auroc_at_best"],
                "max_auroc": rec["max_auroc"],
                "n_train": rec["n_train"],
                "n_test": rec["n_test"],
                "layers": " ".join(str(x) for x in rec["layers"]),
                "accuracy_by_layer": " ".join(f"{x:.3f}" for x in rec["accuracy"]),
            }
        )
        say(
            f"robust: {entry.label} probe {cond}: best layer {rec['best_layer']} accuracy {rec['best_accuracy']:.3f}"
        )
    return rows


# ================================================================================================ tables
def _frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    cols = ["task", "mode", "model", "role", "condition", "type", "rate", "seed", "item_id", "correct"]
    df = pd.DataFrame([{k: r.get(k) for k in cols} for r in records], columns=cols)
    df["confidence"] = [r.get("confidence") or {} for r in records]
    return df


def _chance(task: str) -> float:
    from dlmeval.tasks import get_task

    return float(get_task(task).chance)


def _summaries(df: pd.DataFrame, spec: RobustSpec) -> dict[tuple[str, str, str], Any]:
    """(task, mode, model) -> RobustnessSummary over the spec's conditions."""
    from dlmeval.robustness.metrics import summarize

    out = {}
    for (task, mode, model), g in df.groupby(["task", "mode", "model"], sort=False):
        clean = g.loc[g["condition"] == "clean", "correct"].astype(bool).tolist()
        pert = {
            c: gc_["correct"].astype(bool).tolist()
            for c, gc_ in g[g["condition"] != "clean"].groupby("condition", sort=False)
        }
        out[(task, mode, model)] = summarize(
            clean, pert, chance=_chance(task), alpha=spec.stats.alpha, aurdi_rule=spec.stats.aurdi_rule
        )
    return out


def table_accuracy(records: Sequence[Mapping[str, Any]], spec: RobustSpec) -> pd.DataFrame:
    """Accuracy per (task, mode, model, condition), seeds pooled, with RDI (NaN when the model is not above
    chance on clean input: see ``meaningful``)."""
    df = _frame(records)
    sums = _summaries(df, spec)
    rows = []
    for (task, mode, model), s in sums.items():
        role = df.loc[(df["task"] == task) & (df["mode"] == mode) & (df["model"] == model), "role"].iloc[0]
        base = {"task": task, "mode": mode, "model": model, "role": role}
        rows.append(
            {
                **base,
                "condition": "clean",
                "type": "clean",
                "rate": 0.0,
                "n": s.clean_n,
                "accuracy": s.clean_accuracy,
                "rdi": 0.0 if s.meaningful else float("nan"),
                "meaningful": s.meaningful,
            }
        )
        for c in s.conditions:
            rows.append(
                {
                    **base,
                    "condition": c.key,
                    "type": c.type_key,
                    "rate": c.rate,
                    "n": c.n,
                    "accuracy": c.accuracy,
                    "rdi": c.rdi if s.meaningful else float("nan"),
                    "meaningful": s.meaningful,
                }
            )
    return pd.DataFrame(rows)


def all_tables(
    records: Sequence[Mapping[str, Any]],
    spec: RobustSpec,
    pair_labels: Mapping[str, tuple[str, str]],
    extras: Mapping[str, list[dict]] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table from the per-item records (module docstring)."""
    from dlmeval.robustness.metrics import compare

    df = _frame(records)
    sums = _summaries(df, spec)
    roles = {m: r for m, r in zip(df["model"], df["role"])}
    pair_of = {}
    for pname, (d, a) in pair_labels.items():
        pair_of.setdefault(d, pname)
        pair_of.setdefault(a, pname)
    tables: dict[str, pd.DataFrame] = {}
    tables["accuracy"] = table_accuracy(records, spec)

    # guard
    guard = []
    for (task, mode, model), s in sums.items():
        g = s.guard
        guard.append(
            {
                "task": task,
                "mode": mode,
                "model": model,
                "role": roles[model],
                "clean_correct": g.correct,
                "n": g.n,
                "clean_accuracy": s.clean_accuracy,
                "chance": g.chance,
                "p_value": g.p_value,
                "above_chance": g.above_chance,
                "note": "" if g.above_chance else f"{model} on {task}/{mode}: {g.warning}",
            }
        )
    tables["guard"] = pd.DataFrame(guard)

    # comparisons (App. H) and the summary (Table 1)
    comp, summ = [], []
    for pname, (dl, ar) in pair_labels.items():
        for t in spec.tasks:
            for mode in t.modes:
                sd, sa = sums.get((t.name, mode, dl)), sums.get((t.name, mode, ar))
                if sd is None or sa is None:
                    continue
                row: dict[str, Any] = {"task": t.name, "mode": mode, "pair": pname, "dlm": dl, "ar": ar}
                adv_rate = float("nan")
                if spec.conditions:
                    try:
                        c = compare(
                            sd,
                            sa,
                            seed=derive_seed(spec.seed, "robust-compare", t.name, mode, pname),
                            n_resamples=spec.stats.bootstrap_resamples,
                            confidence=spec.stats.confidence,
                        )
                    except InputError as e:
                        row.update(n_conditions=len(spec.conditions), meaningful=False, note=str(e))
                        comp.append(row)
                        c = None
                    if c is not None:
                        ok = c.meaningful
                        blank = (lambda v: v) if ok else (lambda v: float("nan"))
                        row.update(
                            n_conditions=len(c.keys),
                            wins=c.wins,
                            ties=c.ties,
                            losses=c.losses,
                            adv_rate=blank(c.advantage_rate),
                            mean_adv=blank(c.mean_advantage),
                            ci_lo=blank(c.ci[0]),
                            ci_hi=blank(c.ci[1]),
                            wilcoxon_p=blank(c.wilcoxon_p),
                            meaningful=ok,
                            note=""
                            if ok
                            else "not meaningful: "
                            + " and ".join(m for m, s in ((dl, sd), (ar, sa)) if not s.meaningful)
                            + " not above chance on clean input",
                        )
                        comp.append(row)
                        adv_rate = row["adv_rate"]
                for model, s, role in ((dl, sd, "dlm"), (ar, sa, "ar")):
                    summ.append(
                        {
                            "task": t.name,
                            "mode": mode,
                            "pair": pname,
                            "model": model,
                            "role": role,
                            "acc_clean": s.clean_accuracy,
                            "acc_r": s.mean_accuracy,
                            "mean_rdi": s.mean_rdi if s.meaningful else float("nan"),
                            "adv_rate": adv_rate if role == "dlm" else float("nan"),
                            "above_chance": s.meaningful,
                        }
                    )
    tables["summary"] = pd.DataFrame(summ)
    tables["comparison"] = pd.DataFrame(comp)

    # AURDI per type (Table 9)
    au = []
    for (task, mode, model), s in sums.items():
        for typ, v in s.aurdi.items():
            au.append(
                {
                    "task": task,
                    "mode": mode,
                    "model": model,
                    "role": roles[model],
                    "type": typ,
                    "aurdi": v if s.meaningful else float("nan"),
                    "meaningful": s.meaningful,
                }
            )
    tables["aurdi"] = pd.DataFrame(au)

    cal, abl, rel = calibration_tables(df, spec)
    tables["calibration"], tables["calibration_ablation"], tables["reliability"] = cal, abl, rel
    for name, rows in (extras or {}).items():
        if rows:
            tables[name] = pd.DataFrame(rows)
    return {k: tables[k] for k in TABLE_ORDER if k in tables}


def _primary_key(role: str, mode: str) -> str:
    from dlmeval.robustness.calibration import PRIMARY, confidence_key

    return "choice/softmax" if mode == "likelihood" else confidence_key(*PRIMARY[role])


def calibration_tables(df: pd.DataFrame, spec: RobustSpec) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(calibration, calibration_ablation, reliability) from the per-item frame."""
    from dlmeval.robustness.calibration import AGGREGATIONS, BASES, calibration, confidence_key

    nb = spec.calibration.n_bins
    cal, abl, rel = [], [], []
    for (task, mode, model), g in df.groupby(["task", "mode", "model"], sort=False):
        role = g["role"].iloc[0]
        key = _primary_key(role, mode)
        splits = [("clean", g[g["condition"] == "clean"]), ("noisy", g[g["condition"] != "clean"])]
        splits += [(c, gc_) for c, gc_ in g[g["condition"] != "clean"].groupby("condition", sort=False)]
        base = {"task": task, "mode": mode, "model": model, "role": role}
        for split, gs in splits:
            if gs.empty:
                continue
            conf = [d.get(key, float("nan")) for d in gs["confidence"]]
            row = calibration(conf, gs["correct"].astype(bool).tolist(), n_bins=nb)
            cal.append({**base, "split": split, "confidence_def": key, **row.as_dict()})
            if split in ("clean", "noisy") and row.bins is not None:
                b = row.bins
                for i in range(len(b.count)):
                    rel.append(
                        {
                            **base,
                            "split": split,
                            "bin": i,
                            "lower": float(b.lower[i]),
                            "upper": float(b.upper[i]),
                            "confidence": float(b.confidence[i]),
                            "accuracy": float(b.accuracy[i]),
                            "count": int(b.count[i]),
                        }
                    )
        if mode != "generation":
            continue
        for split, gs in splits[:2]:
            if gs.empty:
                continue
            for basis in BASES:
                for agg in AGGREGATIONS:
                    k = confidence_key(basis, agg)
                    conf = [d.get(k, float("nan")) for d in gs["confidence"]]
                    row = calibration(conf, gs["correct"].astype(bool).tolist(), n_bins=nb)
                    abl.append({**base, "split": split, "basis": basis, "aggregation": agg, **row.as_dict()})
    return pd.DataFrame(cal), pd.DataFrame(abl), pd.DataFrame(rel)


def _guard_notes(guard: pd.DataFrame | None) -> list[str]:
    if guard is None or guard.empty:
        return []
    return [n for n in guard["note"] if n]


# ------------------------------------------------------------------------------------------------ output
def _fmt(v: Any, col: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        if math.isnan(v):
            return "—"
        if col in ("p_value", "wilcoxon_p"):
            return f"{v:.2g}" if v >= 1e-3 else "<0.001"
        return f"{v:.3f}"
    return str(v)


def markdown(name: str, df: pd.DataFrame) -> str:
    """One table as GitHub Markdown with its title. RDI-type columns of models that are not above chance on
    clean input print as ``n/m`` (not meaningful), never as a number."""
    title = TITLES.get(name, name)
    if df is None or df.empty:
        return f"### {title}\n\n(no rows)\n"
    view = df.copy()
    if name == "reliability":
        view = view[view["count"] > 0]
    guarded = {"rdi", "mean_rdi", "aurdi", "adv_rate", "mean_adv", "ci_lo", "ci_hi", "wilcoxon_p"}
    flag = (
        "meaningful"
        if "meaningful" in view.columns
        else ("above_chance" if "above_chance" in view.columns else None)
    )
    out = pd.DataFrame(index=view.index)
    for col in view.columns:
        vals = []
        for idx, v in view[col].items():
            if col in guarded and flag is not None and not bool(view.at[idx, flag]):
                vals.append("n/m")
            else:
                vals.append(_fmt(v, col))
        out[col] = vals
    body = out.to_markdown(index=False, disable_numparse=True)
    return f"### {title}\n\n{body}\n"


def write_tables(tables: Mapping[str, pd.DataFrame], out_dir: str | Path, header: str = "") -> Path:
    """Each table as ``<name>.csv`` and ``<name>.md`` in ``out_dir``, all of them (and the chance-guard notes) in
    ``tables.md``."""
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create output directory {d}: {e.strerror or e}") from None
    parts = [f"# {header}\n"] if header else []
    notes = _guard_notes(tables.get("guard"))
    if notes:
        parts.append("**Chance guard.** " + " ".join(f"\n\n* {n}" for n in notes) + "\n")
    for name in TABLE_ORDER:
        if name not in tables:
            continue
        df = tables[name]
        df.to_csv(d / f"{name}.csv", index=False)
        md = markdown(name, df)
        (d / f"{name}.md").write_text(md, encoding="utf-8")
        parts.append(md)
    (d / "tables.md").write_text("\n".join(parts), encoding="utf-8")
    return d


def plot_reliability(reliability: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """One reliability diagram per (task, mode): accuracy vs mean confidence per bin, clean (solid) and noisy
    (dashed), one colour per model; ``reliability_<task>_<mode>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    if reliability is None or reliability.empty:
        return paths
    for (task, mode), g in reliability.groupby(["task", "mode"], sort=False):
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
        for i, (model, gm) in enumerate(g.groupby("model", sort=False)):
            for split, ls in (("clean", "-"), ("noisy", "--")):
                gs = gm[(gm["split"] == split) & (gm["count"] > 0)]
                if len(gs):
                    ax.plot(
                        gs["confidence"],
                        gs["accuracy"],
                        ls=ls,
                        marker="o",
                        ms=3,
                        color=f"C{i}",
                        label=f"{model} ({split})",
                    )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{task} / {mode}")
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        p = Path(out_dir) / f"reliability_{task}_{mode}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(p)
    return paths


def load_tables(store, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables stored on a ``robust-spec`` (or ``robust``) run, in :data:`TABLE_ORDER`."""
    run = store.get_run(run_id)
    have = set(run.tables())
    return {n: run.get_table(n) for n in TABLE_ORDER if n in have}


__all__ = [
    "MODES",
    "RUN_KIND",
    "SPEC_KIND",
    "TABLE_ORDER",
    "ARGenSpec",
    "CalibrationSpec",
    "LikelihoodSpec",
    "ModelEntry",
    "PairSpec",
    "ProbeSpec",
    "RobustResult",
    "RobustSpec",
    "SamplerSpec",
    "StatsSpec",
    "TaskSpec",
    "all_tables",
    "calibration_tables",
    "load_spec",
    "load_tables",
    "markdown",
    "model_entries",
    "parse_spec",
    "plan",
    "plot_reliability",
    "record_key",
    "run_robust",
    "shipped_spec_path",
    "table_accuracy",
    "write_tables",
]
