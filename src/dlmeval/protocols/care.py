"""The Care protocol (compute-aware remasking evaluation): a sweep spec in, stored generations and tables out.

>>> from dlmeval.protocols.care import run_care
>>> from dlmeval.protocols.care_spec import load_spec
>>> from dlmeval.store import RunStore
>>> result = run_care(load_spec("care-demo"), RunStore("runs.sqlite"), out_dir="care-out")
>>> result.tables["headline"]

What it does, per diffusion model of the spec (one store run each, kind ``care``; the run's config is the spec
minus the other models, so adding a model later leaves the finished runs as they are):

1. prompts: per prefix source (``webtext`` = the OpenWebText stand-in, ``lm1b``) ``n_prompts`` prefixes of exactly
   ``prefix_tokens`` tokens under the model's tokenizer (:func:`build_prompts`);
2. cells: the sweep's full factorial (strategy x nominal steps x unmask temperature x seed x source), the
   compute-matched cells (strategy x NFE budget x temperature x seed x source) and the dose-response cells (remask
   fraction x seed), de-duplicated by their key (:func:`plan_cells`);
3. per cell: generations with :class:`~dlmeval.sampling.RemaskingSampler`, stored per item under
   ``gen/<cell>/<item>`` in atomic chunks of ``batch_size`` (a killed run redoes at most one chunk, with the same
   rows, so it resumes to identical numbers), then the cell's metrics under ``cell/<cell>``: English-filter
   acceptance, then on the accepted texts PPL by the external AR evaluator, MAUVE against human reference texts of
   the same source, Self-BLEU and Distinct-3; actual NFE and re-masks per sample from the sampler;
4. downstream (optional): HumanEval pass@1 (completions run in :mod:`dlmeval.sandbox`), GSM8K exact match
   (:func:`dlmeval.tasks.extract_gsm8k_answer`), and ARC-Challenge by log-likelihood (DiffScore conditional),
   which no sampling setting can change: the sanity check;
5. tables (:mod:`dlmeval.protocols.care_tables`) from the stored cell records only, put on the model's run.

Finally a ``care-sweep`` run (config = the whole spec, models = every model's identity) receives the tables over all
models (with the leaderboard), and ``out_dir`` gets each table as CSV and Markdown plus ``tables.md``.

Seeds: the sampler seed of a cell is ``derive_seed(spec.seed, "care", sweep_seed)`` and each row draws from
``derive_seed(that, "sample", item_id)``, so cells that differ only in strategy, steps or temperature share their
random numbers (paired comparisons); MAUVE's k-means seed is ``derive_seed(spec.seed, "mauve", sweep_seed)``.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols import care_tables as ct
from dlmeval.protocols import common
from dlmeval.protocols.care_markdown import markdown
from dlmeval.protocols.care_spec import CareSpec
from dlmeval.protocols.common import chunks as _chunks
from dlmeval.protocols.common import cut_at
from dlmeval.protocols.common import empty_cuda as _empty_cuda
from dlmeval.seeding import derive_seed

log = logging.getLogger("dlmeval.care")

RUN_KIND = "care"
SWEEP_KIND = "care-sweep"
#: stop sequences of a HumanEval completion (Codex / lm-evaluation-harness)
HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")


# ------------------------------------------------------------------------------------------------ cells
@dataclass(frozen=True)
class Cell:
    """One generation configuration of a model: the unit of the sweep."""

    source: str
    strategy: str
    steps: int | None  # nominal steps, or None for a compute-matched cell
    nfe: int | None  # actual-NFE budget (compute-matched), or None
    temperature: float
    fraction: float
    seed: int

    @property
    def key(self) -> str:
        budget = f"s{self.steps}" if self.steps is not None else f"nfe{self.nfe}"
        return (
            f"{self.source}|{self.strategy}|{budget}|t{self.temperature:g}|f{self.fraction:g}|seed{self.seed}"
        )

    def fields(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "strategy": self.strategy,
            "steps": self.steps,
            "nfe_budget": self.nfe,
            "temperature": self.temperature,
            "fraction": self.fraction,
            "seed": self.seed,
        }


def plan_cells(spec: CareSpec) -> list[Cell]:
    """Every generation cell of the spec, de-duplicated, in a fixed order (sweep, compute-matched, dose)."""
    s, c, d = spec.sweep, spec.compute_matched, spec.dose_response
    out: dict[str, Cell] = {}

    def add(cell: Cell) -> None:
        out.setdefault(cell.key, cell)

    for src in spec.generation.sources:
        for seed in s.seeds:
            for strat in s.strategies:
                for steps in s.steps:
                    for t in s.temperatures:
                        add(Cell(src, strat, steps, None, t, s.remask_fraction, seed))
        for seed in c.seeds:
            for strat in c.strategies:
                for budget in c.nfe:
                    for t in c.temperatures:
                        add(Cell(src, strat, None, budget, t, s.remask_fraction, seed))
        for seed in d.seeds:
            for frac in d.fractions:
                add(Cell(src, d.strategy, d.steps, None, d.temperature, frac, seed))
    return list(out.values())


# ------------------------------------------------------------------------------------------------ texts
@dataclass(frozen=True)
class PromptItem:
    item_id: str
    ids: list[int]  # special prefix tokens (e.g. [CLS]) + exactly prefix_tokens content tokens
    text: str  # the prefix decoded without special tokens


def data_identity(spec: CareSpec, data_dir=None) -> dict[str, str]:
    """A digest of every data file the sweep reads (prompt / reference sources, downstream tasks), for the run
    configurations: item keys are positional (``webtext/17``), so changed data must make another run."""
    from dlmeval.data import tasks as T
    from dlmeval.data.paths import data_dir as resolve
    from dlmeval.data.paths import file_digest

    files = {"webtext": T.WEBTEXT_FILE, "lm1b": T.LM1B_FILE}
    used = [files[s] for s in dict.fromkeys(spec.generation.sources) if s in files]
    d = spec.downstream
    if d.enabled:
        tasks = (
            (T.ARC_CHALLENGE_FILE, d.arc.n),
            (T.HUMANEVAL_FILE, d.humaneval.n),
            (T.GSM8K_FILE, d.gsm8k.n),
        )
        used += [f for f, n in tasks if n]
    root = resolve(data_dir)
    return {str(f): file_digest(root / f) for f in used if (root / f).is_file()}


def _source_texts(source: str, data_dir) -> list[str]:
    from dlmeval.data.tasks import load_lm1b_reference, load_webtext_reference

    loader = {"webtext": load_webtext_reference, "lm1b": load_lm1b_reference}[source]
    return [r.text for r in loader(data_dir)]


def _special_prefix(model) -> list[int]:
    """The ids a family puts before a text ([CLS], <bos>, ...), without trailing EOS ids."""
    ids = model.encode("", add_special_tokens=True)
    eos = set(model.eos_token_ids)
    while ids and ids[-1] in eos:
        ids.pop()
    return ids


def build_prompts(model, source: str, n: int, prefix_tokens: int, data_dir=None) -> list[PromptItem]:
    """``n`` prefixes of exactly ``prefix_tokens`` content tokens from the first half of ``source``'s texts.

    ``webtext`` (documents of <= 61 words): the first documents that alone have ``prefix_tokens`` tokens, cut there.
    ``lm1b`` (single sentences): consecutive sentences joined by a space until there are enough tokens, cut there.
    Item ids name the first text used (``webtext/12``), so they are stable across models.
    """
    texts = _source_texts(source, data_dir)
    pool = texts[: len(texts) // 2]
    special = _special_prefix(model)
    out: list[PromptItem] = []
    i = 0
    while i < len(pool) and len(out) < n:
        start = i
        if source == "webtext":
            ids = model.encode(pool[i], add_special_tokens=False)
            i += 1
            if len(ids) < prefix_tokens:
                continue
        else:
            ids = []
            while i < len(pool) and len(ids) < prefix_tokens:
                ids += model.encode(pool[i], add_special_tokens=False)
                i += 1
            if len(ids) < prefix_tokens:
                break
        full = special + ids[:prefix_tokens]
        out.append(PromptItem(f"{source}/{start}", full, model.decode(full)))
    if len(out) < n:
        raise InputError(
            f"only {len(out)} {source} prefixes of {prefix_tokens} tokens are available for {getattr(model, 'name', '')}, "
            f"{n} were asked for; lower generation.n_prompts or generation.prefix_tokens"
        )
    return out


def build_references(source: str, n: int, words: int, data_dir=None) -> list[str]:
    """``n`` human reference texts of ``words`` whitespace words from the second half of ``source`` (disjoint from
    the prompts): consecutive texts joined by a space and cut at ``words`` words; model-independent."""
    texts = _source_texts(source, data_dir)
    pool = texts[len(texts) // 2 :]
    out: list[str] = []
    buf: list[str] = []
    for t in pool:
        buf += t.split()
        if len(buf) >= words:
            out.append(" ".join(buf[:words]))
            buf = []
            if len(out) == n:
                return out
    raise InputError(
        f"the {source} reference pool gives only {len(out)} texts of {words} words; lower metrics.n_reference "
        "or metrics.reference_words"
    )


def continuation_text(model, prefix_ids: Sequence[int], gen_ids: Sequence[int], fallback: str) -> str:
    """The generated text exactly as it follows the decoded prefix (keeps a leading space; WordPiece pieces that
    glue onto the prefix keep no space)."""
    head = model.decode(list(prefix_ids))
    full = model.decode(list(prefix_ids) + list(gen_ids))
    if full.startswith(head):
        return full[len(head) :]
    return (" " + fallback) if fallback else ""


# ------------------------------------------------------------------------------------------------ runner
def model_label(model_spec: str) -> str:
    """The name a model has in the tables: the spec, with a path shortened to its last part
    (``llada:/models/LLaDA-8B-Base`` -> ``llada:LLaDA-8B-Base``)."""
    kind, sep, rest = model_spec.partition(":")
    if not sep or not rest:
        return model_spec
    return f"{kind}:{Path(rest.rstrip('/')).name or rest}"


@dataclass
class CareResult:
    spec: CareSpec
    model_runs: dict[str, str] = field(default_factory=dict)  # model spec -> run id
    sweep_run: str | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    out_dir: Path | None = None
    signature: str = ""
    warnings: list[str] = field(default_factory=list)


class _Metrics:
    """The evaluator, the MAUVE featurizer and reference features, loaded once per sweep."""

    def __init__(
        self, spec: CareSpec, *, device, dtype, trust_remote_code, allow_download, data_dir, models=None
    ):
        from dlmeval.models import load_causal_lm

        self.spec = spec
        self.data_dir = data_dir
        kw = dict(
            device=device, dtype=dtype, allow_download=allow_download, trust_remote_code=trust_remote_code
        )
        models = models or {}
        self.evaluator = models.get(spec.evaluator) or load_causal_lm(spec.evaluator, **kw)
        f = spec.metrics.featurizer
        self.feature_model = None
        if f == "minilm":
            from dlmeval.metrics import minilm_featurizer

            dev = getattr(self.evaluator, "device", None)
            self.featurizer = minilm_featurizer(device=str(dev) if dev is not None else "cpu")
        elif f == "ar":
            from dlmeval.metrics import ar_featurizer

            self.featurizer = ar_featurizer(self.evaluator)
        else:
            from dlmeval.metrics import ar_featurizer

            self.feature_model = models.get(f) or load_causal_lm(f, **kw)
            self.featurizer = ar_featurizer(self.feature_model)
        self._ref: dict[str, np.ndarray] = {}

    def identities(self) -> list[Any]:
        ids = [self.evaluator.identity()]
        if self.feature_model is not None:
            ids.append(self.feature_model.identity())
        return ids

    def reference_features(self, source: str) -> np.ndarray:
        if source not in self._ref:
            m = self.spec.metrics
            refs = build_references(source, m.n_reference, m.reference_words, self.data_dir)
            self._ref[source] = np.asarray(self.featurizer(refs), dtype=np.float32)
        return self._ref[source]


def run_care(
    spec: CareSpec,
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
) -> CareResult:
    """Run (or resume) the whole sweep of ``spec`` into ``store``; returns the tables over all models.

    ``models`` maps a model spec string (a sampled model or the evaluator) to an already loaded model; other
    models are loaded from their spec strings."""
    models = dict(models or {})
    from dlmeval.models import load_diffusion

    say = echo or (lambda s: None)
    result = CareResult(spec)
    metrics = _Metrics(
        spec,
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        allow_download=allow_download,
        data_dir=data_dir,
        models=models,
    )
    identities: list[Any] = []
    all_cells: list[dict] = []
    all_down: list[dict] = []
    data = data_identity(spec, data_dir)
    if spec.downstream.enabled and spec.downstream.humaneval.n:
        from dlmeval.sandbox import require_isolation

        require_isolation()  # a sandbox that would refuse HumanEval code fails before any run opens
    for model_spec in spec.models:
        own = model_spec in models
        model = (
            models[model_spec]
            if own
            else load_diffusion(
                model_spec,
                device=device,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                allow_download=allow_download,
            )
        )
        run = store.open_run(
            RUN_KIND,
            {**spec.config(model_spec), "data": data},
            [model.identity(), *metrics.identities()],
            seed=spec.seed,
            command_line=command_line,
        )
        result.model_runs[model_spec] = run.run_id
        identities.append(model.identity())
        say(f"care: model {model_spec} -> run {run.run_id}")
        cells, down = _run_model(spec, model_label(model_spec), model, run, metrics, data_dir, progress, say)
        tables = ct.all_tables(ct.cells_frame(cells), ct.down_frame(down), _labelled(spec))
        for name, df in tables.items():
            run.put_table(name, df)
        run.finish()
        result.warnings += [f"{model_spec}: {w}" for w in run.warnings()]
        all_cells += cells
        all_down += down
        del model
        gc.collect()
        _empty_cuda()
    sweep = store.open_run(
        SWEEP_KIND,
        {**spec.config(), "data": data},
        [*identities, *metrics.identities()],
        seed=spec.seed,
        command_line=command_line,
    )
    result.sweep_run = sweep.run_id
    result.tables = ct.all_tables(ct.cells_frame(all_cells), ct.down_frame(all_down), _labelled(spec))
    for name, df in result.tables.items():
        sweep.put_table(name, df)
    sweep.finish()
    result.signature = sweep.signature.short()
    if out_dir is not None:
        result.out_dir = write_tables(
            result.tables, out_dir, header=f"Care sweep {spec.name}: {result.signature}"
        )
    return result


def _labelled(spec: CareSpec) -> CareSpec:
    """The spec with its models as table labels (the leaderboard keeps the spec's model order)."""
    return spec.replace(models=tuple(model_label(m) for m in spec.models))


def _run_model(
    spec, model_spec, model, run, metrics, data_dir, progress, say
) -> tuple[list[dict], list[dict]]:
    from dlmeval.progress import progress_bar

    g = spec.generation
    prompts = {src: build_prompts(model, src, g.n_prompts, g.prefix_tokens, data_dir) for src in g.sources}
    cells = plan_cells(spec)
    done = run.done_keys()
    records: list[dict] = []
    tc = bool(getattr(model, "time_conditioned", False))
    native = str(getattr(model, "native_schedule", "linear"))
    with progress_bar(f"care {model_spec}", len(cells), enabled=progress) as bar:
        for cell in cells:
            canon = canonical_cell(spec, cell, time_conditioned=tc, native_schedule=native)
            key = f"cell/{canon.key}"
            if key not in done:
                t0 = time.perf_counter()
                _generate_cell(spec, model, run, canon, prompts[canon.source], done)
                rec = _cell_metrics(spec, model, run, canon, prompts[canon.source], metrics)
                rec["seconds"] = round(time.perf_counter() - t0, 3)
                run.put(key, rec)
                done.add(key)
                say(
                    f"care: {canon.key}: nfe {rec['nfe']:.1f}, accepted {rec['n_accepted']}/{rec['n']}, "
                    f"ppl {rec['ppl']:.2f}, mauve {rec['mauve']:.3f} ({rec['seconds']:.0f} s)"
                )
            else:
                rec = run.get(key)
            if canon.key != cell.key:  # provably the same generations: run once, reported as the same cell
                rec = {**rec, **cell.fields(), "cell": cell.key, "same_as": canon.key}
                say(f"care: {cell.key} is the same cell as {canon.key} (run once)")
            records.append({"model": model_spec, **{k: rec.get(k) for k in ct.CELL_COLUMNS if k != "model"}})
            bar.update(1, cell.key)
    down = (
        _downstream(spec, model_spec, model, run, data_dir, progress, say) if spec.downstream.enabled else []
    )
    return records, down


def canonical_cell(
    spec: CareSpec, cell: Cell, *, time_conditioned: bool = False, native_schedule: str = "linear"
) -> Cell:
    """The cell whose generations are provably identical to ``cell``'s, named by nominal steps: a compute-matched
    cell becomes the nominal-steps cell its budget resolves to, and a strategy that never re-masks keeps only
    the steps that decode something (:func:`dlmeval.sampling.equivalent_steps`: ``none`` at 128 and 256 steps
    with 128 tokens is one cell). The cell itself when nothing applies."""
    from dlmeval.sampling import STRATEGIES, equivalent_steps, steps_for_nfe

    g = spec.generation
    schedule = "linear" if STRATEGIES[cell.strategy].remasks else native_schedule
    steps = cell.steps
    if steps is None:
        steps, _ = steps_for_nfe(
            cell.nfe,
            g.gen_tokens,
            strategy=cell.strategy,
            block_length=g.block_length,
            remask_fraction=cell.fraction,
            accounting=g.accounting,
            time_conditioned=time_conditioned,
            schedule=schedule,
        )
    steps = equivalent_steps(
        g.gen_tokens,
        steps,
        strategy=cell.strategy,
        block_length=g.block_length,
        time_conditioned=time_conditioned,
        schedule=schedule,
    )
    if steps == cell.steps:
        return cell
    return dataclasses.replace(cell, steps=steps, nfe=None)


def _sampler_config(spec: CareSpec, cell: Cell, length: int | None = None):
    from dlmeval.sampling import SamplerConfig

    g = spec.generation
    return SamplerConfig(
        length=length or g.gen_tokens,
        steps=cell.steps,
        nfe=cell.nfe,
        block_length=g.block_length if length is None else None,
        strategy=cell.strategy,
        remask_fraction=cell.fraction,
        temperature=cell.temperature,
        suppress_eos=g.suppress_eos,
        eos_rank_last=g.eos_rank_last,
        stop_at_eos=True,
        seed=derive_seed(spec.seed, "care", cell.seed),
        accounting=g.accounting,
    )


def _generate_cell(spec, model, run, cell: Cell, prompts: list[PromptItem], done: set[str]) -> None:
    """Generate the cell's missing items, one atomic ``put_many`` per chunk of ``batch_size`` prompts. Chunks are
    fixed slices of the prompt list, so a resumed run forwards exactly the batches an uninterrupted one would."""
    from dlmeval.sampling import RemaskingSampler

    sampler = RemaskingSampler(model, _sampler_config(spec, cell))
    for chunk in _chunks(prompts, spec.generation.batch_size):
        keys = [f"gen/{cell.key}/{p.item_id}" for p in chunk]
        if all(k in done for k in keys):
            continue
        res = sampler.sample([p.ids for p in chunk], item_ids=[p.item_id for p in chunk])
        rows = []
        for p, key, rec in zip(chunk, keys, res.records()):
            gen_ids = rec["token_ids"]
            rows.append(
                (
                    key,
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
                    },
                )
            )
        run.put_many(rows)
        done.update(keys)


def _cell_metrics(spec, model, run, cell: Cell, prompts: list[PromptItem], metrics: _Metrics) -> dict:
    from dlmeval.metrics import distinct_n, english_filter, mauve_score, perplexity, self_bleu

    m = spec.metrics
    gens = [run.get(f"gen/{cell.key}/{p.item_id}") for p in prompts]
    texts = [r["text"] for r in gens]
    nonempty = [bool(t.strip()) for t in texts]
    accepted = [ne and (english_filter(t) if m.english_filter else True) for t, ne in zip(texts, nonempty)]
    keep = [i for i, a in enumerate(accepted) if a]
    acc_texts = [texts[i].strip() for i in keep]
    nfe = np.array([r["nfe"] for r in gens], dtype=float)
    rec: dict[str, Any] = {
        **cell.fields(),
        "cell": cell.key,
        "resolved_steps": gens[0]["resolved_steps"],
        "nfe_predicted": gens[0].get("nfe_predicted"),
        "n": len(gens),
        "n_empty": len(gens) - sum(nonempty),
        "n_accepted": len(keep),
        "acceptance": len(keep) / len(gens),
        "nfe": float(nfe.mean()),
        "nfe_min": float(nfe.min()),
        "nfe_max": float(nfe.max()),
        "remasks": float(np.mean([r["remasks"] for r in gens])),
        "replacement_rate": float(np.mean([r["replacement_rate"] for r in gens])),
        "stable_cells": float(np.mean([r["stable_cells"] for r in gens])),
        "gen_tokens_mean": float(np.mean([r["n_tokens"] for r in gens])),
        "ppl": float("nan"),
        "ppl_mean_item": float("nan"),
        "mauve": float("nan"),
        "mauve_buckets": None,
        "self_bleu": float("nan"),
        "distinct3": float("nan"),
    }
    if len(keep) < 2:
        run.warn(f"cell {cell.key}: {len(keep)} accepted generation(s); PPL, MAUVE and diversity left out")
        return rec
    pr = perplexity(metrics.evaluator, [gens[i]["prefix"] for i in keep], [texts[i] for i in keep])
    rec["ppl"], rec["ppl_mean_item"] = pr.ppl, pr.mean_item_ppl
    ms = mauve_score(
        acc_texts,
        None,
        metrics.featurizer,
        seed=derive_seed(spec.seed, "mauve", cell.seed),
        q_features=metrics.reference_features(cell.source),
        num_buckets=m.mauve_buckets,
    )
    rec["mauve"], rec["mauve_buckets"] = ms.mauve, ms.num_buckets
    # sacrebleu's 0-100 scale -> 0-1, the scale of the paper's tables
    rec["self_bleu"] = (
        self_bleu(
            acc_texts, max_hypotheses=m.self_bleu_max, seed=derive_seed(spec.seed, "self-bleu", cell.key)
        )
        / 100.0
    )
    rec["distinct3"] = distinct_n(acc_texts, n=3)
    return rec


# ------------------------------------------------------------------------------------------------ downstream
def downstream_cells(spec: CareSpec) -> list[Cell]:
    d = spec.downstream
    out: dict[str, Cell] = {}
    for seed in d.seeds:
        for strat in d.strategies:
            for t in d.temperatures:
                for steps in d.steps:
                    c = Cell("task", strat, steps, None, t, spec.sweep.remask_fraction, seed)
                    out.setdefault(c.key, c)
                for budget in d.nfe:
                    c = Cell("task", strat, None, budget, t, spec.sweep.remask_fraction, seed)
                    out.setdefault(c.key, c)
    return list(out.values())


#: lm-evaluation-harness ``gsm8k`` (v3.0): stop strings and the strict-match answer pattern
GSM8K_STOP = ("Question:", "</s>", "<|im_end|>")
_GSM8K_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def gsm8k_prompt(item, shots: Sequence) -> str:
    """lm-evaluation-harness's ``gsm8k`` prompt (the Care paper, C.1: "the 4-shot in-context format from the
    original lm-eval configuration"): ``Question: {question}\nAnswer: {answer}`` per exemplar (the answer as
    the data set writes it, calculator annotations and ``#### N`` included), joined by blank lines, then
    ``Question: {question}\nAnswer:``."""
    parts = [f"Question: {s.question}\nAnswer: {s.answer}" for s in shots]
    return "\n\n".join([*parts, f"Question: {item.question}\nAnswer:"])


def gsm8k_strict_match(text: str) -> str | None:
    """lm-eval's ``strict-match`` filter: the first ``#### N``, with ``,``, ``$`` and a final ``.`` dropped (its
    exact-match ``regexes_to_ignore``), or None."""
    m = _GSM8K_STRICT.search(text)
    if not m:
        return None
    return re.sub(r"\.$", "", m.group(1).replace(",", "").replace("$", ""))


def _downstream(spec, model_spec, model, run, data_dir, progress, say) -> list[dict]:
    d = spec.downstream
    out: list[dict] = []
    if d.arc.n:
        out.append(_arc(spec, model_spec, model, run, data_dir, say))
    tasks = []
    if d.humaneval.n:
        from dlmeval.data.tasks import load_humaneval

        tasks.append(("humaneval", load_humaneval(data_dir)[: d.humaneval.n], d.humaneval.gen_tokens))
    if d.gsm8k.n:
        from dlmeval.data.tasks import load_gsm8k

        items = load_gsm8k(data_dir)
        # lm-eval draws its exemplars from the train split, which is not shipped here: the last `shots` test
        # items stand in and are removed from the evaluated pool, so no item is its own exemplar
        shots = items[len(items) - d.gsm8k.shots :] if d.gsm8k.shots else []
        pool = items[: len(items) - d.gsm8k.shots]
        tasks.append(("gsm8k", [(it, shots) for it in pool[: d.gsm8k.n]], d.gsm8k.gen_tokens))
    for task, items, length in tasks:
        for cell in downstream_cells(spec):
            key = f"down/{task}/{cell.key}"
            rec = run.get(key)
            if rec is None:
                rec = _down_cell(spec, model, run, task, cell, items, length)
                run.put(key, rec)
                say(f"care: {task} {cell.key}: accuracy {rec['accuracy']:.3f}, nfe {rec['nfe']:.1f}")
            out.append({"model": model_spec, **{k: rec.get(k) for k in ct.DOWN_COLUMNS if k != "model"}})
    return out


def _down_cell(spec, model, run, task: str, cell: Cell, items: list, length: int) -> dict:
    from dlmeval.sampling import RemaskingSampler

    d = spec.downstream
    sampler = RemaskingSampler(model, _sampler_config(spec, cell, length=length))
    if task == "humaneval":
        ids = [it.item_id for it in items]
        prompts = [it.prompt for it in items]
    else:
        ids = [it.item_id for it, _ in items]
        prompts = [gsm8k_prompt(it, shots) for it, shots in items]
    done = run.done_keys()
    for chunk in _chunks(list(range(len(items))), spec.generation.batch_size):
        keys = [f"{task}/{cell.key}/{ids[i]}" for i in chunk]
        if all(k in done for k in keys):
            continue
        enc = [sampler.encode_prompt(prompts[i]) for i in chunk]
        keep = model.max_length - length
        if any(len(e) > keep for e in enc):
            run.warn(
                f"{task}: prompts longer than the model window minus {length} generated tokens were cut to their "
                f"last {keep} tokens"
            )
            enc = [e[-keep:] if len(e) > keep else e for e in enc]
        res = sampler.sample(enc, item_ids=[ids[i] for i in chunk])
        rows = []
        for j, (i, key, rec) in enumerate(zip(chunk, keys, res.records())):
            text = continuation_text(model, enc[j], rec["token_ids"], rec["text"])
            row = {"item": ids[i], "nfe": rec["nfe"], "raw": text}
            if task == "humaneval":
                from dlmeval.sandbox import check_humaneval

                it = items[i]
                completion = cut_at(text, HUMANEVAL_STOP)
                ex = check_humaneval(
                    it.prompt,
                    completion,
                    it.test,
                    it.entry_point,
                    timeout_s=d.humaneval.timeout_s,
                    memory_mb=d.humaneval.memory_mb,
                )
                # the isolation the code actually had goes into the run (the report lists run warnings)
                notes = [] if "netns" in ex.isolation else ["no network namespace: the audit-hook block only"]
                if "same-user" in ex.isolation:
                    notes.append("with the caller's privileges (--sandbox-same-user)")
                run.warn(
                    f"HumanEval completions ran in the sandbox with isolation {ex.isolation}"
                    + (f" ({'; '.join(notes)})" if notes else "")
                )
                row.update(completion=completion, status=ex.status, correct=ex.passed, isolation=ex.isolation)
            else:
                from dlmeval.tasks import extract_gsm8k_answer

                it = items[i][0]
                answer = cut_at(text, GSM8K_STOP)
                pred = gsm8k_strict_match(answer)
                gold = it.answer.split("####")[-1].strip().replace(",", "")
                row.update(
                    prediction=pred,
                    gold=gold,
                    correct=pred is not None and pred == gold,
                    # lm-eval's flexible-extract analogue, kept beside the strict match it reports
                    flexible=extract_gsm8k_answer(answer),
                    flexible_correct=extract_gsm8k_answer(answer) == it.gold,
                )
            rows.append((key, row))
        run.put_many(rows)
        done.update(keys)
    recs = [run.get(f"{task}/{cell.key}/{i}") for i in ids]
    return {
        **cell.fields(),
        "task": task,
        "cell": cell.key,
        "n": len(recs),
        "accuracy": float(np.mean([bool(r["correct"]) for r in recs])),
        "nfe": float(np.mean([r["nfe"] for r in recs])),
    }


def _arc(spec, model_spec, model, run, data_dir, say) -> dict:
    """ARC-Challenge by conditional DiffScore over the options (mean log-probability; argmax wins)."""
    key = "down/arc"
    rec = run.get(key)
    if rec is None:
        from dlmeval.scoring import DiffScorer
        from dlmeval.tasks import ARC_CHALLENGE, argmax_choice

        a = spec.downstream.arc
        items = ARC_CHALLENGE.items(data_dir=data_dir, limit=a.n)
        scorer = DiffScorer(model, n_masks=a.n_masks, n_rates=a.n_rates, seed=derive_seed(spec.seed, "arc"))
        requests = []
        for it in items:
            msg, conts = ARC_CHALLENGE.choice_request(it)
            requests.append((msg.text, conts))
        nfe0 = model.nfe
        scores = common.diffscore_choice_scores(scorer, requests, item_ids=[it.item_id for it in items])
        correct = [
            argmax_choice([x if math.isfinite(x) else -math.inf for x in s]) == it.gold
            for it, s in zip(items, scores)
        ]
        rec = {
            "task": "arc",
            "n": len(items),
            "accuracy": float(np.mean(correct)),
            "nfe": float(model.nfe - nfe0),
            "n_masks": a.n_masks,
            "n_rates": a.n_rates,
        }
        run.put(key, rec)
        say(f"care: arc_challenge (log-likelihood): accuracy {rec['accuracy']:.3f} over {rec['n']} items")
    return {
        "model": model_spec,
        "task": "arc",
        "strategy": None,
        "steps": None,
        "nfe_budget": None,
        "temperature": None,
        "seed": None,
        "n": rec["n"],
        "accuracy": rec["accuracy"],
        "nfe": rec["nfe"],
    }


# ------------------------------------------------------------------------------------------------ output
def write_tables(tables: dict[str, pd.DataFrame], out_dir: str | Path, header: str = "") -> Path:
    """Each table as ``<name>.csv`` and ``<name>.md`` in ``out_dir``, and all of them in ``tables.md``."""
    return common.write_tables(tables, out_dir, order=ct.TABLE_ORDER, markdown=markdown, header=header)


def load_tables(store, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables stored on a run (a ``care`` or ``care-sweep`` run), in :data:`TABLE_ORDER`."""
    return common.load_tables(store, run_id, ct.TABLE_ORDER)


__all__ = [
    "HUMANEVAL_STOP",
    "RUN_KIND",
    "SWEEP_KIND",
    "CareResult",
    "Cell",
    "PromptItem",
    "build_prompts",
    "build_references",
    "continuation_text",
    "cut_at",
    "downstream_cells",
    "gsm8k_prompt",
    "gsm8k_strict_match",
    "load_tables",
    "model_label",
    "plan_cells",
    "run_care",
    "write_tables",
]
