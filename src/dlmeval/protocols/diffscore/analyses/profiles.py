"""Multi-timestep quality profiles (DiffScore paper section 6.1, appendix J): ``timestep-matrix`` (Table 13 /
Fig. 2), ``learned-weights`` (Table 14 / Fig. 6) and ``tiers`` (Fig. 7), on every benchmark of ``--benchmarks``.

The three share one store run per selection (analysis ``profiles``; configuration: the benchmarks, ``--limit``, the
estimator, the prompt policy and whether the model's chat template is used): per output and direction the profile S(t_k) of ``cond``, ``reverse`` and
``marginal``, as the benchmark's mapped configurations need them (every one with ``--all-configs``); the ``bidir``
profile is the mean of the ``cond`` and ``reverse`` profiles, as the estimator computes it. Masks are seeded by the
output's store key, so a second analysis on the same outputs reads the profiles back instead of recomputing them.
The pure computations are in :mod:`.profile_stats`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.analyses import profile_stats as S
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, score_items, store_tables

BASE = ("cond", "reverse", "marginal")


def needed_configs(task: str, dims, all_configs: bool = False) -> tuple[list[str], list[str]]:
    """(configurations to report, base directions to score) for a benchmark."""
    cfgs = ["cond", "reverse", "bidir", "marginal"] if all_configs else []
    for d in dims:
        c = P.dimension_config(task, d)
        if c not in cfgs:
            cfgs.append(c)
    base = [b for b in BASE if b in cfgs or (b in ("cond", "reverse") and "bidir" in cfgs)]
    return cfgs, base


def gives_profiles(scheme: str) -> bool:
    """Whether the scheme's per-rate means estimate the paper's S(t_k) (:func:`dlmeval.scoring.stratified.
    has_rate_profile`, which the estimator reads too)."""
    from dlmeval.scoring.stratified import has_rate_profile

    return has_rate_profile(scheme)


def benchmark_profiles(
    suite,
    name: str,
    run,
    *,
    scorer=None,
    prefix: str = "prof",
    skip: tuple[str, ...] = (),
    profiles: bool = True,
) -> tuple[pd.DataFrame, dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """(scoring frame, {configuration: profile matrix}, rates, {configuration: score vector}) of one benchmark,
    scored into ``run`` under keys ``<prefix>/<output>|<direction>`` (resumable). ``scorer``: default the suite's
    for the task; ``skip``: base directions not to score (their configurations are left out). ``profiles=False``:
    the caller reads the scores only, so any scheme will do; otherwise a scheme whose per-rate means are not S(t_k)
    is refused."""
    from dlmeval.protocols.diffscore.meta_eval import dimensions

    o = suite.opts
    frame = suite.frame(name)
    task = frame["task"].iat[0]
    cfgs, base = needed_configs(task, dimensions(name), o.all_configs)
    base = [b for b in base if b not in skip]
    cfgs = [c for c in cfgs if c not in skip and not (c == "bidir" and {"cond", "reverse"} & set(skip))]
    scorer = scorer or suite.scorer(task)
    if scorer.spec.scheme == "pll":
        from dlmeval.errors import InputError

        raise InputError(
            "profile analyses need masking rates; the pll scheme has none (use balanced or independent)"
        )
    if profiles and not gives_profiles(scorer.spec.scheme):
        from dlmeval.errors import InputError

        raise InputError(
            f"profile analyses read S(t_k) per rate; the {scorer.spec.scheme} scheme estimates the score (their "
            "mean) but not each S(t_k) (docs/diffscore.md): add --scheme balanced, or --preset paper"
        )
    rates = scorer.rates
    keys = [f"{prefix}/{k}" for k in frame["key"]]

    def compute(chunk):
        rows = [frame.iloc[i] for i in chunk]
        out: list[dict] = [{} for _ in chunk]
        for cfg in base:
            df = scorer.score(
                [r["candidate"] for r in rows],
                None if cfg == "marginal" else [r["cond_source"] for r in rows],
                config=cfg,
                item_ids=[str(r["key"]) for r in rows],
            )
            for j, (_, r) in enumerate(df.iterrows()):
                out[j][cfg] = {"score": float(r["score"]), "profile": [float(x) for x in r["profile"]]}
        return out

    got = score_items(
        run, keys, base, compute, chunk_size=o.chunk_size, label=f"{name} profiles", progress=o.progress
    )
    mats = {
        b: np.array([g["profile"] for g in got[b]], dtype=np.float64).reshape(len(frame), -1) for b in base
    }
    vals = {b: np.array([g["score"] for g in got[b]], dtype=np.float64) for b in base}
    profs, scores = {}, {}
    for c in cfgs:
        # bidir = (cond + reverse) / 2, profile and score, as the estimator combines the two directions
        profs[c] = 0.5 * (mats["cond"] + mats["reverse"]) if c == "bidir" else mats[c]
        scores[c] = 0.5 * (vals["cond"] + vals["reverse"]) if c == "bidir" else vals[c]
    return frame, profs, rates, scores


def _profiles_run(suite):
    o = suite.opts
    m = suite.dlm()
    return analysis_run(
        suite,
        "profiles",
        {"estimator": o.estimator_record(), "prompt_policy": o.prompt, "chat": suite.has_chat(m)},
        [m],
        selection=True,
    )


def _each_benchmark(suite, run):
    from dlmeval.protocols.diffscore.meta_eval import dimensions

    for name in suite.benchmarks:
        frame, profs, rates, _ = benchmark_profiles(suite, name, run)
        task = frame["task"].iat[0]
        dims = dimensions(name)
        mapped = {d: P.dimension_config(task, d) for d in dims}
        yield name, frame, profs, rates, dims, mapped, P.BENCHMARK_PROTOCOLS[name][0]


def _label(suite) -> str:
    return suite.dlm().identity().name


@register(
    "timestep-matrix",
    help="correlation of the per-rate score S(t_k) with each human dimension, per benchmark (primary protocol)",
    paper="section 6.1, Fig. 2, appendix J.1, Table 13",
    profiles=True,
)
def run_timestep_matrix(suite) -> dict[str, pd.DataFrame]:
    parts = []
    run = _profiles_run(suite)
    for name, frame, profs, rates, dims, mapped, proto in _each_benchmark(suite, run):
        m = S.timestep_matrix(frame, profs, rates, dims, proto, mapped)
        m.insert(0, "benchmark", name)
        parts.append(m)
    matrix = pd.concat(parts, ignore_index=True)
    model = _label(suite)
    pc = matrix[matrix["mapped"]].copy()
    pc["metric"] = "DiffScore " + pc["config"] + f" [{model}]"
    tables = {
        "profile_correlation": pc[
            ["benchmark", "dimension", "dimension_tag", "metric", "config", "protocol", "rate", "value", "n"]
        ].reset_index(drop=True),
        "timestep_matrix": S.matrix_wide(matrix),
    }
    store_tables(run, tables)
    return tables


@register(
    "learned-weights",
    help="timestep weights learned by k-fold CV (NNLS, document folds) against the uniform DiffScore",
    paper="section 6.1, Fig. 6, appendix J.2, Table 14",
    options={"folds": int, "ridge": float},
    profiles=True,
)
def run_learned_weights(suite, *, folds: int = 5, ridge: float = 0.0) -> dict[str, pd.DataFrame]:
    summ, weights = [], []
    run = _profiles_run(suite)
    for name, frame, profs, rates, dims, mapped, proto in _each_benchmark(suite, run):
        for d in dims:
            cfg = mapped[d]
            s, w = S.learned_weights_cv(
                frame,
                profs[cfg],
                rates,
                d,
                proto,
                n_folds=folds,
                seed=suite.opts.seed,
                ridge=ridge,
                tag=(name,),
            )
            shares = w.groupby("rate")["weight"].mean()
            top = float(shares.idxmax())
            summ.append(
                {"benchmark": name, "config": cfg, **s, "top_rate": top, "top_share": float(shares.max())}
            )
            w.insert(0, "config", cfg)
            w.insert(0, "dimension_tag", s["dimension_tag"])
            w.insert(0, "benchmark", name)
            weights.append(w)
    wf = pd.concat(weights, ignore_index=True)
    tables = {
        "learned_weights": pd.DataFrame(summ),
        "learned_weights_by_rate": S.weight_shares(wf),
        "learned_weights_folds": wf,
    }
    run.put_table(
        "learned_weights_config", pd.DataFrame([{"folds": folds, "ridge": ridge, "seed": suite.opts.seed}])
    )
    store_tables(run, tables)
    return tables


@register(
    "tiers",
    help="mean profile S(t_k) per human-score tier (mean of the benchmark's dimensions; equal-count tiers)",
    paper="appendix J.3, Fig. 7",
    options={"n_tiers": int},
    profiles=True,
)
def run_tiers(suite, *, n_tiers: int = 3) -> dict[str, pd.DataFrame]:
    parts = []
    run = _profiles_run(suite)
    for name, frame, profs, rates, dims, _mapped, _proto in _each_benchmark(suite, run):
        if P.DARR in dims:
            continue
        t = S.tier_profiles(frame, profs, rates, dims, n_tiers)
        t.insert(0, "benchmark", name)
        parts.append(t)
    if not parts:
        from dlmeval.errors import InputError

        raise InputError("tiers need a benchmark with absolute human scores (not only WMT)")
    tiers = pd.concat(parts, ignore_index=True)
    tables = {"tier_profiles": tiers, "tier_gap": S.tier_gap(tiers)}
    store_tables(run, tables)
    return tables
