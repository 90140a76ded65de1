"""THE figure home of dlmeval: every plot (the HTML report's sections, the notebooks', the robustness protocol's PNGs)
is drawn here, one function per kind of plot, as a function of stored tables: each takes DataFrames (as
``run.get_table(name)`` returns them) and returns a :class:`matplotlib.figure.Figure`.

Usage (not run here: it reads a stored run)::

    from dlmeval.store import RunStore
    from dlmeval.report import figures
    run = RunStore().get_run("3f2a")
    figures.interaction_plot(run.get_table("mauve_temperature"), steps=16)      # a Figure; .savefig(...)

=====================  ==========================================================================================
module                 what
=====================  ==========================================================================================
:mod:`.base`           palette and fixed strategy colours, the panel grid, THE legend rule (outside the plotted
                       area: right of the panel, or right of the figure for a legend the panels share), grouped
                       bars, table checks, SVG / PNG output (:func:`save_png` for files)
:mod:`.scoring`        meta-evaluation CIs, per-timestep profiles, PMI, token heat map, positional / directional
                       bias, quality-tier curves and learned timestep weights
:mod:`.sampling`       Care: actual NFE, temperature curves, interaction and gap, PPL-MAUVE frontier, churn
:mod:`.robustness`     accuracy and RDI against rate, reliability, IPM, D-GCG, probes, and the robustness paper's
                       summary figures (RDI advantage, clean accuracy / ECE, calibration against rate, pair
                       summaries, mechanism)
=====================  ==========================================================================================

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state, safe in threads and servers).
Every function raises :class:`dlmeval.errors.InputError` when its table lacks a column it needs or has no rows.
The robustness protocol (:mod:`dlmeval.protocols.robust.figures`) only chooses the rows and the file names; it
draws nothing itself.
"""

from __future__ import annotations

from dlmeval.report.figures.base import (
    STRATEGY_COLORS,
    _data_lines,
    colors_for,
    empty_reason,
    figure_png,
    figure_svg,
    grouped_bars,
    legend_outside,
    legend_overlaps,
    save_png,
)
from dlmeval.report.figures.robustness import (
    accuracy_vs_rate,
    calibration_vs_rate,
    clean_accuracy_ece,
    dgcg_summary,
    dgcg_trajectories,
    ipm_comparison,
    mechanism,
    pair_summary,
    probe_layers,
    probe_long,
    rdi_advantage,
    rdi_heatmap,
    reliability_diagram,
)
from dlmeval.report.figures.sampling import (
    churn_plot,
    dose_response,
    gap_plot,
    interaction_plot,
    nfe_vs_steps,
    pareto_front,
    ppl_mauve_frontier,
    temperature_curves,
)
from dlmeval.report.figures.scoring import (
    directional_scatter,
    is_diffscore_row,
    meta_eval_ci,
    plot_token_heatmap,
    pmi_scatter,
    positional_curves,
    profile_correlation,
    tier_curves,
    token_heatmap,
    weight_bars,
)

__all__ = [
    "STRATEGY_COLORS",
    "_data_lines",
    "accuracy_vs_rate",
    "calibration_vs_rate",
    "churn_plot",
    "clean_accuracy_ece",
    "colors_for",
    "dgcg_summary",
    "dgcg_trajectories",
    "directional_scatter",
    "dose_response",
    "empty_reason",
    "figure_png",
    "figure_svg",
    "gap_plot",
    "grouped_bars",
    "interaction_plot",
    "ipm_comparison",
    "is_diffscore_row",
    "legend_outside",
    "legend_overlaps",
    "mechanism",
    "meta_eval_ci",
    "nfe_vs_steps",
    "pair_summary",
    "pareto_front",
    "plot_token_heatmap",
    "pmi_scatter",
    "positional_curves",
    "ppl_mauve_frontier",
    "probe_layers",
    "probe_long",
    "profile_correlation",
    "rdi_advantage",
    "rdi_heatmap",
    "reliability_diagram",
    "save_png",
    "temperature_curves",
    "tier_curves",
    "token_heatmap",
    "weight_bars",
]
