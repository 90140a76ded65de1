"""Section 6 analyses compare DiffScore with BARTScore when the bartscore checkpoint is available, else with the
causal LM, and the table says which."""

import pytest

from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def tiny_bart_dir(tmp_path_factory):
    from dlmeval.baselines.seq2seq import tiny_bart

    return str(tiny_bart(tmp_path_factory.mktemp("tiny-bart"), seed=0))


def _suite(tmp_path, data_root, tiny_encoder, **kw):
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteOptions

    opts = SuiteOptions(
        dlm="tiny-bert", ar="tiny-causal", encoder=tiny_encoder, n_masks=2, n_rates=2, bootstrap=0, progress=False,
        limit=20, chunk_size=8, benchmarks=("SummEval",), data_dir=str(data_root), **kw,
    )  # fmt: skip
    return Suite(opts, RunStore(tmp_path / "s.sqlite"))


def test_bartscore_when_available(tmp_path, data_root, tiny_encoder, tiny_bart_dir):
    from dlmeval.baselines.seq2seq import load_seq2seq
    from dlmeval.protocols.diffscore.analyses import run_analysis
    from dlmeval.protocols.diffscore.analyses.bias import reversal_pairs

    suite = _suite(tmp_path, data_root, tiny_encoder, bartscore_model=tiny_bart_dir)
    d = run_analysis("directional", suite, n_pairs=3)
    labels = list(d["directional"]["model"])
    assert labels[1].startswith("BARTScore empty source [") and "not available" not in labels[1]
    pairs = reversal_pairs(3, 0)
    want = load_seq2seq(tiny_bart_dir).mean_logprobs([None] * 3, list(pairs["forward"]))
    assert list(d["directional_pairs"]["ar_forward"]) == pytest.approx(want, abs=1e-6)
    adv = run_analysis("adversarial", suite)["adversarial"]
    assert any(m.startswith("BARTScore s->h") for m in adv["model"])


def test_ar_otherwise_and_says_why(tmp_path, data_root, tiny_encoder, monkeypatch):
    from dlmeval.protocols.diffscore.analyses import run_analysis

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))  # facebook/bart-large-cnn is not there
    suite = _suite(tmp_path, data_root, tiny_encoder)
    labels = list(run_analysis("directional", suite, n_pairs=3)["directional"]["model"])
    assert labels[1].startswith("AR marginal [tiny-causal; BARTScore's facebook/bart-large-cnn not available")
