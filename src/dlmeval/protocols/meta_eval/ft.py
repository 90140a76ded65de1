"""The ``ft`` family: DiffScore-FT (``--ft``), DiffScore with fold models fine-tuned by
:mod:`dlmeval.protocols.diffscore_ft`, scored with the same estimator and configurations as zero-shot DiffScore
(no prompt, no chat template). Training and fold logic live in ``diffscore_ft``; this family hands it what it
needs from the suite and stores what it scores."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from dlmeval.protocols.meta_eval.benchmarks import data_digest, get_benchmark
from dlmeval.protocols.meta_eval.diffscore import DIFFSCORE_CONFIGS, DiffScoreFamily
from dlmeval.protocols.meta_eval.families import register_family


@register_family
class DiffScoreFTFamily(DiffScoreFamily):
    name = "ft"
    rank = 50
    kind = "meta-eval-diffscore-ft"
    listed = False  # switched on by --ft, not by --metrics
    prefix = "diffscore-ft"
    title = "DiffScore-FT"
    order = (*(f"diffscore-ft:{c}" for c in DIFFSCORE_CONFIGS), "diffscore-ft:mapped")
    mapped = "diffscore-ft:mapped"

    @classmethod
    def enabled(cls, opts) -> bool:
        return bool(opts.ft)

    def applies(self, bench) -> bool:
        # benchmarks with references in English: not the factuality sets (no reference), not WMT (the default
        # models are English-only; the paper's DiffScore-FT-WMT trains on parallel data)
        return bench.has_reference and bench.english_source

    def configuration(self) -> dict[str, Any]:
        o = self.opts
        return {
            "estimator": o.estimator(),
            "ft": asdict(replace(o.ft_options, work_dir=None)),
            # a fold model is trained on the whole file, so every score depends on all of it
            "data": {
                b: data_digest(b, o.data_dir) for b in self.suite.benchmarks if self.applies(get_benchmark(b))
            },
        }

    def compute(self, frame, chunk):
        raise NotImplementedError("DiffScore-FT scores per fold model (see score)")

    def score(self, bench, frame, units, done) -> int:
        from dlmeval.protocols.diffscore_ft import score_ft

        return score_ft(self.suite, bench.name, frame, units, self.metrics(bench), done)

    def comparisons(self, rows) -> list[tuple[str, str]]:
        """DiffScore-FT (paper mapping) against zero-shot DiffScore and AR (paper mapping)."""
        if self.mapped not in rows:
            return []
        return [(self.mapped, m) for m in rows if m in ("diffscore:mapped", "ar:mapped")]
