"""The :class:`Suite`: the models, one component run per metric family, the scoring loop over benchmarks and
families, and the per-benchmark score vectors the evaluation reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.protocols.diffscore.meta_eval.benchmarks import data_digest, get_benchmark, scoring_frame
from dlmeval.protocols.diffscore.meta_eval.diffscore import score_diffscore_chunk
from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES, MetricFamily
from dlmeval.protocols.diffscore.meta_eval.options import SUITE_VERSION, SuiteOptions
from dlmeval.protocols.diffscore.meta_eval.work import Timer, make_units, read_results

Component = MetricFamily  # a component of the suite is a metric family instance (``.run``, ``.label``)


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
        self.timer = Timer(echo=opts.progress)
        self.components: dict[str, MetricFamily] = {}
        self._dlm = None
        self._ar = None
        self._embedder = None
        self._scorers: dict[Any, Any] = {}
        self._frames: dict[str, pd.DataFrame] = {}

    def prepare(self, *, data: bool = True, models: bool = True) -> None:
        """Validate, then open: read every benchmark's data file and load every model the families need, so that a
        missing or malformed file, a bad model spec or a bad setting fails before any run is created (the store
        is left exactly as it was). Nothing here touches the store."""
        if data:
            for name in self.benchmarks:
                self.frame(name)
                self.data_identity(name)
        if models:
            for fam in self.families():
                self.family(fam).load()

    def frame(self, name: str) -> pd.DataFrame:
        """The scoring frame of a benchmark under this suite's ``limit`` (built once)."""
        if name not in self._frames:
            self._frames[name] = scoring_frame(
                name, self.opts.data_dir, self.opts.limit, self.opts.source_for(name)
            )
        return self._frames[name]

    def data_identity(self, name: str) -> str | dict:
        """What a run that depends on a benchmark's whole data records of it: the data file's digest, or the
        provenance of the rows of its ``--benchmark-source`` (a digest of every row among them)."""
        return data_digest(name, self.opts.data_dir, self.opts.source_for(name))

    # ------------------------------------------------------------------ models
    def dlm(self):
        if self._dlm is None and self.opts.dlm in self.models and self.opts.dlm_adapter is None:
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
                adapter=o.dlm_adapter,
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
                device=o.evaluator_device or o.device,
                dtype=o.dtype,
                trust_remote_code=o.trust_remote_code,
                allow_download=o.allow_download,
                seed=o.seed,
            )
        return self._ar

    def embedder(self):
        if self._embedder is None:
            from dlmeval.baselines.embedding import TokenEmbedder

            self._embedder = TokenEmbedder(
                self.opts.encoder, device=self.opts.evaluator_device or self.opts.device
            )
        return self._embedder

    def has_chat(self, model) -> bool:
        return bool(getattr(model, "has_chat_template", False)) and bool(
            getattr(model.tokenizer, "chat_template", None)
        )

    def scorer(self, task: str, model=None, cache_key: str = "zs", layout: dict | None = None):
        """A DiffScorer for a task on ``model`` (default: the zero-shot model with the prompt policy; any other
        model, i.e. a fine-tuned one, in its ``layout`` ``{"chat", "prompt"}``, plain when none is given), kept
        under ``(cache_key, task)``."""
        from dlmeval.scoring import DiffScorer

        key = (cache_key, task)
        if key not in self._scorers:
            if model is None:
                model = self.dlm()
                chat = self.has_chat(model) and self.opts.prompt == "auto"
                prompt = _task_prompt(task) if chat else None
            else:
                chat, prompt = bool((layout or {}).get("chat")), (layout or {}).get("prompt")
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

    def _compute_diffscore(self, frame, chunk, task, prefix="diffscore", model=None, cache_key="zs"):
        """One chunk of DiffScore (``prefix="diffscore-ft"`` with an adapter ``model``: DiffScore-FT). The DiffScore
        families compute through this method (tests patch it to interrupt the work)."""
        comp = self.component("ft" if prefix == "diffscore-ft" else "diffscore")
        return score_diffscore_chunk(
            self.scorer(task, model, cache_key),
            frame,
            chunk,
            prefix=prefix,
            all_configs=self.opts.all_configs,
            warn=comp.run.warn,
        )

    # ------------------------------------------------------------------ runs
    def _open(self, kind: str, config: dict, models: list) -> Any:
        return self.store.open_run(
            kind, {"suite_version": SUITE_VERSION, **config}, models, self.opts.seed, self.command_line
        )

    def family(self, name: str) -> MetricFamily:
        """The family instance of this suite (its run is opened on first use of ``.run``)."""
        if name not in self.components:
            from dlmeval.protocols.diffscore.meta_eval.families import get_family

            self.components[name] = get_family(name)(self)
        return self.components[name]

    def component(self, family: str) -> MetricFamily:
        """The family with its run open."""
        fam = self.family(family)
        fam.run  # noqa: B018  (opens the run)
        return fam

    def families(self) -> list[str]:
        """The families this suite runs, in rank (table) order."""
        return [n for n, cls in METRIC_FAMILIES.items() if cls.enabled(self.opts)]

    def metrics_for(self, family: str, name: str) -> list[str]:
        return self.family(family).metrics(get_benchmark(name))

    # ------------------------------------------------------------------ scoring
    def score_benchmark(self, name: str, family: str) -> None:
        """Score every pending unit of one benchmark with one family (resumably)."""
        frame = self.frame(name)
        units = make_units(frame)
        fam = self.component(family)
        done = fam.run.done_keys(f"{name}/")
        with self.timer.time(name, family, len(frame)) as rec:
            rec["units_computed"] = fam.score(get_benchmark(name), frame, units, done)

    def score_all(self) -> None:
        for name in self.benchmarks:
            bench = get_benchmark(name)
            for family in self.families():
                if self.family(family).applies(bench):
                    self.score_benchmark(name, family)

    # ------------------------------------------------------------------ score vectors
    def scores(self, name: str, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """``{metric: scores aligned with frame rows}`` from every component (NaN where missing)."""
        pos = {k: i for i, k in enumerate(frame["key"])}
        out: dict[str, np.ndarray] = {}
        for fam in self.families():
            for key, res in read_results(self.component(fam).run, f"{name}/").items():
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
        return [(m, fam, lab) for m, fam, lab, _ in self._rows(name, dimension, scores)]

    def _rows(self, name: str, dimension: str, scores) -> list[tuple[str, str, str, str]]:
        """``(metric id, family, label, the metric id whose scores the row reads)``."""
        bench = get_benchmark(name)
        rows: list[tuple[str, str, str, str]] = []
        for f in self.families():
            fam = self.component(f)
            for m in fam.metrics(bench):
                if m in scores:
                    rows.append((m, f, fam.label(m), m))
            src = fam.mapped_source(bench, dimension) if fam.mapped else None
            if src is not None and src in scores:
                rows.append((fam.mapped, f, fam.label(fam.mapped), src))
        return rows

    def metric_vector(
        self, name: str, dimension: str, metric: str, scores: dict[str, np.ndarray]
    ) -> np.ndarray:
        for m, _, _, src in self._rows(name, dimension, scores):
            if m == metric:
                return scores[src]
        return scores[metric]

    def evaluate_benchmark(self, name: str) -> tuple[list[dict], list[dict]]:
        """Result records and significance comparisons of one benchmark (see :mod:`.evaluate`)."""
        from dlmeval.protocols.diffscore.meta_eval.evaluate import evaluate_benchmark

        return evaluate_benchmark(self, name)


def _task_prompt(task: str) -> str:
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS, TASK_PROMPTS

    if task in TASK_PROMPTS:
        return TASK_PROMPTS[task]
    return next(b.task_prompt() for b in BENCHMARKS.values() if b.task == task)
