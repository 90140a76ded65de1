"""The ``ar`` family: autoregressive likelihood scores with the AR model (:mod:`dlmeval.baselines.likelihood`).

s2h, h2s, r2h, h2r, F = (r2h + h2r) / 2, sbi = (s2h + h2s) / 2 and the marginal, where the benchmark has the texts:
no s2h / h2s where the source is not English (WMT), no reference directions without references (the factuality
sets). The "(paper mapping)" row reads the direction that plays the mapped DiffScore configuration's part.
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

AR_DIRECTIONS = ("s2h", "h2s", "sbi", "r2h", "h2r", "f", "mar")
AR_ARROWS = {
    "s2h": "s->h",
    "h2s": "h->s",
    "sbi": "(s->h + h->s)/2",
    "r2h": "r->h",
    "h2r": "h->r",
    "f": "F=(r->h + h->r)/2",
    "mar": "marginal",
    "mapped": "(paper mapping)",
}


def ar_directions_for(name: str) -> tuple[str, ...]:
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

    b = get_benchmark(name)
    source = ("s2h", "h2s", "sbi") if b.english_source else ()
    refs = ("r2h", "h2r", "f") if b.has_reference else ()
    return tuple(d for d in AR_DIRECTIONS if d in (*source, *refs, "mar"))


@register_family
class ARFamily(MetricFamily):
    name = "ar"
    rank = 30
    kind = "meta-eval-ar"
    checkpoints = (("ar", "AR model (--ar-model; a dlmeval model spec or directory)", ()),)
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    order = (*(f"ar:{d}" for d in AR_DIRECTIONS), "ar:mapped")
    mapped = "ar:mapped"

    def load(self) -> None:
        self.suite.ar()

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.likelihood import DEFAULT_TEMPLATE

        cfg: dict[str, Any] = {
            "template": DEFAULT_TEMPLATE,
            "score": "mean-logprob",
            # one rule with the bartscore family (--ref-agg): mean over the references (BARTScore's SUM/score.py at
            # its pickles' commit) or the best reference per direction and the best per-reference F
            "multi_reference": f"{self.opts.ref_agg} over references",
        }
        return refs_config(cfg, self.opts)

    def models(self) -> list[Any]:
        return [self.suite.ar()]

    def metrics(self, bench) -> list[str]:
        return [f"ar:{d}" for d in ar_directions_for(bench.name)]

    def compute(self, frame, chunk):
        from dlmeval.baselines.likelihood import ARScorer, directional_scores

        directions = ar_directions_for(frame["benchmark"].iat[0])
        sc = ARScorer(self.suite.ar(), batch_size=self.opts.ar_batch_size)
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        base = [d for d in directions if d != "sbi"]
        if "sbi" in directions:
            base = list(dict.fromkeys([*base, "s2h", "h2s"]))
        cuts: dict[str, list[int]] = {}
        got = directional_scores(
            sc,
            [r["candidate"] for r in rows],
            sources=[r["cond_source"] for r in rows],
            references=[r["targets"][: self.opts.ar_max_refs] for r in rows]
            if any(d in base for d in ("r2h", "h2r", "f"))
            else None,
            directions=base,
            cuts=cuts,
            ref_agg=self.opts.ref_agg,
        )
        if "sbi" in directions:
            got["sbi"] = [(a + b) / 2 for a, b in zip(got["s2h"], got["h2s"])]
            cuts["sbi"] = [max(a, b) for a, b in zip(cuts["s2h"], cuts["h2s"])]
        out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
        window = self.suite.ar().max_length
        for d in directions:
            cut = cuts.get(d, [0] * len(chunk))
            if any(cut):
                self.run.warn(
                    f"{frame['benchmark'].iat[0]} ar:{d}: conditioning text cut at its start to fit the AR window "
                    f"of {window} tokens (each item's 'warning' field says by how much); the count is the number "
                    "of chunks with cuts"
                )
            for i, u in enumerate(chunk):
                rec: dict[str, Any] = {"score": float(got[d][i])}
                if cut[i]:
                    rec["warning"] = f"conditioning text cut by {cut[i]} tokens (window {window})"
                out[u.uid][f"ar:{d}"] = rec
        return out

    def cut(self) -> bool:
        """Whether any conditioning text of this run was cut (the table labels then say so)."""
        return any(": conditioning text cut" in w for w in self.run.warnings())

    @functools.cached_property
    def model_label(self) -> str:
        return refs_label(self.suite.ar().identity().name, self.opts)

    def label(self, metric: str) -> str:
        mark = ", contexts cut: see warnings" if self.cut() else ""
        return f"AR {AR_ARROWS[metric.split(':', 1)[1]]} [{self.model_label}{mark}]"

    def mapped_source(self, bench, dimension: str) -> str | None:
        from dlmeval.protocols.diffscore import paper_protocols as P

        return f"ar:{P.ar_direction(bench.task, bench.config_for(dimension))}"
