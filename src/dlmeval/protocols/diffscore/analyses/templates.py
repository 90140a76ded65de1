"""The prompt-template robustness study (DiffScore paper section 6.5, appendix I, Table 11: "average correlations
fluctuating by only 0.010 across seven templates").

The paper's copy here names seven templates but not their wording (Table 11's body is not in the text), so
:data:`TEMPLATES` are seven summarization prompts written for dlmeval, from none at all to a role prompt; the
suite's own ``summarize`` prompt is one of them. Each benchmark of ``--benchmarks`` that is a summarization set is
scored under every template with the suite's estimator: the directions that see the prompt (``cond``, and
``reverse`` for ``bidir``) once per template, ``marginal`` (no source, so no prompt) once for all. Masks are seeded
by the output's key, never by the prompt, so every template sees the same masks of the candidate (the source's
masks too, unless a longer prompt cuts the source to another length in the model window). A model without a chat
template gets the prompt's text around the source. Per template: the primary protocol's correlation per human
dimension (paper mapping) and their average; the spread is max - min and the SD of the averages over templates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.analyses import profile_stats as S
from dlmeval.protocols.diffscore.analyses.profiles import benchmark_profiles
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, store_tables

#: seven prompt templates (dlmeval's wording; the paper's is not in its text): ``{source}`` is the article
TEMPLATES: dict[str, str] = {
    "plain": "{source}",
    "summarize": "Summarize the following article.\n\n{source}",
    "short-summary": "Write a short summary of this news article.\n\n{source}",
    "article-summary": "Article: {source}\n\nSummary:",
    "tldr": "{source}\n\nTL;DR:",
    "key-points": "Read the article below and state its key points in a few sentences.\n\n{source}",
    "editor": "You are a news editor. Summarize the article for a reader in a hurry.\n\n{source}",
}


def template_table(values: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(wide, spread) from a long table with ``benchmark``, ``template``, ``dimension_tag``, ``value``.

    wide: one row per (benchmark, template), one column per dimension tag, ``avg`` their mean; spread: per
    benchmark and column, ``max - min`` and the SD (ddof=1) over templates, the best and the worst template."""
    need = {"benchmark", "template", "dimension_tag", "value"}
    if not need <= set(values.columns):
        raise InputError(f"template_table needs columns {sorted(need)}")
    wide = values.pivot_table(
        index=["benchmark", "template"], columns="dimension_tag", values="value", aggfunc="first", sort=False
    )
    dims = list(dict.fromkeys(values["dimension_tag"]))
    wide = wide[dims]
    wide["avg"] = wide[dims].mean(axis=1)
    wide = wide.reset_index()
    wide.columns.name = None
    rows = []
    for b, g in wide.groupby("benchmark", sort=False):
        for c in [*dims, "avg"]:
            v = g[c].to_numpy(dtype=np.float64)
            rows.append(
                {
                    "benchmark": b,
                    "column": c,
                    "templates": int(np.isfinite(v).sum()),
                    "min": float(np.nanmin(v)),
                    "max": float(np.nanmax(v)),
                    "range": float(np.nanmax(v) - np.nanmin(v)),
                    "sd": float(np.nanstd(v, ddof=1)) if np.isfinite(v).sum() > 1 else float("nan"),
                    "best": str(g["template"].iat[int(np.nanargmax(v))]),
                    "worst": str(g["template"].iat[int(np.nanargmin(v))]),
                }
            )
    return wide, pd.DataFrame(rows)


@register(
    "prompt-templates",
    help="DiffScore correlations under seven prompt templates (summarization sets) and their spread",
    paper="section 6.5, appendix I, Table 11",
)
def run_prompt_templates(suite) -> dict[str, pd.DataFrame]:
    from dlmeval.protocols.diffscore.meta_eval import dimensions
    from dlmeval.scoring import DiffScorer

    o = suite.opts
    names = [b for b in suite.benchmarks if suite.frame(b)["task"].iat[0] == "SUM"]
    if not names:
        raise InputError(
            "the prompt-template study uses summarization prompts: pass a SUM benchmark (SummEval ...)"
        )
    m = suite.dlm()
    chat = suite.has_chat(m) and o.prompt == "auto"
    run = analysis_run(
        suite,
        "prompt-templates",
        {"estimator": o.estimator_record(), "chat": chat, "templates": TEMPLATES},
        [m],
        selection=True,
    )
    recs = []
    for name in names:
        dims = dimensions(name)
        mapped = {d: P.dimension_config("SUM", d) for d in dims}
        proto = P.BENCHMARK_PROTOCOLS[name][0]
        # marginal never sees the prompt: scored once, under the first template's key prefix
        shared: dict[str, np.ndarray] = {}
        for i, (tname, tpl) in enumerate(TEMPLATES.items()):
            sc = DiffScorer(
                m,
                seed=o.seed,
                prompt=tpl,
                chat=chat,
                batch_size=o.dlm_batch_size,
                max_tokens=o.dlm_max_tokens,
                **o.estimator(),
            )
            frame, _, _, scores = benchmark_profiles(
                suite,
                name,
                run,
                scorer=sc,
                prefix=f"tpl/{tname}",
                skip=() if i == 0 else ("marginal",),
                profiles=False,
            )
            if i == 0 and "marginal" in scores:
                shared["marginal"] = scores["marginal"]
            scores = {**shared, **scores}
            for d in dims:
                v, n = S.evaluate(proto, frame, d, scores[mapped[d]])
                recs.append(
                    {
                        "benchmark": name,
                        "template": tname,
                        "dimension": d,
                        "dimension_tag": P.DIMENSION_TAGS.get(d, d),
                        "config": mapped[d],
                        "protocol": proto,
                        "value": v,
                        "n": n,
                    }
                )
    long = pd.DataFrame(recs)
    wide, spread = template_table(long)
    tables = {
        "prompt_templates": wide,
        "prompt_template_spread": spread,
        "prompt_template_values": long,
        "prompt_template_texts": pd.DataFrame(
            {"template": list(TEMPLATES), "text": list(TEMPLATES.values())}
        ),
    }
    store_tables(run, tables)
    return tables
