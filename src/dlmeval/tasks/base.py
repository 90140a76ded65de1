"""What every downstream task shares: prompts with a known question span, perturbation scope, chat wrapping,
choice scoring callables, and per-item evaluation loops that do not know which model family answers.

A model enters only as a callable:

* ``Generate = (prompts, item_ids) -> outputs`` for generation (a CausalLM's ``generate``, a diffusion sampler);
* ``ScoreChoices = (context, choices) -> list[float]`` for likelihood scoring (higher = more likely):
  :func:`causal_choice_scorer` for a :class:`~dlmeval.models.causal.CausalLM`; for a diffusion LM, pass the
  DiffScore conditional estimator wrapped into this signature. A :class:`ChoiceScorer` also takes many
  ``(context, choices)`` requests in one call, so that the model batches across items.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from dlmeval.errors import InputError
from dlmeval.robustness.perturb import Perturbation, PerturbResult

Generate = Callable[[list[str], list[str]], list[str]]
ScoreChoices = Callable[[str, Sequence[str]], list[float]]
ScoreChoicesMany = Callable[[Sequence[tuple[str, Sequence[str]]]], list[list[float]]]
SCOPES = ("prompt", "question")


@dataclass(frozen=True, slots=True)
class Prompt:
    """A user message and where the raw question lies in it (``text[question[0]:question[1]]``)."""

    text: str
    question: tuple[int, int]

    def __post_init__(self) -> None:
        s, e = self.question
        if not 0 <= s <= e <= len(self.text):
            raise InputError(
                f"question span {self.question} lies outside a prompt of {len(self.text)} characters"
            )


def fill(template: str, question_field: str = "question", **fields: str) -> Prompt:
    """``template.format(**fields)`` and the span that ``fields[question_field]`` occupies in the result."""
    marker = "\x00QUESTION\x00"
    head, sep, tail = template.format(**{**fields, question_field: marker}).partition(marker)
    if not sep or marker in tail:
        raise InputError(f"template must contain {{{question_field}}} exactly once")
    q = fields[question_field]
    return Prompt(head + q + tail, (len(head), len(head) + len(q)))


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A (possibly perturbed) user message; ``perturbation`` is None on clean input."""

    text: str
    condition: str  # "clean" or the perturbation key
    perturbation: PerturbResult | None = None


def perturb_prompt(
    prompt: Prompt,
    perturbation: Perturbation | None,
    *,
    seed: int,
    item_id: str,
    scope: str = "prompt",
) -> UserMessage:
    """Apply ``perturbation`` to the whole user message (``scope="prompt"``, the paper's main sweep) or to the
    question only (``scope="question"``, its App. H ablation)."""
    if scope not in SCOPES:
        raise InputError(f"perturbation scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if perturbation is None:
        return UserMessage(prompt.text, "clean")
    if scope == "prompt":
        res = perturbation.perturb(prompt.text, seed, item_id)
    else:
        res = perturbation.perturb_span(prompt.text, *prompt.question, seed, item_id)
    return UserMessage(res.text, perturbation.key, res)


def chat_formatter(model: Any) -> Callable[[str], str]:
    """``user text -> prompt text`` through the model's chat template (a generation prompt for the assistant
    turn), or the identity when the model has none. Works for a CausalLM (``model.chat``) and a DiffusionLM
    (``model.has_chat_template`` and its tokenizer)."""
    chat = getattr(model, "chat", None)
    if callable(chat):
        return chat
    if not getattr(model, "has_chat_template", False):
        return lambda user: user
    tok = model.tokenizer
    extra = dict(getattr(model, "chat_kwargs", {}) or {})  # the family's template variables (enable_thinking)

    def apply(user: str) -> str:
        return tok.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True, **extra
        )

    return apply


# ---------------------------------------------------------------------------------------------------- tasks
class Task(ABC):
    """A benchmark: load items, build the paper's user message, extract and judge answers.

    Items come from :mod:`dlmeval.data.tasks` (frozen dataclasses with ``item_id``).
    """

    name: ClassVar[str]
    template: ClassVar[str]
    chance: ClassVar[float]  # accuracy of guessing (the RDI guard's null)
    max_new_tokens: ClassVar[int]  # the paper's generation budget (App. E, Table 6)
    stop: ClassVar[tuple[str, ...]] = ()  # cut generations here (a base model would run on into a new item)
    multiple_choice: ClassVar[bool] = False  # offers choice_request (likelihood scoring of its options)
    #: the task's own settings a spec may give (``[tasks.<name>] key = value``): name -> allowed values; the
    #: first value is the default, held as an instance attribute of that name
    options: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    #: the kind of :mod:`dlmeval.data.rows` (its hub defaults and row converter) for data that is not shipped
    data_kind: ClassVar[str] = ""

    def configured(self, **options: Any) -> Task:
        """This task with ``options`` set (a copy; the task itself when they are all its current values)."""
        for k, v in options.items():
            if k not in self.options:
                known = ", ".join(self.options) or "none"
                raise InputError(f"task {self.name} has no option {k!r} (options: {known})")
            if v not in self.options[k]:
                raise InputError(
                    f"task {self.name}: {k} = {v!r} is not one of {', '.join(map(str, self.options[k]))}"
                )
        if all(getattr(self, k) == v for k, v in options.items()):
            return self
        t = copy.copy(self)
        for k, v in options.items():
            setattr(t, k, v)
        return t

    def settings(self) -> dict[str, Any]:
        """The current values of the task's options (part of every record's signature)."""
        return {k: getattr(self, k) for k in self.options}

    def attack_target(self, item: Any, *, chat: bool) -> str:
        """The answer text whose loss an adversarial suffix raises (the D-GCG probe), spaced as it follows the
        prompt: after a chat template's assistant header as it stands, after a plain ``Answer:`` with a space."""
        raise InputError(f"task {self.name} defines no attack target (Task.attack_target)")

    def choice_request(
        self, item: Any, perturbation: Perturbation | None = None, *, seed: int = 0, scope: str = "prompt",
        chat: bool = False,
    ) -> tuple[UserMessage, list[str]]:  # fmt: skip
        """A multiple-choice task's (perturbed) context and the continuations to score."""
        raise InputError(f"task {self.name} is not multiple choice: it has no options to score")

    @staticmethod
    def _spaced(text: str, chat: bool) -> str:
        return text if chat else " " + text

    @abstractmethod
    def load(self, data_dir=None, *, path=None) -> list[Any]: ...

    @abstractmethod
    def prompt(self, item: Any) -> Prompt: ...

    @abstractmethod
    def extract(self, output: str, item: Any = None) -> Any:
        """The answer a generation states (None when none can be found)."""

    @abstractmethod
    def gold(self, item: Any) -> Any: ...

    @abstractmethod
    def is_correct(self, item: Any, output: str) -> bool: ...

    def user_message(
        self, item: Any, perturbation: Perturbation | None = None, *, seed: int = 0, scope: str = "prompt"
    ) -> UserMessage:
        return perturb_prompt(self.prompt(item), perturbation, seed=seed, item_id=item.item_id, scope=scope)

    def items(
        self, data_dir=None, *, path=None, limit: int | None = None, source=None, allow_download: bool = False
    ) -> list[Any]:
        """The first ``limit`` items in file order (the paper evaluates n = 200 per condition); ``source``: a
        :class:`~dlmeval.data.rows.DataSource` to read instead of the shipped file (:meth:`load_source`)."""
        return self.load_source(
            source, data_dir=data_dir, path=path, limit=limit, allow_download=allow_download
        )[0]

    def from_rows(self, rows) -> list[Any]:
        """Items from dataset rows (:mod:`dlmeval.data.rows`)."""
        from dlmeval.data.rows import CONVERTERS

        if self.data_kind not in CONVERTERS:
            raise InputError(f"task {self.name} reads no dataset rows (Task.from_rows)")
        return CONVERTERS[self.data_kind](rows, label=self.name)

    def load_source(
        self, source=None, *, data_dir=None, path=None, limit: int | None = None, allow_download: bool = False,
        what: str = "",
    ) -> tuple[list[Any], dict[str, Any]]:  # fmt: skip
        """``(items, identity)``: the first ``limit`` items of the shipped file (``source`` None or shipped) or of
        the source's rows, and what a run configuration records of them
        (:func:`dlmeval.data.rows.source_identity`: the rows' provenance, or the shipped file's digest)."""
        from dlmeval.data.rows import read_source, source_identity

        if limit is not None and limit < 1:
            raise InputError(f"limit must be a positive number of items, got {limit}")
        if source is None or source.shipped:
            items = self.load(data_dir, path=path)
            ident = (
                {"kind": "file", "path": str(path), "file_digest": _digest(path)}
                if path is not None
                else source_identity(self.data_kind or self.name, source or _shipped(), data_dir)
            )
            return (items[:limit] if limit is not None else items), ident
        rows = read_source(
            self.data_kind or self.name, source, allow_download=allow_download, limit=limit,
            what=what or f"task {self.name}",
        )  # fmt: skip
        return self.from_rows(rows), source_identity(self.data_kind, source, rows=rows)


def _shipped():
    from dlmeval.data.rows import DataSource

    return DataSource()


def _digest(path) -> str:
    from dlmeval.data.paths import file_digest

    return file_digest(path)


@dataclass(frozen=True)
class ItemResult:
    item_id: str
    task: str
    condition: str  # "clean" or a perturbation key
    seed: int
    scope: str
    prompt: str  # the text the model saw (after the chat template)
    output: str  # the generation ("" in likelihood mode)
    prediction: Any  # the extracted answer (a choice index in likelihood mode)
    gold: Any
    correct: bool
    changed: int = 0  # perturbation units edited
    eligible: int = 0
    scores: tuple[float, ...] = ()  # choice scores in likelihood mode

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["scores"] = list(self.scores)
        return d


def _identity(text: str) -> str:
    return text


def evaluate_generation(
    task: Task,
    items: Sequence[Any],
    generate: Generate,
    *,
    perturbation: Perturbation | None = None,
    seed: int = 0,
    scope: str = "prompt",
    wrap: Callable[[str], str] | None = None,
) -> list[ItemResult]:
    """Build (and perturb) each user message, wrap it (``chat_formatter(model)``), generate, judge.

    ``generate`` receives all prompts and their item ids at once (it batches and seeds per item itself).
    """
    wrap = wrap or _identity
    msgs = [task.user_message(it, perturbation, seed=seed, scope=scope) for it in items]
    prompts = [wrap(m.text) for m in msgs]
    outputs = list(generate(prompts, [it.item_id for it in items]))
    if len(outputs) != len(items):
        raise InputError(f"generate returned {len(outputs)} outputs for {len(items)} prompts")
    out = []
    for it, m, p, o in zip(items, msgs, prompts, outputs):
        pr = m.perturbation
        out.append(
            ItemResult(
                it.item_id,
                task.name,
                m.condition,
                seed,
                scope,
                p,
                o,
                task.extract(o, it),
                task.gold(it),
                bool(task.is_correct(it, o)),
                pr.changed if pr else 0,
                pr.eligible if pr else 0,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------- scoring
def argmax_choice(scores: Sequence[float]) -> int:
    """Index of the highest score; NaN counts as -inf; ties go to the lowest index."""
    if not len(scores):
        raise InputError("no choice scores")
    best, arg = -math.inf, 0
    for i, s in enumerate(scores):
        v = -math.inf if s is None or math.isnan(s) else float(s)
        if v > best:
            best, arg = v, i
    return arg


@dataclass(frozen=True, slots=True)
class ChoiceLogprob:
    total: float  # sum of the continuation's token log-probabilities
    mean: float  # total / n_tokens (NaN for zero tokens)
    n_tokens: int


class ChoiceScorer:
    """A :data:`ScoreChoices` that also scores many ``(context, choices)`` requests in one call (``many``), so
    that a model batches across items instead of seeing one item's choices at a time. Build one from the batched
    function; calling it scores a single request."""

    def __init__(self, many: ScoreChoicesMany):
        self.many = many

    def __call__(self, context: str, choices: Sequence[str]) -> list[float]:
        return self.many([(context, choices)])[0]


def score_requests(
    score_choices: ScoreChoices, requests: Sequence[tuple[str, Sequence[str]]]
) -> list[list[float]]:
    """Every request's scores: in one batched call for a :class:`ChoiceScorer`, one request at a time otherwise."""
    many = getattr(score_choices, "many", None)
    if many is not None:
        got = list(many(list(requests)))
        if len(got) != len(requests):
            raise InputError(f"a batched scorer returned {len(got)} results for {len(requests)} requests")
        return [list(g) for g in got]
    return [list(score_choices(c, x)) for c, x in requests]


def _choice_logprob(lp) -> ChoiceLogprob:
    n = int(len(lp))
    total = float(lp.sum()) if n else float("nan")
    return ChoiceLogprob(total, total / n if n else float("nan"), n)


def causal_choice_logprobs_many(
    model: Any, requests: Sequence[tuple[str, Sequence[str]]], *, batch_size: int = 16
) -> list[list[ChoiceLogprob]]:
    """Log-probability of each choice as the continuation of its context under a CausalLM, for many
    ``(context, choices)`` requests: batched across requests, each context's KV cache shared by its choices,
    where the model offers ``choice_logprobs``."""
    if hasattr(model, "choice_logprobs"):
        got = model.choice_logprobs([(c, list(x)) for c, x in requests], batch_size=batch_size)
    else:
        got = [model.continuation_logprobs([c] * len(x), list(x), batch_size=batch_size) for c, x in requests]
    return [[_choice_logprob(lp) for lp in lps] for lps in got]


def causal_choice_logprobs(
    model: Any, context: str, choices: Sequence[str], *, batch_size: int = 16
) -> list[ChoiceLogprob]:
    """Log-probability of each choice as the continuation of ``context`` under a CausalLM (one request of
    :func:`causal_choice_logprobs_many`)."""
    return causal_choice_logprobs_many(model, [(context, choices)], batch_size=batch_size)[0]


AGGREGATES = ("mean", "sum")


def causal_choice_scorer(model: Any, *, aggregate: str = "mean", batch_size: int = 16) -> ChoiceScorer:
    """A :class:`ChoiceScorer` for a CausalLM: per-choice mean token log-probability (``"mean"``, the default:
    the same length normalisation as the paper's geometric-mean confidence, App. I) or the sum (``"sum"``).
    ``batch_size``: requests (items) per forward batch."""
    if aggregate not in AGGREGATES:
        raise InputError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")

    def many(requests: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        res = causal_choice_logprobs_many(model, requests, batch_size=batch_size)
        return [[r.mean if aggregate == "mean" else r.total for r in rs] for rs in res]

    return ChoiceScorer(many)
