"""ARC-Challenge: four-option science questions, answered by a generated letter (the paper) or by likelihood.

Generation (the paper, App. D): the user message lists the options as ``A) ...`` and asks for just the letter;
:func:`extract_choice` reads the letter from the generation.

Likelihood: each option is scored as the continuation of ``Question: {question}\\nAnswer:`` (the query format of
the data file and of lm-evaluation-harness), with a ``ScoreChoices`` callable (a CausalLM's
:func:`~dlmeval.tasks.base.causal_choice_scorer`, or a diffusion LM's conditional DiffScore); the highest score
wins. Perturbations apply to the context only: the options are what is scored, so they stay clean.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from dlmeval.data.tasks import ARCItem, load_arc_challenge
from dlmeval.errors import InputError
from dlmeval.robustness.perturb import Perturbation
from dlmeval.tasks.base import (
    ItemResult,
    Prompt,
    ScoreChoices,
    Task,
    UserMessage,
    argmax_choice,
    fill,
    perturb_prompt,
    score_requests,
)
from dlmeval.tasks.triviaqa import normalize_answer

LETTERS = "ABCD"

# The robustness paper, App. D (two-space indent before each option as printed there).
ARC_TEMPLATE = (
    "Answer the following multiple choice science question. Reply with just the letter (A, B, C, or D)."
    "\n\nQuestion: {question}\nChoices:\n  A) {A}\n  B) {B}\n  C) {C}\n  D) {D}\nAnswer:"
)
ARC_LIKELIHOOD_TEMPLATE = "Question: {question}\nAnswer:"


def arc_question(item: ARCItem) -> str:
    """The raw question: the file's ``query`` without its ``Question: `` prefix."""
    q = item.query
    return q[len("Question:") :].strip() if q.startswith("Question:") else q.strip()


def _is_article(text: str, end: int) -> bool:
    """An ``A`` that starts an English noun phrase (``A plant ...``), not an option letter."""
    return re.match(r"\s+[a-z]", text[end:]) is not None


def extract_choice(text: str, choices: Sequence[str] | None = None, letters: str = LETTERS) -> int | None:
    """The option a generation picks, as an index into ``letters``; None if it names none unambiguously.

    Rules, first hit wins: (1) an explicit statement, the last one (``The answer is (B)``, ``Answer: C``,
    ``correct option is D``); (2) a letter opening the text (``B``, ``(B)``, ``B) ...``, ``**B**``); (3) the
    last bracketed or closing-parenthesis letter (``(C)``, ``C)``); (4) exactly one option text quoted in the
    generation (needs ``choices``); (5) exactly one distinct standalone capital option letter. Only capital
    letters count, and an ``A`` followed by a lower-case word is read as the article.
    """
    L = f"[{re.escape(letters)}]"
    t = text.strip()
    stated = [
        m
        for m in re.finditer(
            rf"(?i:answer|option|choice)(?:\s+(?i:is))?\s*[:=\-]?\s*(?:\*\*|[\(\[]|\s)*({L})(?![\w'])", t
        )
        if not (m.group(1) == "A" and _is_article(t, m.end(1)))
    ]
    if stated:
        return letters.index(stated[-1].group(1))
    m = re.match(rf"(?:\*\*|[\(\[\s])*({L})(?![\w'])", t)
    if m and not (m.group(1) == "A" and _is_article(t, m.end(1))):
        return letters.index(m.group(1))
    marked = re.findall(rf"[\(\[]({L})[\)\]]|(?<![\w'])({L})\)", t)
    if marked:
        a, b = marked[-1]
        return letters.index(a or b)
    if choices:
        nt = f" {normalize_answer(t)} "
        hits = {i for i, c in enumerate(choices) if normalize_answer(c) and f" {normalize_answer(c)} " in nt}
        if len(hits) == 1:
            return hits.pop()
    alone = {
        m.group(1)
        for m in re.finditer(rf"(?<![\w'])({L})(?![\w'])", t)
        if not (m.group(1) == "A" and _is_article(t, m.end(1)))
    }
    if len(alone) == 1:
        return letters.index(alone.pop())
    return None


class ARCChallenge(Task):
    name = "arc_challenge"
    template = ARC_TEMPLATE
    likelihood_template = ARC_LIKELIHOOD_TEMPLATE
    multiple_choice = True
    data_kind = "arc_challenge"
    chance = 0.25
    max_new_tokens = 128
    stop = ("\nQuestion:",)

    def load(self, data_dir=None, *, path=None) -> list[ARCItem]:
        return load_arc_challenge(data_dir, path=path)

    def prompt(self, item: ARCItem) -> Prompt:
        if len(item.choices) != len(LETTERS):
            raise InputError(f"{item.item_id}: the ARC template needs 4 options, found {len(item.choices)}")
        return fill(self.template, question=arc_question(item), **dict(zip(LETTERS, item.choices)))

    def extract(self, output: str, item: ARCItem | None = None) -> int | None:
        return extract_choice(output, item.choices if item is not None else None)

    def gold(self, item: ARCItem) -> int:
        return item.gold

    def is_correct(self, item: ARCItem, output: str) -> bool:
        return self.extract(output, item) == item.gold

    def attack_target(self, item: ARCItem, *, chat: bool) -> str:
        return self._spaced(LETTERS[int(item.gold)], chat)  # the gold letter

    # ------------------------------------------------------------------------------------------ likelihood
    def likelihood_prompt(self, item: ARCItem) -> Prompt:
        return fill(self.likelihood_template, question=arc_question(item))

    def choice_request(
        self,
        item: ARCItem,
        perturbation: Perturbation | None = None,
        *,
        seed: int = 0,
        scope: str = "prompt",
        chat: bool = False,
    ) -> tuple[UserMessage, list[str]]:
        """The (perturbed) context and the continuations to score: ``" " + option`` after plain text, the bare
        option after a chat template's assistant header (``chat=True``)."""
        msg = perturb_prompt(
            self.likelihood_prompt(item), perturbation, seed=seed, item_id=item.item_id, scope=scope
        )
        sep = "" if chat else " "
        return msg, [sep + c for c in item.choices]


ARC_CHALLENGE = ARCChallenge()


def evaluate_choices(
    items: Sequence[ARCItem],
    score_choices: ScoreChoices,
    *,
    perturbation: Perturbation | None = None,
    seed: int = 0,
    scope: str = "prompt",
    wrap: Callable[[str], str] | None = None,
    task: ARCChallenge = ARC_CHALLENGE,
) -> list[ItemResult]:
    """Likelihood evaluation: the argmax of ``score_choices(context, continuations)`` per item (every item's
    request in one call of a :class:`~dlmeval.tasks.base.ChoiceScorer`).

    ``wrap`` (e.g. ``chat_formatter(model)``) turns the user message into the model's prompt; with a wrap the
    continuations carry no leading space.
    """
    reqs = [
        task.choice_request(it, perturbation, seed=seed, scope=scope, chat=wrap is not None) for it in items
    ]
    contexts = [wrap(msg.text) if wrap is not None else msg.text for msg, _ in reqs]
    all_scores = score_requests(score_choices, [(c, conts) for c, (_, conts) in zip(contexts, reqs)])
    out = []
    for it, (msg, conts), context, got in zip(items, reqs, contexts, all_scores):
        scores = [float(s) for s in got]
        if len(scores) != len(conts):
            raise InputError(f"score_choices returned {len(scores)} scores for {len(conts)} choices")
        pred = argmax_choice(scores)
        pr = msg.perturbation
        out.append(
            ItemResult(
                it.item_id,
                task.name,
                msg.condition,
                seed,
                scope,
                context,
                "",
                pred,
                it.gold,
                pred == it.gold,
                pr.changed if pr else 0,
                pr.eligible if pr else 0,
                tuple(scores),
            )
        )
    return out


def letter(index: Any) -> str | None:
    """``0 -> "A"``; None for None."""
    return None if index is None else LETTERS[int(index)]
