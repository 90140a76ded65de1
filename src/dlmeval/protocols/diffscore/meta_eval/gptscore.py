"""The ``gptscore`` family: GPTScore-style prompted AR scoring (the paper's ``‡`` baseline) with the suite's AR model
(``--ar``; the paper's is GPT-2-large), through :mod:`dlmeval.baselines.gptscore`.

One metric per GPTScore aspect a benchmark's dimensions map to (:data:`~dlmeval.baselines.gptscore.DIMENSION_ASPECT`:
``gptscore:COH`` on SummEval coherence, ``gptscore:ACC`` on the WMT pairs, ...), each the mean hypothesis
log-probability after that aspect's instruction. The instruction carries the source document for summarization
(GPTScore's ``Tl;dr`` prompts) and the reference for MT and D2T (GPTScore's ``In other words`` prompts; with several
references the best one counts). The "(paper mapping)" row reads the aspect of the column's dimension.

Off by default (``--metrics ... gptscore``): it scores once per aspect, i.e. up to four times per output.
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import (
    MetricFamily,
    refs_config,
    refs_label,
    register_family,
)

#: where the prompt's text comes from, per task: the frame's ``cond_source`` (s2h) or its references (r2h)
CONTEXT = {"SUM": "s2h", "WMT": "r2h", "D2T": "r2h"}


def _aspects(bench) -> list[str]:
    from dlmeval.baselines.gptscore import aspect_for

    return list(dict.fromkeys(aspect_for(bench.task, d) for d in bench.dimensions))


@register_family
class GPTScoreFamily(MetricFamily):
    name = "gptscore"
    rank = 34  # after the AR likelihood and BARTScore rows
    kind = "meta-eval-gptscore"
    checkpoints = (("ar", "GPTScore AR model (--ar-model; paper: GPT-2-large)", ()),)
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False
    order = tuple(
        f"gptscore:{a}" for a in ("COH", "CON", "FLU", "REL", "INF", "COV", "FAC", "NAT", "QUA", "ACC")
    ) + ("gptscore:mapped",)
    mapped = "gptscore:mapped"
    paper_row = "GPTScore"
    needs = ""

    def load(self) -> None:
        self.suite.ar()

    def applies(self, bench) -> bool:
        from dlmeval.baselines.gptscore import DIMENSION_ASPECT

        return bench.task in CONTEXT and all((bench.task, d) in DIMENSION_ASPECT for d in bench.dimensions)

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.gptscore import TEMPLATES
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

        tasks = sorted({get_benchmark(b).task for b in self.suite.benchmarks} & set(CONTEXT))
        cfg: dict[str, Any] = {
            "templates": {t: TEMPLATES[t] for t in tasks},
            "context": {t: CONTEXT[t] for t in tasks},
            "score": "mean-logprob",
        }
        return refs_config(cfg, self.opts)

    def models(self) -> list[Any]:
        return [self.suite.ar()]

    def metrics(self, bench) -> list[str]:
        return [f"gptscore:{a}" for a in _aspects(bench)] if self.applies(bench) else []

    def compute(self, frame, chunk):
        from dlmeval.baselines.gptscore import GPTScorer, gptscore
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

        bench = get_benchmark(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        cands = [r["candidate"] for r in rows]
        direction = CONTEXT[bench.task]
        out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
        for aspect in _aspects(bench):
            sc = GPTScorer.for_aspect(self.suite.ar(), bench.task, aspect, batch_size=self.opts.ar_batch_size)
            if direction == "s2h":
                got = gptscore(sc, cands, sources=[r["cond_source"] for r in rows])["s2h"]
            else:
                refs = [r["targets"][: self.opts.ar_max_refs] for r in rows]
                got = gptscore(sc, cands, references=refs, directions=("r2h",))["r2h"]
            for u, v in zip(chunk, got):
                out[u.uid][f"gptscore:{aspect}"] = {"score": float(v)}
        return out

    @functools.cached_property
    def model_label(self) -> str:
        return refs_label(self.suite.ar().identity().name, self.opts)

    def label(self, metric: str) -> str:
        what = metric.split(":", 1)[1]
        return f"GPTScore {'(paper mapping)' if what == 'mapped' else what} [{self.model_label}]"

    def mapped_source(self, bench, dimension: str) -> str | None:
        from dlmeval.baselines.gptscore import DIMENSION_ASPECT

        a = DIMENSION_ASPECT.get((bench.task, dimension))
        return None if a is None else f"gptscore:{a}"
