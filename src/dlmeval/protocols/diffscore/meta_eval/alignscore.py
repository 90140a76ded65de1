"""The ``alignscore`` family: AlignScore (:mod:`dlmeval.baselines.alignscore`, ``nli_sp``: chunked context, claim
sentences, the alignment head's p(aligned)), the output as the claim.

Context: the source document for summarization (AlignScore's use: consistency with the document; Rank19 / QAGS
too), the reference for data-to-text and MT (their sources are a meaning representation / a foreign language);
with several references the best one counts. ``--alignscore-model FILE`` is required (the checkpoints are
release files, not hub repositories); ``--alignscore-base`` names the RoBERTa they were trained from.
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family


@register_family
class AlignScoreFamily(MetricFamily):
    name = "alignscore"
    rank = 37
    kind = "meta-eval-alignscore"
    checkpoints = (
        ("alignscore_model", "AlignScore checkpoint (AlignScore-large.ckpt)", ()),
        ("alignscore_base", "its RoBERTa", ("FacebookAI/roberta-large", "roberta-large")),
    )
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False
    order = ("alignscore",)
    paper_row = "AlignScore"
    needs = "--alignscore-model FILE (AlignScore-large.ckpt) and roberta-large (--alignscore-base DIR)"
    options_title = "AlignScore"
    options = (
        FamilyOption(
            "--alignscore-model",
            metavar="SPEC",
            help="AlignScore checkpoint: its .ckpt file or a converted directory",
        ),
        FamilyOption(
            "--alignscore-base",
            metavar="SPEC",
            help="the RoBERTa the AlignScore checkpoint was trained from (default roberta-large)",
        ),
    )

    @functools.cached_property
    def scorer(self):
        from dlmeval.baselines.alignscore import load_alignscore

        o = self.opts
        return self.suite.model(
            "alignscore",
            lambda: load_alignscore(
                o.alignscore_model,
                o.alignscore_base,
                allow_download=o.allow_download,
                device=o.evaluator_placement,
                batch_size=o.ar_batch_size,
            ),
        )

    def load(self) -> None:
        self.scorer  # noqa: B018

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.alignscore import CHUNK_WORDS
        from dlmeval.baselines.sentences import splitter_name

        return {
            "mode": "nli_sp",
            "chunk_words": CHUNK_WORDS,
            "window": self.scorer.window,
            "sentence_splitter": splitter_name(),
            "context": {"SUM": "source", "D2T": "reference", "WMT": "reference"},
            "multi_reference": "best reference",
        }

    def models(self) -> list[Any]:
        return [self.scorer.identity()]

    def metrics(self, bench) -> list[str]:
        return ["alignscore"]

    def compute(self, frame, chunk):
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        owner, ctx, claims = [], [], []
        for i, r in enumerate(rows):
            contexts = [r["source"]] if r["task"] == "SUM" else list(dict.fromkeys(r["targets"]))
            for c in contexts:
                owner.append(i)
                ctx.append(c)
                claims.append(r["candidate"])
        before = self.scorer.truncated
        got = self.scorer.score(ctx, claims)
        if self.scorer.truncated > before:
            self.run.warn(
                f"alignscore: {self.scorer.truncated - before} pair(s) cut to the {self.scorer.window}-token window "
                "(AlignScore's own truncation of the context chunk)"
            )
        best = [float("-inf")] * len(rows)
        for i, v in zip(owner, got):
            best[i] = max(best[i], v)
        return {u.uid: {"alignscore": {"score": b}} for u, b in zip(chunk, best)}

    def label(self, metric: str) -> str:
        return f"AlignScore [{self.scorer.name}]"
