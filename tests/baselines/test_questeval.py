"""QuestEval (published method on local T5s): answer extraction, SQuAD F1, P/R/F checked by hand on a tiny random
T5, its family in the suite, and the one-line error when its checkpoints are absent."""

import pytest
import torch

from dlmeval.store import RunStore


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    from dlmeval.baselines.questeval import tiny_questeval

    return str(tiny_questeval(tmp_path_factory.mktemp("tiny-qe-t5"), seed=0))


def test_answer_candidates_entities_then_chunks():
    from dlmeval.baselines.questeval import extract_answers

    text = "The cat sat in Paris. In 1990 the dog went to New York City with John Smith, and ate food."
    assert extract_answers(text) == [
        "Paris", "1990", "New York City", "John Smith",  # entities (sentence-initial "The" / "In" dropped)
        "cat sat", "Paris", "1990", "dog went", "New York City", "John Smith", "ate food",  # noun-chunk runs
    ]  # fmt: skip
    assert extract_answers("The cat sat. The dog ran.", limit_sent=1) == [
        "cat sat"
    ]  # the first sentence only
    assert extract_answers("") == []


def test_squad_f1_by_hand():
    from dlmeval.baselines.questeval import squad_f1

    assert squad_f1("The cat sat", "a cat") == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))  # p=1/2, r=1
    assert squad_f1("Paris!", "paris") == 1.0
    assert squad_f1("", "") == 1.0 and squad_f1("the", "dog") == 0.0  # "the" normalises to nothing
    assert squad_f1("dog dog cat", "dog") == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))


def _generate(t5_dir, text, first_id=None):
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(t5_dir)
    m = T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
    enc = tok([text], return_tensors="pt")
    with torch.no_grad():
        out = m.generate(
            **enc, do_sample=False, num_beams=1, output_scores=True, return_dict_in_generate=True
        )
    got = tok.decode(out.sequences[0], skip_special_tokens=True, clean_up_tokenization_spaces=True)
    p = None if first_id is None else float(torch.softmax(out.scores[0][0], -1)[first_id])
    return got, p


def _side(t5_dir, asked_text, on_text):
    """Mean of [F1 ...] + [answerability ...] of questions generated from asked_text, answered on on_text."""
    from dlmeval.baselines.questeval import extract_answers, squad_f1

    un = 3  # "unanswerable" in the tiny vocabulary
    f1s, ans = [], []
    for a in extract_answers(asked_text):
        q, _ = _generate(t5_dir, f"sv1 </s> {a} </s> {asked_text}")
        pred, p_un = _generate(t5_dir, f"{q} </s> {on_text}", un)
        f1s.append(squad_f1(pred, a))
        ans.append(1 - p_un)
    vals = f1s + ans
    return sum(vals) / len(vals), f1s


def test_scores_equal_the_hand_computation(t5_dir):
    from dlmeval.baselines.questeval import QuestEvalScorer

    sc = QuestEvalScorer(t5_dir, t5_dir, device="cpu", batch_size=3)
    assert sc.unanswerable_id == 3
    hyp = "The big dog went to London ."
    src = "In 1990 the big dog went to London . The cat sat in Paris ."
    got = sc.score([hyp, hyp, ""], [src, "four", src])
    p, pf1 = _side(t5_dir, hyp, src)  # precision: the hypothesis's questions answered on the source
    r, rf1 = _side(t5_dir, src, hyp)  # recall: the source's questions answered on the hypothesis
    assert got[0]["precision"] == pytest.approx(p, abs=1e-6)
    assert got[0]["recall"] == pytest.approx(r, abs=1e-6)
    assert got[0]["f"] == pytest.approx((p + r) / 2, abs=1e-6)
    assert p != r and 0 < got[0]["f"] < 1
    assert got[2] == {"precision": 0.0, "recall": 0.0, "f": 0.0}  # an empty text scores 0
    # "four" has no answer candidate (a stop word): no question, so recall is 0 by QuestEval's rule
    assert got[1]["recall"] == 0.0 and got[1]["precision"] > 0
    # without answerability only the F1s count
    sc_f1 = QuestEvalScorer(t5_dir, t5_dir, device="cpu", answerability=False)
    assert sc_f1.score([hyp], [src])[0]["precision"] == pytest.approx(sum(pf1) / len(pf1), abs=1e-6)


def test_family_in_the_suite(tmp_path, data_root, t5_dir):
    from dlmeval.baselines.questeval import QuestEvalScorer
    from dlmeval.protocols.diffscore.meta_eval import (
        Suite,
        SuiteOptions,
        run_suite,
        scoring_frame,
    )

    opts = SuiteOptions(
        families=("questeval",),
        benchmarks=("BAGEL", "QAGS_XSUM"),
        limit=2,
        bootstrap=0,
        progress=False,
        data_dir=str(data_root),
        questeval_qg_model=t5_dir,
        questeval_qa_model=t5_dir,
    )
    store = RunStore(tmp_path / "s.sqlite")
    rep = run_suite(opts, store)
    res = rep.results
    assert set(res["metric"]) == {"questeval", "questeval:precision", "questeval:recall"}
    assert set(res["benchmark"]) == {"BAGEL", "QAGS_XSUM"}
    # D2T: the best reference by F; qg_prefix None (the checkpoint is not QuestEval's own QG model)
    frame = scoring_frame("BAGEL", str(data_root), limit=2)
    got = Suite(opts, store).scores("BAGEL", frame)
    sc = QuestEvalScorer(t5_dir, t5_dir, qg_prefix=None, device="cpu")
    r = frame.iloc[0]
    refs = list(dict.fromkeys(r["targets"]))
    best = max(sc.score([r["candidate"]] * len(refs), refs), key=lambda d: d["f"])
    assert got["questeval"][0] == pytest.approx(best["f"], abs=1e-6)
    assert got["questeval:precision"][0] == pytest.approx(best["precision"], abs=1e-6)
    # SUM: compared with the source
    qf = scoring_frame("QAGS_XSUM", str(data_root), limit=2)
    qgot = Suite(opts, store).scores("QAGS_XSUM", qf)
    want = sc.score([qf.iloc[1]["candidate"]], [qf.iloc[1]["source"]])[0]
    assert qgot["questeval:recall"][1] == pytest.approx(want["recall"], abs=1e-6)
    labels = set(rep.tables["d2t"].index)
    assert "QuestEval F" in labels and not any(lab.startswith("QuestEval (absent") for lab in labels)


def test_missing_checkpoint_is_one_line(data_root):
    from dlmeval.errors import ModelNotFoundError
    from dlmeval.protocols.diffscore.meta_eval import SuiteInputs, SuiteOptions

    opts = SuiteOptions(
        families=("questeval",), benchmarks=("BAGEL",), limit=2, progress=False, data_dir=str(data_root)
    )
    with pytest.raises(
        ModelNotFoundError,
        match=r"^QuestEval: ThomasNLG/t5-qg_squad1-en is not on this machine; pass --questeval-qg-model DIR "
        r"\(a local copy\), or --allow-download$",
    ):
        SuiteInputs(opts).prepare()
