"""The adversarial PMI test (DiffScore paper section 6.2, appendix K, Table 4).

On SummEval, per document the *original* is the system summary with the highest mean human score; *fluent-irrelevant* is another document's original (a seeded derangement); *disfluent-
relevant* is the original with seeded word-order swaps of neighbours inside a clause, article / preposition
substitutions, a repeated word and a deleted word (about 15% of the words touched, every kind at least once).
Scores: DiffScore ``pmi`` (cond, marginal on the same masks, and PMI = cond - marginal) and AR (s2h, marginal,
PMI = s2h - marginal). Each variant is compared with the originals by the two-sided Mann-Whitney U test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, score_items, store_tables
from dlmeval.seeding import numpy_rng

# ---------------------------------------------------------------------------------------------- adversarial
_SUBS = {
    "the": "a",
    "a": "the",
    "an": "the",
    "in": "on",
    "on": "in",
    "at": "on",
    "of": "for",
    "for": "of",
    "to": "at",
    "with": "by",
    "by": "with",
    "from": "to",
    "into": "onto",
}
_OPS = ("swap", "substitute", "repeat", "delete")


def _ends_clause(w: str) -> bool:
    return bool(w) and w[-1] in ".,;:!?"


def disfluent(text: str, rng: np.random.Generator, rate: float = 0.15) -> str:
    """Controlled fluency damage that keeps the content: neighbour swaps inside a clause, article / preposition
    substitutions, a repeated word, a deleted word; ``max(4, rate * words)`` operations cycling over the four kinds
    (a kind with no place to apply falls back to a swap)."""
    words = text.split()
    if len(words) < 4:
        return text
    n_ops = max(len(_OPS), int(round(rate * len(words))))
    for j in range(n_ops):
        op = _OPS[j % len(_OPS)]
        if op == "substitute":
            idx = [i for i, w in enumerate(words) if w.lower().strip(".,;:!?") in _SUBS]
            if idx:
                i = idx[int(rng.integers(len(idx)))]
                w = words[i]
                core = w.rstrip(".,;:!?")
                tail = w[len(core) :]
                new = _SUBS[core.lower()]
                words[i] = (new.capitalize() if core[:1].isupper() else new) + tail
                continue
            op = "swap"
        if op == "swap":
            idx = [
                i
                for i in range(len(words) - 1)
                if not _ends_clause(words[i]) and not _ends_clause(words[i + 1])
            ]
            if idx:
                i = idx[int(rng.integers(len(idx)))]
                words[i], words[i + 1] = words[i + 1], words[i]
        elif op == "repeat":
            i = int(rng.integers(len(words)))
            words.insert(i + 1, words[i].rstrip(".,;:!?"))
        elif op == "delete" and len(words) > 4:
            i = int(rng.integers(1, len(words)))
            if not _ends_clause(words[i]):
                del words[i]
    return " ".join(words)


def adversarial_set(frame: pd.DataFrame, dims: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """Per document: ``original`` (best system summary by mean human score), ``fluent_irrelevant`` (another
    document's original, seeded derangement) and ``disfluent_relevant`` (the original, perturbed)."""
    best = []
    for doc, g in frame.groupby("doc_id", sort=False):
        score = g[list(dims)].mean(axis=1).to_numpy()
        r = g.iloc[int(np.argmax(score))]
        best.append((doc, r["source"], r["candidate"]))
    if len(best) < 2:
        raise InputError("the adversarial test needs at least 2 documents (raise --limit)")
    rng = numpy_rng(seed, "adversarial", "derangement")
    order = rng.permutation(len(best))
    other = {int(order[k]): int(order[(k + 1) % len(order)]) for k in range(len(order))}
    rows = []
    for i, (doc, src, cand) in enumerate(best):
        rows.append({"doc_id": doc, "condition": "original", "source": src, "candidate": cand})
        rows.append(
            {"doc_id": doc, "condition": "fluent_irrelevant", "source": src, "candidate": best[other[i]][2]}
        )
        pert = disfluent(cand, numpy_rng(seed, "adversarial", "disfluent", doc))
        rows.append({"doc_id": doc, "condition": "disfluent_relevant", "source": src, "candidate": pert})
    return pd.DataFrame(rows)


def pmi_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean / std of cond, marginal and PMI per (model, condition), with Mann-Whitney U p-values against the
    originals. ``scores`` columns: model, condition, cond, mar, pmi."""
    from dlmeval.stats import mann_whitney

    out = []
    for model, g in scores.groupby("model", sort=False):
        base = g[g["condition"] == "original"]
        for cond, h in g.groupby("condition", sort=False):
            rec: dict[str, Any] = {"model": model, "condition": cond, "n": len(h)}
            for col in ("cond", "mar", "pmi"):
                rec[f"{col}_mean"] = float(h[col].mean())
                rec[f"{col}_std"] = float(h[col].std(ddof=1)) if len(h) > 1 else float("nan")
                if cond != "original" and len(h) and len(base):
                    rec[f"p_{col}"] = mann_whitney(base[col], h[col], alternative="two-sided")
                else:
                    rec[f"p_{col}"] = float("nan")
            out.append(rec)
    return pd.DataFrame(out)


@register(
    "adversarial",
    help="adversarial PMI test: originals, fluent-irrelevant and disfluent-relevant SummEval summaries",
    paper="section 6.2, Table 4, appendix K, Table 15",
)
def run_adversarial(suite) -> dict[str, pd.DataFrame]:
    from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS
    from dlmeval.protocols.diffscore.analyses.comparator import comparator

    o = suite.opts
    frame = suite.frame("SummEval")
    adv = adversarial_set(frame, BARTSCORE_BENCHMARKS["SummEval"].dimensions, o.seed)
    adv.insert(0, "key", [f"adv/{d}/{c}" for d, c in zip(adv["doc_id"], adv["condition"])])
    dlm, cmp = suite.dlm(), comparator(suite)  # BARTScore as in the paper when available, else the AR model
    run = analysis_run(
        suite,
        "adversarial",
        {"estimator": o.estimator_record(), "perturbation_rate": 0.15, "comparator": cmp.kind},
        [dlm, cmp.model],
    )
    scorer = suite.scorer("SUM")

    def compute(chunk):
        rows = [adv.iloc[i] for i in chunk]
        cands, srcs = [r["candidate"] for r in rows], [r["source"] for r in rows]
        df = scorer.score(cands, srcs, config="pmi", item_ids=[r["key"] for r in rows])
        sc = cmp.scorer
        s2h, mar = sc.mean_logprobs(srcs, cands), sc.mean_logprobs([None] * len(cands), cands)
        out = []
        for i in range(len(chunk)):
            out.append(
                {
                    "dlm": {
                        "cond": float(df["score_cond"].iat[i]),
                        "mar": float(df["score_marginal"].iat[i]),
                        "pmi": float(df["score"].iat[i]),
                    },
                    "ar": {"cond": s2h[i], "mar": mar[i], "pmi": s2h[i] - mar[i]},
                }
            )
        return out

    got = score_items(
        run,
        list(adv["key"]),
        ["dlm", "ar"],
        compute,
        chunk_size=o.chunk_size,
        label="adversarial",
        progress=o.progress,
    )
    recs = []
    for m, label in (("dlm", f"DiffScore [{dlm.identity().name}]"), ("ar", cmp.label("s->h"))):
        for (_, a), r in zip(adv.iterrows(), got[m]):
            recs.append({"model": label, "doc_id": a["doc_id"], "condition": a["condition"], **r})
    scores = pd.DataFrame(recs)
    tables = {
        "adversarial": pmi_table(scores),
        "adversarial_items": adv.merge(
            scores.pivot_table(index=["doc_id", "condition"], columns="model", values="pmi").reset_index(),
            on=["doc_id", "condition"],
        ),
    }
    store_tables(run, tables)
    return tables
