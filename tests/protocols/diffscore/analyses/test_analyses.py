"""The DiffScore analyses of paper section 6 / appendices H, I, J, N: the pure computations against hand
computations (timestep x dimension matrix, CV-learned weights, quality tiers, latency ratios, template spread,
two-model table), the registry, and the producers end to end on the tiny stand-in models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.analyses import profile_stats as S


def _frame(docs, human, dims=("coherence",)):
    f = pd.DataFrame({"doc_id": docs, "system": [f"s{i}" for i in range(len(docs))]})
    for d, h in zip(dims, human if len(dims) > 1 else [human]):
        f[d] = np.asarray(h, dtype=float)
    return f


# ---------------------------------------------------------------------------------------------- Table 13
def test_timestep_matrix_hand_values():
    f = _frame(["d"] * 5, [1, 2, 3, 4, 5])
    h = np.arange(1.0, 6.0)
    X = np.column_stack([h, -h, [1, 3, 2, 5, 4]])
    m = S.timestep_matrix(
        f,
        {"bidir": X, "cond": X[:, ::-1]},
        [1 / 3, 2 / 3, 1.0],
        ["coherence"],
        "spearman",
        {"coherence": "bidir"},
    )
    b = m[m["config"] == "bidir"].set_index("k")
    # Spearman of (1,3,2,5,4) with (1..5): d = (0,1,-1,1,-1), 1 - 6*4/(5*24) = 0.8
    assert b["value"].tolist() == pytest.approx([1.0, -1.0, 0.8])
    assert b["mapped"].all() and not m.loc[m["config"] == "cond", "mapped"].any()
    assert b["best"].tolist() == [True, False, False]
    c = m[m["config"] == "cond"].set_index("k")
    assert c["value"].tolist() == pytest.approx([0.8, -1.0, 1.0]) and c["best"].tolist() == [
        False,
        False,
        True,
    ]
    w = S.matrix_wide(m.assign(benchmark="X"))
    assert list(w.columns[-4:]) == ["t=0.33", "t=0.67", "t=1", "best"]
    assert w.loc[w["config"] == "cond", "best"].iat[0] == "t=1"


def test_timestep_matrix_per_document_and_nan_rows():
    # two documents: per-document Spearman averaged; a NaN score drops its row only
    f = _frame(["a", "a", "a", "b", "b", "b"], [1, 2, 3, 1, 2, 3])
    x = np.array([1.0, 2.0, 3.0, 3.0, 1.0, 2.0])  # doc a: rho 1; doc b: ranks (3,1,2) vs (1,2,3): rho -0.5
    m = S.timestep_matrix(f, {"cond": x[:, None]}, [1.0], ["coherence"], "doc_spearman")
    assert m["value"].iat[0] == pytest.approx((1.0 - 0.5) / 2) and m["n"].iat[0] == 2
    x2 = x.copy()
    x2[4] = np.nan  # doc b keeps (3, 2) against (1, 3): rho -1
    m2 = S.timestep_matrix(f, {"cond": x2[:, None]}, [1.0], ["coherence"], "doc_spearman")
    assert m2["value"].iat[0] == pytest.approx(0.0)
    with pytest.raises(InputError, match="profile matrix"):
        S.timestep_matrix(f, {"cond": x[:, None]}, [0.5, 1.0], ["coherence"], "spearman")


# ---------------------------------------------------------------------------------------------- Table 14
def test_cv_folds_are_whole_documents_seeded_and_balanced():
    docs = [f"d{i // 3}" for i in range(30)]
    a = S.cv_folds(docs, 5, 0, "SummEval", "coherence")
    assert np.array_equal(a, S.cv_folds(docs, 5, 0, "SummEval", "coherence"))
    assert not np.array_equal(a, S.cv_folds(docs, 5, 1, "SummEval", "coherence"))
    per_doc = pd.Series(a).groupby(pd.Series(docs)).nunique()
    assert (per_doc == 1).all()  # a document never straddles folds
    assert sorted(np.bincount(a).tolist()) == [6] * 5  # 10 documents, 2 per fold
    with pytest.raises(InputError, match="at least 5 documents"):
        S.cv_folds(["a", "b", "c"], 5, 0)


def test_fit_weights_recovers_nonnegative_weights_and_falls_back_to_uniform():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X @ np.array([0.5, 0.0, 0.25]) + 7.0  # an offset is centred away
    assert S.fit_weights(X, y) == pytest.approx([2 / 3, 0.0, 1 / 3], abs=1e-9)
    # a target every column predicts negatively: NNLS gives all zeros -> uniform weights
    assert S.fit_weights(X[:, :1].repeat(2, axis=1), -X[:, 0]) == pytest.approx([0.5, 0.5])
    # DARR: differences better - worse fitted on 1; only column 1 separates the pairs
    D = np.column_stack([rng.normal(size=20), np.ones(20)])
    w = S.fit_weights(D, None)
    assert w[1] > 0.9
    # with a ridge term and positive weights, NNLS is the closed-form ridge solution (normalised)
    y2 = X @ np.array([0.5, 0.1, 0.25]) + rng.normal(scale=0.1, size=40)
    A, c = X - X.mean(axis=0), y2 - y2.mean()
    lam = 0.5 * np.trace(A.T @ A) / 3
    ref = np.linalg.solve(A.T @ A + lam * np.eye(3), A.T @ c)
    assert (ref > 0).all() and S.fit_weights(X, y2, ridge=0.5) == pytest.approx(ref / ref.sum(), abs=1e-9)


def test_learned_weights_cv_hand_case():
    rng = np.random.default_rng(1)
    n_docs, per = 10, 4
    docs = [f"d{i // per}" for i in range(n_docs * per)]
    X = rng.normal(size=(len(docs), 3))
    y = X @ np.array([0.5, 0.0, 0.25])
    f = _frame(docs, y)
    summ, w = S.learned_weights_cv(f, X, [0.1, 0.5, 1.0], "coherence", "pearson", n_folds=5, seed=3)
    # every fold recovers the generating weights exactly, so the out-of-fold scores are y itself
    assert w.groupby("fold")["weight"].apply(list).map(lambda v: np.allclose(v, [2 / 3, 0, 1 / 3])).all()
    assert summ["learned"] == pytest.approx(1.0)
    assert summ["uniform"] == pytest.approx(sps.pearsonr(X.mean(axis=1), y).statistic)
    assert summ["delta"] == pytest.approx(1.0 - summ["uniform"]) and summ["n"] == len(docs)
    assert len(w) == 5 * 3 and set(w["fold"]) == set(range(5))
    shares = S.weight_shares(w.assign(dimension_tag="COH"))
    assert shares["weight_mean"].tolist() == pytest.approx([2 / 3, 0, 1 / 3])
    # deterministic under the seed
    s2, w2 = S.learned_weights_cv(f, X, [0.1, 0.5, 1.0], "coherence", "pearson", n_folds=5, seed=3)
    pd.testing.assert_frame_equal(w, w2)


def test_learned_weights_cv_darr_pairs():
    # 10 pairs; column 0 ranks better above worse in every pair, column 1 is noise
    rng = np.random.default_rng(2)
    rows, X = [], []
    for p in range(10):
        for side, base in (("better", 1.0), ("worse", 0.0)):
            rows.append(
                {
                    "key": f"gu-en/{p}/{side}",
                    "doc_id": str(p),
                    "system": side,
                    "pair_id": str(p),
                    "side": side,
                }
            )
            X.append([base + 0.1 * rng.normal(), rng.normal()])
    f = pd.DataFrame(rows)
    summ, w = S.learned_weights_cv(f, np.array(X), [0.5, 1.0], "DARR", "darr_tau", n_folds=5, seed=0)
    assert summ["learned"] == pytest.approx(1.0)
    assert (w.loc[w["k"] == 0, "weight"] > 0.5).all()


# ---------------------------------------------------------------------------------------------- Fig. 7
def test_tier_profiles_hand_means():
    f = _frame(["a"] * 6, [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]], dims=("coherence", "fluency"))
    f["fluency"] = [3, 2, 3, 4, 5, 6]  # mean scores: 2, 2, 3, 4, 5, 6 -> tiers (0, 1), (2, 3), (4, 5) by rank
    X = np.array([[1, 10], [3, 20], [5, 30], [7, 40], [9, 50], [11, 60]], dtype=float)
    t = S.tier_profiles(f, {"cond": X}, [0.5, 1.0], ["coherence", "fluency"], 3)
    low = t[(t["tier"] == 0)].set_index("k")
    assert low["mean"].tolist() == [2.0, 15.0] and low["n"].tolist() == [2, 2]
    assert low["sem"].iat[0] == pytest.approx(np.std([1, 3], ddof=1) / np.sqrt(2))
    assert low["human_lo"].iat[0] == 2.0 and low["human_hi"].iat[0] == 2.0
    high = t[(t["tier"] == 2)].set_index("k")
    assert high["mean"].tolist() == [10.0, 55.0] and set(high["tier_label"]) == {"high"}
    gap = S.tier_gap(t)
    assert gap["gap_high_minus_low"].tolist() == [8.0, 40.0]
    assert S.tier_of(np.array([5.0, np.nan, 1.0, 3.0]), 3).tolist() == [2, -1, 0, 1]
    with pytest.raises(InputError, match="absolute human scores"):
        S.tier_profiles(f, {"cond": X}, [0.5, 1.0], ["DARR"], 3)
    with pytest.raises(InputError, match="at least 2 tiers"):
        S.tier_profiles(f, {"cond": X}, [0.5, 1.0], ["coherence"], 1)


# ---------------------------------------------------------------------------------------------- latency, templates, families
def test_latency_table_ratios():
    from dlmeval.protocols.diffscore.analyses.latency import latency_table

    per = pd.DataFrame(
        {
            "family": ["DiffScore K=20 T=10"] * 2 + ["AR s2h"] * 2 + ["lexical"] * 2,
            "seconds": [1.0, 3.0, 0.1, 0.3, 0.01, 0.03],
            "cpu_seconds": [2.0, 2.0, 0.2, 0.2, 0.01, 0.01],
        }
    )
    t = latency_table(per).set_index("family")
    assert t.loc["DiffScore K=20 T=10", "mean_s"] == 2.0 and t.loc[
        "DiffScore K=20 T=10", "p90_s"
    ] == pytest.approx(2.8)
    assert t["x AR s2h"].tolist() == pytest.approx([10.0, 1.0, 0.1])
    assert t["x BARTScore s2h"].isna().all()  # no BARTScore row: no ratio to it
    assert t.loc["AR s2h", "cpu_mean_s"] == pytest.approx(0.2)
    per2 = pd.concat(
        [per, pd.DataFrame({"family": ["BARTScore s2h"], "seconds": [0.5], "cpu_seconds": [0.5]})]
    )
    assert latency_table(per2).set_index("family").loc["DiffScore K=20 T=10", "x BARTScore s2h"] == 4.0


def test_template_table_spread():
    from dlmeval.protocols.diffscore.analyses.templates import TEMPLATES, template_table

    assert len(TEMPLATES) == 7 and all("{source}" in t for t in TEMPLATES.values())
    vals = pd.DataFrame(
        {
            "benchmark": "SummEval",
            "template": ["p", "p", "q", "q", "r", "r"],
            "dimension_tag": ["COH", "CON"] * 3,
            "value": [0.2, 0.4, 0.1, 0.3, 0.3, 0.3],
        }
    )
    wide, spread = template_table(vals)
    assert wide["avg"].tolist() == pytest.approx([0.3, 0.2, 0.3])
    avg = spread[spread["column"] == "avg"].iloc[0]
    assert avg["range"] == pytest.approx(0.1) and avg["sd"] == pytest.approx(np.std([0.3, 0.2, 0.3], ddof=1))
    assert avg["worst"] == "q" and avg["best"] == "p"
    coh = spread[spread["column"] == "COH"].iloc[0]
    assert coh["best"] == "r" and coh["range"] == pytest.approx(0.2)


def test_families_side_by_side():
    from dlmeval.protocols.diffscore.analyses.families import side_by_side

    long = pd.DataFrame(
        {
            "benchmark": ["X", "X", "X", "X"],
            "dimension_tag": ["COH", "COH", "FLU", "FLU"],
            "model": ["A", "B", "A", "B"],
            "value": [0.5, 0.2, 0.1, 0.3],
        }
    )
    w = side_by_side(long, "A", "B")
    assert w["B - A"].tolist() == pytest.approx([-0.3, 0.2, -0.05])
    assert w.iloc[-1]["A"] == pytest.approx(0.3) and w.iloc[-1]["benchmark"] == "avg"


# ---------------------------------------------------------------------------------------------- registry
def test_registry_names_options_and_cli_choices():
    from dlmeval.cli.meta_eval import ANALYSES
    from dlmeval.protocols.diffscore.analyses import registry as R

    names = [a.name for a in R.analyses()]
    for n in (
        "positional",
        "directional",
        "adversarial",
        "ablation",
        "timestep-matrix",
        "learned-weights",
        "tiers",
        "latency",
        "prompt-templates",
        "families",
    ):
        assert n in names and n in ANALYSES
    assert "nope" not in ANALYSES
    assert R.parse_options("learned-weights", ["folds=3", "ridge=0.5"]) == {"folds": 3, "ridge": 0.5}
    assert R.parse_options("directional", [], {"n_pairs": 7, "compare_model": None}) == {"n_pairs": 7}
    assert R.parse_options("families", [], {"n_pairs": 7, "compare_model": "tiny-dream"}) == {
        "compare_model": "tiny-dream"
    }
    with pytest.raises(InputError, match="no option 'fold'"):
        R.parse_options("learned-weights", ["fold=3"])
    with pytest.raises(InputError, match="is not a int"):
        R.parse_options("learned-weights", ["folds=three"])
    with pytest.raises(InputError, match="KEY=VALUE"):
        R.parse_options("tiers", ["n_tiers"])
    with pytest.raises(InputError, match="unknown analysis"):
        R.get("nope")
    with pytest.raises(InputError, match="takes no option"):
        R.run_analysis("tiers", None, folds=2)


def test_parser_build_imports_no_analysis_module():
    import subprocess
    import sys

    code = (
        "import sys, argparse; from dlmeval.cli import meta_eval as m; p = argparse.ArgumentParser();"
        " m.register(p.add_subparsers()); print('pandas' in sys.modules,"
        " 'dlmeval.protocols.diffscore.analyses.profiles' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def tiny_suite(tmp_path_factory, data_root, tiny_encoder):
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteOptions
    from dlmeval.store import RunStore

    d = tmp_path_factory.mktemp("analyses")
    enc = tiny_encoder
    opts = SuiteOptions(
        dlm="tiny-bert",
        ar="tiny-causal",
        encoder=str(enc),
        n_masks=2,
        n_rates=2,
        scheme="balanced",  # the profile analyses need per-rate means of S(t_k); the default combined has none
        bootstrap=0,
        progress=False,
        limit=20,
        chunk_size=8,
        benchmarks=("SummEval",),
        data_dir=str(data_root),
    )
    return Suite(opts, RunStore(d / "s.sqlite"))


def test_profile_analyses_end_to_end_share_one_run(tiny_suite):
    from dlmeval.protocols.diffscore.analyses import run_analysis

    m = run_analysis("timestep-matrix", tiny_suite)
    pc = m["profile_correlation"]
    assert set(pc["dimension_tag"]) == {"COH", "CON", "FLU", "REL"} and set(pc["rate"]) == {0.5, 1.0}
    assert set(pc["protocol"]) == {"doc_spearman"} and pc["value"].between(-1, 1).all()
    assert set(m["timestep_matrix"]["config"]) == {"cond", "bidir", "marginal"}
    run = next(r for r in tiny_suite.store.list_runs("meta-eval-analysis"))
    n_items = run["n_items"]
    t = run_analysis("tiers", tiny_suite, n_tiers=2)  # reads the stored profiles back: no new items
    assert tiny_suite.store.list_runs("meta-eval-analysis")[0]["n_items"] == n_items
    assert set(t["tier_profiles"]["tier_label"]) == {"low", "high"}
    lw = run_analysis("learned-weights", tiny_suite, folds=2)
    s = lw["learned_weights"]
    assert len(s) == 4 and s["uniform"].between(-1, 1).all()
    w = lw["learned_weights_folds"]
    assert np.allclose(w.groupby(["dimension_tag", "fold"])["weight"].sum(), 1.0) and (w["weight"] >= 0).all()
    again = run_analysis("learned-weights", tiny_suite, folds=2)
    pd.testing.assert_frame_equal(lw["learned_weights"], again["learned_weights"])
    # K = T: one mask per rate, so the uniform weights give DiffScore itself (profile mean = score)
    from dlmeval.protocols.diffscore.analyses.profiles import _profiles_run, benchmark_profiles

    frame, profs, rates, scores = benchmark_profiles(tiny_suite, "SummEval", _profiles_run(tiny_suite))
    assert np.allclose(profs["cond"].mean(axis=1), scores["cond"]) and rates.tolist() == [0.5, 1.0]
    # the bidir profile built from the stored cond and reverse directions is the estimator's own bidir profile
    sc = tiny_suite.scorer("SUM")
    own = sc.score(
        list(frame["candidate"]), list(frame["cond_source"]), config="bidir", item_ids=list(frame["key"])
    )
    assert np.allclose(np.array(own["profile"].tolist()), profs["bidir"])
    assert np.allclose(own["score"], scores["bidir"])


def test_latency_templates_and_families_end_to_end(tiny_suite):
    from dlmeval.protocols.diffscore.analyses import run_analysis

    lat = run_analysis("latency", tiny_suite, warmup=1, max_outputs=3)
    t = lat["latency"].set_index("family")
    assert t.loc["DiffScore K=20 T=10", "outputs"] == 2 and (t["mean_s"].dropna() > 0).all()
    assert "absent" in t.loc["BARTScore s2h", "note"]
    assert t.loc["AR s2h", "x AR s2h"] == pytest.approx(1.0)
    assert t.loc["GPTScore s2h (one aspect)", "outputs"] == 2  # the prompted AR family is timed too
    assert lat["latency_setup"]["torch_threads"].iat[0] >= 1
    # with a seq2seq checkpoint (a tiny random BART) the BARTScore row is timed and the ratios refer to it
    from dlmeval.baselines.seq2seq import tiny_bart

    bart = tiny_bart(tiny_suite.store.path.parent / "tiny-bart")
    t2 = run_analysis("latency", tiny_suite, warmup=1, max_outputs=3, bart=str(bart))["latency"].set_index(
        "family"
    )
    assert t2.loc["BARTScore s2h", "outputs"] == 2 and t2.loc["BARTScore s2h", "x BARTScore s2h"] == 1.0
    assert t2.loc["AR s2h", "x BARTScore s2h"] == pytest.approx(
        t2.loc["AR s2h", "mean_s"] / t2.loc["BARTScore s2h", "mean_s"]
    )
    tp = run_analysis("prompt-templates", tiny_suite)
    assert len(tp["prompt_templates"]) == 7 and {"COH", "CON", "FLU", "REL", "avg"} <= set(
        tp["prompt_templates"]
    )
    # fluency is the marginal score: no prompt, so one value for every template
    assert tp["prompt_templates"]["FLU"].nunique() == 1
    fam = run_analysis("families", tiny_suite, compare_model="tiny-dream")
    f = fam["families"]
    a, b = [c for c in f.columns if c.startswith(("A: ", "B: ")) and " - " not in c]
    assert a.startswith("A: tiny-bert") and b.startswith("B: tiny-dream") and len(f) == 4 + 1
    assert f[f"{b} - {a}"].tolist() == pytest.approx((f[b] - f[a]).tolist())
    with pytest.raises(InputError, match="--compare-model"):
        run_analysis("families", tiny_suite)


def test_report_sections_of_the_new_analyses(tiny_suite):
    from dlmeval.protocols.diffscore.analyses import run_analysis
    from dlmeval.report import collect
    from dlmeval.report.registry import FigureBlock

    for name in ("timestep-matrix", "tiers"):
        run_analysis(name, tiny_suite)
    run_analysis("learned-weights", tiny_suite, folds=2)
    run_analysis("latency", tiny_suite, warmup=1, max_outputs=3)
    rep = collect(tiny_suite.store)
    secs = {rs.renderer.key: rs.section for p in rep.parts for rs in p.sections if rs.renderer}
    for key in (
        "meta-eval/profile_correlation",
        "analysis/timestep_matrix",
        "analysis/learned_weights",
        "analysis/tiers",
        "analysis/latency",
    ):
        assert key in secs, key
    figs = lambda k: sum(isinstance(b, FigureBlock) for b in secs[k].blocks)  # noqa: E731
    assert figs("analysis/tiers") == 1 and figs("analysis/learned_weights") == 1
    assert figs("meta-eval/profile_correlation") == 1
    assert any("torch threads" in b for b in secs["analysis/latency"].blocks if isinstance(b, str))


def test_ablation_rows_on_the_tiny_models(tiny_suite):
    from dlmeval.protocols.diffscore.analyses.ablation import run_ablation

    rows = (
        ("K", "2", {"n_masks": 2, "n_rates": 2}),
        ("weighting", "ELBO", {"n_masks": 2, "n_rates": 2, "weighting": "elbo"}),
        ("masking", "entity-only", {"unsupported": "no entity-only scheme"}),
    )
    t = run_ablation(tiny_suite, rows)["ablation"].set_index("setting")
    assert set(t.columns) >= {"COH", "CON", "FLU", "REL", "avg"}
    assert t.loc["2", "avg"] == pytest.approx(t.loc["2", ["COH", "CON", "FLU", "REL"]].mean())
    assert t.loc["entity-only", "note"] == "no entity-only scheme" and np.isnan(t.loc["entity-only", "avg"])


def test_selection_runs_are_keyed_by_benchmarks_and_limit():
    from types import SimpleNamespace

    from dlmeval.protocols.diffscore.analyses.registry import analysis_run

    seen = []
    store = SimpleNamespace(open_run=lambda kind, cfg, models, seed, cl: seen.append((kind, cfg)) or cfg)
    suite = SimpleNamespace(
        store=store, benchmarks=("SummEval",), opts=SimpleNamespace(limit=30, seed=0), command_line=None
    )
    a = analysis_run(suite, "profiles", {"x": 1}, [], selection=True)
    suite.opts.limit = 80
    b = analysis_run(suite, "profiles", {"x": 1}, [], selection=True)
    c = analysis_run(suite, "positional", {"x": 1}, [])
    assert a["limit"] == 30 and b["limit"] == 80 and a["benchmarks"] == ["SummEval"] and a != b
    assert "limit" not in c and c["analysis"] == "positional" and seen[0][0] == "meta-eval-analysis"


def test_cli_runs_an_analysis_and_refuses_a_bad_option_before_the_store(tmp_path, data_root, capsys):
    from dlmeval.cli.main import main

    base = [
        "--store",
        str(tmp_path / "s.sqlite"),
        "--no-progress",
        "meta-eval",
        "--benchmarks",
        "BAGEL",
        "--limit",
        "10",
        "--model",
        "tiny-bert",
        "--ar-model",
        "tiny-causal",
        "-K",
        "2",
        "-T",
        "2",
        "--data-dir",
        str(data_root),
    ]
    rc = main([*base, "--analysis", "tiers", "--analysis-option", "bogus=1"])
    assert rc != 0 and "no option 'bogus'" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()
    out = tmp_path / "tiers"
    rc = main([*base, "--analysis", "tiers", "--analysis-option", "n_tiers=2", "--out", str(out)])
    assert rc == 0
    # no --scheme: the default (combined) estimates the score, not each S(t_k), so the profile analysis takes
    # balanced and says so
    cap = capsys.readouterr()
    assert "runs with --scheme balanced" in cap.err
    t = pd.read_csv(out / "tier_profiles.csv")
    assert set(t["tier_label"]) == {"low", "high"} and set(t["rate"]) == {0.5, 1.0} and (t["n"] == 5).all()
    assert "## tier_gap" in cap.out


def test_profile_analyses_refuse_a_scheme_without_per_rate_profiles(tiny_suite):
    """The default `combined` scheme's per-rate means are not S(t_k) in expectation (only their weighted sum is the
    score): a profile analysis on it is refused with the fix, while score-only analyses take any scheme."""
    import dataclasses

    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.analyses.profiles import benchmark_profiles, gives_profiles
    from dlmeval.protocols.diffscore.meta_eval import Suite

    assert gives_profiles("balanced") and gives_profiles("independent") and not gives_profiles("combined")
    suite = Suite(dataclasses.replace(tiny_suite.opts, scheme="combined"), tiny_suite.store)
    with pytest.raises(InputError, match="--scheme balanced"):
        benchmark_profiles(suite, "SummEval", None)
