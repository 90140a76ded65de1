"""Robustness building blocks: natural perturbations, RDI/AURDI arithmetic (IPM, D-GCG, probes live beside them).

Perturbations (:mod:`dlmeval.robustness.perturb`)
    ``Perturbation(name, level, rate, params=())``   frozen; ``.key`` "char.keyboard@0.10", ``.describe() -> dict``
    ``Perturbation.of("keyboard", 0.1)``, ``Perturbation.from_key("word.synonym@0.20")``
    ``p.apply(text, seed, item_id) -> str``          deterministic per (seed, item_id, condition)
    ``p.apply_span(text, start, end, seed, item_id)``  perturb only text[start:end] (the question-only ablation)
    ``p.perturb(text, seed, item_id) -> PerturbResult(text, key, eligible, target, changed, edits)``
    ``CONDITIONS``                                   the paper's 32 conditions (5 char types x 4 rates, 4 word x 3)
    ``conditions(types=None, rates=None)``, ``TYPES``, ``resolve_type(name)``, ``HOMOGLYPHS``,
    ``KEYBOARD_NEIGHBOURS``, ``STOPWORDS``
    Synonyms come from Debian's wordnet-base (/usr/share/wordnet) through :mod:`dlmeval.robustness.wordnet`.

RDI / AURDI (:mod:`dlmeval.robustness.metrics`)
    ``rdi(clean_acc, acc) -> float``                  (A_clean - A_r) / A_clean (NaN when A_clean = 0)
    ``aurdi(rates, rdis, rule="riemann") -> float``   normalised area under RDI(r) (see the module docstring)
    ``clean_guard(k, n, chance, alpha=0.05) -> ChanceGuard``  is clean accuracy above chance (exact binomial)?
    ``summarize(clean, perturbed, chance=...) -> RobustnessSummary``  accuracy/RDI per condition, AURDI per type
    ``summarize_results(item_results, chance=...)``   the same from per-item records (condition, correct)
    ``compare(dlm, ar, seed=0) -> Comparison``        DLM advantage rate over conditions, paired CI and Wilcoxon
"""

from dlmeval.robustness.perturb import (
    CONDITIONS,
    HOMOGLYPHS,
    KEYBOARD_NEIGHBOURS,
    STOPWORDS,
    TYPES,
    Edit,
    Perturbation,
    PerturbResult,
    conditions,
    resolve_type,
)

__all__ = [
    "CONDITIONS",
    "HOMOGLYPHS",
    "KEYBOARD_NEIGHBOURS",
    "STOPWORDS",
    "TYPES",
    "Edit",
    "PerturbResult",
    "Perturbation",
    "conditions",
    "resolve_type",
]
