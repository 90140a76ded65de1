"""dlmeval.protocols.diffscore.meta_eval.options: the checks of a run (``check``) and of ``--plan``
(``check_plan``) refuse a text or reference rule outside the allowed values, in one line naming them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.meta_eval.options import SuiteOptions

BAD = [
    ({"rouge_impl": "rouge"}, "--rouge-impl 'rouge': choose one of rouge-score, rouge155"),
    ({"ref_agg": "median"}, "--ref-agg 'median': choose one of mean, max"),
    ({"text_form": "raw"}, "--text-form 'raw': choose one of bartscore, detok"),
    ({"rouge_wordnet": "3.0", "rouge_impl": "rouge155"}, "--rouge-wordnet '3.0': choose one of empty, 2.0"),
    ({"rouge_wordnet": "2.0"}, "--rouge-wordnet applies to --rouge-impl rouge155 only"),
]


@pytest.mark.parametrize("changed, message", BAD, ids=[m.split()[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_plan_and_run_checks_refuse_a_bad_text_or_reference_rule(changed, message):
    opts = replace(SuiteOptions(benchmarks=("SummEval",)), **changed)
    for check in (opts.check_plan, opts.check):
        with pytest.raises(InputError) as e:
            check()
        assert str(e.value).startswith(message) and "\n" not in str(e.value)
    SuiteOptions(
        benchmarks=("SummEval",), rouge_impl="rouge155", ref_agg="max", text_form="detok"
    ).check_plan()


def test_meta_eval_plan_refuses_a_bad_rule_in_one_line(capsys):
    args = ["meta-eval", "--plan", "--benchmarks", "SummEval"]
    for flag, value, allowed in (
        ("--rouge-impl", "bogus", "rouge-score, rouge155"),
        ("--ref-agg", "median", "mean, max"),
        ("--text-form", "raw", "bartscore, detok"),
    ):
        assert main([*args, flag, value]) == 2
        err = capsys.readouterr().err.strip()
        assert err.splitlines() == [err] and f"{flag} {value!r}: choose one of {allowed}" in err
