"""The :class:`Suite`: one suite configuration over an open store: one component run per metric family, the
scoring loop over benchmarks and families, and the per-benchmark score vectors the evaluation reads. What it reads
(options, benchmark frames, models) is its :class:`~.inputs.SuiteInputs`, validated before the store is opened."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark
from dlmeval.protocols.diffscore.meta_eval.diffscore import score_diffscore_chunk
from dlmeval.protocols.diffscore.meta_eval.families import MetricFamily
from dlmeval.protocols.diffscore.meta_eval.inputs import SuiteInputs
from dlmeval.protocols.diffscore.meta_eval.options import SUITE_VERSION, SuiteOptions
from dlmeval.protocols.diffscore.meta_eval.work import Timer, make_units, read_results

Component = MetricFamily  # a component of the suite is a metric family instance (``.run``, ``.label``)


class Suite:
    """The component runs of one suite configuration in ``store``. ``inputs`` is a :class:`SuiteInputs` (usually
    prepared before the store was opened), or the :class:`SuiteOptions` to build one from (with ``models``, the
    already loaded models)."""

    def __init__(
        self,
        inputs: SuiteInputs | SuiteOptions,
        store,
        *,
        command_line: str | None = None,
        models: Mapping[str, Any] | None = None,
    ):
        if store is None:
            raise TypeError(
                "a Suite opens runs in a store: pass an open store (check the inputs without one with "
                "SuiteInputs(opts).prepare())"
            )
        if not isinstance(inputs, SuiteInputs):
            inputs = SuiteInputs(inputs, models=models)
        elif models:
            raise TypeError("give the already loaded models to the SuiteInputs, not to the Suite")
        self.inputs = inputs
        self.store = store
        self.command_line = command_line
        self.timer = Timer(echo=inputs.opts.progress)
        self.components: dict[str, MetricFamily] = {}

    # ------------------------------------------------------------------ the inputs (see SuiteInputs)
    @property
    def opts(self) -> SuiteOptions:
        return self.inputs.opts

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return self.inputs.benchmarks

    @property
    def models(self) -> dict[str, Any]:
        return self.inputs.models

    def frame(self, name: str) -> pd.DataFrame:
        return self.inputs.frame(name)

    def data_identity(self, name: str) -> str | dict:
        return self.inputs.data_identity(name)

    def model(self, key: str, make) -> Any:
        return self.inputs.model(key, make)

    def dlm(self):
        return self.inputs.dlm()

    def ar(self):
        return self.inputs.ar()

    def embedder(self):
        return self.inputs.embedder()

    def has_chat(self, model) -> bool:
        return self.inputs.has_chat(model)

    def scorer(self, task: str, model=None, cache_key: str = "zs", layout: dict | None = None):
        return self.inputs.scorer(task, model, cache_key, layout)

    def release_scorer(self, task: str, cache_key: str) -> None:
        self.inputs.release_scorer(task, cache_key)

    def compute_diffscore(self, frame, chunk, task, prefix="diffscore", model=None, cache_key="zs"):
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
    def open_run(self, kind: str, config: dict, models: list) -> Any:
        """Open (or resume) a component's run: the suite version, the seed and the command line are added, and the
        detokenizer of the texts where it is not Treebank (so that the default's run ids stay)."""
        detok = self.opts.resolved_detokenizer
        config = {"suite_version": SUITE_VERSION, **config}
        if detok != "treebank":
            config["detokenizer"] = detok
        return self.store.open_run(kind, config, models, self.opts.seed, self.command_line)

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
        return self.inputs.families()

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
        return [(m, fam, lab) for m, fam, lab, _ in self.metric_sources(name, dimension, scores)]

    def metric_sources(
        self, name: str, dimension: str, scores, protocol: str | None = None
    ) -> list[tuple[str, str, str, str]]:
        """``(metric id, family, label, the metric id whose scores the row reads)``; the rows the families report
        under suite protocol ``protocol`` (default: the run's ``--protocol``)."""
        bench = get_benchmark(name)
        rows: list[tuple[str, str, str, str]] = []
        for f in self.families():
            fam = self.component(f)
            for m in fam.reported(bench, protocol):
                if m in scores:
                    rows.append((m, f, fam.label(m), m))
            src = fam.mapped_source(bench, dimension) if fam.mapped else None
            if src is not None and src in scores:
                rows.append((fam.mapped, f, fam.label(fam.mapped), src))
        return rows

    def metric_vector(
        self, name: str, dimension: str, metric: str, scores: dict[str, np.ndarray]
    ) -> np.ndarray:
        for m, _, _, src in self.metric_sources(name, dimension, scores):
            if m == metric:
                return scores[src]
        return scores[metric]

    def evaluate_benchmark(self, name: str) -> tuple[list[dict], list[dict]]:
        """Result records and significance comparisons of one benchmark (see :mod:`.evaluate`)."""
        from dlmeval.protocols.diffscore.meta_eval.evaluate import evaluate_benchmark

        return evaluate_benchmark(self, name)
