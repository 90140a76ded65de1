"""Downstream tasks shared by the robustness and Care pillars: TriviaQA, GSM8K, ARC-Challenge.

Tasks (singletons; ``get_task(name)``, ``TASKS``)
    ``TRIVIAQA``       open answer; correct if a normalised alias is a whole-word substring of the output
    ``GSM8K_TASK``     open answer; the final number (``#### N``, ``\\boxed{N}``, "the answer is N", last number)
    ``ARC_CHALLENGE``  four options; a generated letter (the paper) or the likelihood argmax over options
    ``HELLASWAG``, ``BBH_TASK``  the Care paper's log-likelihood checks (lm-eval formats; a source is required)
    ``WEBTEXT_CLOZE``  four continuations of a web-text passage (``cloze``): above chance for the embedded models

Every task
    ``task.items(data_dir=None, path=None, limit=None, source=None)``  items from :mod:`dlmeval.data.tasks`
                                                         (with ``item_id``), or from a hub id / local dataset
                                                         (``source``: :class:`dlmeval.data.rows.DataSource`)
    ``task.load_source(source, ...) -> (items, identity)``  the same and what a run configuration records
    ``task.prompt(item) -> Prompt(text, question=(start, end))``  the paper's user message (App. D) and the
                                                         question's span in it
    ``task.user_message(item, perturbation=None, seed=0, scope="prompt"|"question") -> UserMessage``
                                                         the whole message perturbed (the paper's sweep) or only
                                                         the question (its App. H ablation)
    ``task.extract(output, item) / task.is_correct(item, output) / task.gold(item)``
    ``task.chance`` (RDI guard null), ``task.max_new_tokens`` (128, GSM8K 512), ``task.stop``
    ``task.attack_target(item, chat=)`` (D-GCG's target), ``task.multiple_choice`` / ``task.choice_request(...)``,
    ``task.options`` / ``task.configured(**options)`` (TriviaQA: ``match = "substring" | "word"``)
A new task: a ``Task`` subclass in its own module and ``register_task(MyTask())``.

Running (model-agnostic: a model enters as a callable)
    ``chat_formatter(model) -> (user -> prompt)``       the chat template when the model has one, else identity
    ``evaluate_generation(task, items, generate, perturbation=None, seed=0, scope="prompt", wrap=None)``
        ``generate(prompts, item_ids) -> outputs``; returns ``ItemResult`` per item
    ``evaluate_choices(items, score_choices, perturbation=None, seed=0, scope="prompt", wrap=None)`` (ARC)
        ``score_choices(context, continuations) -> list[float]``
    ``causal_choice_scorer(model, aggregate="mean"|"sum")``  a ``ChoiceScorer`` from ``choice_logprobs``
    ``ChoiceScorer(many)``  a ``score_choices`` that also scores many ``(context, choices)`` requests at once
    ``causal_choice_logprobs(model, context, choices) -> [ChoiceLogprob(total, mean, n_tokens)]``
    ``causal_choice_logprobs_many(model, requests) -> [[ChoiceLogprob, ...], ...]``  batched across requests

Extractors: ``extract_gsm8k_answer(text)``, ``extract_choice(text, choices=None)``, ``normalize_answer(text)``,
``alias_match(prediction, aliases)``.
"""

from dlmeval.errors import InputError
from dlmeval.registry import Registry
from dlmeval.tasks.arc import (
    ARC_CHALLENGE,
    ARC_LIKELIHOOD_TEMPLATE,
    ARC_TEMPLATE,
    ARCChallenge,
    arc_question,
    evaluate_choices,
    extract_choice,
)
from dlmeval.tasks.base import (
    ChoiceLogprob,
    ChoiceScorer,
    ItemResult,
    Prompt,
    Task,
    UserMessage,
    argmax_choice,
    causal_choice_logprobs,
    causal_choice_logprobs_many,
    causal_choice_scorer,
    chat_formatter,
    evaluate_generation,
    fill,
    perturb_prompt,
)
from dlmeval.tasks.choice import BBH, BBH_TASK, HELLASWAG, HellaSwag
from dlmeval.tasks.cloze import WEBTEXT_CLOZE, WebTextCloze
from dlmeval.tasks.gsm8k import GSM8K, GSM8K_TASK, GSM8K_TEMPLATE, extract_gsm8k_answer
from dlmeval.tasks.triviaqa import TRIVIAQA, TRIVIAQA_TEMPLATE, TriviaQA, alias_match, normalize_answer

TASKS: Registry[Task] = Registry("task")


def register_task(task: Task, *aliases: str) -> Task:
    """Make ``task`` (an instance of a :class:`Task` subclass) available by its ``name`` (and ``aliases``) to
    :func:`get_task` and so to the protocols' specs; returns it. A name taken by another task is refused."""
    if not isinstance(task, Task) or not getattr(task, "name", None):
        raise TypeError("register_task takes a Task instance with a name")
    if task.name in TASKS and TASKS[task.name] is not task:
        raise InputError(f"a task named {task.name!r} is registered already")
    return TASKS.add(task.name, task, aliases=aliases)


register_task(TRIVIAQA, "trivia", "trivia_qa")
register_task(GSM8K_TASK)
register_task(ARC_CHALLENGE, "arc", "arc-challenge")
register_task(HELLASWAG)
register_task(BBH_TASK)
register_task(WEBTEXT_CLOZE, "cloze")


def get_task(name: str) -> Task:
    return TASKS.get(name)


__all__ = [
    "ARCChallenge",
    "BBH",
    "BBH_TASK",
    "HELLASWAG",
    "HellaSwag",
    "ARC_CHALLENGE",
    "ARC_LIKELIHOOD_TEMPLATE",
    "ARC_TEMPLATE",
    "ChoiceLogprob",
    "GSM8K",
    "GSM8K_TASK",
    "GSM8K_TEMPLATE",
    "ItemResult",
    "Prompt",
    "TASKS",
    "TRIVIAQA",
    "TRIVIAQA_TEMPLATE",
    "Task",
    "TriviaQA",
    "UserMessage",
    "WEBTEXT_CLOZE",
    "WebTextCloze",
    "alias_match",
    "arc_question",
    "argmax_choice",
    "causal_choice_logprobs",
    "causal_choice_logprobs_many",
    "ChoiceScorer",
    "causal_choice_scorer",
    "chat_formatter",
    "evaluate_choices",
    "evaluate_generation",
    "extract_choice",
    "extract_gsm8k_answer",
    "fill",
    "get_task",
    "register_task",
    "normalize_answer",
    "perturb_prompt",
]
