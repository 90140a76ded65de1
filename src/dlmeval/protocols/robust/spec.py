"""The robustness spec: frozen dataclasses whose fields carry their own validation (``spec_field``), read by the
one generic reader :func:`dlmeval.protocols.spec_io.read_dataclass`, so every default is written once.

Layout and keys: docs/robustness.md. Precedence of the DLM decoding settings for one (pair, task): the pair's
``sampler`` table over ``[dlm]``; the sampler's ``steps`` (when given) over the task's ``steps``; the task's
``gen_tokens`` / ``steps`` / ``max_new_tokens`` over the task's own defaults (128, GSM8K 512).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.spec_io import (
    as_bool,
    as_float,
    as_int,
    as_list,
    as_str,
    as_table,
    bool_check,
    float_check,
    int_check,
    list_check,
    read_dataclass,
    read_spec,
    spec_field,
    str_check,
)

MODES = ("generation", "likelihood")
ROLES = ("dlm", "ar")
SCOPES = ("prompt", "question")
EOS_MODES = ("keep", "ban", "rank_last")  # rank_last: LLaDA's App. B.4 trick (EOS ranked last, not banned)
SHIPPED = ("robust-demo", "robust-paper", "robust-tiny", "robust-mini", "robust-question")

#: The paper's 32 natural-noise conditions (Sec. 3.1), written out: a perturbation added to the registry later
#: does not change what ``[conditions] preset = "paper"`` runs.
PAPER_CONDITIONS: tuple[str, ...] = tuple(
    [f"char.{t}@{r}" for t in ("transposition", "deletion", "insertion", "keyboard", "homoglyph")
     for r in ("0.05", "0.10", "0.20", "0.30")]
    + [f"word.{t}@{r}" for t in ("deletion", "shuffle", "synonym", "repetition") for r in ("0.10", "0.20", "0.30")]
)  # fmt: skip
CONDITION_PRESETS = {"paper": PAPER_CONDITIONS}


def _strategies() -> tuple[str, ...]:
    from dlmeval.sampling import STRATEGIES

    return tuple(STRATEGIES)


def _schemes() -> tuple[str, ...]:
    from dlmeval.scoring.names import SCHEMES

    return SCHEMES


def _weightings() -> tuple[str, ...]:
    from dlmeval.scoring.names import WEIGHTINGS

    return WEIGHTINGS


def _aurdi_rules() -> tuple[str, ...]:
    from dlmeval.robustness.metrics import AURDI_RULES

    return tuple(AURDI_RULES)


_pos = int_check(1)
_pos_or_none = int_check(1, none=(0,))


# ================================================================================================ dataclasses
@dataclass(frozen=True)
class TaskSpec:
    name: str  # canonical task name (dlmeval.tasks.get_task)
    n: int = spec_field(200, _pos)
    modes: tuple[str, ...] = spec_field(("generation",), list_check(str_check(MODES)))
    gen_tokens: int | None = spec_field(None, _pos)  # DLM generation length (None: the task's, 128 / 512)
    steps: int | None = spec_field(None, _pos)  # DLM nominal steps (None: gen_tokens)
    max_new_tokens: int | None = spec_field(None, _pos)  # AR generation budget (None: gen_tokens)
    path: str | None = spec_field(None, str_check())  # a data file instead of the shipped one (same format)
    # a hub dataset id or a local save_to_disk directory / parquet / JSONL / CSV file (dlmeval.data.rows), its
    # split (None: the one with labels) and hub config
    source: str | None = spec_field(None, str_check())
    split: str | None = spec_field(None, str_check())
    config: str | None = spec_field(None, str_check())
    options: tuple[tuple[str, Any], ...] = ()  # the task's own options (Task.options, e.g. TriviaQA's match)

    def budget(self, sampler_steps: int | None = None) -> tuple[int, int]:
        """(DLM generation length, DLM nominal steps); ``sampler_steps``: a pair's steps, over the task's."""
        g = self.gen_tokens or self.task().max_new_tokens
        return g, sampler_steps or self.steps or g

    @property
    def ar_tokens(self) -> int:
        return self.max_new_tokens or self.budget()[0]

    def describe(self) -> str:
        """Where the task's items come from, one line (every table's data note)."""
        if self.source:
            return (
                self.source
                + (f" [{self.config}]" if self.config else "")
                + (f" split {self.split}" if self.split else "")
            )
        return f"file {self.path}" if self.path else "shipped stand-in"

    def data_source(self):
        """The :class:`~dlmeval.data.rows.DataSource` of ``source`` / ``split`` / ``config``."""
        from dlmeval.data.rows import DataSource

        return DataSource(self.source, self.split, self.config)

    def task(self):
        """The task object with this spec's options (``Task.configured``)."""
        from dlmeval.tasks import get_task

        return get_task(self.name).configured(**dict(self.options))


def _schedules() -> tuple[str, ...]:
    from dlmeval.sampling import SCHEDULES

    return tuple(SCHEDULES)


@dataclass(frozen=True)
class SamplerSpec:
    """DLM decoding settings (:class:`dlmeval.sampling.SamplerConfig`); ``batch_size`` (rows per forward pass) is
    in the run signature too: a padded row's numbers move in the last bits with its batch."""

    strategy: str = spec_field("none", str_check(_strategies))  # none = LLaDA's low-confidence unmasking
    block_length: int | None = spec_field(None, _pos_or_none)  # None / 0: one block
    steps: int | None = spec_field(None, _pos_or_none)  # nominal steps for every task (None: the task's)
    temperature: float = spec_field(0.0, float_check(0.0))
    top_p: float = spec_field(1.0, float_check(1e-6, 1.0))  # nucleus of the unmask distribution (Dream 0.95)
    remask_fraction: float = spec_field(0.15, float_check(0.0, 1.0))
    position_temperature: float = spec_field(0.0, float_check(0.0))  # Dream's alg_temp
    top_k: int | None = spec_field(
        None, int_check(1)
    )  # keep the k most likely tokens (Dream's top_k); None: off
    schedule: str | None = spec_field(None, str_check(_schedules))  # None: the family's own (Dream: "dream")
    suppress_eos: bool = spec_field(False, bool_check)  # ban EOS outright (= eos "ban")
    eos: str = spec_field("keep", str_check(EOS_MODES))  # keep, ban, rank_last (LLaDA "EOS suppression on")
    batch_size: int = spec_field(16, _pos)

    def __post_init__(self) -> None:
        from dlmeval.sampling import STRATEGIES

        if self.schedule == "dream" and self.strategy in STRATEGIES and STRATEGIES[self.strategy].remasks:
            raise InputError(
                f"spec: schedule = 'dream' is Dream's own loop, which never re-masks; {self.strategy} re-masks"
            )
        if self.suppress_eos and self.eos == "rank_last":
            raise InputError(
                "spec: suppress_eos = true bans EOS; it cannot be combined with eos = 'rank_last'"
            )

    @property
    def eos_mode(self) -> str:
        return "ban" if self.suppress_eos else self.eos


@dataclass(frozen=True)
class ARGenSpec:
    temperature: float = spec_field(0.0, float_check(0.0))
    top_p: float = spec_field(1.0, float_check(1e-6, 1.0))
    batch_size: int = spec_field(8, _pos)


@dataclass(frozen=True)
class LikelihoodSpec:
    n_masks: int = spec_field(5, _pos)  # DiffScore K (the fast preset)
    n_rates: int = spec_field(5, _pos)  # DiffScore T
    scheme: str = spec_field("balanced", str_check(_schemes))
    weighting: str = spec_field("mlp", str_check(_weightings))
    ar_aggregate: str = spec_field("mean", str_check(("mean", "sum")))  # AR option score over its tokens


@dataclass(frozen=True)
class CalibrationSpec:
    n_bins: int = spec_field(15, _pos)
    commit_top_k: int = spec_field(32, _pos)  # top-k kept per masked position for commit-time probabilities
    # DLM answer confidence (Eq. 4): "unmasked" one pass, nothing masked (default, as run so far); "masked" each
    # answer token masked in turn (p(y_i | y_\i) read literally); "kmask" the K-mask estimate (confidence_masks
    # random groups, one masked per pass). docs/robustness.md
    confidence: str = spec_field("unmasked", str_check(("unmasked", "masked", "kmask")))
    confidence_masks: int = spec_field(8, _pos)
    plots: bool = spec_field(True, bool_check)  # reliability diagrams and the other figures as PNG


@dataclass(frozen=True)
class StatsSpec:
    bootstrap_resamples: int = spec_field(10_000, int_check(100))
    confidence: float = spec_field(0.95, float_check(0.5, 0.999))
    alpha: float = spec_field(0.05, float_check(1e-6, 0.5))  # chance guard level
    aurdi_rule: str = spec_field("riemann", str_check(_aurdi_rules))


@dataclass(frozen=True)
class ProbeSpec:
    """One optional probe (a registered :class:`~dlmeval.protocols.robust.probes.Probe`): run when ``enabled``
    on ``tasks``; ``options`` go to the probe (its ``options`` keys; docs/robustness.md)."""

    enabled: bool = False
    tasks: tuple[str, ...] = ("arc_challenge",)
    n: int = 20
    conditions: tuple[str, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def task(self) -> str:
        return self.tasks[0]

    def kwargs(self) -> dict[str, Any]:
        return {k: thaw(v) for k, v in self.options}


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
    probes_: tuple[tuple[str, ProbeSpec], ...] = ()  # every probe table of the spec, by probe name
    # the clean condition under a sampling DLM (Dream: tau = 0.2): "once" (seed None, the paper as read) or
    # "per_seed" (one clean pass per perturbation seed, its sampler seed derived from it; pooled in the tables)
    clean_seeds: str = "once"
    #: the paper's values of the cells the spec fills (:mod:`dlmeval.protocols.published`); decide no number
    published: tuple = field(default=(), compare=False)
    path: str | None = field(default=None, compare=False)

    def replace(self, **changes: Any) -> RobustSpec:
        return dataclasses.replace(self, **changes)

    def probe(self, name: str) -> ProbeSpec:
        return dict(self.probes_).get(name, ProbeSpec())

    # the three probes of the paper by name (what earlier code and tests read)
    ipm = property(lambda self: self.probe("ipm"))
    dgcg = property(lambda self: self.probe("dgcg"))
    probes = property(lambda self: self.probe("probes"))

    def task(self, name: str) -> TaskSpec:
        for t in self.tasks:
            if t.name == name:
                return t
        raise InputError(f"spec: no task {name!r} (tasks: {', '.join(t.name for t in self.tasks)})")

    def task_or_default(self, name: str) -> TaskSpec:
        """The spec's settings of a task, or the task's defaults for one only a probe uses."""
        return next((t for t in self.tasks if t.name == name), TaskSpec(name))

    def sampler_for(self, pair: PairSpec) -> SamplerSpec:
        return (
            read_dataclass(SamplerSpec, dict(pair.sampler), "sampler", base=self.dlm)
            if pair.sampler
            else self.dlm
        )

    def config(self) -> dict[str, Any]:
        from dlmeval.protocols.robust.keys import spec_config

        return spec_config(self)

    def model_config(self, entry, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
        from dlmeval.protocols.robust.keys import model_config

        return model_config(self, entry, data)


def thaw(v: Any) -> Any:
    if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: thaw(x) for k, x in v}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v


def freeze(v: Any) -> Any:
    if isinstance(v, Mapping):
        return tuple(sorted((str(k), freeze(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    return v


# ================================================================================================ parsing
def condition_key(v: Any, where: str) -> str:
    from dlmeval.robustness import Perturbation

    try:
        return Perturbation.from_key(as_str(v, where)).key
    except InputError as e:
        raise InputError(f"spec: {where}: {e}") from None


def condition_keys(c: Mapping[str, Any]) -> tuple[str, ...]:
    """``[conditions]``: ``preset = "paper"`` (the frozen 32), ``keys = [...]``, or ``types`` / ``rates`` over
    the registry (``types = "all"``: every registered type, which grows with the registry)."""
    from dlmeval.robustness import conditions

    given = [k for k in ("preset", "keys") if k in c] + (
        ["types/rates"] if "types" in c or "rates" in c else []
    )
    if len(given) > 1:
        raise InputError(
            f"spec: [conditions] takes either keys, types/rates or a preset, not {' and '.join(given)}"
        )
    if "preset" in c:
        return CONDITION_PRESETS[as_str(c["preset"], "conditions.preset", tuple(CONDITION_PRESETS))]
    if "keys" in c:
        return as_list(c["keys"], "conditions.keys", condition_key)
    if not c:
        return PAPER_CONDITIONS
    types = c.get("types", "all")
    names = None if types == "all" or types == ["all"] else list(as_list(types, "conditions.types", as_str))
    rates = None
    if "rates" in c:
        rates = list(as_list(c["rates"], "conditions.rates", lambda v, w: as_float(v, w, lo=0.0, hi=1.0)))
        if any(r == 0 for r in rates):
            raise InputError("spec: conditions.rates must be > 0 (the clean condition is always run)")
    try:
        return tuple(p.key for p in conditions(names, rates))
    except InputError as e:
        raise InputError(f"spec: conditions: {e}") from None


def _task(tname: str, traw: Any) -> TaskSpec:
    from dlmeval.tasks import get_task

    task = get_task(tname)
    w = f"tasks.{tname}"
    t = as_table(traw, w, None)
    opts = {k: t.pop(k) for k in list(t) if k in task.options}
    try:
        configured = task.configured(**opts)
    except InputError as e:
        raise InputError(f"spec: {w}: {e}") from None
    ts = read_dataclass(TaskSpec, t, w, skip=("options",), name=task.name, options=freeze(opts))
    if ts.path and ts.source:
        raise InputError(f"spec: {w}: give path (a file in the shipped format) or source, not both")
    if (ts.split or ts.config) and not ts.source:
        raise InputError(f"spec: {w}: split and config apply to a source (a hub id or a local dataset)")
    if "likelihood" in ts.modes and not configured.multiple_choice:
        raise InputError(f"spec: {w}: likelihood mode needs a multiple-choice task (arc_challenge)")
    return ts


def _check_budget(ts: TaskSpec, sampler: SamplerSpec, where: str) -> None:
    gen, steps = ts.budget(sampler.steps)
    bl = sampler.block_length
    if "generation" in ts.modes and bl is not None and (gen % bl or steps < gen // bl):
        raise InputError(
            f"spec: {where}: block_length {bl} must divide gen_tokens {gen} and steps {steps} must be "
            f"at least the number of blocks ({gen // bl if gen % bl == 0 else '?'})"
        )


def parse_pairs(raw_pairs: Any, dlm: SamplerSpec) -> tuple[PairSpec, ...]:
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
        sampler = as_table(p.get("sampler"), f"{w}.sampler", None)
        read_dataclass(SamplerSpec, sampler, f"{w}.sampler", base=dlm, skip=("batch_size",))  # validates
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
    return tuple(pairs)


def _probe(name: str, raw: Any, tasks: Sequence[TaskSpec]) -> ProbeSpec:
    from dlmeval.protocols.robust.probes import PROBES
    from dlmeval.tasks import get_task

    cls = PROBES[name]
    p = as_table(raw, name, {"enabled", "task", "tasks", "n", "conditions", *cls.options})
    if not p:
        return ProbeSpec()
    if "task" in p and "tasks" in p:
        raise InputError(f"spec: [{name}] takes task or tasks, not both")
    default = [tasks[0].name] if tasks else ["arc_challenge"]
    raw_tasks = p.pop("tasks", p.pop("task", default))
    tnames = tuple(get_task(t).name for t in as_list(raw_tasks, f"{name}.tasks", as_str))
    conds = as_list(p.pop("conditions"), f"{name}.conditions", condition_key) if "conditions" in p else ()
    spec = ProbeSpec(
        enabled=as_bool(p.pop("enabled", True), f"{name}.enabled"),
        tasks=tnames,
        n=as_int(p.pop("n", 20), f"{name}.n", minimum=1),
        conditions=conds,
        options=freeze(p),
    )
    cls.validate(spec, name)
    return spec


TOP_KEYS = {
    "name", "seed", "perturbation_seeds", "scope", "pairs", "conditions", "tasks",
    "dlm", "ar", "likelihood", "calibration", "stats", "clean_seeds", "published",
}  # fmt: skip
CLEAN_SEEDS = ("once", "per_seed")


def _published(raw: Any) -> tuple:
    from dlmeval.protocols.published import parse_entries

    return parse_entries(raw)


def parse_spec(raw: Mapping[str, Any], *, path: str | None = None, name: str | None = None) -> RobustSpec:
    """A :class:`RobustSpec` from a parsed TOML/YAML mapping (validated; layout in docs/robustness.md)."""
    from dlmeval.protocols.robust.probes import PROBES

    top = as_table(raw, "", TOP_KEYS | set(PROBES))
    dlm = read_dataclass(SamplerSpec, top.get("dlm"), "dlm")
    pairs = parse_pairs(top.get("pairs", [{"dlm": "default", "ar": "default-ar"}]), dlm)
    raw_tasks = as_table(top.get("tasks"), "tasks", None)
    if not raw_tasks:
        raise InputError("spec: a [tasks.<name>] table is needed (arc_challenge, gsm8k, triviaqa)")
    tasks = [_task(k, v) for k, v in raw_tasks.items()]
    if len({t.name for t in tasks}) != len(tasks):
        raise InputError("spec: a task appears twice (aliases such as arc and arc_challenge are one task)")
    spec = RobustSpec(
        name=as_str(top.get("name", name or "robust"), "name"),
        seed=as_int(top.get("seed", 0), "seed", minimum=0),
        perturbation_seeds=as_list(
            top.get("perturbation_seeds", [0]), "perturbation_seeds", lambda v, w: as_int(v, w, minimum=0)
        ),
        scope=as_str(top.get("scope", "prompt"), "scope", SCOPES),
        clean_seeds=as_str(top.get("clean_seeds", "once"), "clean_seeds", CLEAN_SEEDS),
        pairs=pairs,
        conditions=condition_keys(
            as_table(top.get("conditions"), "conditions", {"preset", "types", "rates", "keys"})
        ),
        tasks=tuple(tasks),
        dlm=dlm,
        ar=read_dataclass(ARGenSpec, top.get("ar"), "ar"),
        likelihood=read_dataclass(LikelihoodSpec, top.get("likelihood"), "likelihood"),
        calibration=read_dataclass(CalibrationSpec, top.get("calibration"), "calibration"),
        stats=read_dataclass(StatsSpec, top.get("stats"), "stats"),
        probes_=tuple((n, _probe(n, top.get(n), tasks)) for n in PROBES if n in top),
        published=_published(top.get("published")),
        path=path,
    )
    for p in pairs:
        s = spec.sampler_for(p)
        for ts in tasks:
            _check_budget(ts, s, f"tasks.{ts.name} ({p.name})")
    return spec


def load_spec(ref: str | os.PathLike) -> RobustSpec:
    """Read a spec from a ``.toml`` / ``.yaml`` / ``.yml`` file, or a shipped spec by name (``robust-demo``)."""
    raw, p = read_spec(ref, SHIPPED)
    return parse_spec(raw, path=str(p), name=p.stem)


def with_models(
    spec: RobustSpec,
    *,
    dlm: str | None = None,
    ar: str | None = None,
    pair: str | None = None,
    sampler: str | Mapping[str, Any] | None = None,
) -> RobustSpec:
    """The spec with one pair's models replaced (the CLI's ``--dlm`` / ``--ar``), keeping only that pair.

    ``pair``: the label of the pair to take (needed when the spec has several). A replaced DLM must be told its
    sampler: ``sampler = "pair"`` keeps the pair's decoding settings, ``"spec"`` takes ``[dlm]`` alone, a mapping
    gives the settings (overrides of ``[dlm]``). Only when the pair sets no sampler of its own may it be left out.
    """
    if not (dlm or ar):
        if sampler is not None:
            raise InputError("a sampler for the DLM is given, but no --dlm replaces one")
        return spec
    if pair is None:
        if len(spec.pairs) > 1:
            raise InputError(
                f"spec {spec.name} has {len(spec.pairs)} pairs; say which one the models replace with --pair "
                f"({', '.join(repr(p.name) for p in spec.pairs)})"
            )
        chosen = spec.pairs[0]
    else:
        chosen = next((p for p in spec.pairs if p.name == pair), None)
        if chosen is None:
            raise InputError(
                f"no pair {pair!r} in spec {spec.name} ({', '.join(repr(p.name) for p in spec.pairs)})"
            )
    overrides = chosen.sampler
    if dlm:
        if sampler is None and chosen.sampler:
            raise InputError(
                f"--dlm replaces the DLM of pair {chosen.name!r}, whose sampler is {dict(chosen.sampler)}; say which "
                "sampler the new model gets: --dlm-sampler pair (keep it), --dlm-sampler spec ([dlm] only) or "
                "--dlm-sampler '{strategy = \"entropy\", steps = 512}'"
            )
        if sampler == "spec":
            overrides = ()
        elif isinstance(sampler, Mapping):
            t = as_table(sampler, "--dlm-sampler", None)
            read_dataclass(SamplerSpec, t, "--dlm-sampler", base=spec.dlm, skip=("batch_size",))
            overrides = tuple(sorted(t.items()))
        elif sampler not in (None, "pair"):
            raise InputError(f"--dlm-sampler must be pair, spec or a TOML table, got {sampler!r}")
    elif sampler is not None:
        raise InputError("--dlm-sampler needs --dlm (the sampler belongs to the replaced DLM)")
    new = PairSpec(dlm or chosen.dlm, ar or chosen.ar, "", overrides)
    out = spec.replace(pairs=(new,))
    s = out.sampler_for(new)
    for ts in out.tasks:
        _check_budget(ts, s, f"tasks.{ts.name} ({new.name})")
    return out
