"""Autoregressive likelihood scores (GPTScore / BARTScore style) with any :class:`~dlmeval.models.causal.CausalLM`.

A score is the mean per-token log-probability of a text given another one, ``(1/|y|) sum_i log p(y_i | y_<i, x)``
(BARTScore's and GPTScore's convention), in one of the directions of BARTScore (Yuan et al. 2021):

========== ======================== =======================================================================
name        score                    BARTScore reading
========== ======================== =======================================================================
``s2h``     log p(hyp | src)         faithfulness (source -> hypothesis)
``h2s``     log p(src | hyp)         coverage of the source (hypothesis -> source)
``r2h``     log p(hyp | ref)         precision (reference -> hypothesis)
``h2r``     log p(ref | hyp)         recall (hypothesis -> reference)
``f``       (r2h + h2r) / 2          F score (arithmetic mean, BARTScore's ``avg_f``)
``mar``     log p(hyp)               marginal likelihood, no conditioning text (fluency; the AR side of PMI)
========== ======================== =======================================================================

The conditioning text is joined to the scored text as ``TEMPLATE.format(context=x) + y`` with the default
template ``"{context}\\n\\n"`` (a paragraph break, no instruction): a decoder-only model has no encoder, so the
source is its prompt. With several references a reference direction takes the best reference (``ref_agg="max"``,
the ``*_max`` variants of a later BARTScore branch) or their mean (``"mean"``, BARTScore's SUM/score.py at the
commit of its pickles), one rule with :func:`dlmeval.baselines.seq2seq.bartscore`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlmeval.errors import InputError

DEFAULT_TEMPLATE = "{context}\n\n"
DIRECTIONS = ("s2h", "h2s", "r2h", "h2r", "f", "mar")


class ARScorer:
    """Mean log-probability scores with a causal LM. ``template`` formats the conditioning text."""

    def __init__(self, model, *, template: str = DEFAULT_TEMPLATE, batch_size: int = 8):
        if "{context}" not in template:
            raise InputError(f"the AR template must contain '{{context}}', got {template!r}")
        self.model = model
        self.template = template
        self.batch_size = int(batch_size)

    def token_logprobs(self, contexts: Sequence[str | None], texts: Sequence[str]) -> list[np.ndarray]:
        """Per-token log-probabilities of each text given its context (``None`` = no context: marginal)."""
        if len(contexts) != len(texts):
            raise InputError("contexts and texts differ in length")
        for i, t in enumerate(texts):
            if not t or not t.strip():
                raise InputError(f"text {i} is empty: a likelihood score needs at least one token")
        ctx = ["" if c is None else self.template.format(context=c) for c in contexts]
        return self.model.continuation_logprobs(ctx, list(texts), batch_size=self.batch_size)

    def dropped(self, contexts: Sequence[str | None], texts: Sequence[str]) -> list[int]:
        """Tokens cut from the start of each conditioning text to fit the model's window (0: none; a marginal
        score has no conditioning text, and a scored text longer than the window raises nothing here: its own
        start is then cut too and counts as well)."""
        ctx = ["" if c is None else self.template.format(context=c) for c in contexts]
        return self.model.dropped_context_tokens(ctx, list(texts))

    def mean_logprobs(self, contexts: Sequence[str | None], texts: Sequence[str]) -> list[float]:
        """The mean per-token log-probability of each text given its context."""
        out = []
        for i, lp in enumerate(self.token_logprobs(contexts, texts)):
            if lp.size == 0 or not np.all(np.isfinite(lp)):
                raise InputError(f"text {i} has no scorable tokens (or a non-finite log-probability)")
            out.append(float(lp.mean()))
        return out


#: how a reference-based score combines several references: the mean over them (BARTScore's SUM/score.py at the
#: commit of its pickles) or the best one; one list for every metric that takes --ref-agg
REF_AGGS = ("mean", "max")


def check_ref_agg(agg: str) -> str:
    """``agg`` if it is one of :data:`REF_AGGS` (checked before any scoring), else one clear error."""
    if agg not in REF_AGGS:
        raise InputError(f"reference aggregation must be 'mean' or 'max', got {agg!r}")
    return agg


def reduce_references(values, owner: Sequence[int], n: int, agg: str) -> np.ndarray:
    """Per-candidate values of per-(candidate, reference) rows (:func:`flat_references`' ``owner``): their mean
    (``"mean"``) or their largest (``"max"``)."""
    own, vals = np.asarray(owner), np.asarray(values, dtype=float)
    if check_ref_agg(agg) == "mean":
        return np.bincount(own, weights=vals, minlength=n) / np.bincount(own, minlength=n)
    best = np.full(n, -np.inf)
    np.maximum.at(best, own, vals)
    return best


def flat_references(
    candidates: Sequence[str], references: Sequence[str | Sequence[str]]
) -> tuple[list[str], list[str], list[int]]:
    """``(candidates, references, owner)`` flattened to one row per (candidate, distinct reference): a candidate
    takes one reference or a sequence of them (duplicates scored once); ``owner[k]`` is row ``k``'s candidate."""
    flat_c, flat_r, owner = [], [], []
    for i, (c, refs) in enumerate(zip(candidates, references)):
        refs = [refs] if isinstance(refs, str) else list(dict.fromkeys(refs))
        if not refs:
            raise InputError(f"candidate {i} has no reference")
        flat_c += [c] * len(refs)
        flat_r += refs
        owner += [i] * len(refs)
    return flat_c, flat_r, owner


def directional_scores(
    scorer: ARScorer,
    candidates: Sequence[str],
    *,
    sources: Sequence[str] | None = None,
    references: Sequence[Sequence[str]] | None = None,
    directions: Sequence[str] = DIRECTIONS,
    cuts: dict[str, list[int]] | None = None,
    ref_agg: str = "max",
) -> dict[str, list[float]]:
    """The requested directions for every candidate: ``{direction: [score per candidate]}``. ``ref_agg="mean"``:
    r2h, h2r and F averaged over the references instead of the best (as BARTScore's SUM/score.py at its pickles'
    commit averages them).

    ``s2h``/``h2s`` need ``sources``; ``r2h``/``h2r``/``f`` need ``references`` (one sequence of references per
    candidate; with ``ref_agg="max"`` the best reference counts for each of r2h and h2r, and ``f`` is the best
    reference's F = (r2h + h2r) / 2, as :func:`dlmeval.baselines.seq2seq.bartscore` computes it). ``cuts``, when given, is filled with ``{direction: [tokens cut from the conditioning text, per
    candidate (the most over its references)]}``.
    """
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        raise InputError(f"unknown AR direction(s) {bad}; choose from {', '.join(DIRECTIONS)}")
    n = len(candidates)
    out: dict[str, list[float]] = {}
    if ("s2h" in directions or "h2s" in directions) and (sources is None or len(sources) != n):
        raise InputError("the s2h / h2s directions need one source per candidate")
    want_ref = any(d in directions for d in ("r2h", "h2r", "f"))
    if want_ref and (references is None or len(references) != n):
        raise InputError("the r2h / h2r / f directions need references for every candidate")
    if want_ref:
        check_ref_agg(ref_agg)  # before any forward pass
    if "s2h" in directions:
        out["s2h"] = scorer.mean_logprobs(list(sources), list(candidates))
        if cuts is not None:
            cuts["s2h"] = scorer.dropped(list(sources), list(candidates))
    if "h2s" in directions:
        out["h2s"] = scorer.mean_logprobs(list(candidates), list(sources))
        if cuts is not None:
            cuts["h2s"] = scorer.dropped(list(candidates), list(sources))
    if "mar" in directions:
        out["mar"] = scorer.mean_logprobs([None] * n, list(candidates))
    if want_ref:
        flat_c, flat_r, owner = flat_references(candidates, references)
        r2h = np.asarray(scorer.mean_logprobs(flat_r, flat_c))
        h2r = np.asarray(scorer.mean_logprobs(flat_c, flat_r))
        best_r2h = reduce_references(r2h, owner, n, ref_agg)
        best_h2r = reduce_references(h2r, owner, n, ref_agg)
        # max: the best per-reference F; mean: F of the mean directions (the same quantity, as F is linear)
        best_f = (
            reduce_references((r2h + h2r) / 2, owner, n, ref_agg)
            if ref_agg == "max"
            else (best_r2h + best_h2r) / 2
        )
        if "r2h" in directions:
            out["r2h"] = best_r2h.tolist()
        if "h2r" in directions:
            out["h2r"] = best_h2r.tolist()
        if "f" in directions:
            out["f"] = best_f.tolist()
        if cuts is not None:
            for d, (ctx, txt) in (("r2h", (flat_r, flat_c)), ("h2r", (flat_c, flat_r))):
                per = np.zeros(n, dtype=int)
                np.maximum.at(per, owner, scorer.dropped(ctx, txt))
                cuts[d] = per.tolist()
            cuts["f"] = [max(a, b) for a, b in zip(cuts["r2h"], cuts["h2r"])]
    return {d: out[d] for d in directions}
