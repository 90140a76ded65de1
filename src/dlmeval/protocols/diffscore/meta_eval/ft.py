"""The ``ft`` family: DiffScore-FT (``--ft``), DiffScore with a LoRA adapter on a base model of its own
(:mod:`dlmeval.protocols.diffscore.ft`: the cross-benchmark training scheme, adapters cached by content), scored
with the same estimator and configurations as zero-shot DiffScore, in the layout the adapter was trained on.

This module is the call site: it hands ``diffscore.ft`` an :class:`~dlmeval.protocols.diffscore.ft.FTContext`
(how to load the base model, with or without an adapter, how to read a benchmark's full frame, the training pool:
the benchmarks registered with ``ft_pool``) and a ``score_with(model, layout)`` that scores the benchmark's
pending units through the suite's chunk loop. ``diffscore.ft`` imports nothing of the meta-evaluation.
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.protocols.diffscore.meta_eval.diffscore import DIFFSCORE_CONFIGS, DiffScoreFamily, dlm_batching
from dlmeval.protocols.diffscore.meta_eval.families import register_family


@register_family
class DiffScoreFTFamily(DiffScoreFamily):
    name = "ft"
    rank = 50
    kind = "meta-eval-diffscore-ft"
    checkpoints = (("ft_options.model", "DiffScore-FT base model (--ft-model; default --model)", ()),)
    listed = False  # switched on by --ft, not by --metrics
    prefix = "diffscore-ft"
    title = "DiffScore-FT"
    order = (*(f"diffscore-ft:{c}" for c in DIFFSCORE_CONFIGS), "diffscore-ft:mapped")
    mapped = "diffscore-ft:mapped"

    @classmethod
    def enabled(cls, opts) -> bool:
        return bool(opts.ft)

    # ------------------------------------------------------------------ the FT context
    @property
    def spec(self) -> str:
        """The base model FT starts from (``--ft-model``; default: the zero-shot ``--model``)."""
        return self.opts.ft_options.model or self.opts.dlm

    def _load(self, adapter: str | None = None):
        from dlmeval.models.registry import load_diffusion

        kw = {"adapter": adapter} if adapter is not None else {}
        return load_diffusion(self.spec, **self.opts.load_kwargs(), **kw)

    def pool(self) -> tuple[str, ...]:
        """The benchmarks whose (source, reference) pairs may be trained on (never the one evaluated)."""
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS

        return tuple(n for n, b in BENCHMARKS.items() if b.ft_pool and b.suite == self.opts.suite)

    @property
    def context(self):
        """The FT context, one per suite (through ``suite.model``: the base model it loads for the signature in
        ``load()`` is the one the first training starts from, not loaded again by the suite's own instance)."""
        from dlmeval.protocols.diffscore.ft import FTContext
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import scoring_frame

        o = self.opts
        return self.suite.model(
            f"ft-context:{self.spec}",
            lambda: FTContext(
                options=o.ft_options,
                load_base=self._load,
                load=self._load,
                # training never depends on --limit
                frame_of=lambda name: scoring_frame(
                    name, o.data_dir, None, o.source_for(name), o.resolved_detokenizer
                ),
                pool=self.pool(),
                seed=o.seed,
                progress=o.progress,
            ),
        )

    def _base_identity(self) -> dict:
        from dlmeval.protocols.diffscore.ft import base_identity

        # the zero-shot model's weights (without its --adapter): no second load for the signature
        if self.spec == self.opts.dlm and self.opts.dlm_adapter is None:
            return self.suite.dlm().identity().as_dict()
        return base_identity(self.context)

    # ------------------------------------------------------------------ the run
    def load(self) -> None:
        self.opts.ft_options.check()
        self._base_identity()

    def configuration(self) -> dict[str, Any]:
        o = self.opts
        # the adapter of a benchmark is trained on the pool's full files and decontaminated against the
        # benchmark's full file: every score depends on all of them
        names = dict.fromkeys([*self.pool(), *self.suite.benchmarks])
        return {
            "estimator": o.estimator_record(),
            "ft": o.ft_options.describe(),
            "batching": dlm_batching(o),
            "data": {b: self.suite.data_identity(b) for b in names},
        }

    def models(self) -> list[Any]:
        return [self._base_identity()]

    @functools.cached_property
    def model_label(self) -> str:
        return str(self._base_identity()["name"])

    # ------------------------------------------------------------------ scoring
    def compute(self, frame, chunk):
        raise NotImplementedError("DiffScore-FT scores with its adapter model (see score)")

    def score(self, bench, frame, units, done) -> int:
        from dlmeval.protocols.diffscore.ft import score_ft
        from dlmeval.protocols.diffscore.meta_eval.work import run_chunks, unit_keys

        metrics = self.metrics(bench)
        if all(k in done for u in units for k in unit_keys(frame, u, metrics)):
            return 0  # nothing pending: no adapter to load or train
        task = frame["task"].iat[0]
        key = f"ft:{bench.name}"

        def score_with(model, layout: dict) -> int:
            self.suite.scorer(task, model, key, layout=layout)  # the adapter's layout (chat template, prompt)
            try:
                return run_chunks(
                    self.run,
                    frame,
                    units,
                    metrics,
                    lambda chunk: self.suite.compute_diffscore(
                        frame, chunk, task, prefix=self.prefix, model=model, cache_key=key
                    ),
                    chunk_size=self.opts.chunk_size,
                    done=done,
                    label=f"{bench.name} DiffScore-FT",
                    progress=self.opts.progress,
                )
            finally:
                self.suite.release_scorer(task, key)

        return score_ft(self.context, bench.name, score_with)

    def comparisons(self, rows) -> list[tuple[str, str]]:
        """DiffScore-FT (paper mapping) against zero-shot DiffScore and AR (paper mapping)."""
        if self.mapped not in rows:
            return []
        return [(self.mapped, m) for m in rows if m in ("diffscore:mapped", "ar:mapped")]
