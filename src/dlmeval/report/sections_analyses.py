"""Scoring-pillar sections of the DiffScore analyses added with their producers (``dlmeval meta-eval --analysis``):
the timestep x dimension matrix (Table 13), CV-learned weights (Table 14 / Fig. 6), quality-tier profiles
(Fig. 7), latency per output (section 6.5, appendix H), the prompt-template study (Table 11) and the two-model
table (section 6.4). Imported by :mod:`dlmeval.report.sections_scoring`, so they register with it."""

from __future__ import annotations

from dlmeval.report import figures as FA
from dlmeval.report.fmt import TableView
from dlmeval.report.registry import Context, Section, register

ANALYSIS = ("meta-eval-analysis",)


@register(
    "analysis/timestep_matrix",
    pillar="scoring",
    kinds=ANALYSIS,
    table="timestep_matrix",
    title="Timestep x dimension correlation matrix",
    columns=("dimension_tag", "config"),
    optional=("benchmark", "mapped", "protocol", "best"),
    description="one row per benchmark dimension and configuration, one column per rate t=...",
)
def _timestep_matrix(ctx: Context) -> Section:
    df = ctx.df
    rates = [c for c in df.columns if str(c).startswith("t=")]
    return Section("Timestep x dimension correlation matrix (paper Table 13)").table(
        TableView(
            df,
            caption="Correlation (the benchmark's primary protocol) of the single-rate score S(t) with each human "
            "dimension; mapped: the configuration the paper uses for the dimension; best: its best rate",
            name=ctx.name,
            best={c: "max" for c in rates},
            max_rows=40,
            more_hint=ctx.more_hint(),
        )
    )


@register(
    "analysis/learned_weights",
    pillar="scoring",
    kinds=ANALYSIS,
    table="learned_weights",
    title="Learned timestep weights (k-fold CV)",
    columns=("dimension_tag", "uniform", "learned"),
    optional=("benchmark", "config", "delta", "top_rate", "top_share", "folds", "ridge", "n"),
    uses=("learned_weights_by_rate",),
    n_figures=1,
)
def _learned_weights(ctx: Context) -> Section:
    s = Section("Uniform against learned timestep weights (paper Table 14 / Fig. 6)")
    shares = ctx.table("learned_weights_by_rate")
    if shares is not None and not shares.empty:
        s.figure(
            "Share of the learned weight at each masking rate (mean over the folds; bars: SD), per dimension.",
            FA.weight_bars(shares),
        )
    s.table(
        TableView(
            ctx.df,
            caption="Out-of-fold correlation of the learned-weight score against the uniform weights (DiffScore); "
            "top_rate / top_share: the rate with the largest mean weight",
            name=ctx.name,
            best={"learned": "max", "delta": "max"},
        )
    )
    return s


@register(
    "analysis/tiers",
    pillar="scoring",
    kinds=ANALYSIS,
    table="tier_profiles",
    title="Quality-tier profile curves",
    columns=("config", "tier", "rate", "mean"),
    optional=("benchmark", "tier_label", "sem", "n", "human_lo", "human_hi"),
    uses=("tier_gap",),
    n_tables=0,
    n_figures=1,
)
def _tiers(ctx: Context) -> Section:
    s = Section("Quality-tier profile curves (paper Fig. 7)")
    s.figure(
        "Mean S(t) of the outputs in each human-score tier (mean of the benchmark's dimensions, equal-count tiers) "
        "against the masking rate; band: +- 1 SEM.",
        FA.tier_curves(ctx.df),
    )
    gap = ctx.table("tier_gap")
    if gap is not None and not gap.empty:
        w = gap.pivot_table(
            index=[c for c in ("benchmark", "config") if c in gap.columns],
            columns="rate",
            values="gap_high_minus_low",
            aggfunc="first",
            sort=False,
        )
        w.columns = [f"t={float(c):.2g}" for c in w.columns]
        s.table(TableView(w.reset_index(), caption="Top tier minus bottom tier, per rate", name="tier_gap"))
    return s


@register(
    "analysis/latency",
    pillar="scoring",
    kinds=ANALYSIS,
    table="latency",
    title="Latency per output of every metric family",
    columns=("family", "mean_s"),
    optional=("outputs", "median_s", "p90_s", "cpu_mean_s", "x BARTScore s2h", "x AR s2h", "note"),
    uses=("latency_setup",),
)
def _latency(ctx: Context) -> Section:
    s = Section("Latency per output (paper section 6.5, appendix H)")
    setup = ctx.table("latency_setup")
    if setup is not None and not setup.empty:
        r = setup.iloc[0].to_dict()
        s.note(
            f"{r.get('outputs_timed')} outputs of {r.get('benchmark')} scored one at a time, every family in turn on "
            f"each output, after {r.get('warmup')} warm-up outputs; device {r.get('device')}, torch threads "
            f"{r.get('torch_threads')}, OMP_NUM_THREADS {r.get('OMP_NUM_THREADS')}; session(s) {r.get('sessions')}."
        )
    s.table(
        TableView(
            ctx.df,
            caption="Wall seconds per output (mean, median, 90th percentile), CPU seconds, and the mean's ratio to "
            "BARTScore and to the AR baseline",
            name=ctx.name,
            hide_absent=("family", "note"),  # a family not timed: a footnote, not a row
        )
    )
    return s


@register(
    "analysis/prompt_templates",
    pillar="scoring",
    kinds=ANALYSIS,
    table="prompt_templates",
    title="Prompt-template robustness",
    columns=("template", "avg"),
    optional=("benchmark",),
    uses=("prompt_template_spread",),
)
def _templates(ctx: Context) -> Section:
    s = Section("Prompt-template robustness (paper Table 11)")
    s.table(
        TableView(
            ctx.df,
            caption="Correlation per human dimension (paper mapping, primary protocol) under each prompt template",
            name=ctx.name,
            best={"avg": "max"},
        )
    )
    spread = ctx.table("prompt_template_spread")
    if spread is not None and not spread.empty:
        s.table(
            TableView(
                spread,
                caption="Spread over the templates: max - min and SD per column; best and worst template",
                name="prompt_template_spread",
            )
        )
    return s


@register(
    "analysis/families",
    pillar="scoring",
    kinds=ANALYSIS,
    table="families",
    title="Two diffusion models side by side",
    columns=("benchmark", "dimension_tag"),
)
def _families(ctx: Context) -> Section:
    cols = [c for c in ctx.df.columns if str(c).startswith(("A: ", "B: ")) and " - " not in str(c)]
    return Section("Two diffusion-model families on the same benchmarks (paper section 6.4)").table(
        TableView(
            ctx.df,
            caption="Correlation (paper mapping, primary protocol) with model A and model B, and B - A",
            name=ctx.name,
            best={c: "max" for c in cols},
        )
    )
