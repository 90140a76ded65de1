"""The ``questeval`` family: QuestEval by its published method (:mod:`dlmeval.baselines.questeval`; the
``questeval`` package does not install with the pinned stack, so answer candidates are found by regular
expressions instead of spaCy, and the answer BERTScore is left out). Rows: F (the mean of precision and recall,
QuestEval's score), precision and recall.

Compared text: the source for summarization (QuestEval's reference-free use; Rank19 / QAGS too), the references
for data-to-text (QuestEval's table models for meaning representations are not used) and MT (the source is in
another language); with several references the best one counts (QuestEval's ``reduction_multi_refs=max``).
Checkpoints: ``--questeval-qg-model`` (default ``ThomasNLG/t5-qg_squad1-en``) and ``--questeval-qa-model``
(default ``ThomasNLG/t5-qa_squad2neg-en``), each a directory or a hub id read from the Hugging Face cache (fetched
only with ``--allow-download``).
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family


@register_family
class QuestEvalFamily(MetricFamily):
    name = "questeval"
    rank = 38
    kind = "meta-eval-questeval"
    checkpoints = (
        ("questeval_qg_model", "QuestEval question generator", ("ThomasNLG/t5-qg_squad1-en",)),
        ("questeval_qa_model", "QuestEval question answerer", ("ThomasNLG/t5-qa_squad2neg-en",)),
    )
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False
    order = ("questeval", "questeval:precision", "questeval:recall")
    paper_row = "QuestEval"
    needs = (
        "--questeval-qg-model DIR (ThomasNLG/t5-qg_squad1-en) and --questeval-qa-model DIR "
        "(ThomasNLG/t5-qa_squad2neg-en), or --allow-download"
    )
    options_title = "QuestEval"
    options = (
        FamilyOption(
            "--questeval-qg-model",
            metavar="SPEC",
            help="QuestEval question generator (default ThomasNLG/t5-qg_squad1-en)",
        ),
        FamilyOption(
            "--questeval-qa-model",
            metavar="SPEC",
            help="QuestEval question answerer (default ThomasNLG/t5-qa_squad2neg-en)",
        ),
    )

    def _dir(self, spec, default: str, option: str):
        from dlmeval.baselines.checkpoints import resolve_checkpoint

        return resolve_checkpoint(
            spec,
            defaults=(default,),
            allow_download=self.opts.allow_download,
            what="QuestEval",
            option=option,
        )

    @functools.cached_property
    def scorer(self):
        from dlmeval.baselines.questeval import QA_MODEL, QG_MODEL, QuestEvalScorer

        o = self.opts

        def load():
            qg = self._dir(o.questeval_qg_model, QG_MODEL, "--questeval-qg-model")
            qa = self._dir(o.questeval_qa_model, QA_MODEL, "--questeval-qa-model")
            return QuestEvalScorer(
                qg,
                qa,
                qg_prefix=self.qg_prefix,
                device=o.evaluator_placement,
                batch_size=o.ar_batch_size,
            )

        return self.suite.model("questeval", load)

    @property
    def qg_prefix(self) -> str | None:
        """``sv1`` for QuestEval's own QG checkpoint (trained with it), none for another."""
        from dlmeval.baselines.questeval import QG_MODEL

        spec = self.opts.questeval_qg_model
        return "sv1" if spec is None or str(spec).rstrip("/").endswith(QG_MODEL.rsplit("/", 1)[-1]) else None

    def load(self) -> None:
        self.scorer  # noqa: B018

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.questeval import EXTRACTION
        from dlmeval.baselines.sentences import splitter_name

        sc = self.scorer
        return {
            "answers": EXTRACTION,
            "limit_sent": sc.limit_sent,
            "sentence_splitter": splitter_name(),
            "qg_prefix": sc.qg_prefix,
            "decoding": "greedy, max_source_length 512",
            "scores": ["f1", "answerability"] if sc.answerability else ["f1"],
            "unanswerable_id": sc.unanswerable_id,
            "f": "mean(precision, recall)",
            "compared": {"SUM": "source", "D2T": "reference", "WMT": "reference"},
            "multi_reference": "best reference",
        }

    def models(self) -> list[Any]:
        return self.scorer.identity()

    def metrics(self, bench) -> list[str]:
        return list(self.order)

    def compute(self, frame, chunk):
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        owner, hyps, other = [], [], []
        for i, r in enumerate(rows):
            for c in [r["source"]] if r["task"] == "SUM" else list(dict.fromkeys(r["targets"])):
                owner.append(i)
                hyps.append(r["candidate"])
                other.append(c)
        before = self.scorer.truncated
        got = self.scorer.score(hyps, other)
        if self.scorer.truncated > before:
            self.run.warn(
                f"questeval: {self.scorer.truncated - before} QG/QA input(s) cut to 512 tokens (QuestEval's own limit)"
            )
        best: list[dict[str, float] | None] = [None] * len(rows)
        for i, g in zip(owner, got):
            if best[i] is None or g["f"] > best[i]["f"]:
                best[i] = g
        return {
            u.uid: {
                "questeval": {"score": b["f"]},
                "questeval:precision": {"score": b["precision"]},
                "questeval:recall": {"score": b["recall"]},
            }
            for u, b in zip(chunk, best)
        }

    def label(self, metric: str) -> str:
        what = {"questeval": "F", "questeval:precision": "precision", "questeval:recall": "recall"}[metric]
        return f"QuestEval {what}"
