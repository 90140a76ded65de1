"""Two diffusion-model families on the same benchmarks (DiffScore paper section 6.4, appendix N: LLaDA against
Dream).

Every benchmark of ``--benchmarks`` is scored with ``--model`` and with ``--compare-model`` under the same
estimator, the same prompt policy (each model with its own chat template where it has one) and the same mask
seeds (keyed by output, so both models see the same masks wherever their tokenizers give the texts the same
length); per human dimension (paper mapping) the primary protocol's correlation of each model, side by side, and
the difference B - A.
"""

from __future__ import annotations

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.analyses import profile_stats as S
from dlmeval.protocols.diffscore.analyses.profiles import benchmark_profiles
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, store_tables


def side_by_side(values: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Wide table from a long one (``benchmark``, ``dimension_tag``, ``model``, ``value``): one row per benchmark
    dimension, columns ``a`` and ``b`` and ``b - a``, then an ``avg`` row per model over all rows."""
    w = values.pivot_table(
        index=["benchmark", "dimension_tag"], columns="model", values="value", aggfunc="first", sort=False
    )[[a, b]].reset_index()
    w.columns.name = None
    avg = {"benchmark": "avg", "dimension_tag": "", a: float(w[a].mean()), b: float(w[b].mean())}
    w = pd.concat([w, pd.DataFrame([avg])], ignore_index=True)
    w[f"{b} - {a}"] = w[b] - w[a]
    return w


def _scorer(suite, model, task: str):
    from dlmeval.protocols.diffscore.meta_eval import TASK_PROMPTS
    from dlmeval.scoring import DiffScorer

    o = suite.opts
    chat = suite.has_chat(model) and o.prompt == "auto"
    return DiffScorer(
        model,
        seed=o.seed,
        prompt=TASK_PROMPTS[task] if chat else None,
        chat=chat,
        batch_size=o.dlm_batch_size,
        max_tokens=o.dlm_max_tokens,
        **o.estimator(),
    )


@register(
    "families",
    help="the benchmarks scored with --model and with --compare-model (e.g. LLaDA against Dream), side by side",
    paper="section 6.4, appendix N",
    options={"compare_model": str},
)
def run_families(suite, *, compare_model: str | None = None) -> dict[str, pd.DataFrame]:
    from dlmeval.models.registry import load_diffusion
    from dlmeval.protocols.diffscore.meta_eval import dimensions

    if not compare_model:
        raise InputError("the families analysis needs a second diffusion model: --compare-model SPEC")
    o = suite.opts
    ma = suite.dlm()
    mb = suite.model(compare_model, lambda: load_diffusion(compare_model, **o.load_kwargs()))
    la, lb = f"A: {o.dlm} [{ma.identity().name}]", f"B: {compare_model} [{mb.identity().name}]"
    run = analysis_run(
        suite,
        "families",
        {"estimator": o.estimator_record(), "prompt_policy": o.prompt, "models": [o.dlm, compare_model]},
        [ma, mb],
        selection=True,
    )
    recs = []
    for name in suite.benchmarks:
        task = suite.frame(name)["task"].iat[0]
        dims = dimensions(name)
        proto = P.BENCHMARK_PROTOCOLS[name][0]
        for tag, label, model in (("a", la, ma), ("b", lb, mb)):
            frame, _, _, scores = benchmark_profiles(
                suite, name, run, scorer=_scorer(suite, model, task), prefix=f"fam/{tag}", profiles=False
            )
            for d in dims:
                cfg = P.dimension_config(task, d)
                v, n = S.evaluate(proto, frame, d, scores[cfg])
                recs.append(
                    {
                        "benchmark": name,
                        "dimension": d,
                        "dimension_tag": P.DIMENSION_TAGS.get(d, d),
                        "config": cfg,
                        "protocol": proto,
                        "model": label,
                        "value": v,
                        "n": n,
                    }
                )
    long = pd.DataFrame(recs)
    tables = {"families": side_by_side(long, la, lb), "families_values": long}
    store_tables(run, tables)
    return tables
