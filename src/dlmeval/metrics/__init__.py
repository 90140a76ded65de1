"""Generation-quality and calibration metrics.

Diversity (:mod:`dlmeval.metrics.diversity`)
    ``distinct_n(texts, n=3) -> float``      unique / total n-grams over the set (lower-cased whitespace tokens)
    ``self_bleu(texts, max_order=4, *, smooth_method="floor", smooth_value=0.1, max_hypotheses=None, seed=0)``
        each text vs all others (sacrebleu sentence BLEU, effective order, Texygen smoothing); 0-100 scale

Language filter (:mod:`dlmeval.metrics.language`)
    ``english_filter(text) -> bool``          ASCII share >= 0.85 and CJK share <= 0.02 of non-space characters
    ``acceptance_rate(texts) -> float``       share of texts that pass; ``char_shares(text)`` for the raw shares

Perplexity (:mod:`dlmeval.metrics.perplexity`)
    ``perplexity(ar, prefixes, generations, batch_size=16) -> PerplexityResult``
        per-item ``nll`` and ``n_tokens``; ``ppl`` = exp(sum nll / sum tokens) (micro); ``mean_item_ppl``

MAUVE (:mod:`dlmeval.metrics.mauve_metric`, featurizers in :mod:`dlmeval.metrics.features`)
    ``mauve_score(p_texts, q_texts, featurizer="minilm"|"ar"|callable, seed=0, *, ar=None, p_features=None,
    q_features=None, num_buckets="auto") -> MauveResult(mauve, frontier_integral, mauve_star, num_buckets, seed,
    kmeans_seed, n_p, n_q, featurizer)``
    ``minilm_featurizer()``, ``ar_featurizer(ar)``: callables texts -> ``[n, d]`` arrays

Calibration (:mod:`dlmeval.metrics.calibration`)
    ``ece(confidences, correct, n_bins=15)``; ``reliability_bins(...) -> ReliabilityBins(lower, upper, confidence,
    accuracy, count)``; ``selective_auroc(confidences, correct)`` (NaN + warning with one class)

Bad input raises :class:`dlmeval.errors.InputError`.
"""

from dlmeval.metrics.calibration import ReliabilityBins, ece, reliability_bins, selective_auroc
from dlmeval.metrics.diversity import distinct_n, self_bleu
from dlmeval.metrics.features import Featurizer, ar_featurizer, minilm_featurizer
from dlmeval.metrics.language import acceptance_rate, char_shares, english_filter
from dlmeval.metrics.mauve_metric import MauveResult, auto_buckets, mauve_score
from dlmeval.metrics.perplexity import PerplexityResult, perplexity

__all__ = [
    "Featurizer",
    "MauveResult",
    "PerplexityResult",
    "ReliabilityBins",
    "acceptance_rate",
    "ar_featurizer",
    "auto_buckets",
    "char_shares",
    "distinct_n",
    "ece",
    "english_filter",
    "mauve_score",
    "minilm_featurizer",
    "perplexity",
    "reliability_bins",
    "self_bleu",
    "selective_auroc",
]
