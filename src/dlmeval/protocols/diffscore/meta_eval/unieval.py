"""The ``unieval`` family: UniEval's Boolean-QA scores (:mod:`dlmeval.baselines.unieval`), one per UniEval dimension
a benchmark's human dimensions map to (:data:`DIMENSIONS`), and a "(paper mapping)" row reading the dimension of
the column.

Checkpoints: ``--unieval-model`` (default ``MingZhong/unieval-sum``, for summarization and data-to-text) and
``--unieval-fact-model`` (default ``MingZhong/unieval-fact``, for Rank19 / QAGS), each read from a directory or
the Hugging Face cache (fetched only with ``--allow-download``). Not for WMT (UniEval has no MT evaluator).
Relevance / informativeness compare with ONE reference, as UniEval's evaluator reads one (``metric/evaluator.py``
``data[i]['reference']``): ``--unieval-refs first`` (default) the first, which is the reference UniEval's own data
files hold (``reproduce/data/data2text/sfhot.json`` / ``sfres.json`` at maszhongming/UniEval@d33e7b6: for all 875 /
1,181 items BARTScore's ``ref_summs[0]``); ``best``: the best-scoring reference. Text: under ``--text-form bartscore``
(default) the tokenized pickle text, which is the text of UniEval's data files (SFHOT, SFRES, QAGS-CNN, QAGS-XSum:
every output and source equals the pickle's); ``detok``: the detokenized text.
"""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family

#: (benchmark task, human dimension) -> (UniEval task, UniEval dimension); "overall": the mean of the task's two
DIMENSIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("SUM", "coherence"): ("summarization", "coherence"),
    ("SUM", "consistency"): ("summarization", "consistency"),
    ("SUM", "fluency"): ("summarization", "fluency"),
    ("SUM", "relevance"): ("summarization", "relevance"),
    ("SUM", "informativeness"): ("summarization", "relevance"),
    ("SUM", "litepyramid_recall"): ("summarization", "relevance"),
    ("SUM", "fact"): ("fact", "consistency"),
    ("D2T", "naturalness"): ("data2text", "naturalness"),
    ("D2T", "informativeness"): ("data2text", "informativeness"),
    ("D2T", "quality"): ("data2text", "overall"),
}


def metric_id(task: str, dim: str) -> str:
    return f"unieval:{'fact' if task == 'fact' else dim}"


@register_family
class UniEvalFamily(MetricFamily):
    name = "unieval"
    rank = 36
    kind = "meta-eval-unieval"
    checkpoints = (
        ("unieval_model", "UniEval summarization / data-to-text", ("MingZhong/unieval-sum",)),
        ("unieval_fact_model", "UniEval factuality (Rank19, QAGS)", ("MingZhong/unieval-fact",)),
    )
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False
    order = tuple(
        f"unieval:{d}"
        for d in (
            "coherence",
            "consistency",
            "fluency",
            "relevance",
            "fact",
            "naturalness",
            "informativeness",
        )
    ) + ("unieval:overall", "unieval:mapped")
    mapped = "unieval:mapped"
    paper_row = "UniEval"
    needs = "--unieval-model DIR (MingZhong/unieval-sum), --unieval-fact-model DIR, or --allow-download"
    options_title = "UniEval"
    options = (
        FamilyOption(
            "--unieval-refs",
            metavar="RULE",
            help="UniEval's reference for relevance / informativeness: first (default; UniEval's evaluator reads one "
            "reference, and its data-to-text files hold the first) or best (the best-scoring of the references)",
        ),
        FamilyOption(
            "--unieval-model",
            metavar="SPEC",
            help="UniEval checkpoint for summarization / data-to-text (default MingZhong/unieval-sum)",
        ),
        FamilyOption(
            "--unieval-fact-model",
            metavar="SPEC",
            help="UniEval checkpoint for Rank19 / QAGS (default MingZhong/unieval-fact)",
        ),
    )

    def applies(self, bench) -> bool:
        return any((bench.task, d) in DIMENSIONS for d in bench.dimensions)

    def _pairs(self, bench) -> list[tuple[str, str]]:
        return list(
            dict.fromkeys(
                DIMENSIONS[(bench.task, d)] for d in bench.dimensions if (bench.task, d) in DIMENSIONS
            )
        )

    def _needs_fact(self) -> tuple[bool, bool]:
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

        pairs = [p for b in self.suite.benchmarks for p in self._pairs(get_benchmark(b))]
        return any(t != "fact" for t, _ in pairs), any(t == "fact" for t, _ in pairs)

    def scorer(self, fact: bool):
        from dlmeval.baselines.checkpoints import resolve_checkpoint
        from dlmeval.baselines.unieval import FACT_MODEL, SUM_MODEL, UniEvalScorer

        o = self.opts
        key = "unieval-fact" if fact else "unieval"
        spec, default, option = (
            (o.unieval_fact_model, FACT_MODEL, "--unieval-fact-model")
            if fact
            else (o.unieval_model, SUM_MODEL, "--unieval-model")
        )

        def load():
            d = resolve_checkpoint(
                spec, defaults=(default,), allow_download=o.allow_download, what="UniEval", option=option
            )
            name = default.rsplit("/", 1)[-1] if spec is None else str(spec).rstrip("/").rsplit("/", 1)[-1]
            return UniEvalScorer(d, name=name, device=o.evaluator_placement, batch_size=o.ar_batch_size)

        return self.suite.model(key, load)

    def _scorers(self) -> list:
        summ, fact = self._needs_fact()
        return [self.scorer(False)] * summ + [self.scorer(True)] * fact

    def load(self) -> None:
        self._scorers()

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.unieval import QUESTIONS, SENTENCE_LEVEL, splitter_name

        return {
            "score": "p(Yes)/(p(Yes)+p(No)), first decoder step",
            "questions": {f"{t}/{d}": q[0] for (t, d), q in QUESTIONS.items()},
            "sentence_level": sorted(f"{t}/{d}" for t, d in SENTENCE_LEVEL),
            "sentence_splitter": splitter_name(),
            "max_length": 1024,
            "multi_reference": "first reference" if self.opts.unieval_refs == "first" else "best reference",
            "text": "tokenized" if self.opts.text_form == "bartscore" else "detokenized",
        }

    def models(self) -> list[Any]:
        return [s.identity() for s in self._scorers()]

    def metrics(self, bench) -> list[str]:
        return [metric_id(t, d) for t, d in self._pairs(bench)] if self.applies(bench) else []

    def _texts(self, row) -> tuple[str, str, tuple[str, ...]]:
        """(candidate, source, distinct targets) as UniEval reads them: the tokenized text of its data files under
        ``--text-form bartscore`` (the frame's ``*_raw`` columns), else the detokenized text."""
        if self.opts.text_form == "bartscore" and "candidate_raw" in row.index:
            src = row["source_raw"] if "source_raw" in row.index else row["source"]
            return row["candidate_raw"], src, tuple(dict.fromkeys(row["targets_raw"]))
        return row["candidate"], row["source"], tuple(dict.fromkeys(row["targets"]))

    def _dimension(self, sc, task, dim, rows) -> list[float]:
        from dlmeval.baselines.unieval import QUESTIONS

        texts = [self._texts(r) for r in rows]
        cands = [t[0] for t in texts]
        kind = QUESTIONS[(task, dim)][3]
        if kind is None:
            return sc.dimension_scores(task, dim, cands, [None] * len(cands))
        if kind == "src":
            return sc.dimension_scores(task, dim, cands, [t[1] for t in texts])
        owner, outs, ctx = [], [], []
        first = self.opts.unieval_refs == "first"
        for i, (cand, _, targets) in enumerate(texts):
            for ref in targets[:1] if first else targets:
                owner.append(i)
                outs.append(cand)
                ctx.append(ref)
        got = sc.dimension_scores(task, dim, outs, ctx)
        best = [float("-inf")] * len(rows)
        for i, v in zip(owner, got):
            best[i] = max(best[i], v)
        return best

    def compute(self, frame, chunk):
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import get_benchmark

        bench = get_benchmark(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        out: dict[str, dict[str, Any]] = {u.uid: {} for u in chunk}
        for task, dim in self._pairs(bench):
            sc = self.scorer(task == "fact")
            before = sc.truncated
            if dim == "overall":
                parts = [self._dimension(sc, task, d, rows) for d in ("naturalness", "informativeness")]
                vals = [(a + b) / 2 for a, b in zip(*parts)]
            else:
                vals = self._dimension(sc, task, dim, rows)
            if sc.truncated > before:
                self.run.warn(
                    f"unieval: {sc.truncated - before} input(s) cut to 1,024 tokens (UniEval's own limit)"
                )
            for u, v in zip(chunk, vals):
                out[u.uid][metric_id(task, dim)] = {"score": float(v)}
        return out

    def label(self, metric: str) -> str:
        what = metric.split(":", 1)[1]
        return f"UniEval {'(paper mapping)' if what == 'mapped' else what}"

    def mapped_source(self, bench, dimension: str) -> str | None:
        p = DIMENSIONS.get((bench.task, dimension))
        return None if p is None else metric_id(*p)
