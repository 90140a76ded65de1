"""UniEval: Boolean-QA p(Yes)/(p(Yes)+p(No)) over a tiny random T5, checked by hand, and its family in the suite."""

import pytest
import torch

from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    from dlmeval.baselines.unieval import tiny_unieval

    return str(tiny_unieval(tmp_path_factory.mktemp("tiny-t5"), seed=0))


def _by_hand(t5_dir, text):
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(t5_dir)
    m = T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
    ids = tok(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = m(input_ids=ids, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
    p = torch.softmax(logits, -1)
    yes, no = tok.convert_tokens_to_ids("Yes"), tok.convert_tokens_to_ids("No")
    return float(p[yes] / (p[yes] + p[no]))


def test_bool_qa_inputs_are_unievals():
    from dlmeval.baselines.unieval import bool_qa_input
    from dlmeval.errors import InputError

    assert (
        bool_qa_input("summarization", "coherence", "a cat.", "the doc")
        == "question: Is this a coherent summary to the document? </s> summary: a cat. </s> document: the doc"
    )
    assert (
        bool_qa_input("data2text", "naturalness", "x")
        == "question: Is this a fluent utterance? </s> utterance: x"
    )
    with pytest.raises(InputError, match="needs the ref"):
        bool_qa_input("data2text", "informativeness", "x")
    with pytest.raises(InputError, match="no question"):
        bool_qa_input("data2text", "coherence", "x")


def test_scores_equal_the_hand_computation(t5_dir):
    from dlmeval.baselines.unieval import UniEvalScorer, bool_qa_input

    sc = UniEvalScorer(t5_dir, device="cpu", batch_size=2)
    texts = ["the cat sat .", "a dog ran to the house . it was big ."]
    doc = "the cat sat on the mat . the dog ran ."
    coh = sc.dimension_scores("summarization", "coherence", texts, [doc, doc])
    assert coh == pytest.approx(
        [_by_hand(t5_dir, bool_qa_input("summarization", "coherence", t, doc)) for t in texts], abs=1e-6
    )
    # consistency: the mean over the output's sentences
    con = sc.dimension_scores("summarization", "consistency", texts[1:], [doc])[0]
    sents = ["a dog ran to the house .", "it was big ."]
    want = sum(_by_hand(t5_dir, bool_qa_input("summarization", "consistency", s, doc)) for s in sents) / 2
    assert con == pytest.approx(want, abs=1e-6)
    assert 0 < con < 1 and coh[0] != coh[1]


def test_family_in_the_suite(tmp_path, data_root, t5_dir):
    from dataclasses import replace

    from dlmeval.baselines.unieval import UniEvalScorer, bool_qa_input
    from dlmeval.protocols.diffscore.meta_eval import (
        Suite,
        SuiteOptions,
        run_suite,
        scoring_frame,
    )

    opts = SuiteOptions(
        families=("unieval",),
        benchmarks=("BAGEL", "QAGS_XSUM", "gu-en"),
        limit=3,
        bootstrap=0,
        progress=False,
        data_dir=str(data_root),
        unieval_model=t5_dir,
        unieval_fact_model=t5_dir,
    )
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    frame = scoring_frame("BAGEL", str(data_root), limit=3)
    got = Suite(opts, store).scores("BAGEL", frame)
    sc = UniEvalScorer(t5_dir, device="cpu")
    r = frame.iloc[0]
    # UniEval's own rule (default): the tokenized text of its data files and the first reference only
    nat = _by_hand(t5_dir, bool_qa_input("data2text", "naturalness", r["candidate_raw"]))
    inf = _by_hand(
        t5_dir, bool_qa_input("data2text", "informativeness", r["candidate_raw"], r["targets_raw"][0])
    )
    assert len(set(r["targets_raw"])) > 1  # the first reference is a choice here
    assert got["unieval:naturalness"][0] == pytest.approx(nat, abs=1e-6)
    assert got["unieval:informativeness"][0] == pytest.approx(inf, abs=1e-6)
    assert got["unieval:overall"][0] == pytest.approx((nat + inf) / 2, abs=1e-6)
    # the other reading: the best of the references, on the detokenized text; another run
    other = replace(opts, unieval_refs="best", text_form="detok", benchmarks=("BAGEL",))
    run_suite(other, store)
    got_b = Suite(other, store).scores("BAGEL", frame)
    inf_b = max(
        _by_hand(t5_dir, bool_qa_input("data2text", "informativeness", r["candidate"], ref))
        for ref in r["targets"]
    )
    assert got_b["unieval:informativeness"][0] == pytest.approx(inf_b, abs=1e-6)
    assert (
        Suite(other, store).component("unieval").run.run_id
        != Suite(opts, store).component("unieval").run.run_id
    )
    assert sc.pos_id != sc.neg_id
    res = rep.results
    assert set(res.loc[res["benchmark"] == "QAGS_XSUM", "metric"]) == {"unieval:fact", "unieval:mapped"}
    assert "gu-en" not in set(res["benchmark"])  # no MT evaluator: no rows
    # the paper's other baselines that did not run are named, with what they need
    assert any(lab.startswith("BARTScore (absent: not run") for lab in rep.tables["d2t"].index)
    assert any(
        lab.startswith("QuestEval (absent: not run; add it with --metrics ... questeval")
        for lab in rep.tables["d2t"].index
    )
    assert not any(lab.startswith("UniEval (absent") for lab in rep.tables["d2t"].index)  # it ran


def test_unieval_refs_rule_is_checked():
    from dlmeval.errors import InputError
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    with pytest.raises(InputError, match="--unieval-refs 'all': choose one of first, best"):
        SuiteOptions(families=("unieval",), unieval_refs="all").check()


def test_missing_checkpoint_is_one_line(tmp_path, data_root):
    from dlmeval.errors import ModelNotFoundError
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions

    opts = SuiteOptions(
        families=("unieval",), benchmarks=("BAGEL",), limit=2, progress=False, data_dir=str(data_root)
    )
    with pytest.raises(
        ModelNotFoundError, match=r"MingZhong/unieval-sum is not on this machine; pass --unieval-model"
    ):
        SuiteInputs(opts).prepare()
