"""The likelihood baseline the section-6 analyses compare DiffScore with: BARTScore, as the paper does, when the
``bartscore`` family's checkpoint is available (``--bartscore-model DIR``, or facebook/bart-large-cnn in the Hugging
Face cache), else the suite's causal LM, and the label says which and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlmeval.errors import ModelNotFoundError


@dataclass
class Comparator:
    kind: str  # "bartscore" | "ar"
    scorer: Any  # token_logprobs(contexts, texts) / mean_logprobs(contexts, texts); None context: no source
    model: Any  # for the analysis run's signature
    name: str
    note: str  # why this one

    def label(self, what: str) -> str:
        head = "BARTScore" if self.kind == "bartscore" else "AR"
        return f"{head} {what} [{self.name}{self.note}]"


def comparator(suite) -> Comparator:
    """BARTScore when it can be loaded (an explicitly given ``--bartscore-model`` that fails is an error), else AR."""

    o = suite.opts
    fam = suite.family("bartscore")  # its scorer only: no run is opened
    try:
        sc = fam.scorer()
    except ModelNotFoundError:
        if o.bartscore_model is not None:
            raise
        sc = None
    if sc is not None:
        return Comparator("bartscore", sc, sc, sc.name, "")
    from dlmeval.baselines.likelihood import ARScorer

    ar = suite.ar()
    return Comparator(
        "ar",
        ARScorer(ar, batch_size=o.ar_batch_size),
        ar,
        ar.identity().name,
        "; BARTScore's facebook/bart-large-cnn not available: --bartscore-model DIR",
    )
