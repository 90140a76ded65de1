"""The metrics of a Care cell: English-filter acceptance, then on the accepted texts PPL by the external AR
evaluator, MAUVE against human reference texts of the same source, Self-BLEU and Distinct-3, beside the NFE and
churn the sampler recorded. :class:`Evaluators` loads the evaluator, the MAUVE featurizer and the reference
features once per sweep (the reference texts come from the sweep's plan)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dlmeval.protocols.care.cells import Cell
from dlmeval.protocols.care.plan import CarePlan
from dlmeval.protocols.care.spec import CareSpec
from dlmeval.seeding import derive_seed


class Evaluators:
    """The evaluator, the MAUVE featurizer and reference features, loaded once per sweep; the references are the
    plan's (:meth:`~dlmeval.protocols.care.plan.CarePlan.references`)."""

    def __init__(self, plan: CarePlan, *, device, dtype, trust_remote_code, allow_download, models=None):
        from dlmeval.models import load_causal_lm

        self.plan = plan
        spec = plan.spec
        kw = dict(
            device=device, dtype=dtype, allow_download=allow_download, trust_remote_code=trust_remote_code
        )
        models = models or {}
        self.evaluator = models.get(spec.evaluator) or load_causal_lm(spec.evaluator, **kw)
        f = spec.metrics.featurizer
        self.feature_model = None
        if f == "minilm":
            from dlmeval.metrics import minilm_featurizer

            dev = getattr(self.evaluator, "device", None)
            self.featurizer = minilm_featurizer(device=str(dev) if dev is not None else "cpu")
        elif f == "ar":
            from dlmeval.metrics import ar_featurizer

            self.featurizer = ar_featurizer(self.evaluator)
        else:
            from dlmeval.metrics import ar_featurizer

            self.feature_model = models.get(f) or load_causal_lm(f, **kw)
            self.featurizer = ar_featurizer(self.feature_model)
        self._ref: dict[str, np.ndarray] = {}

    def identities(self) -> list[Any]:
        ids = [self.evaluator.identity()]
        if self.feature_model is not None:
            ids.append(self.feature_model.identity())
        return ids

    def reference_features(self, source: str) -> np.ndarray:
        if source not in self._ref:
            refs = self.plan.references(source)
            self._ref[source] = np.asarray(self.featurizer(refs), dtype=np.float32)
        return self._ref[source]


def cell_metrics(
    spec: CareSpec, cell: Cell, gens: list[dict], metrics: Evaluators, warn: Callable[[str], None]
) -> dict:
    """The summary record of one cell from its stored generation records ``gens`` (prompt order)."""
    from dlmeval.metrics import distinct_n, english_filter, mauve_score, perplexity, self_bleu

    m = spec.metrics
    texts = [r["text"] for r in gens]
    nonempty = [bool(t.strip()) for t in texts]
    accepted = [ne and (english_filter(t) if m.english_filter else True) for t, ne in zip(texts, nonempty)]
    keep = [i for i, a in enumerate(accepted) if a]
    acc_texts = [texts[i].strip() for i in keep]
    nfe = np.array([r["nfe"] for r in gens], dtype=float)
    rec: dict[str, Any] = {
        **cell.fields(),
        "cell": cell.key,
        "resolved_steps": gens[0]["resolved_steps"],
        "nfe_predicted": gens[0].get("nfe_predicted"),
        "n": len(gens),
        "n_empty": len(gens) - sum(nonempty),
        "n_accepted": len(keep),
        "acceptance": len(keep) / len(gens),
        "nfe": float(nfe.mean()),
        "nfe_min": float(nfe.min()),
        "nfe_max": float(nfe.max()),
        "remasks": float(np.mean([r["remasks"] for r in gens])),
        "replacement_rate": float(np.mean([r["replacement_rate"] for r in gens])),
        "stable_cells": float(np.mean([r["stable_cells"] for r in gens])),
        "gen_tokens_mean": float(np.mean([r["n_tokens"] for r in gens])),
        "ppl": float("nan"),
        "ppl_mean_item": float("nan"),
        "mauve": float("nan"),
        "mauve_buckets": None,
        "self_bleu": float("nan"),
        "distinct3": float("nan"),
    }
    if len(keep) < 2:
        warn(f"cell {cell.key}: {len(keep)} accepted generation(s); PPL, MAUVE and diversity left out")
        return rec
    pr = perplexity(metrics.evaluator, [gens[i]["prefix"] for i in keep], [texts[i] for i in keep])
    rec["ppl"], rec["ppl_mean_item"] = pr.ppl, pr.mean_item_ppl
    mauve_texts = acc_texts
    if m.mauve_samples is not None and len(acc_texts) > m.mauve_samples:
        # a seeded subsample of the accepted generations (metrics.mauve_samples, docs/care.md), in prompt order
        from dlmeval.seeding import numpy_rng

        pick = numpy_rng(spec.seed, "mauve-samples", cell.key).choice(
            len(acc_texts), m.mauve_samples, replace=False
        )
        mauve_texts = [acc_texts[i] for i in sorted(pick.tolist())]
    rec["mauve_n"] = len(mauve_texts)
    ms = mauve_score(
        mauve_texts,
        None,
        metrics.featurizer,
        seed=derive_seed(spec.seed, "mauve", cell.seed),
        q_features=metrics.reference_features(cell.source),
        num_buckets=m.mauve_buckets,
    )
    rec["mauve"], rec["mauve_buckets"] = ms.mauve, ms.num_buckets
    # sacrebleu's 0-100 scale -> 0-1, the scale of the paper's tables
    rec["self_bleu"] = (
        self_bleu(
            acc_texts, max_hypotheses=m.self_bleu_max, seed=derive_seed(spec.seed, "self-bleu", cell.key)
        )
        / 100.0
    )
    rec["distinct3"] = distinct_n(acc_texts, n=3)
    return rec


__all__ = ["Evaluators", "cell_metrics"]
