"""ROUGE-1.5.5 (the Perl script) with BARTScore's options: hand-counted values, BARTScore's sentence split, the
summary-level ROUGE-L, one Perl run split over processes without changing a number, and the clear errors."""

from __future__ import annotations

import pytest

from dlmeval.baselines import rouge155 as R
from dlmeval.errors import InputError

needs_perl = pytest.mark.skipif(R.rouge155_unavailable() is not None, reason=str(R.rouge155_unavailable()))


def test_split_sentences_is_bartscores_sent_no_tag():
    # " . " splits; each piece gets " ." back; the line's newline leaves one more, token-less sentence " ."
    assert R.split_sentences("a b . c d .") == ["a b .", "c d .", " ."]
    assert R.split_sentences("no stop") == ["no stop", " ."]
    assert R.bartscore_text("The Cat 's") == "the cat 's"


@needs_perl
def test_hand_counted_scores_and_summary_level_lcs():
    got = R.rouge155_pairs(
        [
            ("the cat sat on the mat .", "the cat was on the mat ."),
            # two sentences against one: ROUGE-L is the union LCS over the summary's sentences (summary level)
            ("on the mat . the cat sat .", "the cat sat on the mat ."),
        ]
    )
    r1, r2, rl = (got[0][k] for k in ("rouge1", "rouge2", "rougeL"))
    assert r1 == (0.83333, 0.83333, 0.83333)  # 5 of 6 unigrams (the x2, cat, on, mat)
    assert r2 == (0.6, 0.6, 0.6)  # 3 of 5 bigrams (the cat, on the, the mat)
    assert rl == (0.83333, 0.83333, 0.83333)  # LCS "the cat on the mat"
    assert got[1]["rouge1"] == (1.0, 1.0, 1.0)
    assert got[1]["rouge2"][0] == 0.8  # "sat on" crosses the sentence boundary of the summary
    assert got[1]["rougeL"][0] == 1.0  # union LCS: "the cat sat" + "on the mat"


@needs_perl
def test_processes_change_no_number():
    pairs = [(f"w{i} shared words here .", f"shared words w{i % 3} there .") for i in range(120)]
    assert R.rouge155_pairs(pairs, processes=1) == R.rouge155_pairs(pairs, processes=3)
    assert R.rouge155_pairs([]) == []


@needs_perl
def test_stemming_without_exception_list():
    # -m: Porter stemming ("cats" -> "cat"); the exception list is empty, as in BARTScore's runs ("mice" stays)
    got = R.rouge155_pairs([("cats running .", "cat run ."), ("mice .", "mouse .")])
    assert got[0]["rouge1"][2] == 1.0
    assert got[1]["rouge1"][2] == 0.0


def test_missing_perl_module_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(R.shutil, "which", lambda name: None)
    assert "no perl" in R.rouge155_unavailable()
    R._data_dir.cache_clear()
    try:
        with pytest.raises(InputError, match="rouge155 cannot run: no perl"):
            R.rouge155_pairs([("a .", "a .")])
    finally:
        R._data_dir.cache_clear()


@needs_perl
def test_wordnet_2_0_exception_lists_one_flag_away():
    # --rouge-wordnet 2.0: ROUGE-1.5.5's own set-up (the 2.0 lists built in): a listed word is replaced by its
    # lemma and not stemmed ("went" -> "go", which the stemmer leaves as it is), an unlisted one is Porter-stemmed
    # ("mouse" -> "mous", so the lemma "mouse" of "mice" matches nothing)
    pairs = [("cats running .", "cat run ."), ("went .", "go ."), ("mice .", "mouse .")]
    got = R.rouge155_pairs(pairs, exceptions="2.0")
    assert [g["rouge1"][2] for g in got] == [1.0, 1.0, 0.0]
    assert [g["rouge1"][2] for g in R.rouge155_pairs(pairs)] == [1.0, 0.0, 0.0]  # the default: empty
    with pytest.raises(InputError, match="--rouge-wordnet '3.0': choose one of empty, 2.0"):
        R.rouge155_pairs(pairs, exceptions="3.0")


def test_wordnet_lists_need_rouge155():
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    with pytest.raises(InputError, match="--rouge-wordnet applies to --rouge-impl rouge155 only"):
        SuiteOptions(families=("lexical",), rouge_wordnet="2.0").check()


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [("rouge_impl", "perl", "--rouge-impl"), ("protocol", "bart", "--protocol"), ("ref_agg", "median", "--ref-agg"),
     ("text_form", "raw", "--text-form"), ("detokenizer", "perl", "--detokenizer"),
     ("rouge_wordnet", "3.0", "--rouge-wordnet")],
)  # fmt: skip
def test_bad_suite_switches_are_rejected_by_name(field, value, flag):
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions

    with pytest.raises(InputError, match=f"{flag} '{value}': choose one of"):
        SuiteOptions(families=("lexical",), **{field: value}).check()
