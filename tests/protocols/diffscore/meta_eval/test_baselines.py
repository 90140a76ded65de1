"""The ``bartscore`` and ``gptscore`` families in the meta-evaluation suite, and the paper's marks in its tables."""

import math

import pytest

from dlmeval.errors import ModelNotFoundError
from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def tiny_bart_dir(tmp_path_factory):
    from dlmeval.baselines.seq2seq import tiny_bart

    return str(tiny_bart(tmp_path_factory.mktemp("tiny-bart"), seed=0))


def _opts(**kw):
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    base = dict(
        dlm="tiny-bert",
        ar="tiny-causal",
        n_masks=2,
        n_rates=2,
        bootstrap=0,
        progress=False,
        families=("diffscore", "bartscore", "gptscore"),
    )
    base.update(kw)
    return SuiteOptions(**base)


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_root, tiny_bart_dir):
    from dlmeval.protocols.diffscore.meta_eval import run_suite

    d = tmp_path_factory.mktemp("suite")
    opts = _opts(
        data_dir=str(data_root), benchmarks=("SummEval", "gu-en"), limit=8, bartscore_model=tiny_bart_dir
    )
    store = RunStore(d / "runs.sqlite")
    return opts, run_suite(opts, store, out_dir=d / "out"), store


def test_families_are_registered_and_off_by_default():
    from dlmeval.protocols.diffscore.meta_eval import METRIC_FAMILIES, SuiteOptions, family_names

    assert {"bartscore", "gptscore"} <= set(family_names())
    assert not METRIC_FAMILIES["bartscore"].default and not METRIC_FAMILIES["gptscore"].default
    assert "bartscore" not in SuiteOptions().selected_families()


def test_bartscore_family_scores_what_the_building_block_scores(run, data_root, tiny_bart_dir):
    from dlmeval.baselines.seq2seq import bartscore, load_seq2seq
    from dlmeval.protocols.diffscore.meta_eval import scoring_frame

    opts, rep, store = run
    frame = scoring_frame("SummEval", str(data_root), limit=8)
    sc = load_seq2seq(tiny_bart_dir, batch_size=opts.ar_batch_size)
    rows = frame.iloc[[0, 5]]
    want = bartscore(
        sc, list(rows["candidate"]), sources=list(rows["cond_source"]), directions=("s2h", "h2s")
    )
    # SummEval coherence maps to bidir, whose BARTScore counterpart is (s2h + h2s) / 2 (sbi)
    from dlmeval.protocols.diffscore.meta_eval import Suite

    suite = Suite(opts, store)
    scores = suite.scores("SummEval", frame)
    assert scores["bartscore:s2h"][[0, 5]] == pytest.approx(want["s2h"], abs=1e-6)
    assert scores["bartscore:sbi"][[0, 5]] == pytest.approx(
        [(a + b) / 2 for a, b in zip(want["s2h"], want["h2s"])], abs=1e-6
    )
    labels = set(rep.results["label"])
    assert any(lab.startswith("BARTScore (paper mapping)") for lab in labels)
    # the mapped row follows BARTScore's own protocol: s->h on every SummEval dimension (fluency too: not the
    # empty-source row the AR mapping uses), F on MT
    for dim in ("coherence", "fluency"):
        assert list(suite.metric_vector("SummEval", dim, "bartscore:mapped", scores)) == list(
            scores["bartscore:s2h"]
        )
    wmt_scores = suite.scores("gu-en", scoring_frame("gu-en", str(data_root), limit=8))
    assert list(suite.metric_vector("gu-en", "DARR", "bartscore:mapped", wmt_scores)) == list(
        wmt_scores["bartscore:f"]
    )
    assert any(lab.startswith("GPTScore (paper mapping)") for lab in labels)
    # WMT: reference directions only, GPTScore's ACC aspect with the reference in the prompt
    wmt = rep.results[rep.results["benchmark"] == "gu-en"]
    assert "bartscore:r2h" in set(wmt["metric"]) and "bartscore:s2h" not in set(wmt["metric"])
    assert "gptscore:ACC" in set(wmt["metric"])


def test_paper_marks_are_the_williams_tests_at_the_table_level(run, data_root):
    from dlmeval.protocols.diffscore.meta_eval import Suite, judged_for, scoring_frame
    from dlmeval.stats.marks import williams_at_level

    opts, rep, store = run
    cmp = rep.comparisons
    marks = cmp[cmp["test"] == "williams (paper marks)"]
    # one test per (DiffScore row, baseline) on every dimension of the two benchmarks
    assert set(marks["metric_b"]) == {"bartscore:mapped", "gptscore:mapped"}
    assert len(marks) == 2 * (4 + 1)
    frame = scoring_frame("gu-en", str(data_root), limit=8)
    suite = Suite(opts, store)
    scores = suite.scores("gu-en", frame)
    j = judged_for(frame, "DARR")
    w = williams_at_level(
        "darr",
        suite.metric_vector("gu-en", "DARR", "diffscore:mapped", scores),
        suite.metric_vector("gu-en", "DARR", "bartscore:mapped", scores),
        pairs=(j.better_index, j.worse_index),
    )
    got = marks[(marks["benchmark"] == "gu-en") & (marks["metric_b"] == "bartscore:mapped")].iloc[0]
    assert w.n == 8 and math.isfinite(w.t)  # eight pairs, all scored
    assert (got["statistic"], got["p"], got["n"], got["level"]) == (
        pytest.approx(w.t),
        pytest.approx(w.p),
        8,
        "darr (darr)",
    )
    assert got["a_significantly_better"] == w.better(opts.alpha)
    # the summary level: Williams per document, Stouffer-combined
    coh = marks[(marks["benchmark"] == "SummEval") & (marks["dimension"] == "coherence")]
    assert set(coh["level"]) == {"summary (spearman)"}
    md = rep.markdown["sum"]
    assert "significantly better than BARTScore / GPTScore" in md
    for r in marks[marks["a_significantly_better"]].itertuples():
        assert r.mark in md


def test_bartscore_family_without_checkpoint_says_which_option(tmp_path, data_root):
    from dlmeval.protocols.diffscore.meta_eval import run_suite

    opts = _opts(data_dir=str(data_root), benchmarks=("BAGEL",), limit=2, families=("bartscore",))
    store = RunStore(tmp_path / "s.sqlite")
    with pytest.raises(ModelNotFoundError, match="--bartscore-model"):
        run_suite(opts, store)
    assert store.list_runs() == []  # it fails while loading, before any run is opened


def test_cli_bartscore_model_option(tmp_path, data_root, tiny_bart_dir, capsys):
    from dlmeval.cli.main import main

    base = ["--store", str(tmp_path / "s.sqlite"), "--no-progress", "meta-eval", "--benchmarks", "BAGEL"]
    base += ["--limit", "4", "--model", "tiny-bert", "--ar-model", "tiny-causal", "-K", "2", "-T", "2"]
    base += ["--bootstrap", "0", "--data-dir", str(data_root), "--metrics", "bartscore", "diffscore"]
    rc = main([*base, "--out", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert rc != 0 and "--bartscore-model DIR" in err
    rc = main([*base, "--bartscore-model", tiny_bart_dir, "--out", str(tmp_path / "out")])
    assert rc == 0
    md = (tmp_path / "out" / "d2t.md").read_text()
    assert "BARTScore (paper mapping) [" in md and "significantly better than BARTScore / GPTScore" in md
