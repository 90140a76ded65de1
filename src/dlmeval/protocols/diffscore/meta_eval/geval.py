"""The ``geval`` family: G-Eval's form filling (:mod:`dlmeval.baselines.geval`), probability-weighted scores read from
the judge's distribution over the score tokens; one metric per form a benchmark's dimensions map to
(:data:`DIMENSION_FORM`) and a "(paper mapping)" row.

The judge (``--geval-judge``): a local causal LM spec (``causal:DIR``, ``default-ar``, ...) or an OpenAI-compatible
endpoint URL. Never required: without one the family does not run (and the tables say so). Summarization forms
read the source document; data-to-text and MT forms read the reference (best of several).
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.errors import ModelNotFoundError
from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family

DIMENSION_FORM: dict[tuple[str, str], str] = {
    ("SUM", "coherence"): "coherence",
    ("SUM", "consistency"): "consistency",
    ("SUM", "fluency"): "fluency",
    ("SUM", "relevance"): "relevance",
    ("SUM", "informativeness"): "informativeness",
    ("SUM", "litepyramid_recall"): "relevance",
    ("SUM", "fact"): "consistency",
    ("D2T", "naturalness"): "d2t-naturalness",
    ("D2T", "informativeness"): "d2t-informativeness",
    ("D2T", "quality"): "d2t-quality",
    ("WMT", "DARR"): "mt-accuracy",
}


@register_family
class GEvalFamily(MetricFamily):
    name = "geval"
    rank = 35
    kind = "meta-eval-geval"
    checkpoints = (("geval_judge", "G-Eval judge (paper: GPT-4 through its API)", ()),)
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False
    order = tuple(f"geval:{f}" for f in dict.fromkeys(DIMENSION_FORM.values())) + ("geval:mapped",)
    mapped = "geval:mapped"
    paper_row = "G-Eval"
    needs = "--geval-judge SPEC (a causal LM) or URL (an OpenAI-compatible endpoint)"
    options_title = "G-Eval"
    options = (
        FamilyOption(
            "--geval-judge",
            metavar="SPEC",
            help="G-Eval judge: a causal LM spec or an OpenAI-compatible endpoint URL (http...)",
        ),
        FamilyOption("--geval-judge-model", metavar="SPEC", help="the model name sent to a G-Eval endpoint"),
    )

    @functools.cached_property
    def judge(self):
        from dlmeval.baselines.geval import EndpointJudge, LocalJudge

        o = self.opts
        if o.geval_judge is None:
            raise ModelNotFoundError(f"G-Eval: no judge; pass {self.needs}")
        if o.geval_judge.startswith(("http://", "https://")):
            return EndpointJudge(o.geval_judge, o.geval_judge_model)
        from dlmeval.models.registry import load_causal_lm

        model = self.suite.model(
            o.geval_judge, lambda: load_causal_lm(o.geval_judge, **o.load_kwargs(evaluator=True))
        )
        return LocalJudge(model, batch_size=o.ar_batch_size)

    def load(self) -> None:
        self.judge  # noqa: B018

    def applies(self, bench) -> bool:
        return any((bench.task, d) in DIMENSION_FORM for d in bench.dimensions)

    def _forms(self, bench) -> list[str]:
        return list(
            dict.fromkeys(
                DIMENSION_FORM[(bench.task, d)] for d in bench.dimensions if (bench.task, d) in DIMENSION_FORM
            )
        )

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.geval import FORMS

        return {
            "score": "sum_s s p(s) / sum_s p(s), p read from the judge's distribution",
            "forms": {
                n: {"prompt": f.prompt, "scores": f.scores, "published": f.published}
                for n, f in FORMS.items()
            },
            "judge": self.judge.name,
            "document": {"SUM": "source", "D2T": "reference", "WMT": "reference"},
        }

    def models(self) -> list[Any]:
        return [self.judge.identity()]

    def metrics(self, bench) -> list[str]:
        return [f"geval:{f}" for f in self._forms(bench)]

    def compute(self, frame, chunk):
        from dlmeval.baselines.geval import FORMS
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

        bench = get_benchmark(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
        for name in self._forms(bench):
            form = FORMS[name]
            owner, docs, outs = [], [], []
            for i, r in enumerate(rows):
                ctx = [r["source"]] if bench.task == "SUM" else list(dict.fromkeys(r["targets"]))
                for c in ctx if "{{Document}}" in form.prompt else [None]:
                    owner.append(i)
                    docs.append(c)
                    outs.append(r["candidate"])
            before = self.judge.truncated
            got = self.judge.score(form, docs, outs)
            if self.judge.truncated > before:
                self.run.warn(
                    f"geval: {self.judge.truncated - before} source text(s) cut at their end to fit the judge's window"
                )
            best = [float("-inf")] * len(rows)
            for i, v in zip(owner, got):
                best[i] = max(best[i], v)
            for u, v in zip(chunk, best):
                out[u.uid][f"geval:{name}"] = {"score": v}
        return out

    def label(self, metric: str) -> str:
        from dlmeval.baselines.geval import FORMS

        what = metric.split(":", 1)[1]
        if what == "mapped":
            return f"G-Eval (paper mapping) [{self.judge.name}]"
        mark = "" if FORMS[what].published else ", dlmeval's form"
        return f"G-Eval {what} [{self.judge.name}{mark}]"

    def mapped_source(self, bench, dimension: str) -> str | None:
        f = DIMENSION_FORM.get((bench.task, dimension))
        return None if f is None else f"geval:{f}"
