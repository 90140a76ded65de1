"""n-way ANOVA with Type II sums of squares and partial eta squared (statsmodels ``ols`` + ``anova_lm``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlmeval.errors import InputError


def anova(
    df: pd.DataFrame,
    response: str,
    factors: list[str],
    interactions: bool = True,
    typ: int = 2,
) -> pd.DataFrame:
    """ANOVA table of ``response`` on categorical ``factors`` (all interactions when ``interactions``).

    Fits ``response ~ C(f1) * C(f2) * ...`` (or ``+`` without interactions) by OLS with statsmodels and returns
    ``anova_lm(fit, typ=typ)`` (Type II by default) with rows named by factor (``"a"``, ``"a:b"``, ...,
    ``"Residual"``), columns ``sum_sq, df, F, PR(>F)`` and ``partial_eta_sq = SS_effect / (SS_effect +
    SS_residual)`` (NaN on the Residual row). Every factor is treated as categorical (numeric levels too).
    The full factorial model needs replicates (more than one row per cell) to leave residual degrees of freedom.
    """
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"anova needs a pandas DataFrame, got {type(df).__name__}")
    factors = list(factors)
    if not factors:
        raise InputError("anova needs at least one factor")
    if len(set(factors)) != len(factors):
        raise InputError(f"factors repeat: {factors}")
    missing = [c for c in [response, *factors] if c not in df.columns]
    if missing:
        raise InputError(f"columns {missing} are not in the data frame (columns: {list(df.columns)})")
    y = pd.to_numeric(df[response], errors="coerce")
    if y.isna().any():
        raise InputError(f"response {response!r} has {int(y.isna().sum())} missing or non-numeric value(s)")
    # safe internal names: the formula parser must not see user column names (spaces, operators, ...)
    safe = {f: f"f{i}" for i, f in enumerate(factors)}
    data = pd.DataFrame({"y": y.to_numpy(dtype=np.float64)})
    for f, s in safe.items():
        if df[f].isna().any():
            raise InputError(f"factor {f!r} has missing values")
        if df[f].nunique() < 2:
            raise InputError(f"factor {f!r} has a single level; drop it from the design")
        data[s] = df[f].astype(str).to_numpy()
    joiner = " * " if interactions else " + "
    fit = ols("y ~ " + joiner.join(f"C({s})" for s in safe.values()), data=data).fit()
    if fit.df_resid <= 0:
        raise InputError(
            f"no residual degrees of freedom ({len(data)} rows for the model's {int(fit.df_model) + 1} "
            "parameters): add replicates (seeds) per cell or set interactions=False"
        )
    table = sm.stats.anova_lm(fit, typ=typ)
    back = {f"C({s})": f for f, s in safe.items()}
    table.index = [":".join(back.get(p, p) for p in str(term).split(":")) for term in table.index]
    ss_res = float(table.loc["Residual", "sum_sq"])
    eta = table["sum_sq"] / (table["sum_sq"] + ss_res)
    eta.loc["Residual"] = np.nan
    table["partial_eta_sq"] = eta
    # main effects first, then two-way, three-way ... interactions, then the residual
    order = sorted(
        (t for t in table.index if t != "Residual"),
        key=lambda t: (t.count(":"), _position(t, factors)),
    )
    return table.loc[[*order, "Residual"]]


def _position(term: str, factors: list[str]) -> tuple[int, ...]:
    return tuple(factors.index(p) for p in term.split(":"))
