"""Tasks: the paper's prompt templates, perturbation scope, answer extraction and judging, chat wrapping, and
likelihood scoring of choices (tiny causal model built in code)."""

from __future__ import annotations

import math

import pytest

from dlmeval.data.tasks import ARCItem, GSM8KItem, TriviaQAItem
from dlmeval.errors import InputError
from dlmeval.robustness.perturb import Perturbation
from dlmeval.tasks import (
    ARC_CHALLENGE,
    GSM8K_TASK,
    TRIVIAQA,
    ChoiceScorer,
    alias_match,
    argmax_choice,
    causal_choice_logprobs,
    causal_choice_logprobs_many,
    causal_choice_scorer,
    chat_formatter,
    evaluate_choices,
    evaluate_generation,
    extract_choice,
    extract_gsm8k_answer,
    fill,
    get_task,
    normalize_answer,
)

ARC_ITEM = ARCItem(
    "arc_challenge/x",
    "Question: Which gas do plants take in?",
    ("oxygen", "carbon dioxide", "nitrogen", "helium"),
    1,
)
GSM_ITEM = GSM8KItem(
    "gsm8k/x", "Tom has 3 apples and buys 4 more. How many apples does he have?", "3+4=7\n#### 7", "7"
)
TQA_ITEM = TriviaQAItem("triviaqa/x", "What star sign is Jamie Lee Curtis?", ("Scorpio", "Skorpio"))


# ---------------------------------------------------------------------------------------------------- templates


def test_prompts_are_the_papers_templates_with_the_question_span():
    p = TRIVIAQA.prompt(TQA_ITEM)
    assert p.text == (
        "Answer the following question concisely in a few words.\n\n"
        "Question: What star sign is Jamie Lee Curtis?\nAnswer:"
    )
    assert p.text[slice(*p.question)] == TQA_ITEM.question
    g = GSM8K_TASK.prompt(GSM_ITEM)
    assert g.text == (
        "Solve the following math problem step by step. At the end, write the final answer as a number after "
        "'####'.\n\nProblem: Tom has 3 apples and buys 4 more. How many apples does he have?\nSolution:"
    )
    assert g.text[slice(*g.question)] == GSM_ITEM.question
    a = ARC_CHALLENGE.prompt(ARC_ITEM)
    assert a.text == (
        "Answer the following multiple choice science question. Reply with just the letter (A, B, C, or D).\n\n"
        "Question: Which gas do plants take in?\nChoices:\n  A) oxygen\n  B) carbon dioxide\n  C) nitrogen\n"
        "  D) helium\nAnswer:"
    )
    assert a.text[slice(*a.question)] == "Which gas do plants take in?"
    assert ARC_CHALLENGE.likelihood_prompt(ARC_ITEM).text == "Question: Which gas do plants take in?\nAnswer:"


def test_fill_finds_the_question_even_when_it_repeats_template_text():
    p = fill("Q: {question}\nA: {question2}", question="A: x", question2="A: x")
    assert p.text == "Q: A: x\nA: A: x" and p.question == (3, 7)
    with pytest.raises(InputError, match="exactly once"):
        fill("no field", question="x")


def test_real_items_build_prompts(data_root):
    for task, gold in ((TRIVIAQA, ["David Seville"]), (GSM8K_TASK, "18"), (ARC_CHALLENGE, 2)):
        [item] = task.items(data_root, limit=1)
        p = task.prompt(item)
        assert task.gold(item) == gold
        assert p.text[slice(*p.question)] in p.text and len(p.text) > len(p.text[slice(*p.question)])
    [arc] = ARC_CHALLENGE.items(data_root, limit=1)
    assert ARC_CHALLENGE.prompt(arc).text.count("Question:") == 1  # the file's "Question: " prefix is dropped
    with pytest.raises(InputError, match="limit"):
        TRIVIAQA.items(data_root, limit=0)


def test_perturbation_scope_whole_prompt_or_question_only():
    p = Perturbation.of("keyboard", 0.3)
    whole = GSM8K_TASK.user_message(GSM_ITEM, p, seed=1, scope="prompt")
    only_q = GSM8K_TASK.user_message(GSM_ITEM, p, seed=1, scope="question")
    clean = GSM8K_TASK.prompt(GSM_ITEM)
    s, e = clean.question
    assert whole.condition == only_q.condition == "char.keyboard@0.30"
    assert whole.text[:s] != clean.text[:s]  # the instruction is perturbed too
    assert only_q.text[:s] == clean.text[:s] and only_q.text.endswith("\nSolution:")
    assert only_q.text[s : len(only_q.text) - len("\nSolution:")] != GSM_ITEM.question
    assert only_q.perturbation.eligible == sum(c.isascii() and c.isalpha() for c in GSM_ITEM.question)
    assert GSM8K_TASK.user_message(GSM_ITEM).text == clean.text
    assert GSM8K_TASK.user_message(GSM_ITEM, p, seed=1).text == whole.text  # deterministic
    with pytest.raises(InputError, match="scope"):
        GSM8K_TASK.user_message(GSM_ITEM, p, scope="answer")


# ---------------------------------------------------------------------------------------------------- judging


def test_triviaqa_normalisation_and_alias_matching():
    assert normalize_answer("  The  Sunset Blvd.! ") == "sunset blvd"
    assert normalize_answer("U.S._Army") == "us army"
    assert normalize_answer("\u201cAn Apple\u201d") == "apple"
    assert alias_match("It's Scorpio.", ("Scorpio",))
    assert alias_match("scorpio", ("Skorpio", "Scorpio (disambiguation)", "SCORPIO"))
    assert not alias_match("Scorpion", ("Scorpio",))  # whole words only
    assert not alias_match("In 1990", ("9",))
    assert not alias_match("The", ("The", "A"))  # aliases normalising to nothing never match
    assert TRIVIAQA.is_correct(TQA_ITEM, "Jamie Lee Curtis is a Scorpio.")
    assert not TRIVIAQA.is_correct(TQA_ITEM, "Virgo")


@pytest.mark.parametrize(
    "text, want",
    [
        ("3 + 4 = 7\n#### 7", "7"),
        ("#### $1,234.50", "1234.5"),
        ("#### **42**", "42"),
        ("The answer is 42.", "42"),
        ("So the final answer is $1,234.50.", "1234.5"),
        ("Final Answer: -3", "-3"),
        ("answer = 18.00", "18"),
        ("Thus \\boxed{42} apples", "42"),
        ("$\\boxed{\\$1,000}$", "1000"),
        ("#### Step 1\nHe has 3 + 4 = 7 apples.\nThe answer is 7", "7"),  # a heading is not the answer
        ("He has 3 + 4 = 7 apples.", "7"),  # last number
        ("7 apples.\n#### 7\nProblem: 12 more", "7"),  # the first '#### N'
        ("I don't know.", None),
        ("", None),
    ],
)
def test_gsm8k_extractor(text, want):
    assert extract_gsm8k_answer(text) == want


def test_gsm8k_judging():
    assert GSM8K_TASK.is_correct(GSM_ITEM, "3 + 4 = 7.\n#### 7.00")
    assert not GSM8K_TASK.is_correct(GSM_ITEM, "#### 8")
    assert not GSM8K_TASK.is_correct(GSM_ITEM, "no idea")


@pytest.mark.parametrize(
    "text, want",
    [
        ("B", 1),
        (" (C)", 2),
        ("D) helium", 3),
        ("**A**", 0),
        ("The answer is (B).", 1),
        ("Answer: C", 2),
        ("The correct option is D.", 3),
        ("I think it is C because plants need it.", 2),
        ("A plant takes in carbon dioxide.", 1),  # the article A; the option text decides
        ("Answer: A plant needs water", None),
        ("Either C or D", None),  # two letters: ambiguous
        ("carbon dioxide", 1),
        ("nothing useful", None),
        ("b", None),  # lower case letters are not option letters
    ],
)
def test_arc_letter_extractor(text, want):
    assert extract_choice(text, ARC_ITEM.choices) == want


def test_arc_judging_by_generation():
    assert ARC_CHALLENGE.is_correct(ARC_ITEM, "B")
    assert not ARC_CHALLENGE.is_correct(ARC_ITEM, "A")
    assert ARC_CHALLENGE.extract("(D)") == 3


def test_get_task():
    assert (
        get_task("ARC") is ARC_CHALLENGE
        and get_task("gsm8k") is GSM8K_TASK
        and get_task("trivia") is TRIVIAQA
    )
    with pytest.raises(InputError, match="unknown task"):
        get_task("mmlu")


# ---------------------------------------------------------------------------------------------------- running


def test_evaluate_generation_with_a_callable_model():
    seen = {}

    def generate(prompts, item_ids):
        seen["ids"] = list(item_ids)
        seen["prompts"] = list(prompts)
        return ["#### 7", "The answer is 8"]

    items = [GSM_ITEM, GSM8KItem("gsm8k/y", "Two plus five?", "#### 7", "7")]
    res = evaluate_generation(
        GSM8K_TASK,
        items,
        generate,
        perturbation=Perturbation.of("repetition", 0.3),
        seed=2,
        wrap=lambda u: f"<u>{u}",
    )
    assert seen["ids"] == ["gsm8k/x", "gsm8k/y"] and all(p.startswith("<u>") for p in seen["prompts"])
    assert [r.correct for r in res] == [True, False] and [r.prediction for r in res] == ["7", "8"]
    assert res[0].condition == "word.repetition@0.30" and res[0].changed > 0 and res[0].seed == 2
    clean = evaluate_generation(GSM8K_TASK, items, generate)
    assert (
        clean[0].condition == "clean"
        and clean[0].changed == 0
        and clean[0].prompt == GSM8K_TASK.prompt(items[0]).text
    )
    with pytest.raises(InputError, match="outputs"):
        evaluate_generation(GSM8K_TASK, items, lambda p, i: ["x"])


def test_evaluate_choices_with_a_callable_scorer_keeps_options_clean():
    calls = []

    def score(context, conts):
        calls.append((context, list(conts)))
        return [float(len(c)) for c in conts]  # the longest option wins: " carbon dioxide"

    p = Perturbation.of("keyboard", 0.3)
    [r] = evaluate_choices([ARC_ITEM], score, perturbation=p, seed=0)
    assert r.prediction == 1 and r.correct and r.scores == (7.0, 15.0, 9.0, 7.0)
    ctx, conts = calls[0]
    assert conts == [" oxygen", " carbon dioxide", " nitrogen", " helium"]
    assert ctx != "Question: Which gas do plants take in?\nAnswer:" and r.condition == "char.keyboard@0.30"
    [r2] = evaluate_choices([ARC_ITEM], score, wrap=lambda u: "<chat>" + u)
    assert calls[-1][1][0] == "oxygen" and calls[-1][0].startswith(
        "<chat>Question:"
    )  # no space after a chat header
    with pytest.raises(InputError, match="scores"):
        evaluate_choices([ARC_ITEM], lambda c, x: [1.0])


def test_evaluate_choices_sends_every_item_to_a_batched_scorer_in_one_call(tiny_causal):
    calls = []

    def many(requests):
        calls.append(len(requests))
        return [[float(len(c)) for c in conts] for _, conts in requests]

    items = [ARC_ITEM, ARC_ITEM, ARC_ITEM]
    rs = evaluate_choices(items, ChoiceScorer(many), perturbation=Perturbation.of("keyboard", 0.3), seed=0)
    assert calls == [3] and [r.prediction for r in rs] == [1, 1, 1]
    assert ChoiceScorer(many)("ctx", ["ab", "c"]) == [2.0, 1.0] and calls[-1] == 1
    with pytest.raises(InputError, match="2 results for 3 requests"):
        evaluate_choices(items, ChoiceScorer(lambda reqs: [[1.0] * 4] * 2))
    # the causal scorer's batched path equals scoring one item at a time
    reqs = [("the cat", [" sat", " runs fast"]), ("a dog", [" b", " c d", " e"])]
    batched = causal_choice_logprobs_many(tiny_causal, reqs, batch_size=2)
    for (cx, ch), got in zip(reqs, batched):
        assert [g.total for g in got] == pytest.approx(
            [g.total for g in causal_choice_logprobs(tiny_causal, cx, ch)]
        )


def test_argmax_choice_ignores_nan_and_breaks_ties_low():
    assert argmax_choice([float("nan"), -2.0, -1.0, -1.0]) == 2
    assert argmax_choice([float("nan")] * 2) == 0


@pytest.fixture(scope="module")
def tiny_causal():
    from dlmeval.models.tiny import tiny_model

    return tiny_model("causal")


def test_causal_choice_scores_are_sums_and_means_of_continuation_logprobs(tiny_causal):
    ctx = "the cat"
    choices = [" sat on the mat", " runs", " is a big red dog"]
    lps = tiny_causal.continuation_logprobs([ctx] * 3, choices)
    got = causal_choice_logprobs(tiny_causal, ctx, choices)
    for g, lp in zip(got, lps):
        assert g.n_tokens == len(lp) and g.total == pytest.approx(float(lp.sum()))
        assert g.mean == pytest.approx(float(lp.sum()) / len(lp))
    assert [g.n_tokens for g in got] == [4, 1, 5]
    s_mean = causal_choice_scorer(tiny_causal)(ctx, choices)
    s_sum = causal_choice_scorer(tiny_causal, aggregate="sum")(ctx, choices)
    assert s_mean == pytest.approx([g.mean for g in got]) and s_sum == pytest.approx([g.total for g in got])
    with pytest.raises(InputError, match="aggregate"):
        causal_choice_scorer(tiny_causal, aggregate="max")
    [r] = evaluate_choices([ARC_ITEM], causal_choice_scorer(tiny_causal))
    assert r.prediction == argmax_choice(r.scores) and all(math.isfinite(s) for s in r.scores)


def test_chat_formatter_uses_the_template_only_when_there_is_one(tiny_causal):
    assert chat_formatter(tiny_causal)("hi") == "hi"  # no chat template: identity

    class FakeDLM:  # a DiffusionLM-like object: has_chat_template and a tokenizer, no .chat
        has_chat_template = True

        class tokenizer:  # noqa: N801
            @staticmethod
            def apply_chat_template(msgs, tokenize, add_generation_prompt):
                assert tokenize is False and add_generation_prompt is True
                return f"<user>{msgs[0]['content']}</user><assistant>"

    assert chat_formatter(FakeDLM())("hi") == "<user>hi</user><assistant>"

    tok = tiny_causal.tokenizer
    old = getattr(tok, "chat_template", None)
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant]"
    tiny_causal.has_chat_template = True
    try:
        assert chat_formatter(tiny_causal)("hi") == "[user] hi\n[assistant]"
    finally:
        tok.chat_template = old
        tiny_causal.has_chat_template = False
