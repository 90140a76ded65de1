"""DiffScore diagnostics: multi-timestep profiles, learned profile weights, token-level scores and heat maps.

* :func:`profile_matrix` turns the ``profile`` column of a :meth:`DiffScorer.score` frame into ``[N, T]``.
* :func:`learn_profile_weights` learns non-negative rate weights ``w_k`` (summing to 1) so that
  ``sum_k w_k S(t_k)`` tracks human scores, by k-fold cross-validation (DiffScore section 6.1 / appendix J.2:
  5-fold CV). Each fold fits ``sklearn.linear_model.LinearRegression(positive=True)`` on the training folds; the
  weights are the normalised coefficients; the held-out fold is predicted with them. Reported: out-of-fold Spearman
  and Kendall against the human scores (pooled over folds and the mean per fold), the same for uniform weights,
  the weights of every fold and the weights fitted on all data.
* PMI is computed by the estimator itself (``config="pmi"``: cond - marginal mask by mask on shared masks).
* :func:`token_table` exports token-level scores as a long table; the token x rate heat map of one item (mean
  ``log p`` of each token over the masks at each rate that hid it) is drawn by the figure home,
  :func:`dlmeval.report.figures.plot_token_heatmap`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.seeding import derive_seed


def profile_matrix(df: pd.DataFrame, column: str = "profile") -> np.ndarray:
    """``[N, T]`` float array of per-rate scores (NaN rows for items without a score)."""
    if column not in df:
        raise InputError(f"no {column!r} column; pass a frame returned by DiffScorer.score")
    rows = [list(p) if isinstance(p, list | tuple | np.ndarray) else [] for p in df[column]]
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        raise InputError("the frame has no profiles (the 'pll' scheme has none)")
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        if len(r) == width:
            out[i] = np.asarray(r, dtype=float)
    return out


@dataclass
class ProfileWeights:
    """Result of :func:`learn_profile_weights` (weights sum to 1; ``rates`` label the columns)."""

    weights: np.ndarray  # [T], fitted on all items
    rates: list[float]
    fold_weights: np.ndarray  # [folds, T]
    oof_prediction: np.ndarray  # [N] out-of-fold sum_k w_k S(t_k) (NaN for dropped rows)
    cv_spearman: float  # pooled out-of-fold
    cv_kendall: float
    cv_spearman_per_fold: float  # mean over folds
    uniform_spearman: float  # uniform weights (the plain mean profile), pooled over the same rows
    uniform_kendall: float
    n_items: int
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": [float(w) for w in self.weights],
            "rates": self.rates,
            "fold_weights": self.fold_weights.tolist(),
            "cv_spearman": self.cv_spearman,
            "cv_kendall": self.cv_kendall,
            "cv_spearman_per_fold": self.cv_spearman_per_fold,
            "uniform_spearman": self.uniform_spearman,
            "uniform_kendall": self.uniform_kendall,
            "n_items": self.n_items,
            **self.details,
        }


def _fit_weights(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LinearRegression

    coef = LinearRegression(positive=True).fit(x, y).coef_
    s = coef.sum()
    if not np.isfinite(s) or s <= 0:  # nothing correlates positively: fall back to uniform weights
        return np.full(x.shape[1], 1.0 / x.shape[1])
    return coef / s


def learn_profile_weights(
    profiles: np.ndarray | pd.DataFrame,
    human: Any,
    *,
    folds: int = 5,
    seed: int = 0,
    groups: Any = None,
    rates: list[float] | None = None,
) -> ProfileWeights:
    """Learn rate weights on human scores by ``folds``-fold cross-validation.

    ``profiles``: ``[N, T]`` or a DiffScore frame (its ``profile`` column; rates from ``attrs``). ``human``: N
    human scores. ``groups`` (e.g. the source document of each candidate) keeps a group inside one fold, so that
    candidates of one document never sit on both sides of a split. Rows with a NaN are dropped. Fold assignment
    is seeded by ``derive_seed(seed, "profile-weights")``.
    """
    from scipy.stats import kendalltau, spearmanr
    from sklearn.model_selection import GroupKFold, KFold

    if isinstance(profiles, pd.DataFrame):
        rates = rates or list(profiles.attrs.get("rates", [])) or None
        x = profile_matrix(profiles)
    else:
        x = np.asarray(profiles, dtype=float)
    y = np.asarray(human, dtype=float)
    if x.ndim != 2 or len(y) != x.shape[0]:
        raise InputError(f"profiles must be [N, T] with one human score per row; got {x.shape} and {len(y)}")
    keep = np.isfinite(x).all(axis=1) & np.isfinite(y)
    g = None if groups is None else np.asarray(groups, dtype=object)
    xi, yi = x[keep], y[keep]
    gi = None if g is None else g[keep]
    n_groups = len(set(gi.tolist())) if gi is not None else len(yi)
    if folds < 2 or n_groups < folds:
        raise InputError(
            f"need at least {max(folds, 2)} items (groups) with finite values for {folds}-fold CV"
        )
    rs = derive_seed(seed, "profile-weights") % (2**32)
    if gi is None:
        splits = KFold(n_splits=folds, shuffle=True, random_state=rs).split(xi)
    else:
        splits = GroupKFold(n_splits=folds, shuffle=True, random_state=rs).split(xi, yi, gi)
    oof = np.full(len(yi), np.nan)
    fold_w, per_fold = [], []
    for tr, te in splits:
        w = _fit_weights(xi[tr], yi[tr])
        fold_w.append(w)
        oof[te] = xi[te] @ w
        if len(te) > 2:
            per_fold.append(spearmanr(oof[te], yi[te]).statistic)
    uniform = xi.mean(axis=1)
    full_oof = np.full(len(y), np.nan)
    full_oof[keep] = oof
    t = x.shape[1]
    return ProfileWeights(
        weights=_fit_weights(xi, yi),
        rates=list(rates) if rates else [(k + 1) / t for k in range(t)],
        fold_weights=np.stack(fold_w),
        oof_prediction=full_oof,
        cv_spearman=float(spearmanr(oof, yi).statistic),
        cv_kendall=float(kendalltau(oof, yi).statistic),
        cv_spearman_per_fold=float(np.nanmean(per_fold)) if per_fold else float("nan"),
        uniform_spearman=float(spearmanr(uniform, yi).statistic),
        uniform_kendall=float(kendalltau(uniform, yi).statistic),
        n_items=int(keep.sum()),
        details={"folds": folds, "grouped": gi is not None, "seed": seed},
    )


def apply_profile_weights(profiles: np.ndarray | pd.DataFrame, weights: Any) -> np.ndarray:
    """``sum_k w_k S(t_k)`` for every row."""
    x = profile_matrix(profiles) if isinstance(profiles, pd.DataFrame) else np.asarray(profiles, dtype=float)
    w = np.asarray(weights, dtype=float)
    if x.shape[1] != w.shape[0]:
        raise InputError(f"{w.shape[0]} weights for profiles of {x.shape[1]} rates")
    return x @ w


def _token_suffixes(df: pd.DataFrame) -> list[str]:
    return sorted(c[len("tokens") :] for c in df.columns if c.startswith("tokens"))


def token_table(df: pd.DataFrame) -> pd.DataFrame:
    """Long table of token-level scores: ``item_id, direction, position, token, logprob`` and one ``lp@t`` column
    per rate (NaN where that rate never hid the token). Needs a frame scored with ``token_scores=True``."""
    sfx = _token_suffixes(df)
    if not sfx:
        raise InputError("no token scores in this frame; score with token_scores=True")
    rates = list(df.attrs.get("rates", []))
    records = []
    for _, row in df.iterrows():
        for s in sfx:
            toks = row[f"tokens{s}"]
            lps = row[f"token_logprob{s}"]
            by_rate = row.get(f"token_rate_logprob{s}") or []
            if not isinstance(toks, list) or not lps:
                continue
            for i, (tok, lp) in enumerate(zip(toks, lps, strict=True)):
                rec = {
                    "item_id": row["item_id"],
                    "direction": s.lstrip("_") or row["config"],
                    "position": i,
                    "token": tok,
                    "logprob": lp,
                }
                for k, vals in enumerate(by_rate):
                    label = f"{rates[k]:.3g}" if k < len(rates) else str(k)
                    rec[f"lp@{label}"] = vals[i]
                records.append(rec)
    return pd.DataFrame.from_records(records)
