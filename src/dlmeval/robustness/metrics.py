"""The robustness arithmetic: accuracy per condition, RDI, AURDI, the chance guard and DLM-vs-AR comparisons.

Definitions (the robustness paper, Sec. 3.3, Table 1, App. F and H):

* ``RDI(r) = (A_clean - A_r) / A_clean`` (Eq. 2): relative accuracy loss; 0 = no degradation. It is *not*
  clipped: a condition that beats clean accuracy gets a negative RDI (clipping would bias the mean RDI upward).
  Undefined (NaN) when ``A_clean = 0``.
* ``AURDI ~ sum_r RDI(r) * dr`` (Eq. 3), per perturbation type over its rates. The paper does not state ``dr`` or a
  normalisation, but its Table 9 reports AURDI values up to 0.77 for types evaluated at r in {0.1, 0.2, 0.3},
  which a raw sum of RDI * dr cannot reach (it is at most 0.3 there), and the mean of each model's nine AURDIs is
  close to its mean RDI over the 32 conditions (LLaDA GSM8K 0.313 vs 0.306; LLaMA-3 0.496 vs 0.470). dlmeval
  therefore reads Eq. 3 as a right Riemann sum anchored at RDI(0) = 0, ``dr_i = r_i - r_{i-1}`` with
  ``r_0 = 0``, divided by the largest rate, which keeps AURDI on the RDI scale (a constant RDI c gives AURDI c):
  for rates (0.05, 0.10, 0.20, 0.30) the weights are (1, 1, 2, 2) / 6, for (0.1, 0.2, 0.3) the plain mean.
  ``rule="trapezoid"`` (also anchored at (0, 0), same normalisation) and ``normalize=False`` (the raw sum) are
  available for comparison.
* Mean RDI (Table 1) = the mean over conditions; Acc_r = the mean accuracy over conditions.
* DLM advantage per condition = ``RDI_AR - RDI_DLM`` (positive: the DLM degrades less); the advantage rate
  (Table 1 "Adv.%") is the share of conditions with a positive advantage; App. H adds a paired bootstrap CI of the
  mean advantage (10,000 resamples) and a Wilcoxon signed-rank test over the conditions.
* Chance guard: RDI is a ratio to clean accuracy, so it only means something when the model is above chance on
  clean input. :func:`clean_guard` runs the exact one-sided binomial test of ``k`` correct out of ``n`` against
  the task's chance rate (ARC: 0.25 for four options; open answers: 0, where any correct answer is above chance);
  when it fails, summaries carry ``meaningful = False`` and a warning, and RDI should not be reported.

Accuracy over seeds: the paper reports the mean over three perturbation seeds; pass the per-item correctness of
all seeds of a condition together (the pooled mean equals the mean of per-seed accuracies when every seed has
the same items).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlmeval.errors import InputError
from dlmeval.robustness.perturb import Perturbation


# ---------------------------------------------------------------------------------------------------- basics
def accuracy(correct: Sequence[bool] | np.ndarray) -> float:
    """Mean of 0/1 correctness; InputError for an empty sequence or values other than 0/1."""
    a = np.asarray(correct)
    if a.size == 0:
        raise InputError("accuracy of an empty set of items is undefined")
    if a.dtype != bool and not np.isin(a, (0, 1)).all():
        raise InputError("correctness values must be booleans or 0/1")
    return float(a.astype(float).mean())


def rdi(clean_accuracy: float, perturbed_accuracy: float) -> float:
    """``(A_clean - A_r) / A_clean``; NaN when ``A_clean == 0`` (no accuracy to lose)."""
    for name, v in (("clean accuracy", clean_accuracy), ("perturbed accuracy", perturbed_accuracy)):
        if not 0 <= v <= 1:
            raise InputError(f"{name} must lie in [0, 1], got {v}")
    if clean_accuracy == 0:
        return float("nan")
    return (clean_accuracy - perturbed_accuracy) / clean_accuracy


AURDI_RULES = ("riemann", "trapezoid")


def aurdi(
    rates: Sequence[float], rdis: Sequence[float], *, rule: str = "riemann", normalize: bool = True
) -> float:
    """Area under the RDI curve of one perturbation type (module docstring): anchored at RDI(0) = 0.

    ``rule="riemann"``: ``sum_i RDI(r_i) (r_i - r_{i-1})`` with ``r_0 = 0`` (Eq. 3);
    ``rule="trapezoid"``: the trapezoidal area over ``(0, 0), (r_1, RDI_1), ...``. Divided by ``max(r)`` when
    ``normalize``. Rates need not be sorted; NaN in, NaN out.
    """
    if rule not in AURDI_RULES:
        raise InputError(f"unknown AURDI rule {rule!r}; choose one of {', '.join(AURDI_RULES)}")
    r = np.asarray(rates, dtype=float)
    y = np.asarray(rdis, dtype=float)
    if r.ndim != 1 or r.shape != y.shape or r.size == 0:
        raise InputError(f"need one RDI per rate, got {r.size} rates and {y.size} RDIs")
    if (r <= 0).any() or (r > 1).any() or np.unique(r).size != r.size:
        raise InputError(f"rates must be distinct and lie in (0, 1], got {list(r)}")
    order = np.argsort(r)
    r, y = r[order], y[order]
    r0 = np.concatenate([[0.0], r])
    if rule == "riemann":
        area = float(np.sum(y * np.diff(r0)))
    else:
        from scipy.integrate import trapezoid

        area = float(trapezoid(np.concatenate([[0.0], y]), r0))
    return area / float(r[-1]) if normalize else area


@dataclass(frozen=True)
class ChanceGuard:
    correct: int
    n: int
    chance: float
    p_value: float
    alpha: float
    above_chance: bool

    @property
    def warning(self) -> str | None:
        if self.above_chance:
            return None
        return (
            f"clean accuracy {self.correct}/{self.n} = {self.correct / self.n:.3f} is not above chance "
            f"({self.chance:g}; one-sided binomial p = {self.p_value:.3g} >= {self.alpha:g}): RDI and AURDI are "
            "relative to a baseline that is indistinguishable from guessing and are not meaningful"
        )


def clean_guard(correct: int, n: int, chance: float, *, alpha: float = 0.05) -> ChanceGuard:
    """Is clean accuracy ``correct / n`` above ``chance``? Exact one-sided binomial test at level ``alpha``.

    ``chance == 0`` (open answers): the p-value is ``P(X >= k | p = 0)``, 1 for k = 0 and 0 otherwise.
    """
    if not 0 <= chance < 1:
        raise InputError(f"chance accuracy must lie in [0, 1), got {chance}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    if chance == 0:
        if n < 1 or not 0 <= correct <= n:
            raise InputError(f"need 0 <= correct <= n and n >= 1, got correct={correct}, n={n}")
        p = 1.0 if correct == 0 else 0.0
    else:
        from dlmeval.stats import binomial_above_chance

        p = binomial_above_chance(int(correct), int(n), float(chance))
    return ChanceGuard(int(correct), int(n), float(chance), p, alpha, p < alpha)


# ---------------------------------------------------------------------------------------------------- summaries
@dataclass(frozen=True)
class ConditionResult:
    key: str
    type_key: str
    rate: float
    accuracy: float
    n: int
    rdi: float


@dataclass(frozen=True)
class RobustnessSummary:
    clean_accuracy: float
    clean_n: int
    guard: ChanceGuard
    conditions: tuple[ConditionResult, ...]
    aurdi: dict[str, float]  # type key -> AURDI
    mean_rdi: float  # over conditions (Table 1)
    mean_accuracy: float  # Acc_r: mean accuracy over conditions
    aurdi_rule: str = "riemann"
    warnings: tuple[str, ...] = field(default=())

    @property
    def meaningful(self) -> bool:
        return self.guard.above_chance

    def rdi_by_key(self) -> dict[str, float]:
        return {c.key: c.rdi for c in self.conditions}

    def as_dict(self) -> dict[str, Any]:
        return {
            "clean_accuracy": self.clean_accuracy,
            "clean_n": self.clean_n,
            "chance": self.guard.chance,
            "chance_p_value": self.guard.p_value,
            "meaningful": self.meaningful,
            "mean_rdi": self.mean_rdi,
            "mean_accuracy": self.mean_accuracy,
            "aurdi_rule": self.aurdi_rule,
            "aurdi": dict(self.aurdi),
            "conditions": [c.__dict__.copy() for c in self.conditions],
            "warnings": list(self.warnings),
        }


def summarize(
    clean: Sequence[bool],
    perturbed: Mapping[str | Perturbation, Sequence[bool]],
    *,
    chance: float,
    alpha: float = 0.05,
    aurdi_rule: str = "riemann",
) -> RobustnessSummary:
    """Accuracy and RDI per condition, AURDI per type, mean RDI and Acc_r, and the chance guard.

    ``clean``: per-item correctness on clean prompts; ``perturbed``: condition (key or Perturbation) -> per-item
    correctness (all seeds pooled). A type's AURDI uses the rates present for it (a type with one rate still has
    an area; compare AURDIs only across identical rate sets).
    """
    a_clean = accuracy(clean)
    n_clean = len(clean)
    guard = clean_guard(int(np.sum(np.asarray(clean, dtype=float))), n_clean, chance, alpha=alpha)
    rows: list[ConditionResult] = []
    for cond, corr in perturbed.items():
        p = cond if isinstance(cond, Perturbation) else Perturbation.from_key(cond)
        acc = accuracy(corr)
        rows.append(ConditionResult(p.key, p.type_key, p.rate, acc, len(corr), rdi(a_clean, acc)))
    if len({r.key for r in rows}) != len(rows):
        raise InputError("a condition appears twice in the perturbed results")
    by_type: dict[str, list[ConditionResult]] = {}
    for r in rows:
        by_type.setdefault(r.type_key, []).append(r)
    areas = {
        t: aurdi([c.rate for c in cs], [c.rdi for c in cs], rule=aurdi_rule) for t, cs in by_type.items()
    }
    warnings = [w for w in (guard.warning,) if w]
    return RobustnessSummary(
        a_clean,
        n_clean,
        guard,
        tuple(rows),
        areas,
        float(np.mean([r.rdi for r in rows])) if rows else float("nan"),
        float(np.mean([r.accuracy for r in rows])) if rows else float("nan"),
        aurdi_rule,
        tuple(warnings),
    )


def summarize_results(
    results: Iterable[Any], *, chance: float, alpha: float = 0.05, aurdi_rule: str = "riemann"
) -> RobustnessSummary:
    """:func:`summarize` from per-item records (``dlmeval.tasks.ItemResult``, or dicts) with ``condition``
    (``"clean"`` or a perturbation key) and ``correct``; all seeds of a condition are pooled."""
    clean: list[bool] = []
    perturbed: dict[str, list[bool]] = {}
    for r in results:
        cond = r["condition"] if isinstance(r, Mapping) else r.condition
        ok = bool(r["correct"] if isinstance(r, Mapping) else r.correct)
        if cond == "clean":
            clean.append(ok)
        else:
            perturbed.setdefault(Perturbation.from_key(cond).key, []).append(ok)
    if not clean:
        raise InputError("no clean results: RDI needs the clean accuracy of the same items")
    return summarize(clean, perturbed, chance=chance, alpha=alpha, aurdi_rule=aurdi_rule)


@dataclass(frozen=True)
class Comparison:
    """DLM vs AR over shared conditions: advantage = RDI_AR - RDI_DLM (positive: the DLM degrades less)."""

    keys: tuple[str, ...]
    advantage: tuple[float, ...]
    wins: int
    ties: int
    losses: int
    advantage_rate: float  # wins / conditions (Table 1 "Adv.%")
    mean_advantage: float
    ci: tuple[float, float]  # paired bootstrap CI of the mean advantage
    wilcoxon_p: float
    meaningful: bool  # both models above chance on clean input
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["keys"], d["advantage"], d["ci"], d["warnings"] = (
            list(self.keys),
            list(self.advantage),
            list(self.ci),
            list(self.warnings),
        )
        return d


def compare(
    dlm: RobustnessSummary,
    ar: RobustnessSummary,
    *,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> Comparison:
    """The paper's paired DLM-vs-AR comparison over the conditions both summaries share (Table 1, App. H)."""
    from dlmeval.stats import paired_bootstrap_ci, wilcoxon

    d, a = dlm.rdi_by_key(), ar.rdi_by_key()
    keys = tuple(k for k in d if k in a)
    if not keys:
        raise InputError("the two summaries share no perturbation condition")
    if any(math.isnan(d[k]) or math.isnan(a[k]) for k in keys):
        raise InputError("RDI is undefined (clean accuracy 0) for one of the models; nothing to compare")
    adv = tuple(a[k] - d[k] for k in keys)
    wins = sum(x > 0 for x in adv)
    ties = sum(x == 0 for x in adv)
    if len(keys) >= 2:
        ci = paired_bootstrap_ci(
            [a[k] for k in keys],
            [d[k] for k in keys],
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
        )
        lo, hi = float(ci.lo), float(ci.hi)
        # the paper's App. H: two-sided (the module's default, said here)
        p = wilcoxon([a[k] for k in keys], [d[k] for k in keys], alternative="two-sided").p
    else:
        lo = hi = p = float("nan")
    warnings = tuple(f"{who}: {w}" for who, s in (("DLM", dlm), ("AR", ar)) for w in s.warnings)
    return Comparison(
        keys,
        adv,
        wins,
        ties,
        len(keys) - wins - ties,
        wins / len(keys),
        float(np.mean(adv)),
        (lo, hi),
        float(p),
        dlm.meaningful and ar.meaningful,
        warnings,
    )
