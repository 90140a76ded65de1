"""Pure computations on multi-timestep quality profiles S(t_k) (DiffScore paper section 6.1, appendix J).

A *profile matrix* ``X`` holds one row per scored output of a scoring frame and one column per masking rate
``t_k = k / T`` (NaN where a rate has no value). The frame is the suite's scoring frame (``doc_id``, ``system``, the
human dimensions; WMT: ``pair_id``, ``side``), so every correlation uses the benchmark's own protocol
(:func:`dlmeval.protocols.diffscore.paper_protocols.evaluate`).

* :func:`timestep_matrix` (Table 13 / Fig. 2): the protocol's correlation of each column ``S(t_k)`` with each human
  dimension.
* :func:`learned_weights_cv` (Table 14 / Fig. 6): timestep weights learned by k-fold cross-validation and their
  out-of-fold correlation against the uniform weights (the mean of the profile, i.e. DiffScore itself when every
  rate has the same number of masks). The paper says only that the weights are "optimized via 5-fold
  cross-validation" and reports them as shares of the total; here: per training fold, non-negative least squares
  (scipy.optimize.nnls) of the centred human score on the centred profile columns, optionally with a ridge term
  ``ridge * trace(Xc'Xc) / T`` (added as extra rows, which keeps the non-negativity), normalised to sum to 1 (all
  zero: uniform). For WMT DARR (better / worse pairs, no absolute score) the fit is NNLS of the profile difference
  better - worse on 1. Folds are whole documents (WMT: pairs), assigned by a permutation drawn from
  ``numpy_rng(seed, "learned-weights", benchmark, dimension)``: deterministic for a seed.
* :func:`tier_profiles` (Fig. 7): outputs bucketed by the mean of their human dimensions into ``n_tiers``
  equal-count tiers (ties by file order), mean and standard error of ``S(t_k)`` per tier and rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.seeding import numpy_rng

TIER_LABELS = {2: ("low", "high"), 3: ("low", "mid", "high")}


def _judged(frame: pd.DataFrame, dim: str) -> P.Judged:
    from dlmeval.protocols.diffscore.meta_eval import judged_for

    return judged_for(frame.reset_index(drop=True), dim)


def _finite_rows(frame: pd.DataFrame, dim: str, v: np.ndarray) -> np.ndarray:
    """Rows usable for ``dim``: finite metric (and human score); DARR keeps a pair only when both sides are."""
    ok = np.isfinite(v)
    if dim == P.DARR:
        bad = set(frame.loc[~ok, "pair_id"])
        return ok & ~frame["pair_id"].isin(bad).to_numpy()
    return ok & np.isfinite(frame[dim].to_numpy(dtype=np.float64))


def evaluate(protocol: str, frame: pd.DataFrame, dim: str, v: np.ndarray) -> tuple[float, int]:
    """(value, n) of ``protocol`` for scores ``v`` on the usable rows; NaN when fewer than 2 remain."""
    v = np.asarray(v, dtype=np.float64)
    ok = _finite_rows(frame, dim, v)
    if ok.sum() < 2:
        return float("nan"), 0
    try:
        res = P.evaluate(protocol, _judged(frame[ok], dim), v[ok])
    except InputError:
        return float("nan"), 0
    return float(res.value), int(res.n)


def _check(frame: pd.DataFrame, X: np.ndarray, rates: Sequence[float]) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != len(frame) or X.shape[1] != len(rates):
        raise InputError(
            f"a profile matrix must be (outputs, rates) = ({len(frame)}, {len(rates)}), got {X.shape}"
        )
    return X


# ---------------------------------------------------------------------------------------------- Table 13
def timestep_matrix(
    frame: pd.DataFrame,
    profiles: Mapping[str, np.ndarray],
    rates: Sequence[float],
    dims: Sequence[str],
    protocol: str,
    mapped: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Long table: one row per (dimension, configuration, rate) with the protocol's ``value`` and ``n``; the
    column ``mapped`` marks the configuration the paper maps the dimension to (``mapped[dim]``), and ``best``
    the rate with the highest value per (dimension, configuration)."""
    rows = []
    for dim in dims:
        for cfg, X in profiles.items():
            X = _check(frame, X, rates)
            vals = [evaluate(protocol, frame, dim, X[:, k]) for k in range(len(rates))]
            finite = [v for v, _ in vals if np.isfinite(v)]
            top = max(finite) if finite else None
            for k, (t, (v, n)) in enumerate(zip(rates, vals)):
                rows.append(
                    {
                        "dimension": dim,
                        "dimension_tag": P.DIMENSION_TAGS.get(dim, dim),
                        "config": cfg,
                        "mapped": bool(mapped and mapped.get(dim) == cfg),
                        "k": k,
                        "rate": float(t),
                        "protocol": protocol,
                        "value": v,
                        "n": n,
                        "best": top is not None and v == top,
                    }
                )
    return pd.DataFrame(rows)


def matrix_wide(matrix: pd.DataFrame) -> pd.DataFrame:
    """The long :func:`timestep_matrix` as one row per (benchmark, dimension, configuration), one column per
    rate (``t=0.1`` ...), plus ``best``: the column of the best rate."""
    keys = [c for c in ("benchmark", "dimension_tag", "config", "mapped", "protocol") if c in matrix.columns]
    w = matrix.pivot_table(index=keys, columns="rate", values="value", aggfunc="first", sort=False)
    w.columns = [f"t={float(c):.2g}" for c in w.columns]
    w = w.reset_index()
    vals = w[[c for c in w.columns if c.startswith("t=")]]
    w["best"] = vals.idxmax(axis=1, skipna=True) if vals.notna().any().any() else None
    return w


# ---------------------------------------------------------------------------------------------- Table 14
def cv_folds(groups: Sequence, n_folds: int, seed: int, *tag: object) -> np.ndarray:
    """Fold index of each row: whole groups (documents) per fold, groups permuted by a seeded generator."""
    uniq = list(dict.fromkeys(groups))
    if len(uniq) < n_folds:
        raise InputError(
            f"{n_folds}-fold cross-validation needs at least {n_folds} documents, got {len(uniq)} (raise --limit)"
        )
    perm = numpy_rng(seed, "learned-weights", *tag).permutation(len(uniq))
    fold_of = {uniq[int(g)]: i % n_folds for i, g in enumerate(perm)}
    return np.array([fold_of[g] for g in groups], dtype=int)


def fit_weights(X: np.ndarray, y: np.ndarray | None, ridge: float = 0.0) -> np.ndarray:
    """Non-negative timestep weights summing to 1. ``y`` None: ``X`` holds better - worse differences, fitted
    on 1 (DARR)."""
    from scipy.optimize import nnls

    X = np.asarray(X, dtype=np.float64)
    T = X.shape[1]
    if y is None:
        A, b = X, np.ones(len(X))
    else:
        A, b = X - X.mean(axis=0), np.asarray(y, dtype=np.float64) - float(np.mean(y))
    if ridge > 0:
        lam = ridge * float(np.trace(A.T @ A)) / T
        A, b = np.vstack([A, np.sqrt(lam) * np.eye(T)]), np.concatenate([b, np.zeros(T)])
    w, _ = nnls(A, b)
    s = float(w.sum())
    return w / s if s > 0 else np.full(T, 1.0 / T)


def learned_weights_cv(
    frame: pd.DataFrame,
    X: np.ndarray,
    rates: Sequence[float],
    dim: str,
    protocol: str,
    *,
    n_folds: int = 5,
    seed: int = 0,
    ridge: float = 0.0,
    tag: Sequence[object] = (),
) -> tuple[dict, pd.DataFrame]:
    """(summary, per-fold weights) of k-fold learned timestep weights for one dimension.

    summary: ``uniform`` (protocol value of the profile mean), ``learned`` (of the pooled out-of-fold weighted
    scores), ``delta``, ``n``, ``folds``; weights: one row per (fold, rate) with ``weight`` and the fold's own
    ``value_learned`` / ``value_uniform`` on its held-out rows."""
    X = _check(frame, X, rates)
    keep = np.isfinite(X).all(axis=1)
    if dim != P.DARR:
        keep &= np.isfinite(frame[dim].to_numpy(dtype=np.float64))
    else:
        bad = set(frame.loc[~keep, "pair_id"])
        keep &= ~frame["pair_id"].isin(bad).to_numpy()
    f = frame[keep].reset_index(drop=True)
    Xk = X[keep]
    groups = f["pair_id"].tolist() if dim == P.DARR else f["doc_id"].tolist()
    fold = cv_folds(groups, n_folds, seed, *tag, dim)
    pred = np.full(len(f), np.nan)
    uniform = Xk.mean(axis=1)
    rows = []
    for i in range(n_folds):
        tr, te = fold != i, fold == i
        if dim == P.DARR:
            ft = f[tr].reset_index(drop=True)
            j = _judged(ft, dim)
            w = fit_weights(Xk[tr][j.better_index] - Xk[tr][j.worse_index], None, ridge)
        else:
            w = fit_weights(Xk[tr], f.loc[tr, dim].to_numpy(dtype=np.float64), ridge)
        pred[te] = Xk[te] @ w
        vl, _ = evaluate(protocol, f[te], dim, pred[te])
        vu, _ = evaluate(protocol, f[te], dim, uniform[te])
        for k, t in enumerate(rates):
            rows.append(
                {
                    "fold": i,
                    "k": k,
                    "rate": float(t),
                    "weight": float(w[k]),
                    "value_learned": vl,
                    "value_uniform": vu,
                }
            )
    u, n = evaluate(protocol, f, dim, uniform)
    lv, _ = evaluate(protocol, f, dim, pred)
    summary = {
        "dimension": dim,
        "dimension_tag": P.DIMENSION_TAGS.get(dim, dim),
        "protocol": protocol,
        "uniform": u,
        "learned": lv,
        "delta": lv - u,
        "n": n,
        "folds": n_folds,
        "ridge": ridge,
    }
    return summary, pd.DataFrame(rows)


def weight_shares(weights: pd.DataFrame) -> pd.DataFrame:
    """Mean and SD over folds of each rate's weight (the paper's Fig. 6 shares), per group of the other keys."""
    keys = [c for c in ("benchmark", "dimension_tag", "config") if c in weights.columns]
    g = weights.groupby([*keys, "rate"], sort=False)["weight"]
    return g.agg(weight_mean="mean", weight_sd="std", folds="count").reset_index()


# ---------------------------------------------------------------------------------------------- Fig. 7
def tier_of(score: np.ndarray, n_tiers: int) -> np.ndarray:
    """Tier 0 .. n_tiers-1 of each finite score by equal-count quantiles of its rank (ties in order); -1: NaN."""
    s = pd.Series(np.asarray(score, dtype=np.float64))
    out = np.full(len(s), -1, dtype=int)
    ok = s.notna().to_numpy()
    if ok.sum() < n_tiers:
        raise InputError(
            f"{n_tiers} tiers need at least {n_tiers} outputs with human scores, got {int(ok.sum())}"
        )
    ranks = s[ok].rank(method="first").to_numpy()
    out[ok] = pd.qcut(ranks, n_tiers, labels=False).astype(int)
    return out


def tier_profiles(
    frame: pd.DataFrame,
    profiles: Mapping[str, np.ndarray],
    rates: Sequence[float],
    dims: Sequence[str],
    n_tiers: int = 3,
) -> pd.DataFrame:
    """One row per (configuration, tier, rate): ``mean`` and ``sem`` of S(t_k) over the tier's outputs, ``n``,
    and the tier's human-score range (``human_lo`` .. ``human_hi``; the score is the mean of ``dims``)."""
    if n_tiers < 2:
        raise InputError(f"tiers: need at least 2 tiers, got {n_tiers}")
    if P.DARR in dims:
        raise InputError("quality tiers need absolute human scores; WMT DARR has only better/worse pairs")
    human = frame[list(dims)].to_numpy(dtype=np.float64).mean(axis=1)
    tier = tier_of(human, n_tiers)
    labels = TIER_LABELS.get(n_tiers, tuple(f"tier {i + 1}" for i in range(n_tiers)))
    rows = []
    for cfg, X in profiles.items():
        X = _check(frame, X, rates)
        for i in range(n_tiers):
            sel = tier == i
            for k, t in enumerate(rates):
                v = X[sel, k]
                v = v[np.isfinite(v)]
                rows.append(
                    {
                        "config": cfg,
                        "tier": i,
                        "tier_label": labels[i],
                        "k": k,
                        "rate": float(t),
                        "mean": float(v.mean()) if v.size else float("nan"),
                        "sem": float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan"),
                        "n": int(v.size),
                        "human_lo": float(human[sel].min()),
                        "human_hi": float(human[sel].max()),
                    }
                )
    return pd.DataFrame(rows)


def tier_gap(tiers: pd.DataFrame) -> pd.DataFrame:
    """Top tier minus bottom tier mean per (configuration, rate)."""
    keys = [c for c in ("benchmark", "config") if c in tiers.columns]
    out = []
    for key, g in tiers.groupby(keys, sort=False):
        lo, hi = g["tier"].min(), g["tier"].max()
        a = g[g["tier"] == hi].set_index("rate")["mean"]
        b = g[g["tier"] == lo].set_index("rate")["mean"]
        for t in a.index:
            rec = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
            out.append({**rec, "rate": float(t), "gap_high_minus_low": float(a[t] - b[t])})
    return pd.DataFrame(out)
