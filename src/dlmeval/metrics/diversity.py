"""Diversity of a set of generations: Distinct-n and Self-BLEU."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlmeval.errors import InputError
from dlmeval.seeding import numpy_rng


def _texts(texts: Sequence[str], name: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise InputError(f"{name} must be a list of strings, not one string")
    out = list(texts)
    bad = [i for i, t in enumerate(out) if not isinstance(t, str)]
    if bad:
        raise InputError(f"{name}[{bad[0]}] is {type(out[bad[0]]).__name__}, expected str")
    return out


def distinct_n(texts: Sequence[str], n: int = 3) -> float:
    """Distinct-n (Li et al. 2016): unique n-grams / total n-grams, pooled over the whole set.

    Tokens are ``text.lower().split()`` (whitespace tokens, lower-cased, punctuation kept attached); n-grams never
    cross text boundaries. A text shorter than n contributes none. NaN when the set has no n-gram at all.
    Written by hand: the definition is a two-line count and no library fixes the tokenization.
    """
    if int(n) != n or n < 1:
        raise InputError(f"n must be a positive integer, got {n!r}")
    n = int(n)
    seen: set[tuple[str, ...]] = set()
    total = 0
    for t in _texts(texts):
        toks = t.lower().split()
        grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return float("nan") if total == 0 else len(seen) / total


def self_bleu(
    texts: Sequence[str],
    max_order: int = 4,
    *,
    smooth_method: str = "floor",
    smooth_value: float | None = 0.1,
    tokenize: str = "13a",
    lowercase: bool = False,
    max_hypotheses: int | None = None,
    seed: int = 0,
) -> float:
    """Self-BLEU (Zhu et al. 2018, Texygen): each text scored as a hypothesis against ALL OTHER texts as references
    (never itself), averaged over hypotheses. Lower is more diverse. Scale 0-100 (sacrebleu's; divide by 100 for
    the 0-1 scale of Texygen and the Care tables).

    Scores come from ``sacrebleu.metrics.BLEU(max_ngram_order=max_order, effective_order=True,
    smooth_method="floor", smooth_value=0.1, tokenize="13a").sentence_score``: ``floor`` with 0.1 is Chen & Cherry's
    method 1, the nltk ``SmoothingFunction().method1`` that Texygen uses; effective order keeps texts shorter than
    ``max_order`` tokens from scoring 0 by construction. A text sharing no unigram with the others scores 0.

    The cost is quadratic in the set size; ``max_hypotheses`` scores only that many hypotheses, drawn without
    replacement by ``numpy_rng(seed, "self_bleu")`` (each still against all other texts).
    """
    from sacrebleu.metrics import BLEU

    ts = _texts(texts)
    if len(ts) < 2:
        raise InputError(f"Self-BLEU needs at least 2 texts, got {len(ts)}")
    if int(max_order) != max_order or max_order < 1:
        raise InputError(f"max_order must be a positive integer, got {max_order!r}")
    bleu = BLEU(
        max_ngram_order=int(max_order),
        effective_order=True,
        smooth_method=smooth_method,
        smooth_value=smooth_value,
        tokenize=tokenize,
        lowercase=lowercase,
    )
    idx = np.arange(len(ts))
    if max_hypotheses is not None and max_hypotheses < len(ts):
        if max_hypotheses < 1:
            raise InputError(f"max_hypotheses must be positive, got {max_hypotheses}")
        idx = np.sort(numpy_rng(seed, "self_bleu").choice(len(ts), size=int(max_hypotheses), replace=False))
    scores = [bleu.sentence_score(ts[i], ts[:i] + ts[i + 1 :]).score for i in idx]
    return float(np.mean(scores))
