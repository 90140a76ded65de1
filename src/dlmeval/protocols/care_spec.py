"""The Care sweep spec: a TOML or YAML file that names every factor of a Care run.

A spec is read by :func:`load_spec` (a path, or the name of a spec shipped in ``dlmeval/specs``: ``care-demo``,
``care-paper``, ``care-tiny``) into a frozen :class:`CareSpec`. Unknown keys, wrong types and impossible values are
refused with an :class:`~dlmeval.errors.InputError` naming the key. Layout (every table optional except ``sweep``)::

    name = "care-demo"
    seed = 0                                   # run seed: every draw derives from it
    preset = "cpu"                             # paper (64/128 tokens), cpu (32/64), tiny (8/16)

    [models]
    diffusion = ["default"]                    # model specs, one run per model
    evaluator = "default-ar"                   # external AR model for PPL (and featurizer = "ar")

    [generation]
    prefix_tokens = 64                         # overrides the preset
    gen_tokens = 128
    n_prompts = 100                            # prompts per cell
    sources = ["webtext"]                      # webtext (OpenWebText stand-in), lm1b
    batch_size = 16                            # rows per forward pass (does not change a number)
    block_length = 32                          # semi-autoregressive blocks (default: one block)
    suppress_eos = false                       # ban EOS ids while sampling (default: a row may end early)
    eos_rank_last = false                      # keep EOS but unmask it after every other position (LLaDA B.4)
    accounting = "paper"                       # paper: re-masked tokens cost real passes; refill: 1 per step

    [sweep]                                    # the full factorial: strategies x steps x temperatures x seeds
    strategies = ["none", "high_entropy"]
    steps = [64, 128]                          # nominal step counts
    temperatures = [0.0, 0.25]                 # unmask temperature (Gumbel noise scale; 0 = argmax)
    seeds = [1, 2, 3]
    remask_fraction = 0.15

    [compute_matched]                          # Table 4: strategies at equal actual NFE
    nfe = [128, 256]
    strategies = ["none", "random", "high_entropy"]
    temperatures = [0.0]
    seeds = [1]

    [dose_response]                            # Table 9: remask fraction sweep at one configuration
    strategy = "high_entropy"
    steps = 128
    temperature = 0.25
    fractions = [0.05, 0.15, 0.3]
    seeds = [1]

    [headline]                                 # Table 7 / bootstrap / leaderboard: the interaction gap
    baseline = "none"
    strategy = "high_entropy"
    steps = 128
    temperature = 0.25
    bootstrap_resamples = 10000

    [metrics]
    featurizer = "minilm"                      # MAUVE features: minilm, ar (the evaluator) or causal:PATH
    mauve_buckets = "auto"                     # or an integer (Care: 500)
    n_reference = 500                          # human reference texts per source
    reference_words = 96                       # reference texts are packed to this many words
    english_filter = true
    self_bleu_max = 200                        # Self-BLEU on at most this many texts (seeded subsample)

    [downstream]                               # generation-based tasks through the sampler
    strategies = ["none", "high_entropy"]
    steps = [128]
    nfe = []
    temperatures = [0.0]
    seeds = [1]
    humaneval = { n = 20, gen_tokens = 256, timeout_s = 10, memory_mb = 1024 }
    gsm8k = { n = 50, shots = 4, gen_tokens = 256 }
    arc = { n = 100, n_masks = 5, n_rates = 5 } # log-likelihood multiple choice (sampling-invariant check)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
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
    field_names,
    read_spec,
    shipped_spec_path,
)
from dlmeval.sampling.config import ACCOUNTINGS

SOURCES = ("webtext", "lm1b")
FEATURIZERS = ("minilm", "ar")
PRESETS: dict[str, dict[str, int]] = {
    "paper": {"prefix_tokens": 64, "gen_tokens": 128},
    "cpu": {"prefix_tokens": 32, "gen_tokens": 64},
    "tiny": {"prefix_tokens": 8, "gen_tokens": 16},
}
SHIPPED = ("care-demo", "care-paper", "care-tiny")


# ------------------------------------------------------------------------------------------------ the spec
@dataclass(frozen=True)
class GenerationSpec:
    prefix_tokens: int = 64
    gen_tokens: int = 128
    n_prompts: int = 100
    sources: tuple[str, ...] = ("webtext",)
    batch_size: int = 16
    block_length: int | None = None
    suppress_eos: bool = False
    eos_rank_last: bool = False
    accounting: str = "paper"


@dataclass(frozen=True)
class SweepSpec:
    strategies: tuple[str, ...] = ("none", "high_entropy")
    steps: tuple[int, ...] = (128,)
    temperatures: tuple[float, ...] = (0.0,)
    seeds: tuple[int, ...] = (1,)
    remask_fraction: float = 0.15


@dataclass(frozen=True)
class MatchedSpec:
    nfe: tuple[int, ...] = ()
    strategies: tuple[str, ...] = ()
    temperatures: tuple[float, ...] = (0.0,)
    seeds: tuple[int, ...] = (1,)


@dataclass(frozen=True)
class DoseSpec:
    strategy: str = "high_entropy"
    steps: int = 128
    temperature: float = 0.25
    fractions: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (1,)


@dataclass(frozen=True)
class HeadlineSpec:
    baseline: str = "none"
    strategy: str = "high_entropy"
    steps: int | None = None  # None: the largest swept step count
    temperature: float | None = None  # None: the largest swept temperature
    bootstrap_resamples: int = 10_000
    confidence: float = 0.95


@dataclass(frozen=True)
class MetricsSpec:
    featurizer: str = "minilm"
    mauve_buckets: int | str = "auto"
    n_reference: int = 500
    reference_words: int = 96
    english_filter: bool = True
    self_bleu_max: int = 200


@dataclass(frozen=True)
class HumanEvalSpec:
    n: int = 0
    gen_tokens: int = 256
    timeout_s: float = 10.0
    memory_mb: int = 1024


@dataclass(frozen=True)
class GSM8KSpec:
    n: int = 0
    shots: int = 4
    gen_tokens: int = 256


@dataclass(frozen=True)
class ARCSpec:
    n: int = 0
    n_masks: int = 5  # DiffScore conditional estimator: K masks over T rates (the fast preset by default)
    n_rates: int = 5


@dataclass(frozen=True)
class DownstreamSpec:
    strategies: tuple[str, ...] = ("none", "high_entropy")
    steps: tuple[int, ...] = (128,)
    nfe: tuple[int, ...] = ()
    temperatures: tuple[float, ...] = (0.0,)
    seeds: tuple[int, ...] = (1,)
    humaneval: HumanEvalSpec = field(default_factory=HumanEvalSpec)
    gsm8k: GSM8KSpec = field(default_factory=GSM8KSpec)
    arc: ARCSpec = field(default_factory=ARCSpec)

    @property
    def enabled(self) -> bool:
        return bool(self.humaneval.n or self.gsm8k.n or self.arc.n)


@dataclass(frozen=True)
class CareSpec:
    name: str
    seed: int = 0
    preset: str = "paper"
    models: tuple[str, ...] = ("default",)
    evaluator: str = "default-ar"
    generation: GenerationSpec = field(default_factory=GenerationSpec)
    sweep: SweepSpec = field(default_factory=SweepSpec)
    compute_matched: MatchedSpec = field(default_factory=MatchedSpec)
    dose_response: DoseSpec = field(default_factory=DoseSpec)
    headline: HeadlineSpec = field(default_factory=HeadlineSpec)
    metrics: MetricsSpec = field(default_factory=MetricsSpec)
    downstream: DownstreamSpec = field(default_factory=DownstreamSpec)
    path: str | None = field(default=None, compare=False)

    # ------------------------------------------------------------------ derived
    @property
    def headline_steps(self) -> int:
        return self.headline.steps if self.headline.steps is not None else max(self.sweep.steps)

    @property
    def headline_temperature(self) -> float:
        t = self.headline.temperature
        return t if t is not None else max(self.sweep.temperatures)

    def config(self, model: str | None = None) -> dict[str, Any]:
        """The part of the spec that decides the numbers (for run signatures): no batch size, no path, and the
        model list replaced by one ``model`` when given (one run per model)."""
        d = dataclasses.asdict(self)
        d.pop("path")
        d["generation"].pop("batch_size")
        d.pop("name")
        if model is not None:
            d.pop("models")
            d["model"] = model
        return d

    def replace(self, **changes: Any) -> CareSpec:
        return dataclasses.replace(self, **changes)


# ------------------------------------------------------------------------------------------------ parsing
def _strategy(v: Any, where: str) -> str:
    from dlmeval.sampling import STRATEGIES

    return as_str(v, where, tuple(STRATEGIES))


def parse_spec(raw: Mapping[str, Any], *, path: str | None = None, name: str | None = None) -> CareSpec:
    """A :class:`CareSpec` from the parsed TOML/YAML mapping (validated; see the module docstring)."""
    top = as_table(
        raw,
        "",
        {
            "name",
            "seed",
            "preset",
            "models",
            "generation",
            "sweep",
            "compute_matched",
            "dose_response",
            "headline",
            "metrics",
            "downstream",
        },
    )
    spec_name = as_str(top.get("name", name or "care"), "name")
    seed = as_int(top.get("seed", 0), "seed", minimum=0)
    preset = as_str(top.get("preset", "paper"), "preset", tuple(PRESETS))

    m = as_table(top.get("models"), "models", {"diffusion", "evaluator"})
    models = as_list(m.get("diffusion", ["default"]), "models.diffusion", as_str)
    evaluator = as_str(m.get("evaluator", "default-ar"), "models.evaluator")

    g = as_table(top.get("generation"), "generation", field_names(GenerationSpec))
    g = {**PRESETS[preset], **g}
    gen = GenerationSpec(
        prefix_tokens=as_int(g["prefix_tokens"], "generation.prefix_tokens", minimum=1),
        gen_tokens=as_int(g["gen_tokens"], "generation.gen_tokens", minimum=1),
        n_prompts=as_int(g.get("n_prompts", 100), "generation.n_prompts", minimum=2),
        sources=as_list(
            g.get("sources", ["webtext"]), "generation.sources", lambda v, w: as_str(v, w, SOURCES)
        ),
        batch_size=as_int(g.get("batch_size", 16), "generation.batch_size", minimum=1),
        block_length=as_int(g["block_length"], "generation.block_length", minimum=1)
        if "block_length" in g
        else None,
        suppress_eos=as_bool(g.get("suppress_eos", False), "generation.suppress_eos"),
        eos_rank_last=as_bool(g.get("eos_rank_last", False), "generation.eos_rank_last"),
        accounting=as_str(g.get("accounting", "paper"), "generation.accounting", ACCOUNTINGS),
    )
    if gen.suppress_eos and gen.eos_rank_last:
        raise InputError(
            "spec: generation.suppress_eos bans EOS and eos_rank_last keeps it ranked last: choose one"
        )
    if gen.block_length is not None and gen.gen_tokens % gen.block_length:
        raise InputError(
            f"spec: generation.block_length = {gen.block_length} does not divide gen_tokens = {gen.gen_tokens}"
        )

    if "sweep" not in top:
        raise InputError("spec: a [sweep] table is required (strategies, steps, temperatures, seeds)")
    s = as_table(top["sweep"], "sweep", field_names(SweepSpec))
    sweep = SweepSpec(
        strategies=as_list(s.get("strategies", ["none", "high_entropy"]), "sweep.strategies", _strategy),
        steps=as_list(s.get("steps", [128]), "sweep.steps", lambda v, w: as_int(v, w, minimum=1)),
        temperatures=as_list(
            s.get("temperatures", [0.0]), "sweep.temperatures", lambda v, w: as_float(v, w, lo=0.0)
        ),
        seeds=as_list(s.get("seeds", [1]), "sweep.seeds", lambda v, w: as_int(v, w, minimum=0)),
        remask_fraction=as_float(s.get("remask_fraction", 0.15), "sweep.remask_fraction", lo=0.0, hi=1.0),
    )

    c = as_table(top.get("compute_matched"), "compute_matched", field_names(MatchedSpec))
    matched = MatchedSpec(
        nfe=as_list(
            c.get("nfe", []), "compute_matched.nfe", lambda v, w: as_int(v, w, minimum=1), allow_empty=True
        ),
        strategies=as_list(
            c.get("strategies", list(sweep.strategies)), "compute_matched.strategies", _strategy
        ),
        temperatures=as_list(
            c.get("temperatures", [0.0]), "compute_matched.temperatures", lambda v, w: as_float(v, w, lo=0.0)
        ),
        seeds=as_list(
            c.get("seeds", [sweep.seeds[0]]), "compute_matched.seeds", lambda v, w: as_int(v, w, minimum=0)
        ),
    )

    d = as_table(top.get("dose_response"), "dose_response", field_names(DoseSpec))
    dose = DoseSpec(
        strategy=_strategy(d.get("strategy", "high_entropy"), "dose_response.strategy"),
        steps=as_int(d.get("steps", max(sweep.steps)), "dose_response.steps", minimum=1),
        temperature=as_float(
            d.get("temperature", max(sweep.temperatures)), "dose_response.temperature", lo=0.0
        ),
        fractions=as_list(
            d.get("fractions", []),
            "dose_response.fractions",
            lambda v, w: as_float(v, w, lo=0.0, hi=1.0),
            allow_empty=True,
        ),
        seeds=as_list(
            d.get("seeds", [sweep.seeds[0]]), "dose_response.seeds", lambda v, w: as_int(v, w, minimum=0)
        ),
    )

    h = as_table(top.get("headline"), "headline", field_names(HeadlineSpec))
    headline = HeadlineSpec(
        baseline=_strategy(h.get("baseline", "none"), "headline.baseline"),
        strategy=_strategy(h.get("strategy", "high_entropy"), "headline.strategy"),
        steps=as_int(h["steps"], "headline.steps", minimum=1) if "steps" in h else None,
        temperature=as_float(h["temperature"], "headline.temperature", lo=0.0)
        if "temperature" in h
        else None,
        bootstrap_resamples=as_int(
            h.get("bootstrap_resamples", 10_000), "headline.bootstrap_resamples", minimum=100
        ),
        confidence=as_float(h.get("confidence", 0.95), "headline.confidence", lo=0.5, hi=0.999),
    )
    for key, val in (("baseline", headline.baseline), ("strategy", headline.strategy)):
        if val not in sweep.strategies:
            raise InputError(
                f"spec: headline.{key} = {val!r} is not among sweep.strategies {list(sweep.strategies)}"
            )
    if headline.baseline == headline.strategy:
        raise InputError("spec: headline.baseline and headline.strategy must differ")
    if headline.steps is not None and headline.steps not in sweep.steps:
        raise InputError(
            f"spec: headline.steps = {headline.steps} is not among sweep.steps {list(sweep.steps)}"
        )
    if headline.temperature is not None and headline.temperature not in sweep.temperatures:
        raise InputError(
            f"spec: headline.temperature = {headline.temperature} is not among sweep.temperatures "
            f"{list(sweep.temperatures)}"
        )

    mt = as_table(top.get("metrics"), "metrics", field_names(MetricsSpec))
    buckets = mt.get("mauve_buckets", "auto")
    if buckets != "auto":
        buckets = as_int(buckets, "metrics.mauve_buckets", minimum=2)
    metrics = MetricsSpec(
        featurizer=_featurizer(mt.get("featurizer", "minilm")),
        mauve_buckets=buckets,
        n_reference=as_int(mt.get("n_reference", 500), "metrics.n_reference", minimum=2),
        reference_words=as_int(mt.get("reference_words", 96), "metrics.reference_words", minimum=1),
        english_filter=as_bool(mt.get("english_filter", True), "metrics.english_filter"),
        self_bleu_max=as_int(mt.get("self_bleu_max", 200), "metrics.self_bleu_max", minimum=2),
    )

    ds = as_table(top.get("downstream"), "downstream", field_names(DownstreamSpec))
    he = as_table(ds.get("humaneval"), "downstream.humaneval", field_names(HumanEvalSpec))
    gs = as_table(ds.get("gsm8k"), "downstream.gsm8k", field_names(GSM8KSpec))
    ar = as_table(ds.get("arc"), "downstream.arc", field_names(ARCSpec))
    downstream = DownstreamSpec(
        strategies=as_list(ds.get("strategies", list(sweep.strategies)), "downstream.strategies", _strategy),
        steps=as_list(
            ds.get("steps", [max(sweep.steps)]),
            "downstream.steps",
            lambda v, w: as_int(v, w, minimum=1),
            allow_empty=True,
        ),
        nfe=as_list(
            ds.get("nfe", []), "downstream.nfe", lambda v, w: as_int(v, w, minimum=1), allow_empty=True
        ),
        temperatures=as_list(
            ds.get("temperatures", [0.0]), "downstream.temperatures", lambda v, w: as_float(v, w, lo=0.0)
        ),
        seeds=as_list(
            ds.get("seeds", [sweep.seeds[0]]), "downstream.seeds", lambda v, w: as_int(v, w, minimum=0)
        ),
        humaneval=HumanEvalSpec(
            n=as_int(he.get("n", 0), "downstream.humaneval.n", minimum=0),
            gen_tokens=as_int(he.get("gen_tokens", 256), "downstream.humaneval.gen_tokens", minimum=1),
            timeout_s=as_float(he.get("timeout_s", 10.0), "downstream.humaneval.timeout_s", lo=0.1),
            memory_mb=as_int(he.get("memory_mb", 1024), "downstream.humaneval.memory_mb", minimum=64),
        ),
        gsm8k=GSM8KSpec(
            n=as_int(gs.get("n", 0), "downstream.gsm8k.n", minimum=0),
            shots=as_int(gs.get("shots", 4), "downstream.gsm8k.shots", minimum=0),
            gen_tokens=as_int(gs.get("gen_tokens", 256), "downstream.gsm8k.gen_tokens", minimum=1),
        ),
        arc=ARCSpec(
            n=as_int(ar.get("n", 0), "downstream.arc.n", minimum=0),
            n_masks=as_int(ar.get("n_masks", 5), "downstream.arc.n_masks", minimum=1),
            n_rates=as_int(ar.get("n_rates", 5), "downstream.arc.n_rates", minimum=1),
        ),
    )
    if (downstream.humaneval.n or downstream.gsm8k.n) and not (downstream.steps or downstream.nfe):
        raise InputError("spec: downstream needs steps or nfe budgets for its generation tasks")
    _check_sampler_settings(gen, sweep, matched, dose)

    return CareSpec(
        name=spec_name,
        seed=seed,
        preset=preset,
        models=models,
        evaluator=evaluator,
        generation=gen,
        sweep=sweep,
        compute_matched=matched,
        dose_response=dose,
        headline=headline,
        metrics=metrics,
        downstream=downstream,
        path=path,
    )


def _check_sampler_settings(gen, sweep, matched, dose) -> None:
    """Every (strategy, remask fraction) the spec samples with is one the sampler accepts (e.g. a fraction that
    would never re-mask under the paper accounting), so a bad spec fails before any run opens."""
    from dlmeval.sampling import SamplerConfig

    pairs = {(st, sweep.remask_fraction) for st in (*sweep.strategies, *matched.strategies)}
    pairs |= {(dose.strategy, f) for f in dose.fractions}
    for strategy, fraction in sorted(pairs):
        try:
            SamplerConfig(
                length=gen.gen_tokens,
                steps=gen.gen_tokens,
                block_length=gen.block_length,
                strategy=strategy,
                remask_fraction=fraction,
                accounting=gen.accounting,
            )
        except InputError as e:
            raise InputError(f"spec: {strategy} at remask fraction {fraction:g}: {e}") from None


def _featurizer(v: Any) -> str:
    v = as_str(v, "metrics.featurizer")
    if v not in FEATURIZERS and not v.startswith(("causal:", "default-ar", "tiny-causal")):
        raise InputError(
            f"spec: metrics.featurizer = {v!r}; use minilm, ar (the evaluator's hidden states) or a causal model "
            "spec such as causal:PATH (e.g. GPT-2 XL, the paper's MAUVE backbone)"
        )
    return v


def load_spec(ref: str | os.PathLike) -> CareSpec:
    """Read a spec from a ``.toml`` / ``.yaml`` / ``.yml`` file, or a shipped spec by name (``care-demo``)."""
    raw, p = read_spec(ref, SHIPPED)
    return parse_spec(raw, path=str(p), name=p.stem)


__all__ = [
    "ARCSpec",
    "CareSpec",
    "DoseSpec",
    "DownstreamSpec",
    "GSM8KSpec",
    "GenerationSpec",
    "HeadlineSpec",
    "HumanEvalSpec",
    "MatchedSpec",
    "MetricsSpec",
    "PRESETS",
    "SOURCES",
    "SweepSpec",
    "load_spec",
    "parse_spec",
    "shipped_spec_path",
]
