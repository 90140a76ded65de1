"""The DiffScore meta-evaluation suite on the 12 BARTScore benchmarks (DiffScore paper, Tables 1-3).

>>> from dlmeval.protocols.meta_eval import SuiteOptions, run_suite
>>> report = run_suite(SuiteOptions(benchmarks=("SummEval", "gu-en"), limit=20), store=RunStore())
>>> report.tables["sum"]            # paper-style wide table, one row per metric, columns labelled by protocol

What runs, per benchmark (:func:`scoring_frame` normalises the three layouts of the BARTScore files):

* baselines: sentence BLEU, ROUGE-1/2/L F1, METEOR (family ``lexical``); BERTScore-style greedy-matching F1 and
  MoverScore-style ``1 - EMD`` over all-MiniLM-L6-v2 token embeddings (``embedding``); all against the references
  (the best one counts), against the source for the factuality sets Rank19 / QAGS (they have no reference);
* autoregressive likelihood scores with the AR model (``ar``): s2h, h2s, r2h, h2r, F = (r2h + h2r) / 2, sbi =
  (s2h + h2s) / 2 and the marginal, where the benchmark has the texts (no s2h/h2s for WMT, whose source is not
  English; no reference directions for the factuality sets); see :mod:`dlmeval.baselines.likelihood`;
* DiffScore with the diffusion model (``diffscore``) in the configurations the paper maps the benchmark's human
  dimensions to (:data:`~dlmeval.protocols.diffscore_protocols.DIMENSION_CONFIG`): ``bidir`` is computed as
  cond + reverse, which also gives those two; WMT conditions on the reference;
* DiffScore-FT (``--ft``): LoRA fine-tuning on (source, reference) pairs with document-level k-fold, see
  :mod:`dlmeval.protocols.diffscore_ft`.

Resumption. Every score is written to the run store as soon as its chunk is computed, keyed
``"{item}@{content}|{metric}"`` (the item id starts with the benchmark: ``SummEval/M11/...``, ``gu-en/17@.../better``;
``content`` is a digest of every text the score is computed from, so a changed data file under ``--data-dir``
recomputes what changed instead of reading back the old numbers; the summary run's configuration holds a digest
of every data file, so its id and signature change with the data), in one
run per component (baselines, AR model, diffusion model + estimator, DiffScore-FT), so changing one component
(``--fast``, another AR model) recomputes only that component, and a ``--limit`` run's scores are reused by the
full run. Work goes in fixed chunks of distinct texts (an output text that recurs, as WMT system outputs do, is
scored once), and a chunk is written in one transaction: a killed run loses at most the chunk in flight, and the
rerun recomputes exactly the same chunks with the same batches, so the tables come out identical.

Tables (stored in the summary run and written to ``--out`` as CSV and Markdown): ``results`` (long: benchmark,
dimension, protocol, metric, value, n, bootstrap CI), ``comparisons`` (DiffScore against every other metric:
Williams test or paired bootstrap), the paper-style ``mt`` / ``sum`` / ``d2t`` tables of the primary protocols,
``secondary`` (the other protocols) and ``timing`` (seconds per benchmark and component in this session).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS, load_bartscore, resolve_bartscore_name
from dlmeval.errors import InputError
from dlmeval.protocols import diffscore_protocols as P
from dlmeval.seeding import derive_seed
from dlmeval.store import jsonsafe

log = logging.getLogger("dlmeval.meta_eval")

SUITES: dict[str, tuple[str, ...]] = {"bartscore": tuple(BARTSCORE_BENCHMARKS)}
FAMILIES = ("lexical", "embedding", "ar", "diffscore")
LEXICAL_METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "meteor")


def lexical_metrics() -> tuple[str, ...]:
    """:data:`LEXICAL_METRICS`, without METEOR on a machine without WordNet 3.0 (the suite then says so)."""
    from dlmeval.baselines.lexical import meteor_unavailable

    return (
        LEXICAL_METRICS
        if meteor_unavailable() is None
        else tuple(m for m in LEXICAL_METRICS if m != "meteor")
    )


EMBEDDING_METRICS = ("bertscore_f", "moverscore")
AR_DIRECTIONS = ("s2h", "h2s", "sbi", "r2h", "h2r", "f", "mar")
DIFFSCORE_CONFIGS = ("cond", "reverse", "bidir", "marginal")
#: task-specific prompts for instruction-tuned diffusion models (``prompt="auto"``); see scoring.configs.PROMPTS
TASK_PROMPTS = {"SUM": "summarize", "D2T": "describe", "WMT": "plain"}
SUITE_VERSION = 1  # bump when a component's numbers change for the same configuration


# ---------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class FTOptions:
    """DiffScore-FT: LoRA on (source, reference) pairs, document-level k-fold (see diffscore_ft)."""

    folds: int = 5
    steps: int = 30
    batch_size: int = 8
    lr: float = 5e-4
    lora_r: int = 16
    lora_alpha: int = 32
    max_len: int | None = None  # default: the model's window
    work_dir: str | None = None  # fold checkpoints (default: <cache>/meta-eval-ft/<run id>)


@dataclass(frozen=True)
class SuiteOptions:
    suite: str = "bartscore"
    benchmarks: tuple[str, ...] | None = None  # default: every benchmark of the suite
    limit: int | None = None
    families: tuple[str, ...] = FAMILIES
    dlm: str = "default"
    ar: str = "default-ar"
    encoder: str | None = None  # BERT-style encoder directory for the embedding baselines (default: MiniLM)
    fast: bool = False
    n_masks: int | None = None  # default: 20 (5 with fast)
    n_rates: int | None = None  # default: 10 (5 with fast)
    scheme: str = "balanced"
    weighting: str = "mlp"
    prompt: str = "auto"  # "auto": task prompts for models with a chat template; "none"
    all_configs: bool = False  # every DiffScore configuration on every benchmark, not just the mapped ones
    ft: bool = False
    ft_options: FTOptions = field(default_factory=FTOptions)
    bootstrap: int = 1000
    confidence: float = 0.95
    alpha: float = 0.05
    ci_protocols: str = "primary"  # "primary" | "all"
    seed: int = 0
    device: str | None = None
    dtype: str | None = None
    data_dir: str | None = None
    chunk_size: int = 32
    ar_batch_size: int = 8
    # AR reference directions: best of the first N distinct references (None: all)
    ar_max_refs: int | None = None
    dlm_batch_size: int | None = None
    dlm_max_tokens: int | None = None  # padded tokens per DiffScore forward pass (default: the scorer's)
    trust_remote_code: bool = False
    allow_download: bool = False  # model specs may be hub ids (needs internet)
    progress: bool = True

    def resolved_benchmarks(self) -> tuple[str, ...]:
        if self.suite not in SUITES:
            raise InputError(f"unknown suite {self.suite!r}; choose one of {', '.join(SUITES)}")
        if not self.benchmarks:
            return SUITES[self.suite]
        out: list[str] = []
        for name in self.benchmarks:
            key = name.strip()
            if key.upper() in ("SUM", "D2T", "WMT"):
                out += [b for b, spec in BARTSCORE_BENCHMARKS.items() if spec.task == key.upper()]
            else:
                out.append(resolve_bartscore_name(key).name)
        return tuple(dict.fromkeys(out))

    def estimator(self) -> dict[str, Any]:
        k = self.n_masks if self.n_masks is not None else (5 if self.fast else 20)
        t = self.n_rates if self.n_rates is not None else (5 if self.fast else 10)
        return {"n_masks": int(k), "n_rates": int(t), "scheme": self.scheme, "weighting": self.weighting}

    def check(self) -> None:
        bad = [f for f in self.families if f not in FAMILIES]
        if bad:
            raise InputError(
                f"unknown metric famil{'ies' if len(bad) > 1 else 'y'} {bad}; choose from {', '.join(FAMILIES)}"
            )
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be a positive number of items, got {self.limit}")
        if self.prompt not in ("auto", "none"):
            raise InputError(f"prompt policy must be 'auto' or 'none', got {self.prompt!r}")
        if self.ci_protocols not in ("primary", "all"):
            raise InputError(f"ci_protocols must be 'primary' or 'all', got {self.ci_protocols!r}")
        if self.bootstrap < 0:
            raise InputError(f"--bootstrap must be >= 0 resamples, got {self.bootstrap}")
        if not 0 < self.confidence < 1 or not 0 < self.alpha < 0.5:
            raise InputError("confidence must lie in (0, 1) and alpha in (0, 0.5)")
        if self.chunk_size < 1:
            raise InputError("chunk_size must be positive")
        if self.ar_max_refs is not None and self.ar_max_refs < 1:
            raise InputError(f"--ar-max-refs must be at least 1, got {self.ar_max_refs}")
        if self.ft and self.ft_options.folds < 2:
            raise InputError(f"DiffScore-FT needs at least 2 folds, got {self.ft_options.folds}")
        for flag, v in (("--masks/-K", self.n_masks), ("--rates/-T", self.n_rates)):
            if v is not None and v < 1:
                raise InputError(f"{flag} must be at least 1, got {v}")
        if self.dlm_batch_size is not None and self.dlm_batch_size < 1:
            raise InputError(f"--batch-size must be at least 1, got {self.dlm_batch_size}")
        if self.dlm_max_tokens is not None and self.dlm_max_tokens < 1:
            raise InputError(f"--max-tokens must be at least 1, got {self.dlm_max_tokens}")
        from dlmeval.models.registry import check_settings

        check_settings(self.device, self.dtype, self.seed)
        self.resolved_benchmarks()


# ---------------------------------------------------------------------------------------------- data
def _limit_rows(df: pd.DataFrame, task: str, limit: int | None) -> pd.DataFrame:
    """The first ``limit`` rows in file order; SUM sets keep whole documents (the last one is completed), so
    per-document correlations stay defined."""
    if limit is None or limit >= len(df):
        return df
    if task != "SUM":
        return df.iloc[:limit]
    keep = set(df["doc_id"].iloc[:limit])
    return df[df["doc_id"].isin(keep)]


def scoring_frame(name: str, data_dir: str | None = None, limit: int | None = None) -> pd.DataFrame:
    """One row per scored output of benchmark ``name``, in file order.

    Columns: ``key`` (store key prefix; the loader's item id, ``/better`` or ``/worse`` appended for WMT),
    ``benchmark``, ``task``, ``doc_id``, ``system``, ``source`` (the text the output was made from: article, meaning
    representation, or WMT foreign-language source), ``cond_source`` (what DiffScore and the s2h/h2s directions
    condition on: the source, or the reference translation for WMT), ``targets`` (the texts reference-based
    metrics compare with: the references, or the source for the factuality sets), ``has_reference``, ``candidate``,
    then the human dimensions (WMT: ``pair_id``, ``side``).
    """
    b = resolve_bartscore_name(name)
    df = load_bartscore(b.name, data_dir)
    df = _limit_rows(df, b.task, limit)
    if b.task == "WMT":
        rows = []
        for r in df.itertuples(index=False):
            h = _content_digest(r.src, r.ref, r.better, r.worse)
            for side, cand, system in (
                ("better", r.better, r.better_system),
                ("worse", r.worse, r.worse_system),
            ):
                rows.append(
                    {
                        "key": f"{r.item_id}@{h}/{side}",
                        "benchmark": b.name,
                        "task": "WMT",
                        "doc_id": str(r.pair_id),
                        "system": system,
                        "source": r.src,
                        "cond_source": r.ref,
                        "targets": (r.ref,),
                        "has_reference": True,
                        "candidate": cand,
                        "pair_id": str(r.pair_id),
                        "side": side,
                    }
                )
        return pd.DataFrame(rows)
    refs = [tuple(dict.fromkeys(r)) for r in df["references"]]
    digests = [
        _content_digest(s, *rf, c) for s, rf, c in zip(df["source"], refs, df["candidate"], strict=True)
    ]
    out = pd.DataFrame(
        {
            "key": [f"{k}@{h}" for k, h in zip(df["item_id"].astype(str), digests, strict=True)],
            "benchmark": b.name,
            "task": b.task,
            "doc_id": df["doc_id"].astype(str),
            "system": df["system"],
            "source": df["source"],
            "cond_source": df["source"],
            "targets": [tuple(dict.fromkeys(r)) for r in df["references"]]
            if not b.reference_is_source
            else [(s,) for s in df["source"]],
            "has_reference": not b.reference_is_source,
            "candidate": df["candidate"],
        }
    )
    for dim in b.dimensions:
        out[dim] = df[dim].to_numpy(dtype=np.float64)
    return out.reset_index(drop=True)


def _content_digest(*texts: str) -> str:
    """12 hex digits of the texts a row's scores are computed from (part of its store key)."""
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()[:12]


def data_digest(name: str, data_dir: str | None = None) -> str:
    """A digest of the data file of benchmark ``name`` (goes into the configuration of the runs that depend on
    the whole file: the summary, DiffScore-FT)."""
    from dlmeval.data.bartscore import bartscore_path
    from dlmeval.data.paths import file_digest

    return file_digest(bartscore_path(name, data_dir))


def dimensions(name: str) -> tuple[str, ...]:
    b = resolve_bartscore_name(name)
    return (P.DARR,) if b.task == "WMT" else b.dimensions


def judged_for(frame: pd.DataFrame, dimension: str) -> P.Judged:
    """The :class:`~dlmeval.protocols.diffscore_protocols.Judged` view of a scoring frame."""
    docs = frame["doc_id"].to_numpy(dtype=object)
    systems = frame["system"].astype(str).to_numpy(dtype=object)
    if dimension == P.DARR:
        pos = {k: i for i, k in enumerate(frame["key"])}
        pairs = frame.loc[frame["side"] == "better", "pair_id"].tolist()
        prefix = frame["key"].str.rsplit("/", n=1).str[0]
        better = frame.index[frame["side"] == "better"].to_numpy()
        worse = np.array([pos[f"{prefix[i]}/worse"] for i in better])
        return P.Judged(docs, systems, None, better, worse, np.asarray(pairs, dtype=object))
    return P.Judged(docs, systems, frame[dimension].to_numpy(dtype=np.float64))


# ---------------------------------------------------------------------------------------------- units
@dataclass(frozen=True)
class Unit:
    """Distinct texts to score once: ``uid`` (a digest of the texts), the frame rows that share them."""

    uid: str
    rows: tuple[int, ...]


def make_units(frame: pd.DataFrame) -> list[Unit]:
    """Rows grouped by identical (cond_source, targets, source, candidate), in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, (cs, tg, src, cand) in enumerate(
        zip(frame["cond_source"], frame["targets"], frame["source"], frame["candidate"])
    ):
        h = hashlib.sha256("\x1e".join([cs, "\x1f".join(tg), src, cand]).encode("utf-8")).hexdigest()[:20]
        groups.setdefault("u" + h, []).append(i)
    return [Unit(uid, tuple(rows)) for uid, rows in groups.items()]


def _keys(frame: pd.DataFrame, unit: Unit, metrics: Iterable[str]) -> list[str]:
    return [f"{frame['key'].iat[r]}|{m}" for r in unit.rows for m in metrics]


def _read_results(run, prefix: str) -> dict[str, dict[str, Any]]:
    """``{key: result}`` of the items of ``run`` whose key starts with ``prefix`` (one SQL query)."""
    rows = run.store.execute(
        "SELECT key, result FROM items WHERE run_id = ? AND substr(key, 1, ?) = ?",
        (run.run_id, len(prefix), prefix),
    ).fetchall()
    return {k: jsonsafe.loads(v) for k, v in rows}


# ---------------------------------------------------------------------------------------------- components
@dataclass
class Component:
    """One scored component: a family of metrics with its own run (config + models) in the store."""

    family: str
    run: Any
    label: Callable[[str], str]  # metric name -> table label


def ar_directions_for(name: str) -> tuple[str, ...]:
    b = resolve_bartscore_name(name)
    if b.task == "WMT":
        return ("r2h", "h2r", "f", "mar")
    if b.reference_is_source:
        return ("s2h", "h2s", "sbi", "mar")
    return AR_DIRECTIONS


def diffscore_calls(name: str, all_configs: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """The DiffScorer calls a benchmark needs: ``[(config, metrics it yields)]`` (bidir yields cond and reverse)."""
    b = resolve_bartscore_name(name)
    need = (
        set(DIFFSCORE_CONFIGS) if all_configs else {P.dimension_config(b.task, d) for d in dimensions(name)}
    )
    calls: list[tuple[str, tuple[str, ...]]] = []
    if "bidir" in need:
        calls.append(("bidir", ("cond", "reverse", "bidir")))
        need -= {"bidir", "cond", "reverse"}
    for cfg in ("cond", "reverse", "marginal"):
        if cfg in need:
            calls.append((cfg, (cfg,)))
    return calls


def _diffscore_payloads(row: pd.Series, cfg: str, prefix: str) -> dict[str, dict[str, Any]]:
    def clean(x):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    base = {"reason": clean(row.get("reason")), "warning": clean(row.get("warning"))}
    if cfg == "bidir":
        out = {}
        for d in ("cond", "reverse"):
            out[f"{prefix}:{d}"] = {
                "score": float(row[f"score_{d}"]),
                "se": float(row[f"se_{d}"]),
                "n_tokens": int(row[f"n_tokens_{d}"]),
                **base,
            }
        out[f"{prefix}:bidir"] = {
            "score": float(row["score"]),
            "se": float(row["se"]),
            "profile": list(row["profile"]),
            **base,
        }
        return out
    return {
        f"{prefix}:{cfg}": {
            "score": float(row["score"]),
            "se": float(row["se"]),
            "profile": list(row["profile"]),
            "n_tokens": int(row["n_tokens"]),
            **base,
        }
    }


class _Timer:
    def __init__(self, echo: bool = False):
        self.rows: list[dict[str, Any]] = []
        self.echo = echo

    @contextlib.contextmanager
    def time(self, benchmark: str, family: str, n_outputs: int):
        rec = {"benchmark": benchmark, "family": family, "outputs": n_outputs, "units_computed": 0}
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield rec
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 3)
            # CPU seconds of the whole process (all threads): a cost measure that a busy machine does not inflate
            rec["cpu_seconds"] = round(time.process_time() - c0, 3)
            self.rows.append(rec)
            if self.echo:
                print(
                    f"[meta-eval] {benchmark} {family}: {n_outputs} outputs, {rec['units_computed']} texts scored, "
                    f"{rec['seconds']:.1f} s wall, {rec['cpu_seconds']:.1f} s CPU",
                    file=sys.stderr,
                    flush=True,
                )


def run_chunks(
    run,
    frame: pd.DataFrame,
    units: Sequence[Unit],
    metrics: Sequence[str],
    compute: Callable[[list[Unit]], dict[str, dict[str, dict[str, Any]]]],
    *,
    chunk_size: int,
    done: set[str] | None = None,
    label: str = "",
    progress: bool = False,
) -> int:
    """Compute and store every pending chunk; returns the number of units computed.

    ``compute(chunk) -> {uid: {metric: result dict}}``. A chunk is pending when any of its (item, metric) keys is
    missing; it is then recomputed whole (same composition, same batches) and written in one transaction.
    """
    from dlmeval.progress import progress_bar

    if done is None:
        done = run.done_keys()
    chunks = [list(units[s : s + chunk_size]) for s in range(0, len(units), chunk_size)]
    todo = [c for c in chunks if any(k not in done for u in c for k in _keys(frame, u, metrics))]
    n = 0
    with progress_bar(label, sum(len(c) for c in todo), enabled=progress) as bar:
        for chunk in todo:
            res = compute(chunk)
            pairs = []
            for u in chunk:
                got = res[u.uid]
                missing = [m for m in metrics if m not in got]
                if missing:
                    raise RuntimeError(f"{label}: no {missing} for unit {u.uid}")
                for r in u.rows:
                    key = frame["key"].iat[r]
                    for m in metrics:
                        pairs.append((f"{key}|{m}", got[m]))
            run.put_many(pairs)
            done.update(k for k, _ in pairs)
            n += len(chunk)
            bar.update(len(chunk))
    return n


# ---------------------------------------------------------------------------------------------- the suite
@dataclass
class SuiteReport:
    run: Any  # the summary run (tables)
    results: pd.DataFrame
    comparisons: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    markdown: dict[str, str]
    timing: pd.DataFrame
    components: dict[str, str]  # family -> run id
    out_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)


class Suite:
    """Loads the models and opens the component runs of one suite configuration."""

    def __init__(
        self,
        opts: SuiteOptions,
        store,
        *,
        command_line: str | None = None,
        models: Mapping[str, Any] | None = None,
    ):
        opts.check()
        self.opts = opts
        self.models = dict(models or {})  # model spec -> an already loaded model
        self.store = store
        self.command_line = command_line
        self.benchmarks = opts.resolved_benchmarks()
        self.timer = _Timer(echo=opts.progress)
        self.components: dict[str, Component] = {}
        self._dlm = None
        self._ar = None
        self._embedder = None
        self._scorers: dict[str, Any] = {}
        self._frames: dict[str, pd.DataFrame] = {}

    def prepare(self, *, data: bool = True, models: bool = True) -> None:
        """Validate, then open: read every benchmark's data file and load every model the families need, so that a
        missing or malformed file, a bad model spec or a bad setting fails before any run is created (the store
        is left exactly as it was). Nothing here touches the store."""
        if data:
            for name in self.benchmarks:
                self.frame(name)
                data_digest(name, self.opts.data_dir)
        if models:
            fams = self.families()
            if "diffscore" in fams or "ft" in fams:
                self.dlm()
            if "ar" in fams:
                self.ar()
            if "embedding" in fams:
                self.embedder()

    def frame(self, name: str) -> pd.DataFrame:
        """The scoring frame of a benchmark under this suite's ``limit`` (built once)."""
        if name not in self._frames:
            self._frames[name] = scoring_frame(name, self.opts.data_dir, self.opts.limit)
        return self._frames[name]

    # ------------------------------------------------------------------ models
    def dlm(self):
        if self._dlm is None and self.opts.dlm in self.models:
            self._dlm = self.models[self.opts.dlm]
        if self._dlm is None:
            from dlmeval.models.registry import load_diffusion

            o = self.opts
            self._dlm = load_diffusion(
                o.dlm,
                device=o.device,
                dtype=o.dtype,
                trust_remote_code=o.trust_remote_code,
                allow_download=o.allow_download,
                seed=o.seed,
            )
        return self._dlm

    def ar(self):
        if self._ar is None and self.opts.ar in self.models:
            self._ar = self.models[self.opts.ar]
        if self._ar is None:
            from dlmeval.models.registry import load_causal_lm

            o = self.opts
            self._ar = load_causal_lm(
                o.ar,
                device=o.device,
                dtype=o.dtype,
                trust_remote_code=o.trust_remote_code,
                allow_download=o.allow_download,
                seed=o.seed,
            )
        return self._ar

    def embedder(self):
        if self._embedder is None:
            from dlmeval.baselines.embedding import TokenEmbedder

            self._embedder = TokenEmbedder(self.opts.encoder, device=self.opts.device)
        return self._embedder

    def has_chat(self, model) -> bool:
        return bool(getattr(model, "has_chat_template", False)) and bool(
            getattr(model.tokenizer, "chat_template", None)
        )

    def scorer(self, task: str, model=None, cache_key: str = "zs"):
        """A DiffScorer for a task on ``model`` (default: the zero-shot model with the prompt policy; any other
        model, i.e. a fine-tuned one, is scored plainly: no prompt, no chat template)."""
        from dlmeval.scoring import DiffScorer

        key = (cache_key, task)
        if key not in self._scorers:
            if model is None:
                model = self.dlm()
                chat = self.has_chat(model) and self.opts.prompt == "auto"
                prompt = TASK_PROMPTS[task] if chat else None
            else:
                chat, prompt = False, None
            self._scorers[key] = DiffScorer(
                model,
                seed=self.opts.seed,
                prompt=prompt,
                chat=chat,
                batch_size=self.opts.dlm_batch_size,
                max_tokens=self.opts.dlm_max_tokens,
                **self.opts.estimator(),
            )
        return self._scorers[key]

    # ------------------------------------------------------------------ runs
    def _open(self, kind: str, config: dict, models: list) -> Any:
        return self.store.open_run(
            kind, {"suite_version": SUITE_VERSION, **config}, models, self.opts.seed, self.command_line
        )

    def component(self, family: str) -> Component:
        if family in self.components:
            return self.components[family]
        o = self.opts
        if family == "lexical":
            from dlmeval.baselines.lexical import meteor_unavailable

            why = meteor_unavailable()
            run = self._open(
                "meta-eval-lexical",
                {
                    "metrics": list(lexical_metrics()),
                    "detokenize": True,
                    "bleu": "sacrebleu-sentence",
                    "rouge": "rouge-score-stemmed-F1",
                    "meteor": "nltk-wordnet3.0" if why is None else "not available",
                },
                [],
            )
            if why is not None:
                run.warn(f"METEOR not available: {why}")
            labels = {
                "bleu": "BLEU (sacrebleu)",
                "rouge1": "ROUGE-1 F1",
                "rouge2": "ROUGE-2 F1",
                "rougeL": "ROUGE-L F1",
                "meteor": "METEOR (nltk)",
            }
            comp = Component(family, run, lambda m: labels[m])
        elif family == "embedding":
            e = self.embedder()
            run = self._open(
                "meta-eval-embedding",
                {
                    "metrics": list(EMBEDDING_METRICS),
                    "layer": e.layer,
                    "idf": False,
                    "emd_weights": "uniform",
                },
                [e.identity()],
            )
            lab = e.label
            labels = {"bertscore_f": f"BERTScore-F [{lab}]", "moverscore": f"MoverScore 1-EMD [{lab}]"}
            comp = Component(family, run, lambda m: labels[m])
        elif family == "ar":
            from dlmeval.baselines.likelihood import DEFAULT_TEMPLATE

            m = self.ar()
            cfg = {"template": DEFAULT_TEMPLATE, "score": "mean-logprob"}
            if o.ar_max_refs is not None:
                cfg["max_refs"] = int(o.ar_max_refs)
            run = self._open("meta-eval-ar", cfg, [m])
            name = m.identity().name
            if o.ar_max_refs is not None:
                name += f", best of first {o.ar_max_refs} refs"
            arrows = {
                "s2h": "s->h",
                "h2s": "h->s",
                "sbi": "(s->h + h->s)/2",
                "r2h": "r->h",
                "h2r": "h->r",
                "f": "F=(r->h + h->r)/2",
                "mar": "marginal",
                "mapped": "(paper mapping)",
            }
            comp = Component(family, run, lambda d: f"AR {arrows[d.split(':', 1)[1]]} [{name}]")
        elif family == "diffscore":
            m = self.dlm()
            run = self._open(
                "meta-eval-diffscore",
                {
                    "estimator": o.estimator(),
                    "prompt_policy": o.prompt,
                    "task_prompts": TASK_PROMPTS,
                    "chat": self.has_chat(m),
                },
                [m],
            )
            name = m.identity().name
            comp = Component(family, run, lambda d: f"DiffScore {_cfg_label(d)} [{name}]")
        elif family == "ft":
            m = self.dlm()
            run = self._open(
                "meta-eval-diffscore-ft",
                {
                    "estimator": o.estimator(),
                    "ft": asdict(replace(o.ft_options, work_dir=None)),
                    # a fold model is trained on the whole file, so every score depends on all of it
                    "data": {b: data_digest(b, o.data_dir) for b in self.benchmarks if _ft_applies(b)},
                },
                [m],
            )
            name = m.identity().name
            comp = Component(family, run, lambda d: f"DiffScore-FT {_cfg_label(d)} [{name}]")
        else:
            raise InputError(f"unknown component {family!r}")
        self.components[family] = comp
        return comp

    # ------------------------------------------------------------------ scoring
    def metrics_for(self, family: str, name: str) -> list[str]:
        if family == "lexical":
            return list(lexical_metrics())
        if family == "embedding":
            return list(EMBEDDING_METRICS)
        if family == "ar":
            return [f"ar:{d}" for d in ar_directions_for(name)]
        if family in ("diffscore", "ft"):
            prefix = "diffscore" if family == "diffscore" else "diffscore-ft"
            return [f"{prefix}:{m}" for _, ms in diffscore_calls(name, self.opts.all_configs) for m in ms]
        raise InputError(family)

    def _compute_lexical(self, frame, chunk):
        from dlmeval.baselines.lexical import bleu, meteor, rouge

        out = {}
        with_meteor = "meteor" in lexical_metrics()
        for u in chunk:
            r = frame.iloc[u.rows[0]]
            rg = rouge(r["candidate"], r["targets"])
            out[u.uid] = {
                "bleu": {"score": bleu(r["candidate"], r["targets"])},
                **{k: {"score": v} for k, v in rg.items()},
            }
            if with_meteor:
                out[u.uid]["meteor"] = {"score": meteor(r["candidate"], r["targets"])}
        return out

    def _compute_embedding(self, frame, chunk):
        from dlmeval.baselines.embedding import greedy_match_f1, mover_score

        e = self.embedder()
        texts = [
            t for u in chunk for t in (frame["candidate"].iat[u.rows[0]], *frame["targets"].iat[u.rows[0]])
        ]
        e.clear()  # the chunk's own batches only, so a resumed run embeds exactly as an uninterrupted one
        e.embed(texts)  # one batched pass for the chunk; the metric calls below read the cache
        out = {}
        for u in chunk:
            r = frame.iloc[u.rows[0]]
            out[u.uid] = {
                "bertscore_f": {"score": greedy_match_f1(e, r["candidate"], r["targets"])},
                "moverscore": {"score": mover_score(e, r["candidate"], r["targets"])},
            }
        return out

    def _compute_ar(self, frame, chunk, directions):
        from dlmeval.baselines.likelihood import ARScorer, directional_scores

        sc = ARScorer(self.ar(), batch_size=self.opts.ar_batch_size)
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        base = [d for d in directions if d != "sbi"]
        if "sbi" in directions:
            base = list(dict.fromkeys([*base, "s2h", "h2s"]))
        got = directional_scores(
            sc,
            [r["candidate"] for r in rows],
            sources=[r["cond_source"] for r in rows],
            references=[r["targets"][: self.opts.ar_max_refs] for r in rows]
            if any(d in base for d in ("r2h", "h2r", "f"))
            else None,
            directions=base,
        )
        if "sbi" in directions:
            got["sbi"] = [(a + b) / 2 for a, b in zip(got["s2h"], got["h2s"])]
        return {
            u.uid: {f"ar:{d}": {"score": float(got[d][i])} for d in directions} for i, u in enumerate(chunk)
        }

    def _compute_diffscore(self, frame, chunk, task, prefix="diffscore", model=None, cache_key="zs"):
        scorer = self.scorer(task, model, cache_key)
        out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        name = frame["benchmark"].iat[0]
        est_log = logging.getLogger("dlmeval.scoring.estimator")
        for cfg, _ in diffscore_calls(name, self.opts.all_configs):
            level = est_log.level
            est_log.setLevel(
                logging.ERROR
            )  # truncation notes go to the run (below), not to the console per chunk
            try:
                df = scorer.score(
                    [r["candidate"] for r in rows],
                    None if cfg == "marginal" else [r["cond_source"] for r in rows],
                    config=cfg,
                    item_ids=[u.uid for u in chunk],
                )
            finally:
                est_log.setLevel(level)
            for u, (_, row) in zip(chunk, df.iterrows()):
                out[u.uid].update(_diffscore_payloads(row, cfg, prefix))
            if df["warning"].notna().any():
                comp = self.component("ft" if prefix == "diffscore-ft" else "diffscore")
                comp.run.warn(
                    f"{name} {cfg}: texts cut to the model window of {scorer.model.max_length} tokens "
                    "(each item's 'warning' field says which); the count is the number of chunks with cuts"
                )
        return out

    def score_benchmark(self, name: str, family: str) -> None:
        o = self.opts
        frame = self.frame(name)
        task = frame["task"].iat[0]
        units = make_units(frame)
        comp = self.component(family)
        metrics = self.metrics_for(family, name)
        done = set(_read_results(comp.run, f"{name}/"))
        with self.timer.time(name, family, len(frame)) as rec:
            if family == "ft":
                from dlmeval.protocols.diffscore_ft import score_ft

                rec["units_computed"] = score_ft(self, name, frame, units, metrics, done)
                return
            compute = {
                "lexical": lambda c: self._compute_lexical(frame, c),
                "embedding": lambda c: self._compute_embedding(frame, c),
                "ar": lambda c: self._compute_ar(frame, c, ar_directions_for(name)),
                "diffscore": lambda c: self._compute_diffscore(frame, c, task),
            }[family]
            rec["units_computed"] = run_chunks(
                comp.run,
                frame,
                units,
                metrics,
                compute,
                chunk_size=o.chunk_size,
                done=done,
                label=f"{name} {family}",
                progress=o.progress,
            )

    def families(self) -> list[str]:
        fams = [f for f in FAMILIES if f in self.opts.families]
        if self.opts.ft:
            fams.append("ft")
        return fams

    def score_all(self) -> None:
        for name in self.benchmarks:
            for family in self.families():
                if family == "ft" and not _ft_applies(name):
                    continue
                self.score_benchmark(name, family)

    # ------------------------------------------------------------------ tables
    def scores(self, name: str, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """``{metric: scores aligned with frame rows}`` from every component (NaN where missing)."""
        pos = {k: i for i, k in enumerate(frame["key"])}
        out: dict[str, np.ndarray] = {}
        for fam in self.families():
            comp = self.component(fam)
            for key, res in _read_results(comp.run, f"{name}/").items():
                item, _, metric = key.rpartition("|")
                i = pos.get(item)
                if i is None:
                    continue
                arr = out.setdefault(metric, np.full(len(frame), np.nan))
                v = res.get("score")
                arr[i] = np.nan if v is None else float(v)
        return out

    def metric_rows(
        self, name: str, dimension: str, scores: dict[str, np.ndarray]
    ) -> list[tuple[str, str, str]]:
        """``(metric id, family, label)`` rows for a benchmark dimension, in table order, with the mapped rows."""
        task = resolve_bartscore_name(name).task
        rows: list[tuple[str, str, str]] = []
        for fam in self.families():
            comp = self.component(fam)
            for m in self.metrics_for(fam, name):
                if m in scores:
                    rows.append((m, fam, comp.label(m)))
            cfg = P.dimension_config(task, dimension)
            if fam == "ar":
                d = P.ar_direction(task, cfg)
                if f"ar:{d}" in scores:
                    rows.append(("ar:mapped", fam, comp.label("ar:mapped")))
            if fam in ("diffscore", "ft"):
                prefix = "diffscore" if fam == "diffscore" else "diffscore-ft"
                if f"{prefix}:{cfg}" in scores:
                    rows.append((f"{prefix}:mapped", fam, comp.label(f"{prefix}:mapped")))
        return rows

    def metric_vector(
        self, name: str, dimension: str, metric: str, scores: dict[str, np.ndarray]
    ) -> np.ndarray:
        task = resolve_bartscore_name(name).task
        cfg = P.dimension_config(task, dimension)
        if metric == "ar:mapped":
            return scores[f"ar:{P.ar_direction(task, cfg)}"]
        if metric.endswith(":mapped"):
            return scores[f"{metric.split(':')[0]}:{cfg}"]
        return scores[metric]

    def evaluate_benchmark(self, name: str) -> tuple[list[dict], list[dict]]:
        o = self.opts
        frame = self.frame(name)
        scores = self.scores(name, frame)
        task = frame["task"].iat[0]
        protocols = P.BENCHMARK_PROTOCOLS[name]
        results, comps = [], []
        for dim in dimensions(name):
            judged = judged_for(frame, dim)
            rows = self.metric_rows(name, dim, scores)
            cfg = P.dimension_config(task, dim)
            vectors = {m: self.metric_vector(name, dim, m, scores) for m, _, _ in rows}
            for pi, proto in enumerate(protocols):
                bseed = derive_seed(o.seed, "meta-eval-bootstrap", name, dim, proto)
                for m, fam, label in rows:
                    j, v, n_ok, n_dropped = _finite(judged, vectors[m], dim)
                    rec = {
                        "benchmark": name,
                        "task": task,
                        "dimension": dim,
                        "dimension_tag": P.DIMENSION_TAGS.get(dim, dim),
                        "protocol": proto,
                        "protocol_label": P.PROTOCOLS[proto],
                        "primary": pi == 0,
                        "metric": m,
                        "family": fam,
                        "label": label,
                        "config": cfg if m.endswith(":mapped") else None,
                        "value": math.nan,
                        "n": 0,
                        "ci_lo": math.nan,
                        "ci_hi": math.nan,
                        "dropped": n_dropped,
                    }
                    if n_ok >= 2:
                        res = P.evaluate(proto, j, v)
                        rec["value"], rec["n"] = res.value, res.n
                        if o.bootstrap and (pi == 0 or o.ci_protocols == "all"):
                            rec["ci_lo"], rec["ci_hi"] = P.protocol_ci(
                                proto, j, v, n_resamples=o.bootstrap, confidence=o.confidence, seed=bseed
                            )
                    results.append(rec)
                if pi != 0:
                    continue
                # significance on the primary protocol: DiffScore (paper mapping) against every other row,
                # and DiffScore-FT against zero-shot DiffScore
                pairs = []
                if "diffscore:mapped" in vectors:
                    pairs += [("diffscore:mapped", m) for m, _, _ in rows if m != "diffscore:mapped"]
                if "diffscore-ft:mapped" in vectors:
                    pairs += [
                        ("diffscore-ft:mapped", m)
                        for m, _, _ in rows
                        if m in ("diffscore:mapped", "ar:mapped")
                    ]
                labels = {m: lab for m, _, lab in rows}
                for a, b in pairs:
                    va, vb = vectors[a], vectors[b]
                    ok = np.isfinite(va) & np.isfinite(vb)
                    if dim == P.DARR:
                        ok = np.isfinite(va[judged.better_index]) & np.isfinite(va[judged.worse_index])
                        ok &= np.isfinite(vb[judged.better_index]) & np.isfinite(vb[judged.worse_index])
                        j = _subset_pairs(judged, ok)
                    else:
                        j = _subset_rows(judged, ok)
                        va, vb = va[ok], vb[ok]
                    if (dim == P.DARR and ok.sum() < 2) or (dim != P.DARR and ok.sum() < 4):
                        continue
                    c = P.compare(
                        proto,
                        j,
                        va,
                        vb,
                        alpha=o.alpha,
                        n_resamples=max(o.bootstrap, 1),
                        seed=derive_seed(bseed, "compare", a, b),
                    )
                    comps.append(
                        {
                            "benchmark": name,
                            "task": task,
                            "dimension": dim,
                            "dimension_tag": P.DIMENSION_TAGS.get(dim, dim),
                            "protocol": proto,
                            "metric_a": a,
                            "label_a": labels[a],
                            "metric_b": b,
                            "label_b": labels[b],
                            "test": c.test,
                            "value_a": c.value_a,
                            "value_b": c.value_b,
                            "statistic": c.statistic,
                            "p": c.p,
                            "diff_ci_lo": c.ci_lo,
                            "diff_ci_hi": c.ci_hi,
                            "n": c.n,
                            "a_significantly_better": c.a_better,
                        }
                    )
        return results, comps


def _cfg_label(metric: str) -> str:
    d = metric.split(":", 1)[1]
    return "(paper mapping)" if d == "mapped" else d


def _ft_applies(name: str) -> bool:
    b = resolve_bartscore_name(name)
    return b.task != "WMT" and not b.reference_is_source


def _subset_rows(j: P.Judged, ok: np.ndarray) -> P.Judged:
    return P.Judged(j.docs[ok], j.systems[ok], None if j.human is None else j.human[ok])


def _subset_pairs(j: P.Judged, ok: np.ndarray) -> P.Judged:
    return replace(
        j,
        better_index=j.better_index[ok],
        worse_index=j.worse_index[ok],
        pair_ids=None if j.pair_ids is None else j.pair_ids[ok],
    )


def _finite(j: P.Judged, v: np.ndarray, dim: str) -> tuple[P.Judged, np.ndarray, int, int]:
    """Drop outputs whose score is NaN (an empty text DiffScore could not score, or a score not computed): rows,
    or whole DARR pairs. Returns the judged view, the scores, the units left and the units dropped."""
    if dim == P.DARR:
        ok = np.isfinite(v[j.better_index]) & np.isfinite(v[j.worse_index])
        w = np.where(np.isfinite(v), v, 0.0)  # outputs of dropped pairs are never read
        return _subset_pairs(j, ok), w, int(ok.sum()), int((~ok).sum())
    ok = np.isfinite(v)
    return _subset_rows(j, ok), v[ok], int(ok.sum()), int((~ok).sum())


# ---------------------------------------------------------------------------------------------- tables
def _fmt(x: float) -> str:
    return "" if x is None or not np.isfinite(x) else f"{x:.3f}"


def paper_tables(results: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Wide tables (rows = metric labels, columns = "benchmark DIM (protocol)") of the primary protocols, per task
    (``mt``, ``sum``, ``d2t``, each with an ``avg`` column), and ``secondary`` with every other protocol."""
    out: dict[str, pd.DataFrame] = {}
    if results.empty:
        return out
    fam_rank = {f: i for i, f in enumerate((*FAMILIES, "ft"))}
    tail = [*(f"ar:{d}" for d in AR_DIRECTIONS), "ar:mapped"]
    tail += [f"{p}:{c}" for p in ("diffscore", "diffscore-ft") for c in (*DIFFSCORE_CONFIGS, "mapped")]
    met_rank = {m: i for i, m in enumerate((*LEXICAL_METRICS, *EMBEDDING_METRICS, *tail))}
    firsts = results.drop_duplicates("label")
    keyed = sorted(
        zip(firsts["family"], firsts["metric"], firsts["label"]),
        key=lambda t: (fam_rank.get(t[0], 99), met_rank.get(t[1], 999), t[2]),
    )
    order = [lab for _, _, lab in keyed]  # the same row order in every table, whatever benchmark came first
    bench_order = list(BARTSCORE_BENCHMARKS)

    def wide(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        df["column"] = [
            f"{b} ({P.PROTOCOL_TAGS[p]})" if t == "WMT" else f"{b} {d} ({P.PROTOCOL_TAGS[p]})"
            for b, t, d, p in zip(df["benchmark"], df["task"], df["dimension_tag"], df["protocol"])
        ]
        df["_b"] = df["benchmark"].map(bench_order.index)
        cols = list(dict.fromkeys(df.sort_values(["_b"], kind="stable")["column"]))
        w = df.pivot_table(index="label", columns="column", values="value", aggfunc="first", dropna=False)
        w = w.reindex(index=[lab for lab in order if lab in w.index], columns=cols)
        w.index.name = "metric"
        return w

    prim = results[results["primary"]]
    for task, name in (("WMT", "mt"), ("SUM", "sum"), ("D2T", "d2t")):
        sub = prim[prim["task"] == task]
        if sub.empty:
            continue
        w = wide(sub)
        w["avg"] = w.mean(axis=1, skipna=False)
        out[name] = w
    sec = results[~results["primary"]]
    if not sec.empty:
        out["secondary"] = wide(sec)
    return out


def markdown_table(w: pd.DataFrame, marks: dict[tuple[str, str], str] | None = None, note: str = "") -> str:
    """A GitHub Markdown table (3 decimals; ``marks[(row, column)]`` appended to a cell)."""
    marks = marks or {}
    head = [w.index.name or "metric", *map(str, w.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(w.columns)) + "|"]
    for lab, row in w.iterrows():
        cells = [_fmt(v) + marks.get((lab, c), "") for c, v in row.items()]
        lines.append("| " + " | ".join([str(lab), *cells]) + " |")
    text = "\n".join(lines) + "\n"
    return text + (f"\n{note}\n" if note else "")


TABLE_NOTES = {
    "mt": "WMT19 DARR Kendall-like tau = (Concordant - Discordant) / (Concordant + Discordant) over the human "
    "better/worse pairs; a metric tie is Discordant.",
    "sum": "rho doc-avg: Spearman per document over its systems, averaged (SummEval, Newsroom); r sys: Pearson of "
    "system means (REALSumm coverage); acc: pairwise accuracy correct > incorrect (Rank19); r: Pearson over all "
    "outputs (QAGS). Reference-based baselines compare with the source on Rank19 / QAGS (no reference).",
    "d2t": "rho: Spearman over all outputs (BARTScore's evaluate_text; the D2T files carry no system names).",
    "secondary": "Protocols other than the paper's headline number, same metrics.",
}


def _marks(comparisons: pd.DataFrame, results: pd.DataFrame) -> dict[tuple[str, str], str]:
    """'†' on DiffScore / DiffScore-FT (paper mapping) cells significantly better than AR (paper mapping)."""
    marks: dict[tuple[str, str], str] = {}
    if comparisons.empty:
        return marks
    sig = comparisons[(comparisons["metric_b"] == "ar:mapped") & comparisons["a_significantly_better"]]
    for r in sig.itertuples(index=False):
        col = (
            f"{r.benchmark} ({P.PROTOCOL_TAGS[r.protocol]})"
            if r.task == "WMT"
            else f"{r.benchmark} {r.dimension_tag} ({P.PROTOCOL_TAGS[r.protocol]})"
        )
        marks[(r.label_a, col)] = "†"
    return marks


def write_outputs(out_dir: Path, tables: dict[str, pd.DataFrame], markdown: dict[str, str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out_dir / f"{name}.csv", index=not isinstance(df.index, pd.RangeIndex))
    for name, text in markdown.items():
        (out_dir / f"{name}.md").write_text(text, encoding="utf-8")


def run_suite(
    opts: SuiteOptions,
    store,
    *,
    out_dir: str | Path | None = None,
    command_line: str | None = None,
    models: Mapping[str, Any] | None = None,
    suite: Suite | None = None,
) -> SuiteReport:
    """Score every pending item (resumably), then compute and store the tables. See the module docstring.
    ``models`` maps a model spec string (``opts.dlm``, ``opts.ar``) to an already loaded model; ``suite`` is a
    :class:`Suite` already built (and prepared) for ``opts``, e.g. before the store was opened."""
    if suite is None:
        suite = Suite(opts, store, command_line=command_line, models=models)
    suite.store = store
    suite.prepare()
    suite.score_all()
    results, comps = [], []
    for name in suite.benchmarks:
        r, c = suite.evaluate_benchmark(name)
        results += r
        comps += c
    res = pd.DataFrame(results)
    cmp_df = pd.DataFrame(comps)
    tables = paper_tables(res)
    marks = _marks(cmp_df, res)
    markdown = {
        name: f"## {name}\n\n"
        + markdown_table(w, marks if name != "secondary" else None, TABLE_NOTES.get(name, ""))
        + (
            "\n† significantly better than AR (paper mapping), p < "
            f"{opts.alpha} (Williams test or paired bootstrap; see comparisons).\n"
            if name != "secondary"
            else ""
        )
        for name, w in tables.items()
    }
    timing = pd.DataFrame(suite.timer.rows)
    components = {f: c.run.run_id for f, c in suite.components.items()}
    summary = store.open_run(
        "meta-eval",
        {
            "suite_version": SUITE_VERSION,
            "suite": opts.suite,
            "benchmarks": list(suite.benchmarks),
            "limit": opts.limit,
            "data": {b: data_digest(b, opts.data_dir) for b in suite.benchmarks},
            "components": components,
            "bootstrap": opts.bootstrap,
            "confidence": opts.confidence,
            "alpha": opts.alpha,
            "ci_protocols": opts.ci_protocols,
        },
        [c.run.signature.models[0] for c in suite.components.values() if c.run.signature.models],
        opts.seed,
        command_line,
    )
    all_tables = {"results": res, "comparisons": cmp_df, **tables, "timing": timing}
    for name, df in all_tables.items():
        summary.put_table(name, df if isinstance(df.index, pd.RangeIndex) else df.reset_index())
    summary.finish()
    for c in suite.components.values():
        c.run.finish()
    od = Path(out_dir) if out_dir is not None else None
    if od is not None:
        write_outputs(od, all_tables, markdown)
    return SuiteReport(summary, res, cmp_df, tables, markdown, timing, components, od)
