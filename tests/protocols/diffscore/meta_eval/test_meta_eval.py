"""Meta-evaluation: protocol functions against hand-computed values, the dimension mapping, the suite end to end on
tiny models (all 12 benchmarks), resumption after a crash (identical tables), DiffScore-FT rows, analyses."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.meta_eval import (
    SuiteOptions,
    diffscore_calls,
    judged_for,
    make_units,
    run_suite,
    scoring_frame,
)
from dlmeval.store import RunStore


# ---------------------------------------------------------------------------------------------- protocols
def test_summary_level_hand_values():
    # doc A: metric and human agree (rho 1, tau 1); doc B: human 3,1,2 -> rho = 1 - 6*6/(3*8) = -0.5,
    # tau = (1 concordant - 2 discordant) / 3; doc C: constant human -> skipped (BARTScore's rule)
    docs = ["A"] * 3 + ["B"] * 3 + ["C"] * 3
    metric = [1, 2, 3, 1, 2, 3, 1, 2, 3]
    human = [1, 2, 3, 3, 1, 2, 5, 5, 5]
    rho = P.summary_level(metric, human, docs, "spearman")
    assert rho.value == pytest.approx((1 - 0.5) / 2)
    assert rho.n == 2 and rho.skipped == 1 and rho.unit_ids == ("A", "B")
    tau = P.summary_level(metric, human, docs, "kendall")
    assert tau.value == pytest.approx((1 - 1 / 3) / 2)


def test_system_level_hand_value():
    # systems x, y, z over two documents; means: metric 1, 2, 3 and human 2, 4, 7
    systems = ["x", "y", "z", "x", "y", "z"]
    metric = [0.5, 2.0, 2.0, 1.5, 2.0, 4.0]
    human = [1.0, 4.0, 6.0, 3.0, 4.0, 8.0]
    r = P.system_level(metric, human, systems, "pearson")
    # r = cov / (sx sy) with deviations (-1, 0, 1) and (-7/3, -1/3, 8/3): 5 / (sqrt(2) * sqrt(114) / 3)
    assert r.value == pytest.approx(15 / math.sqrt(228))
    assert r.n == 3
    assert P.system_level(metric, human, systems, "spearman").value == pytest.approx(1.0)


def test_pairwise_accuracy_ties_are_wrong():
    docs = ["d1", "d1", "d2", "d2", "d3", "d3", "d4", "d4"]
    systems = ["correct", "incorrect"] * 4
    metric = [2, 1, 1, 1, 0, 3, 5, 4]  # d1 right, d2 tie (wrong), d3 wrong, d4 right
    acc = P.pairwise_accuracy(metric, docs, systems)
    assert acc.value == 0.5 and acc.n == 4
    assert acc.units.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_darr_kendall_like_hand_values():
    # concordant, tie (discordant), discordant, concordant -> (2 - 2) / 4
    assert P.darr_kendall([3, 2, 1, 5], [1, 2, 2, 4]).value == 0.0
    r = P.darr_kendall([1, 2, 3], [0, 0, 5])
    assert r.value == pytest.approx(1 / 3) and r.units.tolist() == [1.0, 1.0, -1.0]


def test_segment_level_and_bad_input():
    assert P.segment_level([1, 2, 3, 4], [2, 4, 6, 8.5], "spearman").value == pytest.approx(1.0)
    assert math.isnan(P.segment_level([1, 1, 1], [1, 2, 3], "pearson").value)  # constant metric
    with pytest.raises(InputError, match="NaN"):
        P.segment_level([1, float("nan")], [1, 2])
    with pytest.raises(InputError, match="unknown protocol"):
        P.evaluate("median_rank", P.Judged(np.array(["a"]), np.array(["s"]), np.array([1.0])), [1.0])


def test_dimension_mapping_matches_the_paper():
    assert P.dimension_config("WMT", P.DARR) == "cond"
    assert P.dimension_config("SUM", "consistency") == "cond"
    assert P.dimension_config("SUM", "fact") == "cond"
    assert P.dimension_config("SUM", "litepyramid_recall") == "reverse"
    assert P.dimension_config("SUM", "fluency") == "marginal"
    for d in ("coherence", "relevance", "informativeness"):
        assert P.dimension_config("SUM", d) == "bidir"
    for d in ("informativeness", "naturalness", "quality"):
        assert P.dimension_config("D2T", d) == "bidir"
    assert P.ar_direction("WMT", "cond") == "r2h" and P.ar_direction("SUM", "reverse") == "h2s"
    assert diffscore_calls("SummEval") == [
        ("bidir", ("cond", "reverse", "bidir")),
        ("marginal", ("marginal",)),
    ]
    assert diffscore_calls("REALSumm") == [("reverse", ("reverse",))]
    assert diffscore_calls("gu-en") == [("cond", ("cond",))]
    assert diffscore_calls("SFRES") == [("bidir", ("cond", "reverse", "bidir"))]
    with pytest.raises(InputError, match="no DiffScore configuration"):
        P.dimension_config("SUM", "humour")


def test_bootstrap_ci_is_seeded_and_brackets_the_value():
    rng = np.random.default_rng(0)
    h = rng.normal(size=60)
    m = h + rng.normal(size=60)
    j = P.Judged(np.array([f"d{i // 6}" for i in range(60)]), np.array([f"s{i % 6}" for i in range(60)]), h)
    for proto in ("pearson", "doc_spearman", "sys_pearson"):
        lo, hi = P.protocol_ci(proto, j, m, n_resamples=200, seed=7)
        assert lo <= P.evaluate(proto, j, m).value <= hi
        assert (lo, hi) == P.protocol_ci(proto, j, m, n_resamples=200, seed=7)
    assert P.protocol_ci("pearson", j, m, n_resamples=200, seed=8) != P.protocol_ci(
        "pearson", j, m, n_resamples=200, seed=7
    )


def test_compare_uses_williams_for_single_correlations():
    from dlmeval.stats import pearson, williams_test

    rng = np.random.default_rng(1)
    h = rng.normal(size=80)
    good, bad = h + 0.3 * rng.normal(size=80), h + 2.0 * rng.normal(size=80)
    j = P.Judged(np.arange(80).astype(str).astype(object), np.zeros(80).astype(str).astype(object), h)
    c = P.compare("pearson", j, good, bad)
    w = williams_test(pearson(h, good).r, pearson(h, bad).r, pearson(good, bad).r, 80, alternative="greater")
    assert c.test == "williams" and c.statistic == pytest.approx(w.t) and c.p == pytest.approx(w.p)
    assert c.a_better
    # a mean-over-units protocol uses the paired bootstrap of the difference
    d = P.compare(
        "darr_tau", P.Judged(None, None, None, np.arange(0, 40, 2), np.arange(1, 40, 2)), good[:40], bad[:40]
    )
    assert d.test == "paired_bootstrap" and d.ci_lo <= d.statistic <= d.ci_hi
    assert d.statistic == pytest.approx(d.value_a - d.value_b)


# ---------------------------------------------------------------------------------------------- frames
def test_scoring_frames(data_root):
    se = scoring_frame("SummEval", data_root, limit=20)
    assert len(se) == 32 and se["doc_id"].nunique() == 2  # limit rounded up to whole documents
    assert all(len(t) == 11 for t in se["targets"])
    wmt = scoring_frame("gu-en", data_root, limit=5)
    # keys: the loader's id, a digest of the pair's texts, the side
    assert len(wmt) == 10 and re.fullmatch(r"gu-en/0@[0-9a-f]{12}/better", wmt["key"].iat[0])
    assert wmt["key"].iat[1] == wmt["key"].iat[0].replace("/better", "/worse")
    assert (wmt["cond_source"] == wmt["targets"].map(lambda t: t[0])).all()  # MT conditions on the reference
    qags = scoring_frame("QAGS_CNN", data_root, limit=3)
    assert (
        qags["targets"] == qags["source"].map(lambda s: (s,))
    ).all()  # factuality: compare with the source
    j = judged_for(wmt, P.DARR)
    assert list(wmt["side"].iloc[j.better_index]) == ["better"] * 5
    assert list(wmt["side"].iloc[j.worse_index]) == ["worse"] * 5
    full = scoring_frame("kk-en", data_root, limit=300)
    units = make_units(full)
    assert len(units) < len(full)  # recurring system outputs are scored once
    assert sum(len(u.rows) for u in units) == len(full)


def test_bad_options():
    with pytest.raises(InputError, match="unknown BARTScore benchmark"):
        SuiteOptions(benchmarks=("SumEval",)).check()
    with pytest.raises(InputError, match="limit"):
        SuiteOptions(limit=0).check()
    with pytest.raises(InputError, match="famil"):
        SuiteOptions(families=("bleurt",)).check()
    with pytest.raises(InputError, match="ar-max-refs"):
        SuiteOptions(ar_max_refs=0).check()
    assert SuiteOptions(benchmarks=("WMT", "SummEval")).resolved_benchmarks() == (
        "gu-en",
        "kk-en",
        "lt-en",
        "SummEval",
    )


# ---------------------------------------------------------------------------------------------- the suite
def _opts(encoder: str, **kw):
    base = dict(
        dlm="tiny-bert",
        ar="tiny-causal",
        encoder=encoder,
        n_masks=2,
        n_rates=2,
        bootstrap=20,
        progress=False,
        limit=2,
    )
    base.update(kw)
    return SuiteOptions(**base)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, data_root, tiny_encoder):
    d = tmp_path_factory.mktemp("suite")
    store = RunStore(d / "runs.sqlite")
    rep = run_suite(_opts(tiny_encoder, data_dir=str(data_root)), store, out_dir=d / "out")
    return store, rep, d


def test_diffscore_runs_record_what_the_estimator_names_mean(full_run):
    """A scheme or weighting whose meaning changes (``balanced``: exact-count masks before, Bernoulli now; the default
    scheme: ``combined`` since #38) must make new runs: the DiffScore run records the scheme, the masks'
    distribution, the weight formula and the preset, not the names alone."""
    store, rep, _ = full_run
    sig = store.get_run(rep.components["diffscore"]).signature
    est = sig.config["estimator"]
    assert est == {
        "n_masks": 2,
        "n_rates": 2,
        "scheme": "combined",
        "weighting": "mlp",
        "weight": "1/|M|",
        "masking": est["masking"],
        "preset": None,
    }
    assert est["masking"].startswith("bernoulli") and "control variate" in est["masking"]


def test_suite_end_to_end_all_benchmarks(full_run):
    store, rep, d = full_run
    res = rep.results
    # the shared data's 12 sets; de-en, fi-en, ru-en, zh-en join only once `dlmeval data import` put their files there
    here = {b for b in P.BENCHMARK_PROTOCOLS if b not in ("de-en", "fi-en", "ru-en", "zh-en")}
    assert set(res["benchmark"]) == here
    prim = res[res["primary"]]
    # each number carries its benchmark's protocol
    got = dict(prim.groupby("benchmark")["protocol"].first())
    assert got == {b: ps[0] for b, ps in P.BENCHMARK_PROTOCOLS.items() if b in here}
    # the paper mapping row reads the mapped configuration
    m = res[(res["metric"] == "diffscore:mapped") & (res["benchmark"] == "SummEval")]
    assert dict(zip(m["dimension"], m["config"])) == {
        "coherence": "bidir",
        "consistency": "cond",
        "fluency": "marginal",
        "relevance": "bidir",
    }
    for b in ("SummEval", "BAGEL", "gu-en"):
        for fam_metric in (
            "bleu",
            "rouge1",
            "meteor",
            "bertscore_f",
            "moverscore",
            "ar:mapped",
            "diffscore:mapped",
        ):
            assert fam_metric in set(res.loc[res["benchmark"] == b, "metric"]), (b, fam_metric)
    assert {"mt", "sum", "d2t", "secondary"} <= set(rep.tables)
    assert list(rep.tables["mt"].columns) == [
        "gu-en (DARR tau)",
        "kk-en (DARR tau)",
        "lt-en (DARR tau)",
        "avg",
    ]
    for name in ("mt", "sum", "d2t", "secondary"):  # one row order everywhere: baselines, AR, DiffScore
        rows = list(rep.tables[name].index)
        fam = [
            0
            if r.startswith(("BLEU", "ROUGE", "METEOR", "BERT", "Mover"))
            else 1
            if r.startswith("AR")
            else 2
            for r in rows
        ]
        assert fam == sorted(fam), (name, rows)
        assert rows.index(next(r for r in rows if r.startswith("AR (paper mapping)"))) == fam.index(2) - 1
    for name in ("mt", "sum", "d2t", "results", "comparisons", "timing"):
        assert (d / "out" / f"{name}.csv").is_file()
    assert "DARR Kendall-like tau" in (d / "out" / "mt.md").read_text()
    assert not rep.comparisons.empty and set(rep.comparisons["test"]) <= {"williams", "paired_bootstrap"}
    # stored: per-item scores keyed (benchmark/item@content|metric), and the tables in the summary run
    lex = store.get_run(rep.components["lexical"])
    keys = lex.done_keys()
    assert any(k.startswith("SummEval/") and k.endswith("|bleu") for k in keys)
    assert any(re.fullmatch(r"gu-en/0@[0-9a-f]{12}/worse\|bleu", k) for k in keys)
    assert set(rep.run.tables()) >= {"results", "comparisons", "sum", "mt", "d2t"}


def test_suite_resumes_after_a_crash_with_identical_tables(tmp_path, data_root, monkeypatch, tiny_encoder):
    from dlmeval.protocols.diffscore import meta_eval

    kw = dict(
        data_dir=str(data_root),
        benchmarks=("Rank19", "BAGEL", "gu-en"),
        limit=3,
        chunk_size=2,
    )
    ref = run_suite(_opts(tiny_encoder, **kw), RunStore(tmp_path / "a.sqlite"))

    calls = {"n": 0}
    real = meta_eval.Suite.compute_diffscore

    def flaky(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # a kill in the middle of the DiffScore work
        return real(self, *a, **k)

    store = RunStore(tmp_path / "b.sqlite")
    monkeypatch.setattr(meta_eval.Suite, "compute_diffscore", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_suite(_opts(tiny_encoder, **kw), store)
    monkeypatch.setattr(meta_eval.Suite, "compute_diffscore", real)
    again = run_suite(_opts(tiny_encoder, **kw), store)
    assert (
        again.timing["units_computed"].sum() < ref.timing["units_computed"].sum()
    )  # only the rest was scored
    pd.testing.assert_frame_equal(again.results, ref.results)
    pd.testing.assert_frame_equal(again.comparisons, ref.comparisons)
    for name in ("mt", "sum", "d2t"):
        pd.testing.assert_frame_equal(again.tables[name], ref.tables[name])
    # and a third run computes nothing
    third = run_suite(_opts(tiny_encoder, **kw), store)
    assert third.timing["units_computed"].sum() == 0


def test_suite_uses_preloaded_models(tmp_path, data_root, tiny_encoder, monkeypatch):
    import dlmeval.models.registry as registry

    kw = dict(data_dir=str(data_root), benchmarks=("BAGEL",), limit=3)
    opts = _opts(tiny_encoder, **kw)
    ref = run_suite(opts, RunStore(tmp_path / "a.sqlite"))
    loaded = {
        opts.dlm: registry.load_diffusion(opts.dlm, seed=opts.seed),
        opts.ar: registry.load_causal_lm(opts.ar, seed=opts.seed),
    }

    def no_load(spec, **k):
        raise AssertionError(f"{spec} was loaded again")

    monkeypatch.setattr(registry, "load_diffusion", no_load)
    monkeypatch.setattr(registry, "load_causal_lm", no_load)
    again = run_suite(opts, RunStore(tmp_path / "b.sqlite"), models=loaded)
    pd.testing.assert_frame_equal(again.results, ref.results)


def test_cli_meta_eval_writes_tables(tmp_path, data_root, capsys, tiny_encoder):
    from dlmeval.cli.main import main

    out = tmp_path / "out"
    rc = main(
        [
            "--store",
            str(tmp_path / "s.sqlite"),
            "--no-progress",
            "meta-eval",
            "--benchmarks",
            "Rank19",
            "QAGS_XSUM",
            "--limit",
            "6",
            "--model",
            "tiny-bert",
            "--ar-model",
            "tiny-causal",
            "-K",
            "2",
            "-T",
            "2",
            "--metrics",
            "lexical",
            "ar",
            "diffscore",
            "--bootstrap",
            "10",
            "--data-dir",
            str(data_root),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "Rank19 FAC (acc)" in text and "QAGS_XSUM FAC (r)" in text
    assert (out / "sum.md").is_file() and (out / "results.csv").is_file()
    rc = main(["--store", str(tmp_path / "s.sqlite"), "meta-eval", "--benchmarks", "NoSuchSet"])
    assert rc == 2


# ---------------------------------------------------------------------------------------------- DiffScore-FT
def test_ft_rows_in_the_same_table_and_resume_without_training(tmp_path, data_root, tiny_encoder):
    """The suite's call site of DiffScore-FT (its training scheme is tested in tests/protocols/diffscore/test_ft.py): one adapter
    per training set, FT keys beside the zero-shot ones, FT comparisons, and a rerun that trains nothing."""
    from dlmeval.protocols.diffscore.meta_eval import FTOptions

    ft_dir = tmp_path / "ft"
    opts = _opts(
        tiny_encoder,
        data_dir=str(data_root),
        benchmarks=("BAGEL",),
        limit=8,
        families=("diffscore",),
        ft=True,
        ft_options=FTOptions(steps=2, batch_size=2, lr=1e-2, rank=2, alpha=4, work_dir=str(ft_dir)),
    )
    rep = run_suite(opts, RunStore(tmp_path / "s.sqlite"))
    rows = set(rep.tables["d2t"].index)
    assert any(r.startswith("DiffScore-FT (paper mapping)") for r in rows)
    assert any(r.startswith("DiffScore (paper mapping)") for r in rows)
    store = RunStore(tmp_path / "s.sqlite")
    ft = store.get_run(rep.components["ft"]).results()
    zs = store.get_run(rep.components["diffscore"]).results()
    keys = sorted(k for k in zs if k.endswith("|diffscore:bidir"))
    assert len(keys) == 8 and all(k.replace("diffscore:", "diffscore-ft:") in ft for k in keys)
    a = np.array([zs[k]["score"] for k in keys])
    b = np.array([ft[k.replace("diffscore:", "diffscore-ft:")]["score"] for k in keys])
    assert np.isfinite(b).all() and not np.allclose(a, b)  # the adapter is trained
    assert len([d for d in ft_dir.iterdir() if d.is_dir()]) == 1  # BAGEL: one adapter on the pool
    assert "diffscore-ft:mapped" in set(rep.comparisons["metric_a"])
    # a rerun finds every FT score stored: nothing computed, nothing trained or loaded for FT
    stamp = {p: p.stat().st_mtime_ns for p in ft_dir.rglob("*")}
    again = run_suite(opts, RunStore(tmp_path / "s.sqlite"))
    assert again.timing["units_computed"].sum() == 0
    assert {p: p.stat().st_mtime_ns for p in ft_dir.rglob("*")} == stamp
    pd.testing.assert_frame_equal(again.results, rep.results)


# ---------------------------------------------------------------------------------------------- analyses
def test_positional_stats_hand_values():
    from dlmeval.protocols.diffscore.analyses import positional_stats

    st = positional_stats([[1, 2], [3, 4], [5, 6]], min_count=2)
    assert st["position_means"] == [3.0, 4.0] and st["position_stds"] == [2.0, 2.0]
    assert st["mean_positional_std"] == 2.0
    assert st["cov_position_means"] == pytest.approx(np.std([3, 4], ddof=1) / 3.5)
    assert st["first_minus_rest"] == -1.0


def test_directional_pairs_and_consistency():
    from dlmeval.protocols.diffscore.analyses import RELATIONS, consistency_stats, reversal_pairs

    pairs = reversal_pairs(200, seed=0)
    assert len(pairs) == 200 and pairs["pair_id"].is_unique
    assert set(pairs["relation"]) == set(RELATIONS)
    r0 = pairs.iloc[0]
    assert r0["forward"].startswith(r0["reverse"].split(" by ")[1].rstrip("."))  # same person both ways
    assert " was authored by " in r0["reverse"]
    pd.testing.assert_frame_equal(pairs, reversal_pairs(200, seed=0))
    assert not pairs["forward"].equals(reversal_pairs(200, seed=1)["forward"])
    # consistency min/max of |scores|: (1/2, 1/2, 1); rank correlation 1 - 6*2/(3*8) = 0.5
    st = consistency_stats([-1, -2, -4], [-2, -1, -4])
    assert st["mean_consistency"] == pytest.approx(2 / 3)
    assert st["rank_correlation"] == pytest.approx(0.5)


def test_adversarial_variants(data_root):
    from dlmeval.protocols.diffscore.analyses import adversarial_set, disfluent
    from dlmeval.seeding import numpy_rng

    frame = scoring_frame("SummEval", data_root, limit=64)
    adv = adversarial_set(frame, ("coherence", "consistency", "fluency", "relevance"), seed=0)
    assert len(adv) == 3 * 4
    orig = adv[adv["condition"] == "original"].set_index("doc_id")["candidate"]
    irr = adv[adv["condition"] == "fluent_irrelevant"].set_index("doc_id")["candidate"]
    assert all(irr[d] != orig[d] and irr[d] in set(orig) for d in orig.index)  # another document's original
    text = "The mayor of the city said on Monday that a new bridge will be built across the river by 2030."
    a = disfluent(text, numpy_rng(0, "x"))
    assert a == disfluent(text, numpy_rng(0, "x")) and a != text
    assert abs(len(a.split()) - len(text.split())) <= 2


def test_analyses_run_on_tiny_models(tmp_path, data_root, tiny_encoder):
    from dlmeval.protocols.diffscore.analyses import run_analysis
    from dlmeval.protocols.diffscore.meta_eval import Suite

    suite = Suite(
        _opts(tiny_encoder, data_dir=str(data_root), limit=20, chunk_size=8), RunStore(tmp_path / "s.sqlite")
    )
    pos = run_analysis("positional", suite, min_count=3)["positional"]
    assert len(pos) == 2 and (pos["mean_positional_std"] > 0).all()
    d = run_analysis("directional", suite, n_pairs=6)["directional"]
    assert len(d) == 2 and d["mean_consistency"].between(0, 1).all()
    adv = run_analysis("adversarial", suite)["adversarial"]
    assert set(adv["condition"]) == {"original", "fluent_irrelevant", "disfluent_relevant"}
    assert adv.loc[adv["condition"] != "original", "p_pmi"].between(0, 1).all()


def test_suite_without_wordnet_drops_meteor_and_says_so(tmp_path, data_root, tiny_encoder, monkeypatch):
    """A machine without wordnet-base: the lexical baselines run without METEOR and the run records why."""
    from dlmeval.baselines.lexical import WORDNET_ENV, meteor_unavailable

    empty = tmp_path / "no-wordnet"
    empty.mkdir()
    monkeypatch.setenv(WORDNET_ENV, str(empty))
    assert "wordnet-base" in meteor_unavailable()
    opts = _opts(tiny_encoder, data_dir=str(data_root), benchmarks=("QAGS_XSUM",), families=("lexical",))
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    labels = set(rep.results["label"])
    assert labels and not any("METEOR" in lab for lab in labels) and any("ROUGE-1" in lab for lab in labels)
    warned = store.get_run(rep.components["lexical"]).warnings()
    assert any("METEOR not available: install wordnet-base" in w for w in warned)


def test_cli_allow_download_and_max_tokens_reach_the_model_and_the_scorer(monkeypatch):
    """`meta-eval --allow-download` used to be accepted and ignored; `--max-tokens` bounds DiffScore batches."""
    import dlmeval.models.registry as registry
    from dlmeval.cli.main import build_parser
    from dlmeval.cli.meta_eval import _options
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs

    args = build_parser().parse_args(
        [
            "meta-eval",
            "--allow-download",
            "--max-tokens",
            "512",
            "--model",
            "tiny-llada",
            "--ar-model",
            "tiny-causal",
        ]
    )
    opts = _options(args)
    assert opts.allow_download and opts.dlm_max_tokens == 512
    seen = []
    real_d, real_c = registry.load_diffusion, registry.load_causal_lm
    monkeypatch.setattr(registry, "load_diffusion", lambda spec, **kw: seen.append(kw) or real_d(spec, **kw))
    monkeypatch.setattr(registry, "load_causal_lm", lambda spec, **kw: seen.append(kw) or real_c(spec, **kw))
    suite = SuiteInputs(opts)
    suite.dlm(), suite.ar()
    assert [kw["allow_download"] for kw in seen] == [True, True]
    model = suite.dlm()
    assert suite.scorer("SUM").max_tokens == max(512, model.max_length)
    off = _options(build_parser().parse_args(["meta-eval"]))
    assert off.allow_download is False and off.dlm_max_tokens is None
    with pytest.raises(InputError, match="max-tokens"):
        SuiteOptions(dlm_max_tokens=0).check()
