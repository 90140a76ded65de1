"""The ``bartscore`` family: BARTScore proper, seq2seq likelihood with BART-large-CNN (the paper's ``†`` baseline),
through :mod:`dlmeval.baselines.seq2seq`.

Directions where the benchmark has the texts (as the ``ar`` family): s2h, h2s, sbi = (s2h + h2s) / 2 with an
English source; r2h, h2r, F (BARTScore's ``avg_f``) with references; the empty-source analogue of a marginal. The
"(paper mapping)" row follows BARTScore's own per-dimension protocol (:func:`bartscore_direction`: s->h for
summarization and factuality, h->r for REALSumm coverage, F for data-to-text and MT), not the AR family's mapping.

Off by default (``--metrics ... bartscore`` switches it on): the checkpoint is not shipped; ``--bartscore-model
DIR`` (``SuiteOptions.bartscore_model``) points at a local copy of ``facebook/bart-large-cnn`` (or, with
``--allow-download``, the hub id is fetched).
"""

from __future__ import annotations

import functools
from typing import Any

from dlmeval.protocols.diffscore.meta_eval.ar import AR_ARROWS, AR_DIRECTIONS, ar_directions_for
from dlmeval.protocols.diffscore.meta_eval.families import (
    FamilyOption,
    MetricFamily,
    refs_config,
    refs_label,
    register_family,
)

BARTSCORE_DIRECTIONS = (
    AR_DIRECTIONS  # the likelihood directions of the AR family; "mar" is its empty-source row
)
_ARROWS = {**AR_ARROWS, "mar": "empty source"}
HINT = (
    "pass --bartscore-model DIR (SuiteOptions(bartscore_model=DIR)): a local copy of facebook/bart-large-cnn"
)


@register_family
class BARTScoreFamily(MetricFamily):
    name = "bartscore"
    rank = 32  # after the AR likelihood rows
    kind = "meta-eval-bartscore"
    checkpoints = (
        (
            "bartscore_model",
            "BARTScore seq2seq (paper: facebook/bart-large-cnn; BARTScore's own MT / D2T rows used bart-large-cnn + Para)",
            ("facebook/bart-large-cnn",),
        ),
    )
    batched = True  # SuiteOptions.ar_batch_size rows a forward pass: in the run configuration
    default = False  # no checkpoint ships with dlmeval: asked for with --metrics
    order = (*(f"bartscore:{d}" for d in BARTSCORE_DIRECTIONS), "bartscore:mapped")
    mapped = "bartscore:mapped"
    paper_row = "BARTScore"
    needs = "--bartscore-model DIR (facebook/bart-large-cnn) or --allow-download"
    options_title = "BARTScore"
    options = (
        FamilyOption(
            "--bartscore-model",
            metavar="DIR",
            help="the seq2seq checkpoint: a local copy of facebook/bart-large-cnn, the paper's (default; read "
            "from the Hugging Face cache, fetched only with --allow-download)",
        ),
    )

    @property
    def spec(self) -> str:
        from dlmeval.baselines.seq2seq import BART_LARGE_CNN

        return self.opts.bartscore_model or BART_LARGE_CNN

    def scorer(self):
        """The seq2seq scorer (an already loaded one from the suite's ``models`` under the spec, else loaded)."""
        from dlmeval.baselines.seq2seq import load_seq2seq

        o = self.opts
        return self.suite.model(
            self.spec,
            lambda: load_seq2seq(
                self.spec,
                allow_download=o.allow_download,
                device=o.evaluator_placement,
                dtype=o.dtype,
                batch_size=o.ar_batch_size,
                hint=HINT,
            ),
        )

    def load(self) -> None:
        self.scorer()

    def configuration(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "score": "mean-target-logprob-with-special-tokens",
            "max_length": self.scorer().max_length,
            "multi_reference": f"{self.opts.ref_agg} over references",  # --ref-agg
        }
        return refs_config(cfg, self.opts)

    def models(self) -> list[Any]:
        return [self.scorer()]

    def metrics(self, bench) -> list[str]:
        return [f"bartscore:{d}" for d in ar_directions_for(bench.name)]

    def compute(self, frame, chunk):
        from dlmeval.baselines.seq2seq import bartscore

        directions = ar_directions_for(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        wants_refs = any(d in directions for d in ("r2h", "h2r", "f"))
        got = bartscore(
            self.scorer(),
            [r["candidate"] for r in rows],
            sources=[r["cond_source"] for r in rows],
            references=[r["targets"][: self.opts.ar_max_refs] for r in rows] if wants_refs else None,
            directions=directions,
            ref_agg=self.opts.ref_agg,
        )
        return {
            u.uid: {f"bartscore:{d}": {"score": float(got[d][i])} for d in directions}
            for i, u in enumerate(chunk)
        }

    @functools.cached_property
    def model_label(self) -> str:
        return refs_label(self.scorer().name, self.opts)

    def label(self, metric: str) -> str:
        return f"BARTScore {_ARROWS[metric.split(':', 1)[1]]} [{self.model_label}]"

    def mapped_source(self, bench, dimension: str) -> str | None:
        d = bartscore_direction(bench.task, dimension)
        return f"bartscore:{d}" if d in ar_directions_for(bench.name) else None


def bartscore_direction(task: str, dimension: str) -> str:
    """BARTScore's own choice of direction per dimension (Yuan et al. 2021, section 3 and the per-task tables):
    recall h->r for REALSumm's coverage (litepyramid recall), the faithfulness direction s->h for the other
    summarization dimensions and the factuality sets, F = (r->h + h->r) / 2 for data-to-text and MT."""
    if task == "SUM":
        return "h2r" if dimension == "litepyramid_recall" else "s2h"
    return "f"
