"""Positional bias (DiffScore paper section 6.3, appendix L) and directional consistency (section 6.3, appendix M).

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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, score_items, store_tables
from dlmeval.seeding import numpy_rng


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


@register(
    "positional",
    help="positional bias: per-position token-score spread of DiffScore cond against AR s2h (SummEval)",
    paper="section 6.3, Fig. 3 left, appendix L",
    options={"max_positions": int, "min_count": int},
)
def run_positional(suite, *, max_positions: int = 64, min_count: int = 5) -> dict[str, pd.DataFrame]:
    from dlmeval.protocols.diffscore.analyses.comparator import comparator

    o = suite.opts
    frame = suite.frame("SummEval")
    items = pd.DataFrame(
        {"key": "pos/" + frame["key"], "source": frame["source"], "candidate": frame["candidate"]}
    )
    dlm, cmp = suite.dlm(), comparator(suite)  # BARTScore as in the paper when available, else the AR model
    run = analysis_run(
        suite,
        "positional",
        {"estimator": o.estimator_record(), "dlm_config": "cond", "ar": "s2h", "comparator": cmp.kind},
        [dlm, cmp.model],
    )
    scorer = suite.scorer("SUM")

    def compute(chunk):
        rows = [items.iloc[i] for i in chunk]
        df = scorer.score(
            [r["candidate"] for r in rows],
            [r["source"] for r in rows],
            config="cond",
            item_ids=[str(r["key"]) for r in rows],
            token_scores=True,
        )
        lps = cmp.scorer.token_logprobs([r["source"] for r in rows], [r["candidate"] for r in rows])
        return [
            {"dlm": {"tokens": list(map(float, df["token_logprob"].iat[i]))}, "ar": {"tokens": lp.tolist()}}
            for i, lp in enumerate(lps)
        ]

    got = score_items(
        run,
        list(items["key"]),
        ["dlm", "ar"],
        compute,
        chunk_size=o.chunk_size,
        label="positional",
        progress=o.progress,
    )
    summary, per_pos = [], []
    for m, label in (
        ("dlm", f"DiffScore cond [{dlm.identity().name}]"),
        ("ar", cmp.label("s->h")),
    ):
        st = positional_stats([r["tokens"] for r in got[m]], max_positions=max_positions, min_count=min_count)
        summary.append({"model": label, **{k: v for k, v in st.items() if not k.startswith("position_")}})
        for p, (mu, sd, n) in enumerate(
            zip(st["position_means"], st["position_stds"], st["position_counts"])
        ):
            per_pos.append({"model": label, "position": p, "mean": mu, "std": sd, "count": n})
    tables = {"positional": pd.DataFrame(summary), "positional_by_position": pd.DataFrame(per_pos)}
    store_tables(run, tables)
    return tables


@register(
    "directional",
    help="directional consistency on seeded forward / reverse sentence pairs (--n-pairs)",
    paper="section 6.3, Fig. 3 right, appendix M, Table 17",
    options={"n_pairs": int},
)
def run_directional(suite, *, n_pairs: int = 200) -> dict[str, pd.DataFrame]:
    from dlmeval.protocols.diffscore.analyses.comparator import comparator

    o = suite.opts
    pairs = reversal_pairs(n_pairs, o.seed)
    items = pd.DataFrame(
        {
            "key": [f"dir/{p}/{side}" for p in pairs["pair_id"] for side in ("forward", "reverse")],
            "text": [t for f, r in zip(pairs["forward"], pairs["reverse"]) for t in (f, r)],
        }
    )
    dlm, cmp = suite.dlm(), comparator(suite)
    run = analysis_run(
        suite,
        "directional",
        {"estimator": o.estimator_record(), "n_pairs": n_pairs, "comparator": cmp.kind},
        [dlm, cmp.model],
    )
    scorer = suite.scorer("SUM")

    def compute(chunk):
        texts = [items["text"].iat[i] for i in chunk]
        df = scorer.score(texts, config="marginal", item_ids=[items["key"].iat[i] for i in chunk])
        arm = cmp.scorer.mean_logprobs([None] * len(texts), texts)
        return [
            {"dlm": {"score": float(df["score"].iat[i])}, "ar": {"score": arm[i]}} for i in range(len(chunk))
        ]

    got = score_items(
        run,
        list(items["key"]),
        ["dlm", "ar"],
        compute,
        chunk_size=o.chunk_size,
        label="directional",
        progress=o.progress,
    )
    rows, per_pair = [], pairs.copy()
    for m, label in (
        ("dlm", f"DiffScore marginal [{dlm.identity().name}]"),
        ("ar", cmp.label("marginal" if cmp.kind == "ar" else "empty source")),
    ):
        v = np.array([r["score"] for r in got[m]])
        f, r = v[0::2], v[1::2]
        rows.append({"model": label, **consistency_stats(f, r)})
        per_pair[f"{m}_forward"], per_pair[f"{m}_reverse"] = f, r
    tables = {"directional": pd.DataFrame(rows), "directional_pairs": per_pair}
    store_tables(run, tables)
    return tables
