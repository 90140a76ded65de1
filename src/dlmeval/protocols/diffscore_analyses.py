"""The analyses of DiffScore paper section 6: positional bias, directional consistency, the adversarial PMI test,
and the estimator ablations.

Every analysis writes its per-item values into a run of the store (kind ``meta-eval-analysis``) chunk by chunk, so
a rerun resumes, and returns small summary tables. Definitions (the paper gives numbers, not formulas; these are
the ones used here):

Positional bias (section 6.3, appendix L), on SummEval candidates. Token scores: DiffScore ``cond`` (each token's
mean log-probability over the masks that hid it, source visible) and the AR model's ``s2h`` (log p of each token
given the source and the tokens before it). For position p = 0, 1, ... (token index in the candidate, positions
with at least ``min_count`` tokens, at most ``max_positions``): the standard deviation across candidates of the
token scores at p. *Mean positional std* = the mean of those over positions; *CoV* = the coefficient of variation
of the per-position MEAN scores across positions (std / |mean|, how much the expected score drifts with position);
*trend* = Spearman's rho between position and the per-position mean (a left-to-right drift is AR's bias); also the
mean score of the first token minus the mean of the rest.

Directional consistency (section 6.3, appendix M): ``n_pairs`` seeded pairs over fictional entities, "X authored
'Y'." / "'Y' was authored by X." and six more relations (invented, discovered, founded, composed, painted,
designed). Both sentences are scored alone (DiffScore ``marginal``; AR marginal mean log-prob). Consistency of a
pair = min(|f|, |r|) / max(|f|, |r|) of the two mean log-probabilities (1 = the same score both ways); reported:
mean and variance of the consistency and Spearman's rho between forward and reverse scores over pairs.

Adversarial PMI test (section 6.2, appendix K) on SummEval. Per document the *original* is the system summary with
the highest mean human score; *fluent-irrelevant* is another document's original (a seeded derangement); *disfluent-
relevant* is the original with seeded word-order swaps of neighbours inside a clause, article / preposition
substitutions, a repeated word and a deleted word (about 15% of the words touched, every kind at least once).
Scores: DiffScore ``pmi`` (cond, marginal on the same masks, and PMI = cond - marginal) and AR (s2h, marginal,
PMI = s2h - marginal). Each variant is compared with the originals by the two-sided Mann-Whitney U test.

Ablations (section 6.5, Table 5), on SummEval with the paper's dimension mapping, summary-level Spearman per
dimension and their average: K in (5, 10, 20) at T = 10; T in (5, 10, 20) at K = 20; MLP against ELBO weighting
(under the paper's Bernoulli masks, where they differ; under exact-count masks they nearly coincide); balanced
against the paper's independent masks. Entity-only masking is not available in the estimator
(:mod:`dlmeval.scoring.masks` has balanced / independent / pll): its row says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.seeding import numpy_rng

ANALYSES = ("positional", "directional", "adversarial", "ablation")


# ---------------------------------------------------------------------------------------------- positional
def positional_stats(
    token_scores: Sequence[Sequence[float]], *, max_positions: int = 64, min_count: int = 5
) -> dict:
    """Positional-bias statistics of per-token scores (one sequence per text); see the module docstring."""
    from scipy import stats as sps

    seqs = [np.asarray(s, dtype=np.float64) for s in token_scores]  # NaN: a token no mask hid (skipped)
    n_pos = min(max_positions, max((len(s) for s in seqs), default=0))
    means, stds, counts = [], [], []
    for p in range(n_pos):
        v = np.array([s[p] for s in seqs if len(s) > p and np.isfinite(s[p])])
        if v.size < max(2, min_count):
            break
        means.append(float(v.mean()))
        stds.append(float(v.std(ddof=1)))
        counts.append(int(v.size))
    if not means:
        raise InputError(f"too few tokens for positional statistics (need {min_count} texts at position 0)")
    m = np.asarray(means)
    first = np.array([s[0] for s in seqs if len(s) and np.isfinite(s[0])])
    rest = np.concatenate([s[1:] for s in seqs if len(s) > 1] or [np.zeros(0)])
    rest = rest[np.isfinite(rest)]
    trend = (
        float(sps.spearmanr(np.arange(m.size), m).statistic) if m.size > 2 and np.ptp(m) > 0 else float("nan")
    )
    return {
        "texts": len(seqs),
        "tokens": int(sum(len(s) for s in seqs)),
        "positions": int(m.size),
        "mean_positional_std": float(np.mean(stds)),
        "cov_position_means": float(np.std(m, ddof=1) / abs(np.mean(m))) if m.size > 1 else float("nan"),
        "trend_rho": trend,
        "first_minus_rest": float(first.mean() - rest.mean()) if rest.size else float("nan"),
        "position_means": means,
        "position_stds": stds,
        "position_counts": counts,
    }


# ---------------------------------------------------------------------------------------------- directional
_SYL = (
    "bar ring ton dal mer vo lin cas tor wen el ka rou sel mi dra fen gol hal ith ja lor nes quin rad sor tam ul "
    "vex yor zan bel cor dun esk far gri hol ivo kel mor nor pel ros sta tre val wyn"
).split()
_ADJ = "Shattered Silent Crimson Hollow Distant Gilded Fading Burning Quiet Broken Amber Frozen Hidden Velvet".split()
_NOUN = (
    "Light Harbor Garden River Echo Lantern Orchard Tide Meadow Citadel Compass Ember Willow Archive".split()
)
_DEVICE = (
    "spectral loom|tidal engine|copper astrolabe|folding telescope|pressure lantern|rotary press|glass harmonium|"
    "steam carriage|crystal receiver|signal kite"
).split("|")
_ORG_KIND = "Institute|Society|Company|Foundation|Academy|Observatory|Guild".split("|")
RELATIONS = ("authored", "invented", "discovered", "founded", "composed", "painted", "designed")


def _name(rng: np.random.Generator, parts: int) -> str:
    return "".join(_SYL[int(i)] for i in rng.integers(0, len(_SYL), parts)).capitalize()


def reversal_pairs(n_pairs: int = 200, seed: int = 0) -> pd.DataFrame:
    """``n_pairs`` forward / reverse sentence pairs with fictional entities, relations cycling over
    :data:`RELATIONS`; pair i is drawn from ``numpy_rng(seed, "directional", i)``."""
    if n_pairs < 3:
        raise InputError(f"directional consistency needs at least 3 pairs, got {n_pairs}")
    rows = []
    for i in range(n_pairs):
        rng = numpy_rng(seed, "directional", i)
        rel = RELATIONS[i % len(RELATIONS)]
        person = f"{_name(rng, 2)} {_name(rng, 3)}"
        adj, noun = _ADJ[int(rng.integers(len(_ADJ)))], _NOUN[int(rng.integers(len(_NOUN)))]
        if rel in ("authored", "composed", "painted"):
            obj = f"'{adj} {noun}'"
        elif rel in ("invented", "designed"):
            obj = f"the {_DEVICE[int(rng.integers(len(_DEVICE)))]}"
        elif rel == "discovered":
            obj = (
                f"the {_name(rng, 2)} comet"
                if rng.random() < 0.5
                else f"the element {_name(rng, 2).lower()}ium"
            )
        else:
            obj = f"the {_name(rng, 3)} {_ORG_KIND[int(rng.integers(len(_ORG_KIND)))]}"
        head = obj[0].upper() + obj[1:]
        rows.append(
            {
                "pair_id": f"dir{i:04d}",
                "relation": rel,
                "forward": f"{person} {rel} {obj}.",
                "reverse": f"{head} was {rel} by {person}.",
            }
        )
    return pd.DataFrame(rows)


def consistency_stats(forward: Sequence[float], reverse: Sequence[float]) -> dict:
    """Mean / variance of min(|f|,|r|)/max(|f|,|r|) per pair and Spearman's rho between f and r."""
    from dlmeval.stats import spearman

    f, r = np.asarray(forward, dtype=np.float64), np.asarray(reverse, dtype=np.float64)
    if f.size != r.size or f.size < 3:
        raise InputError("consistency needs at least 3 paired forward / reverse scores")
    a, b = np.abs(f), np.abs(r)
    hi = np.maximum(a, b)
    cons = np.where(hi > 0, np.minimum(a, b) / np.where(hi > 0, hi, 1.0), 1.0)
    return {
        "pairs": int(f.size),
        "mean_consistency": float(cons.mean()),
        "var_consistency": float(cons.var(ddof=1)),
        "rank_correlation": float(spearman(f, r).r),
        "mean_forward": float(f.mean()),
        "mean_reverse": float(r.mean()),
    }


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
    from scipy.stats import mannwhitneyu

    out = []
    for model, g in scores.groupby("model", sort=False):
        base = g[g["condition"] == "original"]
        for cond, h in g.groupby("condition", sort=False):
            rec: dict[str, Any] = {"model": model, "condition": cond, "n": len(h)}
            for col in ("cond", "mar", "pmi"):
                rec[f"{col}_mean"] = float(h[col].mean())
                rec[f"{col}_std"] = float(h[col].std(ddof=1)) if len(h) > 1 else float("nan")
                if cond != "original" and len(h) and len(base):
                    rec[f"p_{col}"] = float(mannwhitneyu(base[col], h[col], alternative="two-sided").pvalue)
                else:
                    rec[f"p_{col}"] = float("nan")
            out.append(rec)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------- runner
def _analysis_run(suite, name: str, config: dict, models: list):
    from dlmeval.protocols.meta_eval import SUITE_VERSION

    return suite.store.open_run(
        "meta-eval-analysis",
        {"suite_version": SUITE_VERSION, "analysis": name, **config},
        models,
        suite.opts.seed,
        suite.command_line,
    )


def _frame_runner(
    run, items: pd.DataFrame, metrics: list[str], compute, chunk_size: int, progress: bool, label: str
):
    """Chunked, resumable scoring of analysis items (``items`` has ``key``; one unit per row)."""
    from dlmeval.protocols.meta_eval import Unit, _read_results, run_chunks

    units = [Unit(f"a{i}", (i,)) for i in range(len(items))]
    prefix = str(items["key"].iat[0]).split("/", 1)[0] + "/"
    done = set(_read_results(run, prefix))
    run_chunks(
        run, items, units, metrics, compute, chunk_size=chunk_size, done=done, label=label, progress=progress
    )
    res = _read_results(run, prefix)
    return {m: [res[f"{k}|{m}"] for k in items["key"]] for m in metrics}


def run_positional(suite, *, max_positions: int = 64, min_count: int = 5) -> dict[str, pd.DataFrame]:
    from dlmeval.baselines.likelihood import ARScorer

    o = suite.opts
    frame = suite.frame("SummEval")
    items = pd.DataFrame(
        {"key": "pos/" + frame["key"], "source": frame["source"], "candidate": frame["candidate"]}
    )
    dlm, ar = suite.dlm(), suite.ar()
    run = _analysis_run(
        suite, "positional", {"estimator": o.estimator(), "dlm_config": "cond", "ar": "s2h"}, [dlm, ar]
    )
    scorer = suite.scorer("SUM")

    def compute(chunk):
        rows = [items.iloc[u.rows[0]] for u in chunk]
        df = scorer.score(
            [r["candidate"] for r in rows],
            [r["source"] for r in rows],
            config="cond",
            item_ids=[str(r["key"]) for r in rows],
            token_scores=True,
        )
        lps = ARScorer(ar, batch_size=o.ar_batch_size).token_logprobs(
            [r["source"] for r in rows], [r["candidate"] for r in rows]
        )
        return {
            u.uid: {
                "dlm": {"tokens": list(map(float, df["token_logprob"].iat[i]))},
                "ar": {"tokens": lp.tolist()},
            }
            for i, (u, lp) in enumerate(zip(chunk, lps))
        }

    got = _frame_runner(run, items, ["dlm", "ar"], compute, o.chunk_size, o.progress, "positional")
    summary, per_pos = [], []
    for m, label in (
        ("dlm", f"DiffScore cond [{dlm.identity().name}]"),
        ("ar", f"AR s->h [{ar.identity().name}]"),
    ):
        st = positional_stats([r["tokens"] for r in got[m]], max_positions=max_positions, min_count=min_count)
        summary.append({"model": label, **{k: v for k, v in st.items() if not k.startswith("position_")}})
        for p, (mu, sd, n) in enumerate(
            zip(st["position_means"], st["position_stds"], st["position_counts"])
        ):
            per_pos.append({"model": label, "position": p, "mean": mu, "std": sd, "count": n})
    tables = {"positional": pd.DataFrame(summary), "positional_by_position": pd.DataFrame(per_pos)}
    _store_tables(run, tables)
    return tables


def run_directional(suite, *, n_pairs: int = 200) -> dict[str, pd.DataFrame]:
    from dlmeval.baselines.likelihood import ARScorer

    o = suite.opts
    pairs = reversal_pairs(n_pairs, o.seed)
    items = pd.DataFrame(
        {
            "key": [f"dir/{p}/{side}" for p in pairs["pair_id"] for side in ("forward", "reverse")],
            "text": [t for f, r in zip(pairs["forward"], pairs["reverse"]) for t in (f, r)],
        }
    )
    dlm, ar = suite.dlm(), suite.ar()
    run = _analysis_run(suite, "directional", {"estimator": o.estimator(), "n_pairs": n_pairs}, [dlm, ar])
    scorer = suite.scorer("SUM")

    def compute(chunk):
        texts = [items["text"].iat[u.rows[0]] for u in chunk]
        df = scorer.score(texts, config="marginal", item_ids=[items["key"].iat[u.rows[0]] for u in chunk])
        arm = ARScorer(ar, batch_size=o.ar_batch_size).mean_logprobs([None] * len(texts), texts)
        return {
            u.uid: {"dlm": {"score": float(df["score"].iat[i])}, "ar": {"score": arm[i]}}
            for i, u in enumerate(chunk)
        }

    got = _frame_runner(run, items, ["dlm", "ar"], compute, o.chunk_size, o.progress, "directional")
    rows, per_pair = [], pairs.copy()
    for m, label in (
        ("dlm", f"DiffScore marginal [{dlm.identity().name}]"),
        ("ar", f"AR marginal [{ar.identity().name}]"),
    ):
        v = np.array([r["score"] for r in got[m]])
        f, r = v[0::2], v[1::2]
        rows.append({"model": label, **consistency_stats(f, r)})
        per_pair[f"{m}_forward"], per_pair[f"{m}_reverse"] = f, r
    tables = {"directional": pd.DataFrame(rows), "directional_pairs": per_pair}
    _store_tables(run, tables)
    return tables


def run_adversarial(suite) -> dict[str, pd.DataFrame]:
    from dlmeval.baselines.likelihood import ARScorer
    from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS

    o = suite.opts
    frame = suite.frame("SummEval")
    adv = adversarial_set(frame, BARTSCORE_BENCHMARKS["SummEval"].dimensions, o.seed)
    adv.insert(0, "key", [f"adv/{d}/{c}" for d, c in zip(adv["doc_id"], adv["condition"])])
    dlm, ar = suite.dlm(), suite.ar()
    run = _analysis_run(
        suite, "adversarial", {"estimator": o.estimator(), "perturbation_rate": 0.15}, [dlm, ar]
    )
    scorer = suite.scorer("SUM")

    def compute(chunk):
        rows = [adv.iloc[u.rows[0]] for u in chunk]
        cands, srcs = [r["candidate"] for r in rows], [r["source"] for r in rows]
        df = scorer.score(cands, srcs, config="pmi", item_ids=[r["key"] for r in rows])
        sc = ARScorer(ar, batch_size=o.ar_batch_size)
        s2h, mar = sc.mean_logprobs(srcs, cands), sc.mean_logprobs([None] * len(cands), cands)
        out = {}
        for i, u in enumerate(chunk):
            out[u.uid] = {
                "dlm": {
                    "cond": float(df["score_cond"].iat[i]),
                    "mar": float(df["score_marginal"].iat[i]),
                    "pmi": float(df["score"].iat[i]),
                },
                "ar": {"cond": s2h[i], "mar": mar[i], "pmi": s2h[i] - mar[i]},
            }
        return out

    got = _frame_runner(run, adv, ["dlm", "ar"], compute, o.chunk_size, o.progress, "adversarial")
    recs = []
    for m, label in (("dlm", f"DiffScore [{dlm.identity().name}]"), ("ar", f"AR [{ar.identity().name}]")):
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
    _store_tables(run, tables)
    return tables


ABLATIONS: tuple[tuple[str, str, dict], ...] = (
    ("K", "5", {"n_masks": 5, "n_rates": 10}),
    ("K", "10", {"n_masks": 10, "n_rates": 10}),
    ("K", "20 (default)", {"n_masks": 20, "n_rates": 10}),
    ("T", "5", {"n_masks": 20, "n_rates": 5}),
    ("T", "10 (default)", {"n_masks": 20, "n_rates": 10}),
    ("T", "20", {"n_masks": 20, "n_rates": 20}),
    (
        "weighting",
        "MLP, Bernoulli masks",
        {"n_masks": 20, "n_rates": 10, "scheme": "independent", "weighting": "mlp"},
    ),
    (
        "weighting",
        "ELBO, Bernoulli masks",
        {"n_masks": 20, "n_rates": 10, "scheme": "independent", "weighting": "elbo"},
    ),
    ("masking", "random, balanced (default)", {"n_masks": 20, "n_rates": 10, "scheme": "balanced"}),
    ("masking", "random, independent (paper)", {"n_masks": 20, "n_rates": 10, "scheme": "independent"}),
    ("masking", "entity-only", {"unsupported": "the estimator has no entity-only masking scheme"}),
)


def run_ablation(suite, ablations=ABLATIONS) -> dict[str, pd.DataFrame]:
    """Each variant is a DiffScore component of its own (resumable, shared with the main suite when the
    estimator matches); summary-level Spearman per SummEval dimension with the paper mapping."""
    from dlmeval.protocols.meta_eval import Suite

    o = suite.opts
    rows = []
    for block, setting, kw in ablations:
        rec: dict[str, Any] = {"block": block, "setting": setting}
        if "unsupported" in kw:
            rec["note"] = kw["unsupported"]
            rows.append(rec)
            continue
        v_opts = replace(
            o,
            families=("diffscore",),
            benchmarks=("SummEval",),
            ft=False,
            fast=False,
            n_masks=kw.get("n_masks"),
            n_rates=kw.get("n_rates"),
            scheme=kw.get("scheme", "balanced"),
            weighting=kw.get("weighting", "mlp"),
        )
        v = Suite(v_opts, suite.store, command_line=suite.command_line)
        v._dlm = suite.dlm()
        v.score_benchmark("SummEval", "diffscore")
        res, _ = replace_bootstrap(v).evaluate_benchmark("SummEval")
        df = pd.DataFrame(res)
        sel = df[(df["metric"] == "diffscore:mapped") & (df["protocol"] == "doc_spearman")]
        for r in sel.itertuples(index=False):
            rec[r.dimension_tag] = r.value
        rec["avg"] = float(sel["value"].mean()) if len(sel) else float("nan")
        rec["estimator"] = str(v_opts.estimator())
        rows.append(rec)
    table = pd.DataFrame(rows)
    run = suite.store.open_run(
        "meta-eval-analysis",
        {"analysis": "ablation", "limit": o.limit},
        [suite.dlm()],
        o.seed,
        suite.command_line,
    )
    _store_tables(run, {"ablation": table})
    return {"ablation": table}


def replace_bootstrap(v):
    """The same suite without bootstrap CIs (the ablation reports point values)."""
    v.opts = replace(v.opts, bootstrap=0)
    return v


def _store_tables(run, tables: dict[str, pd.DataFrame]) -> None:
    for name, df in tables.items():
        run.put_table(name, df)
    run.finish()


def run_analysis(name: str, suite, **kw) -> dict[str, pd.DataFrame]:
    if name not in ANALYSES:
        raise InputError(f"unknown analysis {name!r}; choose one of {', '.join(ANALYSES)}")
    if name == "positional":
        return run_positional(suite, **kw)
    if name == "directional":
        return run_directional(suite, **kw)
    if name == "adversarial":
        return run_adversarial(suite)
    return run_ablation(suite)


__all__ = [
    "ABLATIONS",
    "ANALYSES",
    "RELATIONS",
    "adversarial_set",
    "consistency_stats",
    "disfluent",
    "pmi_table",
    "positional_stats",
    "reversal_pairs",
    "run_analysis",
]
