"""Report figures draw what their captions say (#26): DiffScore rows kept in every CI panel (chosen by role),
full labels, the probe figure from the stored probe columns, empty / single-level figures and empty tables left
out with a reason, and one RDI heat map / reliability diagram shared by the report and the robustness output."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dlmeval.report import figures as F
from dlmeval.report.fmt import TableView
from dlmeval.report.html import prune
from dlmeval.report.registry import Section


def _labels(fig) -> list[list[str]]:
    return [[t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes if ax.get_visible()]


def test_meta_eval_ci_keeps_diffscore_rows_by_role_and_full_labels():
    rows = []
    for bench in ("SummEval", "BAGEL"):
        for i in range(20):  # twenty baselines with higher correlations first, DiffScore rows last
            rows.append(
                {
                    "benchmark": bench,
                    "dimension": "coh",
                    "label": f"baseline number {i} with a long label that goes past thirty-four characters",
                    "family": "lexical",
                    "value": 0.9 - i / 100,
                }
            )
        rows.append(
            {
                "benchmark": bench,
                "dimension": "coh",
                "label": "DiffScore-Fast (default, mapped)",
                "family": "diffscore",
                "value": 0.1,
            }
        )
        rows.append(
            {
                "benchmark": bench,
                "dimension": "coh",
                "label": "my fine-tuned scorer",
                "family": "ft",
                "value": 0.05,
            }
        )
    fig = F.meta_eval_ci(pd.DataFrame(rows), max_metrics=12)
    panels = _labels(fig)
    assert len(panels) == 2
    for labels in panels:
        assert len(labels) == 12
        assert "DiffScore-Fast (default, mapped)" in labels and "my fine-tuned scorer" in labels  # by family
        assert any(len(lab) > 34 and lab.endswith("thirty-four characters") for lab in labels)  # not cut
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert all("(12 of 22 metrics)" in t for t in titles)


def test_probe_figure_reads_the_stored_probe_columns():
    stored = pd.DataFrame(
        [
            {
                "model": "dlm",
                "task": "arc",
                "condition": "typo",
                "layers": "0 1 2",
                "accuracy_by_layer": "0.500 0.700 0.650",
                "best_layer": 1,
                "best_accuracy": 0.7,
            },
            {
                "model": "ar",
                "task": "arc",
                "condition": "typo",
                "layers": "0 1 2",
                "accuracy_by_layer": "0.500 0.550 0.600",
                "best_layer": 2,
                "best_accuracy": 0.6,
            },
        ]
    )
    long = F.probe_long(stored)
    assert len(long) == 6 and list(long["layer"]) == [0, 1, 2, 0, 1, 2]
    assert long.loc[long["model"] == "dlm", "accuracy"].tolist() == [0.5, 0.7, 0.65]
    fig = F.probe_layers(stored)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["dlm", "ar"]
    assert [list(ln.get_ydata()) for ln in F._data_lines(ax)] == [[0.5, 0.7, 0.65], [0.5, 0.55, 0.6]]
    assert F.empty_reason(fig) is None


def test_empty_and_single_level_figures_and_empty_tables_are_pruned_with_a_reason():
    zero = pd.DataFrame({"variant": ["noisy", "ipm-a", "ipm-b"], "accuracy": [0.0, 0.0, 0.0]})
    assert F.empty_reason(F.ipm_comparison(zero)) == "nothing to draw (every value is missing, or zero)"
    some = zero.assign(accuracy=[0.2, 0.3, 0.0])
    assert F.empty_reason(F.ipm_comparison(some)) is None
    one_t = pd.DataFrame(
        {"strategy": ["none", "high_entropy"], "temperature": [0.25, 0.25], "mauve": [0.5, 0.6]}
    )
    assert "one level" in F.empty_reason(F.interaction_plot(one_t))
    two_t = pd.concat([one_t, one_t.assign(temperature=0.5, mauve=[0.4, 0.7])])
    assert F.empty_reason(F.interaction_plot(two_t)) is None
    sec = Section("s").table(TableView(pd.DataFrame({"a": []}), name="calibration_ablation"))
    sec.figure("zero", F.ipm_comparison(zero)).table(TableView(some, name="ipm"))
    why = prune(sec)
    assert why == [
        "table calibration_ablation is empty",
        "figure: nothing to draw (every value is missing, or zero)",
    ]
    assert [type(b).__name__ for b in sec.blocks] == ["TableView"] and sec.blocks[0].name == "ipm"


def test_robust_output_draws_the_report_figures(tmp_path, monkeypatch):
    """protocols.robust's PNGs come from the report's figure functions: one drawing, one colour scale."""
    from dlmeval.protocols.robust import figures as RF
    from dlmeval.protocols.robust import output as RO

    calls = []
    real_rdi, real_rel = F.rdi_heatmap, F.reliability_diagram
    monkeypatch.setattr(F, "rdi_heatmap", lambda df: calls.append("rdi") or real_rdi(df))
    monkeypatch.setattr(F, "reliability_diagram", lambda df: calls.append("rel") or real_rel(df))
    acc = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "task": ["arc"] * 3,
            "mode": ["generation"] * 3,
            "condition": ["clean", "t@0.1", "t@0.2"],
            "type": ["clean", "typo", "typo"],
            "rate": [0.0, 0.1, 0.2],
            "accuracy": [0.8, 0.6, 0.4],
            "rdi": [np.nan, 0.25, 0.5],
        }
    )
    out: list = []
    RF.fig_rdi_heatmap({"accuracy": acc}, tmp_path, out)
    rel = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "task": ["arc"] * 4,
            "mode": ["generation"] * 4,
            "split": ["clean", "clean", "noisy", "noisy"],
            "confidence": [0.2, 0.8, 0.3, 0.7],
            "accuracy": [0.1, 0.9, 0.2, 0.5],
            "count": [3, 4, 2, 5],
        }
    )
    paths = RO.plot_reliability(rel, tmp_path)
    assert calls == ["rdi", "rel"]
    assert [p.name for p in out] == ["rdi_heatmap_arc.png"] and [p.name for p in paths] == [
        "reliability_arc_generation.png"
    ]
    assert all(p.stat().st_size > 1000 for p in [*out, *paths])
    # the heat map's colour scale is the report's: symmetric about 0
    fig = real_rdi(acc[acc["type"] != "clean"])
    im = next(a for ax in fig.axes for a in ax.images)
    lo, hi = im.get_clim()
    assert lo == -hi and re.match("RdBu", im.get_cmap().name)


def test_every_robustness_png_is_drawn_by_the_figure_home_with_legends_outside(tmp_path, monkeypatch):
    """#35 item 2 / #36 item 7: protocols.robust writes its PNGs through report.figures.save_png (one figure home),
    under the same file names, and no legend covers a panel."""
    from dlmeval.protocols.robust.figures import draw_figures

    saved = {}
    real = F.save_png
    monkeypatch.setattr(
        F,
        "save_png",
        lambda fig, path, out=None, **kw: saved.setdefault(path.name, fig) and real(fig, path, out, **kw),
    )
    models, tasks = ["dlm-a", "ar-b"], ["arc", "gsm8k"]
    acc = pd.DataFrame(
        [
            {"model": m, "task": t, "mode": "generation", "condition": c, "type": ty, "rate": r,
             "accuracy": 0.8 - r - 0.1 * i, "rdi": np.nan if ty == "clean" else r + 0.05 * i}
            for i, m in enumerate(models) for t in tasks
            for c, ty, r in (("clean", "clean", 0.0), ("typo@0.1", "typo", 0.1), ("typo@0.3", "typo", 0.3))
        ]
    )  # fmt: skip
    comp = pd.DataFrame(
        [{"task": t, "mode": "generation", "pair": "dlm-a vs ar-b", "dlm": "dlm-a", "ar": "ar-b",
          "mean_adv": 0.1, "ci_lo": 0.02, "ci_hi": 0.2, "adv_rate": 0.7} for t in tasks]
    )  # fmt: skip
    cal = pd.DataFrame(
        [{"model": m, "task": t, "mode": "generation", "split": s, "ece": 0.1 + 0.01 * i, "auroc": 0.6}
         for i, m in enumerate(models) for t in tasks for s in ("clean", "noisy", "typo@0.1", "typo@0.3")]
    )  # fmt: skip
    summ = pd.DataFrame(
        [{"model": m, "task": t, "mode": "generation", "acc_clean": 0.8} for m in models for t in tasks]
    )
    dgcg = pd.DataFrame(
        [{"model": m, "task": "arc", "suffix_length": L, "degradation": 0.1 * L, "mean_grad_norm": 1.0 + i,
          "loss_trajectory": "3 2.5 2 1.8", "transfer_from": None, "transfer_degradation": np.nan}
         for i, m in enumerate(models) for L in (2, 4)]
    )  # fmt: skip
    traj = pd.DataFrame([{"model": "dlm-a", "task": t, "id_divergence": 0.3} for t in tasks])
    att = pd.DataFrame(
        [{"model": "ar-b", "condition": c, "mean_ratio": 1.2} for c in ("typo@0.1", "typo@0.3")]
    )
    probes = pd.DataFrame(
        [{"model": m, "task": "arc", "condition": "typo@0.1", "layers": "0 1 2", "accuracy_by_layer": "0.5 0.6 0.7"}
         for m in models]
    )  # fmt: skip
    ipm = pd.DataFrame(
        [{"model": "dlm-a", "task": "arc", "condition": "typo@0.1", "variant": v, "accuracy": a}
         for v, a in (("clean", 0.9), ("noisy baseline", 0.6), ("ipm.random[0.1]", 0.65), ("ipm.span[0.1]", 0.7))]
    )  # fmt: skip
    tables = {"accuracy": acc, "comparison": comp, "calibration": cal, "summary": summ, "dgcg": dgcg,
              "trajectory": traj, "attention": att, "probes": probes, "ipm": ipm}  # fmt: skip
    files = [p.name for p in draw_figures(tables, tmp_path)]
    assert files == [
        "rdi_advantage.png",
        "accuracy_vs_rate_arc.png",
        "accuracy_vs_rate_gsm8k.png",
        "rdi_heatmap_arc.png",
        "rdi_heatmap_gsm8k.png",
        "clean_accuracy_ece.png",
        "ece_auroc_vs_rate_arc.png",
        "ece_auroc_vs_rate_gsm8k.png",
        "dgcg_arc.png",
        "probes_by_layer.png",
        "mechanism.png",
        "pair_summary_1.png",
        "ipm_variants.png",
    ]
    assert sorted(saved) == sorted(files) and all((tmp_path / f).stat().st_size > 1000 for f in files)
    # what they show: the clean accuracy at rate 0, one line per model; the IPM bars without the clean variant
    lines = F._data_lines(saved["accuracy_vs_rate_arc.png"].axes[0])
    assert [ln.get_label() for ln in lines] == models
    assert [list(ln.get_ydata()) for ln in lines][0] == pytest.approx([0.8, 0.7, 0.5])
    ipm_labels = [t.get_text() for t in saved["ipm_variants.png"].axes[0].get_legend().get_texts()]
    assert sorted(ipm_labels) == ["ipm.random[0.1]", "ipm.span[0.1]", "noisy baseline"]
    for name, fig in saved.items():
        assert F.legend_overlaps(fig) == [], name


def test_interaction_and_gap_plots_draw_one_sorted_line_per_strategy_or_step_count():
    rows = [
        {"model": "m", "source": "webtext", "strategy": s, "baseline": "none", "steps": st, "temperature": t,
         "mauve": 0.1 * i + t, "mauve_se": 0.01, "gap": t - 0.5, "gap_se": 0.02}
        for i, s in enumerate(("none", "high_entropy")) for st in (8, 16) for t in (1.0, 0.0, 0.5)
    ]  # fmt: skip
    df = pd.DataFrame(rows)
    ax = F.interaction_plot(df).axes[0]
    assert ax.get_legend_handles_labels()[1] == ["none", "high_entropy"]
    xs = [c.lines[0].get_xdata().tolist() for c in ax.containers]  # one errorbar per strategy
    assert xs == [[0.0, 0.5, 1.0]] * 2  # sorted by temperature, at the largest step count only
    ax = F.gap_plot(df[df["strategy"] == "high_entropy"]).axes[0]
    assert ax.get_legend_handles_labels()[1] == ["8 steps", "16 steps"]
    ax = F.gap_plot(df[df["strategy"] == "high_entropy"].drop(columns="steps").iloc[:3]).axes[0]
    assert ax.get_legend_handles_labels()[1] == ["all"]
