"""The Care sweep spec: a TOML or YAML file that names every factor of a Care run.

A spec is read by :func:`load_spec` (a path, or the name of a spec shipped in ``dlmeval/specs``: ``care-demo``,
``care-paper``, ``care-tiny``) into a frozen :class:`CareSpec`. Unknown keys, wrong types and impossible values are
refused with an :class:`~dlmeval.errors.InputError` naming the key. Each key is declared once, on its dataclass
field: its default and its check (``spec_field``), read by the one generic reader
:func:`dlmeval.protocols.spec_io.read_dataclass`; the defaults that follow another table (the preset's lengths,
``compute_matched`` / ``dose_response`` / ``downstream`` following ``[sweep]``) are written once, in
:data:`PRESETS` and :func:`following`. Layout (every table optional except ``sweep``)::

    name = "care-demo"
    seed = 0                                   # run seed: every draw derives from it
    preset = "cpu"                             # paper (64/128 tokens), cpu (32/64), tiny (8/16)

    [models]
    diffusion = ["default"]                    # model specs, one run per model
    evaluator = "default-ar"                   # external AR model for PPL (and featurizer = "ar")

    [models."default"]                         # optional, per model: its sampler settings
    strategies = { none = "entropy" }          # (dlmeval.protocols.model_overrides: strategies, alg_temp,
    top_p = 0.95                               #  top_k, top_p, temperature, schedule)

    [generation]
    prefix_tokens = 64                         # overrides the preset
    gen_tokens = 128
    n_prompts = 100                            # prompts per cell
    sources = ["webtext"]                      # corpus names: webtext (OpenWebText stand-in), lm1b, openwebtext,
                                               # or any [corpora.<name>]; [] runs the downstream checks only
    resample_prompts = false                   # true: each seed draws its own prompts (default: the paper's
                                               # reading, the same prompts for every seed)
    batch_size = 16                            # rows per forward pass (in the run signature: see config)
    block_length = 32                          # semi-autoregressive blocks (default: one block)
    suppress_eos = false                       # ban EOS ids while sampling (default: a row may end early)
    eos_rank_last = false                      # keep EOS but unmask it after every other position (LLaDA B.4)
    accounting = "paper"                       # paper: re-masked tokens cost real passes; refill: 1 per step

    [corpora.webtext]                          # where a corpus's texts come from (default: the shipped stand-in)
    source = "Skylion007/openwebtext"          # a hub id (--allow-download) or a save_to_disk dir / parquet /
    split = "train[:20000]"                    # JSONL / CSV file; split (datasets slicing works), config,
    field = "text"                             # the text field, style = "documents" | "sentences" (LM1B:
    limit = 20000                              # consecutive sentences joined), limit = rows read

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
    mauve_buckets = "auto"                     # MAUVE clusters: auto = n / 10 (the MAUVE paper) or an integer
    mauve_samples = 500                        # generations per cell MAUVE compares (seeded subsample; default:
                                               # all accepted). Care's "K = 500": read as 500 samples (docs/care.md)
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
    humaneval = { n = 20, gen_tokens = 256, timeout_s = 10, memory_mb = 1024 }  # gen_tokens may be a list
    gsm8k = { n = 50, shots = 4, gen_tokens = 256 }  # exemplars: the source's train split when it has one
    arc = { n = 100, n_masks = 5, n_rates = 5 } # log-likelihood multiple choice (sampling-invariant check)
    hellaswag = { n = 0, source = "Rowan/hellaswag" }    # log-likelihood checks (a source is required)
    bbh = { n = 0, source = "lukaemon/bbh", configs = ["boolean_expressions"] }
    # every task takes source / split / config (default: the shipped stand-in)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.model_overrides import NO_OVERRIDE, ModelOverride, read_overrides
from dlmeval.protocols.spec_io import (
    as_int,
    as_str,
    as_table,
    bool_check,
    float_check,
    int_check,
    list_check,
    read_dataclass,
    read_fields,
    read_spec,
    shipped_spec_path,
    spec_field,
    str_check,
    table_field,
)
from dlmeval.sampling.config import ACCOUNTINGS

SOURCES = ("webtext", "lm1b", "openwebtext")  # the built-in corpus names (CORPORA)
STYLES = ("documents", "sentences")
FEATURIZERS = ("minilm", "ar")
PRESETS: dict[str, dict[str, int]] = {
    "paper": {"prefix_tokens": 64, "gen_tokens": 128},
    "cpu": {"prefix_tokens": 32, "gen_tokens": 64},
    "tiny": {"prefix_tokens": 8, "gen_tokens": 16},
}
SHIPPED = ("care-demo", "care-paper", "care-tiny", "care-strategies", "care-instruct")


def _strategies() -> tuple[str, ...]:
    from dlmeval.sampling import STRATEGIES

    return tuple(STRATEGIES)


def _is_causal_spec(v: str) -> bool:
    """Whether ``v`` names an autoregressive model (a registered family of kind ``causal``)."""
    from dlmeval.models.family import family_for_spec

    try:
        return family_for_spec(v)[0].kind == "causal"
    except InputError:
        return False


def _featurizer(v: Any, at: str) -> str:
    v = as_str(v, at)
    if v not in FEATURIZERS and not _is_causal_spec(v):
        raise InputError(
            f"spec: {at} = {v!r}; use minilm, ar (the evaluator's hidden states) or a causal model "
            "spec such as causal:PATH (e.g. GPT-2 XL, the paper's MAUVE backbone)"
        )
    return v


def _buckets(v: Any, at: str) -> int | str:
    return v if v == "auto" else as_int(v, at, minimum=2)


_pos = int_check(1)
_count = int_check(0)
_strategy = str_check(_strategies)
_strategy_list = list_check(_strategy)
_steps_list = list_check(_pos)
_budgets = list_check(_pos, allow_empty=True)
_temperatures = list_check(float_check(0.0))
_seeds = list_check(int_check(0))


# ------------------------------------------------------------------------------------------------ the spec
_opt_str = str_check()


@dataclass(frozen=True)
class CorpusSpec:
    """``[corpora.<name>]``: where a corpus's texts come from. ``source`` None: the shipped stand-in of a
    built-in name (webtext, lm1b). ``style``: ``documents`` (a prompt is one text cut at the prefix length;
    OpenWebText) or ``sentences`` (consecutive texts joined until long enough; LM1B). ``limit``: rows read.
    ``sample`` / ``sample_seed``: a fixed held-out slice of ``sample`` documents chosen by index with that seed
    (:func:`dlmeval.data.hub.sample_indices`; OpenWebText has only a train split), recorded in the run."""

    source: str | None = spec_field(None, _opt_str)
    split: str | None = spec_field(None, _opt_str)
    config: str | None = spec_field(None, _opt_str)
    field: str = spec_field("text", _opt_str)
    style: str = spec_field("documents", str_check(STYLES))
    limit: int | None = spec_field(None, int_check(2))
    sample: int | None = spec_field(None, int_check(2))
    sample_seed: int = spec_field(0, int_check(0))

    def describe(self) -> str:
        """Where the texts come from, one line (the plan and every table's source note)."""
        if self.source is None:
            return "shipped stand-in"
        out = (
            self.source
            + (f" [{self.config}]" if self.config else "")
            + (f" split {self.split}" if self.split else "")
        )
        if self.limit:
            out += f", first {self.limit} rows"
        if self.sample:
            out += (
                f", held-out slice: {self.sample} documents drawn by index with seed {self.sample_seed} "
                "(sorted numpy default_rng(seed).choice(rows, n, replace=False))"
            )
        return out

    def data_source(self):
        from dlmeval.data.rows import DataSource

        return DataSource(self.source, self.split, self.config)


#: the built-in corpora (a spec's [corpora.<name>] replaces or adds one)
CORPORA: dict[str, CorpusSpec] = {
    "webtext": CorpusSpec(style="documents"),
    "lm1b": CorpusSpec(style="sentences"),
    # OpenWebText has only a train split: the paper's corpus is a fixed held-out slice of it, 10,000 documents
    # drawn by index with seed 0 (first half: prompts; second half: MAUVE references)
    "openwebtext": CorpusSpec(
        source="Skylion007/openwebtext", split="train", style="documents", sample=10_000, sample_seed=0
    ),
}
#: the corpus of the paper a shipped stand-in takes the place of (named by the plan and the tables)
STANDS_IN_FOR = {"webtext": "openwebtext"}


@dataclass(frozen=True)
class ModelsSpec:
    """The ``[models]`` table as written (:class:`CareSpec` keeps its two values flat: ``models``, ``evaluator``)."""

    diffusion: tuple[str, ...] = spec_field(("default",), list_check(str_check()))
    evaluator: str = spec_field("default-ar", str_check())


@dataclass(frozen=True)
class GenerationSpec:
    # prefix_tokens / gen_tokens: the "paper" preset; a spec's preset replaces both (PRESETS)
    prefix_tokens: int = spec_field(PRESETS["paper"]["prefix_tokens"], _pos)
    gen_tokens: int = spec_field(PRESETS["paper"]["gen_tokens"], _pos)
    n_prompts: int = spec_field(100, int_check(2))
    sources: tuple[str, ...] = spec_field(("webtext",), list_check(str_check(), allow_empty=True))
    batch_size: int = spec_field(16, _pos)
    block_length: int | None = spec_field(None, _pos)
    suppress_eos: bool = spec_field(False, bool_check)
    eos_rank_last: bool = spec_field(False, bool_check)
    accounting: str = spec_field("paper", str_check(ACCOUNTINGS))
    resample_prompts: bool = spec_field(False, bool_check)  # true: per-seed prompts (docs/care.md)


@dataclass(frozen=True)
class SweepSpec:
    strategies: tuple[str, ...] = spec_field(("none", "high_entropy"), _strategy_list)
    steps: tuple[int, ...] = spec_field((128,), _steps_list)
    temperatures: tuple[float, ...] = spec_field((0.0,), _temperatures)
    seeds: tuple[int, ...] = spec_field((1,), _seeds)
    remask_fraction: float = spec_field(0.15, float_check(0.0, 1.0))


def following(sweep: SweepSpec) -> dict[str, dict[str, Any]]:
    """The defaults that follow ``[sweep]``, per table and field: written once, here. A parsed spec takes them
    from its own sweep; the dataclass defaults of these fields are them under the default sweep."""
    first = sweep.seeds[:1]
    top = max(sweep.steps)
    return {
        "compute_matched": {"strategies": sweep.strategies, "seeds": first},
        "dose_response": {"steps": top, "temperature": max(sweep.temperatures), "seeds": first},
        "downstream": {"strategies": sweep.strategies, "steps": (top,), "seeds": first},
    }


_FOLLOW = following(SweepSpec())
_M, _D, _S = _FOLLOW["compute_matched"], _FOLLOW["dose_response"], _FOLLOW["downstream"]


@dataclass(frozen=True)
class MatchedSpec:
    nfe: tuple[int, ...] = spec_field((), _budgets)
    strategies: tuple[str, ...] = spec_field(_M["strategies"], _strategy_list)  # follows the sweep
    temperatures: tuple[float, ...] = spec_field((0.0,), _temperatures)
    seeds: tuple[int, ...] = spec_field(_M["seeds"], _seeds)  # follows the sweep


@dataclass(frozen=True)
class DoseSpec:
    strategy: str = spec_field("high_entropy", _strategy)
    steps: int = spec_field(_D["steps"], _pos)  # follows the sweep
    temperature: float = spec_field(_D["temperature"], float_check(0.0))  # follows the sweep
    fractions: tuple[float, ...] = spec_field((), list_check(float_check(0.0, 1.0), allow_empty=True))
    seeds: tuple[int, ...] = spec_field(_D["seeds"], _seeds)  # follows the sweep


@dataclass(frozen=True)
class HeadlineSpec:
    baseline: str = spec_field("none", _strategy)
    strategy: str = spec_field("high_entropy", _strategy)
    steps: int | None = spec_field(None, _pos)  # None: the largest swept step count
    temperature: float | None = spec_field(None, float_check(0.0))  # None: the largest swept temperature
    bootstrap_resamples: int = spec_field(10_000, int_check(100))
    confidence: float = spec_field(0.95, float_check(0.5, 0.999))


@dataclass(frozen=True)
class MetricsSpec:
    featurizer: str = spec_field("minilm", _featurizer)
    mauve_buckets: int | str = spec_field("auto", _buckets)  # MAUVE's number of clusters
    mauve_samples: int | None = spec_field(None, int_check(2))  # generations per cell in MAUVE (None: all)
    n_reference: int = spec_field(500, int_check(2))
    reference_words: int = spec_field(96, _pos)
    english_filter: bool = spec_field(True, bool_check)
    self_bleu_max: int = spec_field(200, int_check(2))


def _lengths(v: Any, at: str) -> int | tuple[int, ...]:
    """One generation length, or a list of them (each its own task rows: ``humaneval@128``)."""
    if isinstance(v, list | tuple):
        out = _steps_list(v, at)
        return out[0] if len(out) == 1 else out
    return as_int(v, at, minimum=1)


@dataclass(frozen=True)
class _Source:
    """Where a downstream task's items come from (default: the shipped stand-in; dlmeval.data.rows)."""

    source: str | None = spec_field(None, _opt_str)
    split: str | None = spec_field(None, _opt_str)
    config: str | None = spec_field(None, _opt_str)

    def data_source(self, config: str | None = None):
        from dlmeval.data.rows import DataSource

        return DataSource(self.source, self.split, config or self.config)


@dataclass(frozen=True)
class HumanEvalSpec(_Source):
    n: int = spec_field(0, _count)
    gen_tokens: int | tuple[int, ...] = spec_field(256, _lengths)
    timeout_s: float = spec_field(10.0, float_check(0.1))
    memory_mb: int = spec_field(1024, int_check(64))

    @property
    def lengths(self) -> tuple[int, ...]:
        return self.gen_tokens if isinstance(self.gen_tokens, tuple) else (self.gen_tokens,)


@dataclass(frozen=True)
class GSM8KSpec(_Source):
    n: int = spec_field(0, _count)
    shots: int = spec_field(4, _count)
    gen_tokens: int = spec_field(256, _pos)
    # the split the exemplars come from when the source has it (lm-eval: train); otherwise the last `shots`
    # items of the evaluated split stand in and leave the pool (stated in the plan and the run warnings)
    exemplar_split: str = spec_field("train", _opt_str)


#: how a log-likelihood check scores an option (docs/care.md): ``diffscore``, dlmeval's reading (the conditional
#: DiffScore mean log-probability); ``llada``, LLaDA's lm-eval harness, where the paper's "reported" values come from
LIKELIHOODS = ("diffscore", "llada")


@dataclass(frozen=True)
class ARCSpec(_Source):
    n: int = spec_field(0, _count)
    # DiffScore conditional estimator: K masks over T rates (the fast preset by default)
    n_masks: int = spec_field(5, _pos)
    n_rates: int = spec_field(5, _pos)
    # likelihood = "llada": lm-eval's token split, LLaDA's Monte Carlo ELBO of mc_num rows in passes of mc_batch
    # (eval_llada.py: 128 and 32), guidance cfg, the family's vocabulary rule; argmax of the sum (lm-eval's acc)
    likelihood: str = spec_field("diffscore", str_check(LIKELIHOODS))
    mc_num: int = spec_field(128, _pos)
    mc_batch: int = spec_field(32, _pos)
    cfg: float = spec_field(0.0, float_check(0.0))


@dataclass(frozen=True)
class HellaSwagSpec(ARCSpec):
    """HellaSwag by log-likelihood (the Care paper's sanity check); no stand-in ships: ``source`` is needed."""


@dataclass(frozen=True)
class BBHSpec(ARCSpec):
    """BBH by log-likelihood over each subtask's distinct targets; ``configs``: the subtasks (hub configs) read,
    ``n`` items from each."""

    configs: tuple[str, ...] = spec_field(("boolean_expressions",), list_check(str_check()))


#: the log-likelihood checks of [downstream] (unit keys down/<task>; ARC keeps its key "arc")
LOGLIK_TASKS = ("arc", "hellaswag", "bbh")


@dataclass(frozen=True)
class DownstreamSpec:
    strategies: tuple[str, ...] = spec_field(
        ("none", "high_entropy"), _strategy_list
    )  # follows: sweep.strategies
    steps: tuple[int, ...] = spec_field(
        (128,), list_check(_pos, allow_empty=True)
    )  # follows: the largest sweep steps
    nfe: tuple[int, ...] = spec_field((), _budgets)
    temperatures: tuple[float, ...] = spec_field((0.0,), _temperatures)
    seeds: tuple[int, ...] = spec_field((1,), _seeds)  # follows: the first sweep seed
    humaneval: HumanEvalSpec = table_field(HumanEvalSpec)
    gsm8k: GSM8KSpec = table_field(GSM8KSpec)
    arc: ARCSpec = table_field(ARCSpec)
    hellaswag: HellaSwagSpec = table_field(HellaSwagSpec)
    bbh: BBHSpec = table_field(BBHSpec)

    @property
    def enabled(self) -> bool:
        return bool(self.humaneval.n or self.gsm8k.n or self.arc.n or self.hellaswag.n or self.bbh.n)


@dataclass(frozen=True)
class CareSpec:
    name: str = spec_field(check=str_check())
    seed: int = spec_field(0, int_check(0))
    preset: str = spec_field("paper", str_check(tuple(PRESETS)))
    models: tuple[str, ...] = ModelsSpec.diffusion  # [models] diffusion
    evaluator: str = ModelsSpec.evaluator  # [models] evaluator
    generation: GenerationSpec = table_field(GenerationSpec)
    sweep: SweepSpec = table_field(SweepSpec)
    compute_matched: MatchedSpec = table_field(MatchedSpec)
    dose_response: DoseSpec = table_field(DoseSpec)
    headline: HeadlineSpec = table_field(HeadlineSpec)
    metrics: MetricsSpec = table_field(MetricsSpec)
    downstream: DownstreamSpec = table_field(DownstreamSpec)
    #: ``[models."<spec>"]`` tables: per-model sampler settings (:mod:`dlmeval.protocols.model_overrides`)
    overrides: tuple[tuple[str, ModelOverride], ...] = ()
    corpora: tuple[tuple[str, CorpusSpec], ...] = ()  # [corpora.<name>] tables as written
    #: the paper's values of the cells the spec fills (:mod:`dlmeval.protocols.published`); decide no number
    published: tuple = field(default=(), compare=False)
    path: str | None = field(default=None, compare=False)

    # ------------------------------------------------------------------ derived
    @property
    def headline_steps(self) -> int:
        return self.headline.steps if self.headline.steps is not None else max(self.sweep.steps)

    @property
    def headline_temperature(self) -> float:
        t = self.headline.temperature
        return t if t is not None else max(self.sweep.temperatures)

    def override(self, model: str) -> ModelOverride:
        """``model``'s sampler settings (``NO_OVERRIDE`` when the spec has no table for it)."""
        return dict(self.overrides).get(model, NO_OVERRIDE)

    def corpus(self, name: str) -> CorpusSpec:
        """The corpus behind a source name: the spec's [corpora.<name>], else the built-in one."""
        got = dict(self.corpora).get(name) or CORPORA.get(name)
        if got is None:
            raise InputError(
                f"spec: generation.sources names {name!r}, which is neither a built-in corpus "
                f"({', '.join(CORPORA)}) nor a [corpora.{name}] table"
            )
        return got

    def config(self, model: str | None = None) -> dict[str, Any]:
        """The part of the spec that decides the numbers (for run signatures): no path, and the model list
        replaced by one ``model`` when given (one run per model). A model's override table is part of it (only
        where the spec has one, so a spec without any keeps its signature). The batch size is part of it: it
        decides which rows share a forward pass (the canonical chunks of ``batch_size`` prompts), and a padded
        row's logits move in the last bits with its batch (``length_sorted_batches``), so a store is never
        resumed into generations of another batching."""
        d = dataclasses.asdict(self)
        d.pop("path")
        d.pop("name")
        d.pop("overrides")
        d.pop("published")
        # the records' version: 2 since the cells record ``mauve_n`` and a cell's PPL moved in the 8th digit when
        # the model-family registry, the hub data layer and the work loop landed together, so a store written
        # before is never resumed into the new numbers
        d["records"] = 2
        if not self.corpora:
            d.pop("corpora")  # the signature of a spec without corpora tables stays what it was
        else:
            for c in d["corpora"]:  # a corpus without a held-out slice keeps its signature
                if c[1]["sample"] is None:
                    c[1].pop("sample")
                    c[1].pop("sample_seed")
        for k in ("resample_prompts",):
            if not d["generation"][k]:
                d["generation"].pop(k)
        if d["metrics"]["mauve_samples"] is None:
            d["metrics"].pop("mauve_samples")
        for task in ("hellaswag", "bbh"):
            if not d["downstream"][task]["n"]:
                d["downstream"].pop(task)
        for task in LOGLIK_TASKS:  # a check scored by DiffScore (the default) keeps its signature
            t = d["downstream"].get(task)
            if t is not None and t["likelihood"] == "diffscore":
                for k in ("likelihood", "mc_num", "mc_batch", "cfg"):
                    t.pop(k)
        for task in ("humaneval", "gsm8k", "arc"):
            t = d["downstream"][task]
            for k in ("source", "split", "config"):
                if t[k] is None:
                    t.pop(k)
        if d["downstream"]["gsm8k"]["exemplar_split"] == "train" and "source" not in d["downstream"]["gsm8k"]:
            d["downstream"]["gsm8k"].pop("exemplar_split")
        if model is not None:
            d.pop("models")
            d["model"] = model
            if self.override(model) != NO_OVERRIDE:
                d["override"] = self.override(model).as_config()
        elif self.overrides:
            d["overrides"] = {m: ov.as_config() for m, ov in self.overrides}
        return d

    def replace(self, **changes: Any) -> CareSpec:
        return dataclasses.replace(self, **changes)


TABLES = (
    "generation",
    "sweep",
    "compute_matched",
    "dose_response",
    "headline",
    "metrics",
    "downstream",
    "corpora",
)


# ------------------------------------------------------------------------------------------------ parsing
def parse_spec(raw: Mapping[str, Any], *, path: str | None = None, name: str | None = None) -> CareSpec:
    """A :class:`CareSpec` from the parsed TOML/YAML mapping (validated; see the module docstring)."""
    from dlmeval.protocols.published import parse_entries

    top = as_table(raw, "", {"name", "seed", "preset", "models", "published", *TABLES})
    head = read_fields(CareSpec, top, "", ("name", "seed", "preset"), defaults={"name": name or "care"})
    models_raw = as_table(top.get("models"), "models", None)
    own = {f.name for f in dataclasses.fields(ModelsSpec)}
    plain = {k: v for k, v in models_raw.items() if k in own or not isinstance(v, Mapping)}
    models = read_dataclass(ModelsSpec, plain, "models")
    gen = read_dataclass(
        GenerationSpec, top.get("generation"), "generation", base=GenerationSpec(**PRESETS[head["preset"]])
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
    sweep = read_dataclass(SweepSpec, top["sweep"], "sweep")
    follow = following(sweep)
    matched = read_dataclass(
        MatchedSpec,
        top.get("compute_matched"),
        "compute_matched",
        base=MatchedSpec(**follow["compute_matched"]),
    )
    dose = read_dataclass(
        DoseSpec, top.get("dose_response"), "dose_response", base=DoseSpec(**follow["dose_response"])
    )
    headline = read_dataclass(HeadlineSpec, top.get("headline"), "headline")
    _check_headline(headline, sweep)
    metrics = read_dataclass(MetricsSpec, top.get("metrics"), "metrics")
    downstream = read_dataclass(
        DownstreamSpec,
        top.get("downstream"),
        "downstream",
        base=DownstreamSpec(**follow["downstream"]),
    )
    if (downstream.humaneval.n or downstream.gsm8k.n) and not (downstream.steps or downstream.nfe):
        raise InputError("spec: downstream needs steps or nfe budgets for its generation tasks")
    for task in LOGLIK_TASKS:
        t = getattr(downstream, task)
        if t.likelihood == "llada" and t.mc_num % t.mc_batch:
            raise InputError(
                f"spec: downstream.{task}: mc_num ({t.mc_num}) must be a multiple of mc_batch ({t.mc_batch}) under "
                'likelihood = "llada" (LLaDA\'s harness asserts it)'
            )
    for task in ("hellaswag", "bbh"):
        t = getattr(downstream, task)
        if t.n and t.source is None:
            raise InputError(
                f"spec: downstream.{task} ships no stand-in: give its source (a hub id such as "
                f"{'Rowan/hellaswag' if task == 'hellaswag' else 'lukaemon/bbh'} or a local dataset)"
            )
    corpora = tuple(
        (k, read_dataclass(CorpusSpec, v, f"corpora.{k}"))
        for k, v in as_table(top.get("corpora"), "corpora", None).items()
    )
    _check_sampler_settings(gen, sweep, matched, dose)
    swept = {*sweep.strategies, *matched.strategies, dose.strategy, *downstream.strategies}
    overrides = read_overrides({k: v for k, v in models_raw.items() if k not in own}, models.diffusion, swept)
    for model, ov in overrides:
        _check_sampler_settings(gen, sweep, matched, dose, ov, f'models."{model}"')
    out = CareSpec(
        **head,
        models=models.diffusion,
        evaluator=models.evaluator,
        generation=gen,
        sweep=sweep,
        compute_matched=matched,
        dose_response=dose,
        headline=headline,
        metrics=metrics,
        downstream=downstream,
        overrides=overrides,
        corpora=corpora,
        published=parse_entries(top.get("published")),
        path=path,
    )
    for src in gen.sources:
        out.corpus(src)  # every source names a corpus
    return out


def _check_headline(headline: HeadlineSpec, sweep: SweepSpec) -> None:
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


def _check_sampler_settings(gen, sweep, matched, dose, ov=None, where: str = "") -> None:
    """Every (strategy, remask fraction) the spec samples with is one the sampler accepts (e.g. a fraction that
    would never re-mask under the paper accounting), so a bad spec fails before any run opens; with a model's
    override ``ov``, as that model runs them."""
    from dlmeval.sampling import STRATEGIES, SamplerConfig

    ov = ov or NO_OVERRIDE
    pairs = {(st, sweep.remask_fraction) for st in (*sweep.strategies, *matched.strategies)}
    pairs |= {(dose.strategy, f) for f in dose.fractions}
    for strategy, fraction in sorted(pairs):
        runs = ov.strategy(strategy)
        kw = ov.sampler_kwargs()
        if STRATEGIES[runs].remasks:
            kw.pop("schedule", None)  # the override's schedule is that of the cells that never re-mask
        try:
            SamplerConfig(
                length=gen.gen_tokens,
                steps=gen.gen_tokens,
                block_length=gen.block_length,
                strategy=runs,
                remask_fraction=fraction,
                accounting=gen.accounting,
                **kw,
            )
        except InputError as e:
            at = f"{where}: " if where else ""
            raise InputError(f"spec: {at}{runs} at remask fraction {fraction:g}: {e}") from None


def load_spec(ref: str | os.PathLike) -> CareSpec:
    """Read a spec from a ``.toml`` / ``.yaml`` / ``.yml`` file, or a shipped spec by name (``care-demo``)."""
    raw, p = read_spec(ref, SHIPPED)
    return parse_spec(raw, path=str(p), name=p.stem)


__all__ = [
    "ARCSpec",
    "BBHSpec",
    "CORPORA",
    "CareSpec",
    "CorpusSpec",
    "HellaSwagSpec",
    "LOGLIK_TASKS",
    "DoseSpec",
    "DownstreamSpec",
    "GSM8KSpec",
    "GenerationSpec",
    "HeadlineSpec",
    "HumanEvalSpec",
    "MatchedSpec",
    "MetricsSpec",
    "ModelsSpec",
    "PRESETS",
    "SOURCES",
    "SweepSpec",
    "following",
    "load_spec",
    "parse_spec",
    "shipped_spec_path",
]
