"""The estimator ablations (DiffScore paper section 6.5, Table 5).

On SummEval with the paper's dimension mapping, summary-level Spearman per dimension and their average: K in
(5, 10, 20) at T = 10; T in (5, 10, 20) at K = 20; MLP against the paper's ELBO weighting ``1/t`` (Table 22;
the ELBO is a sequence-level bound, so it grows with the length where MLP is a per-token mean); the default
balanced masks against the paper's independent ones (the same expectation, a lower variance).
Entity-only masking is not available in the estimator (:mod:`dlmeval.scoring.masks` has balanced / independent /
pll): its row says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from dlmeval.protocols.diffscore.analyses.registry import register, store_tables

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
    ("masking", "random, combined (default)", {"n_masks": 20, "n_rates": 10, "scheme": "combined"}),
    ("masking", "random, balanced (former default)", {"n_masks": 20, "n_rates": 10, "scheme": "balanced"}),
    ("masking", "random, independent (paper)", {"n_masks": 20, "n_rates": 10, "scheme": "independent"}),
    ("masking", "entity-only", {"unsupported": "the estimator has no entity-only masking scheme"}),
)


@register(
    "ablation",
    help="estimator ablations on SummEval: K, T, MLP vs ELBO weighting, combined / balanced / independent masks",
    paper="section 6.5, Table 5; appendix R, Table 22",
)
def run_ablation(suite, ablations=ABLATIONS) -> dict[str, pd.DataFrame]:
    """Each variant is a DiffScore component of its own (resumable, shared with the main suite when the
    estimator matches); summary-level Spearman per SummEval dimension with the paper mapping."""
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs

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
            scheme=kw.get("scheme", "combined"),
            weighting=kw.get("weighting", "mlp"),
        )
        # the bootstrap is off (the ablation reports point values); the models already loaded are shared
        inputs = SuiteInputs(replace(v_opts, bootstrap=0), models=suite.models)
        v = Suite(inputs, suite.store, command_line=suite.command_line)
        v.score_benchmark("SummEval", "diffscore")
        res, _ = v.evaluate_benchmark("SummEval")
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
    store_tables(run, {"ablation": table})
    return {"ablation": table}
