"""Scoring-pillar sections: the meta-evaluation tables, correlation profiles, PMI, token heat maps, positional
bias, directional consistency and ablations (DiffScore paper); the sections of the later analyses (timestep matrix,
learned weights, tiers, latency, prompt templates, two models) are in :mod:`dlmeval.report.sections_analyses`,
registered from here."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlmeval.report import figures as F
from dlmeval.report.fmt import PROTOCOL_TAGS, TableView
from dlmeval.report.registry import ITEMS, Context, Omit, Section, register

META = ("meta-eval",)
ANALYSIS = ("meta-eval-analysis",)

TASK_TITLES = {
    "mt": "Machine translation (WMT19 DARR)",
    "sum": "Summarization",
    "d2t": "Data-to-text",
    "secondary": "Secondary protocols",
}
TABLE_NOTES = {
    "mt": "Kendall-like tau over the WMT19 DARR better/worse pairs (a metric tie counts as discordant).",
    "sum": "rho doc-avg: Spearman per document, averaged; r sys: Pearson of system means; acc: pairwise accuracy; "
    "r: Pearson over all outputs.",
    "d2t": "rho: Spearman over all outputs.",
    "secondary": "Protocols other than the paper's headline number, same metrics.",
}


def _protocol_tag(protocol: str) -> str:
    return PROTOCOL_TAGS.get(protocol, protocol)


#: the ``test`` of the comparison records that carry the paper's marks (``protocols/diffscore/meta_eval/paper_marks.py``)
PAPER_MARKS_TEST = "williams (paper marks)"


def uses_paper_marks(comparisons: pd.DataFrame | None) -> bool:
    """Whether the run's comparisons hold the paper's marks (a BARTScore or GPTScore family ran)."""
    return (
        comparisons is not None
        and not comparisons.empty
        and {"test", "mark"} <= set(comparisons.columns)
        and bool((comparisons["test"] == PAPER_MARKS_TEST).any())
    )


def significance_marks(wide: pd.DataFrame, comparisons: pd.DataFrame | None) -> dict[tuple[int, str], str]:
    """The paper's marks (``†`` / ``‡``: significantly better than BARTScore / GPTScore, paper mapping) when the run
    has them, as the Markdown tables show them; else '†' on DiffScore / DiffScore-FT cells significantly better
    than the AR baseline (paper mapping). From the ``comparisons`` table."""
    need = {"label_a", "metric_b", "a_significantly_better", "benchmark", "protocol"}
    if comparisons is None or comparisons.empty or not need <= set(comparisons.columns):
        return {}
    rows = {str(lab): i for i, lab in enumerate(wide["metric"])} if "metric" in wide.columns else {}
    ok = comparisons["a_significantly_better"].astype(bool)
    if uses_paper_marks(comparisons):
        sig = comparisons[(comparisons["test"] == PAPER_MARKS_TEST) & ok]
    else:
        sig = comparisons[(comparisons["metric_b"] == "ar:mapped") & ok]
    out: dict[tuple[int, str], str] = {}
    for r in sig.to_dict("records"):
        tag = _protocol_tag(str(r["protocol"]))
        if r.get("task") == "WMT":
            col = f"{r['benchmark']} ({tag})"
        else:
            col = f"{r['benchmark']} {r.get('dimension_tag', r.get('dimension', ''))} ({tag})"
        i = rows.get(str(r["label_a"]))
        if i is not None and col in wide.columns:
            mark = str(r.get("mark") or "†") if uses_paper_marks(comparisons) else "†"
            out[(i, col)] = "".join(sorted(set(out.get((i, col), "")) | {mark}))
    return out


def _meta_table(name: str):
    def fn(ctx: Context) -> Section:
        df = ctx.df
        if "metric" not in df.columns:
            df = df.reset_index().rename(columns={"index": "metric"})
        value_cols = [c for c in df.columns if c != "metric"]
        comparisons = ctx.table("comparisons")
        marks = significance_marks(df, comparisons) if name != "secondary" else {}
        alpha = ctx.run.signature.config.get("alpha", 0.05)
        note = TABLE_NOTES.get(name, "")
        if uses_paper_marks(comparisons) and name != "secondary":
            note += (
                f" † / ‡ significantly better than BARTScore / GPTScore (paper mapping), p < {alpha}, Williams test"
                " at the column's level (the paper's marks). Bold: best value per column; underlined: second."
            )
        elif marks or name != "secondary":
            note += f" † significantly better than the AR baseline (paper mapping), p < {alpha} (Williams test or paired bootstrap). Bold: best value per column; underlined: second."
        s = Section(f"Meta-evaluation: {TASK_TITLES.get(name, name)}")
        s.table(
            TableView(
                df,
                caption=f"Correlation with human judgements, per benchmark, dimension and protocol (table {name})",
                name=name,
                best={c: "max" for c in value_cols},
                underline_second=True,
                marks=marks,
                note=note.strip(),
                max_rows=60,
                more_hint=ctx.more_hint(),
                hide_absent="metric",  # a paper baseline the suite did not run: a footnote, not a row
            )
        )
        return s

    return fn


for _name in ("mt", "sum", "d2t", "secondary"):
    register(
        f"meta-eval/{_name}",
        pillar="scoring",
        kinds=META,
        table=_name,
        title=f"Meta-evaluation table: {TASK_TITLES[_name]}",
        columns=("metric",),
        uses=("comparisons",),
        description="wide table: one row per metric, one column per 'benchmark DIM (protocol)' plus avg",
    )(_meta_table(_name))


@register(
    "meta-eval/results",
    pillar="scoring",
    kinds=META,
    table="results",
    title="Correlations with bootstrap CIs",
    columns=("benchmark", "dimension", "label", "value"),
    optional=("primary", "dimension_tag", "protocol_label", "ci_lo", "ci_hi", "n"),
    n_tables=0,
    n_figures=1,
)
def _results(ctx: Context) -> Section:
    s = Section("Correlations with bootstrap confidence intervals (primary protocol)")
    s.figure(
        "Each metric's correlation with human judgements on the primary protocol of each benchmark dimension; "
        "bars: bootstrap CI; red: DiffScore.",
        F.meta_eval_ci(ctx.df),
    )
    return s


@register(
    "meta-eval/profile_correlation",
    pillar="scoring",
    kinds=META + ANALYSIS,
    table="profile_correlation",
    title="Per-timestep correlation profiles",
    columns=("benchmark", "dimension", "rate", "value"),
    optional=("metric", "protocol", "ci_lo", "ci_hi", "n"),
    n_figures=1,
    expected_from="dlmeval meta-eval --analysis timestep-matrix",
)
def _profiles(ctx: Context) -> Section:
    df = ctx.df
    s = Section("Per-timestep correlation profiles")
    s.figure(
        "Correlation of the per-rate DiffScore S(t) with the human scores, per quality dimension: which masking "
        "rates carry the signal for which dimension.",
        F.profile_correlation(df),
    )
    wide = df.pivot_table(
        index=[c for c in ("benchmark", "dimension") if c in df.columns],
        columns="rate",
        values="value",
        aggfunc="first",
    )
    wide.columns = [f"t={float(c):.2g}" for c in wide.columns]
    s.table(TableView(wide.reset_index(), caption="Correlation per masking rate t", name=ctx.name, best={}))
    return s


@register(
    "meta-eval/comparisons",
    pillar="scoring",
    kinds=META,
    table="comparisons",
    title="Significance tests: DiffScore against every other metric",
    columns=("benchmark", "label_a", "label_b", "p"),
    optional=(
        "dimension",
        "test",
        "value_a",
        "value_b",
        "statistic",
        "diff_ci_lo",
        "diff_ci_hi",
        "a_significantly_better",
    ),
)
def _comparisons(ctx: Context) -> Section:
    df = ctx.df
    keep = [
        c
        for c in (
            "benchmark",
            "dimension_tag",
            "label_a",
            "label_b",
            "test",
            "value_a",
            "value_b",
            "p",
            "diff_ci_lo",
            "diff_ci_hi",
            "a_significantly_better",
        )
        if c in df.columns
    ]
    s = Section("Significance tests (primary protocol)")
    s.table(
        TableView(
            df[keep],
            caption="DiffScore (paper mapping) against every other metric: Williams test (correlations) or paired bootstrap (other protocols)",
            name=ctx.name,
            max_rows=30,
            more_hint=ctx.more_hint(),
        )
    )
    return s


@register(
    "meta-eval/timing",
    pillar="scoring",
    kinds=META,
    table="timing",
    title="Timing",
    columns=("benchmark", "seconds"),
    optional=("family", "outputs", "units_computed"),
)
def _timing(ctx: Context) -> Section:
    return Section("Timing").table(
        TableView(
            ctx.df,
            caption="Seconds per benchmark and metric family in the session that made the tables (s)",
            name=ctx.name,
        )
    )


# ------------------------------------------------------------------------------------------------ analyses
@register(
    "analysis/adversarial",
    pillar="scoring",
    kinds=ANALYSIS,
    table="adversarial",
    title="Adversarial PMI test",
    columns=("model", "condition"),
    optional=("n", "cond_mean", "mar_mean", "pmi_mean", "p_cond", "p_mar", "p_pmi"),
    uses=("adversarial_items",),
    n_figures=1,
    description="scatter from the run's items adv/<doc>/<condition>|<dlm|ar> -> {cond, mar, pmi}",
)
def _adversarial(ctx: Context) -> Section:
    s = Section("PMI decomposition: the adversarial test")
    items = adversarial_items(ctx.run)
    if items.empty:
        raise Omit("the run holds no per-item adversarial scores (keys adv/<doc>/<condition>|<scorer>)")
    s.figure(
        "Conditional against marginal score of each summary: originals, fluent but irrelevant summaries (another "
        "document's) and relevant but disfluent ones. PMI = conditional - marginal is the distance above the "
        "dashed line.",
        F.pmi_scatter(items),
    )
    s.table(
        TableView(
            ctx.df,
            caption="Mean (and SD) of conditional, marginal and PMI per condition; p: Mann-Whitney U against the originals",
            name=ctx.name,
        )
    )
    return s


def adversarial_items(run) -> pd.DataFrame:
    """Per-item conditional / marginal / PMI scores of an adversarial analysis run (one row per item and scorer)."""
    from dlmeval.report.registry import results_with_prefix

    rows = []
    for key, res in results_with_prefix(run, "adv/").items():
        if "|" not in key:
            continue
        path, _, scorer = key.rpartition("|")
        parts = path.split("/")
        if len(parts) < 3:
            continue
        names = [m.get("name", "?") for m in run.signature.models]
        label = {
            "dlm": f"DiffScore [{names[0]}]" if names else "DiffScore",
            "ar": f"AR [{names[1]}]" if len(names) > 1 else "AR",
        }.get(scorer, scorer)
        rows.append(
            {
                "model": label,
                "doc_id": "/".join(parts[1:-1]),
                "condition": parts[-1],
                "cond": res.get("cond"),
                "mar": res.get("mar"),
                "pmi": res.get("pmi"),
            }
        )
    return pd.DataFrame(rows, columns=["model", "doc_id", "condition", "cond", "mar", "pmi"])


@register(
    "analysis/positional",
    pillar="scoring",
    kinds=ANALYSIS,
    table="positional_by_position",
    title="Positional bias: DiffScore against AR",
    columns=("model", "position", "mean"),
    optional=("std", "count"),
    uses=("positional",),
    n_figures=1,
)
def _positional(ctx: Context) -> Section:
    s = Section("Positional bias: DiffScore against AR")
    s.figure(
        "Mean token log-probability by position in the candidate (band: +- 1 SD across texts) and its spread; an "
        "autoregressive scorer drifts left to right, a masked one should not.",
        F.positional_curves(ctx.df),
    )
    summary = ctx.table("positional")
    if summary is not None:
        s.table(
            TableView(
                summary,
                caption="Positional statistics (CoV of position means, trend = Spearman rho of position vs mean)",
                name="positional",
            )
        )
    else:
        s.table(
            TableView(
                ctx.df,
                caption="Per-position statistics",
                name=ctx.name,
                max_rows=20,
                more_hint=ctx.more_hint(),
            )
        )
    return s


@register(
    "analysis/directional",
    pillar="scoring",
    kinds=ANALYSIS,
    table="directional",
    title="Directional consistency",
    columns=("model",),
    optional=("pairs", "mean_consistency", "var_consistency", "rank_correlation"),
    uses=("directional_pairs",),
    n_figures=0,
)
def _directional(ctx: Context) -> Section:
    s = Section("Directional consistency (reversal pairs)")
    pairs = ctx.table("directional_pairs")
    if pairs is not None:
        try:
            s.figure(
                "Score of each forward sentence against its reversal (1:1 dashed): a consistent scorer lies on the diagonal.",
                F.directional_scatter(pairs),
            )
        except Exception as e:  # a pairs table of another layout: the summary table still shows
            s.note(f"No scatter: {e}")
    s.table(
        TableView(
            ctx.df,
            caption="Consistency min(|f|,|r|)/max(|f|,|r|) per pair and Spearman rho of forward vs reverse",
            name=ctx.name,
        )
    )
    return s


@register(
    "analysis/ablation",
    pillar="scoring",
    kinds=ANALYSIS,
    table="ablation",
    title="Estimator ablations",
    columns=("block", "setting"),
    optional=("avg", "note", "estimator"),
)
def _ablation(ctx: Context) -> Section:
    df = ctx.df.drop(columns=[c for c in ("estimator",) if c in ctx.df.columns])
    value_cols = [c for c in df.columns if c not in ("block", "setting", "note")]
    return Section("Estimator ablations (SummEval, summary-level Spearman)").table(
        TableView(
            df,
            caption="K masks, T rates, weighting and masking scheme",
            name=ctx.name,
            best={c: "max" for c in value_cols},
        )
    )


# ------------------------------------------------------------------------------------------------ token heat maps
def _token_items(run, chosen: list[str] | None, limit: int) -> list[tuple[str, dict]]:
    out = []
    res = run.results()
    keys = [k for k in (chosen or []) if k in res] or list(res)
    for k in keys:
        r = res[k]
        if any(str(f).startswith("token_rate_logprob") and r.get(f) for f in r):
            out.append((k, r))
        if len(out) >= limit:
            break
    return out


@register(
    "diffscore/heatmap",
    pillar="scoring",
    kinds=("diffscore",),
    table=ITEMS,
    title="Token heat maps",
    optional=("tokens", "token_rate_logprob", "tokens_<direction>", "token_rate_logprob_<direction>"),
    n_figures=1,
    description="items scored with token_scores=True (dlmeval score --tokens)",
)
def _heatmaps(ctx: Context) -> Section:
    chosen = ctx.options.get("heatmap_items")
    n = int(ctx.options.get("heatmap_count", 2))
    items = _token_items(ctx.run, chosen, n)
    if not items:
        raise Omit("no item was scored with token scores (score with --tokens / token_scores=True)")
    cfg = ctx.run.signature.config
    rates = cfg.get("rates")
    if not rates and cfg.get("n_rates") and cfg.get("scheme") != "pll":
        from dlmeval.scoring.masks import rate_grid

        rates = [float(t) for t in rate_grid(int(cfg["n_rates"]))]
    s = Section("Token heat maps")
    rows = []
    for key, rec in items:
        sfx = [
            f[len("token_rate_logprob") :].lstrip("_")
            for f in rec
            if str(f).startswith("token_rate_logprob") and rec.get(f)
        ]
        direction = sfx[0] or None if sfx else None
        s.figure(
            f"Item {key}: mean log p of each token over the masks at each masking rate that hid it (white: never hidden).",
            F.token_heatmap(rec, rates=rates, item_id=key, direction=direction),
        )
        rows.append(
            {
                "item": key,
                "config": rec.get("config", cfg.get("config")),
                "score": rec.get("score"),
                "score_se": rec.get("se"),
                "n_tokens": rec.get("n_tokens"),
            }
        )
    s.table(TableView(pd.DataFrame(rows), caption="The items shown", name="items"))
    return s


@register(
    "diffscore/scores",
    pillar="scoring",
    kinds=("diffscore",),
    table=ITEMS,
    title="DiffScore scores",
    columns=("score",),
    optional=("se", "n_tokens", "reason"),
)
def _scores(ctx: Context) -> Section:
    df = ctx.df
    keep = [c for c in ("key", "config", "score", "se", "n_tokens", "reason", "warning") if c in df.columns]
    view = df[keep].rename(columns={"se": "score_se"})
    v = pd.to_numeric(df["score"], errors="coerce")
    finite = v[np.isfinite(v)]
    intro = (
        f"{len(df)} items; mean score {finite.mean():.3f}"
        + (f" (SD {finite.std(ddof=1):.3f})" if len(finite) > 1 else "")
        if len(finite)
        else f"{len(df)} items; no finite score"
    )
    s = Section("DiffScore scores")
    s.note(intro + "; score = mean log p of the hidden tokens (higher is better).")
    s.table(
        TableView(
            view,
            caption="Scores per item (± Monte Carlo SE)",
            name="items",
            max_rows=15,
            more_hint=f"dlmeval runs export {ctx.run.run_id}",
        )
    )
    return s
