"""GPTScore-style prompted autoregressive scoring (Fu et al. 2024) with any :class:`~dlmeval.models.causal.CausalLM`.

GPTScore scores a hypothesis ``h`` by its mean token log-probability after an instruction that names the aspect to
judge and carries the conditioning text ``x``: ``(1/|h|) sum_t log p(h_t | h_<t, T(aspect, x))``. The DiffScore
paper uses it (with GPT-2-large) as the zero-shot AR baseline of its ``‡`` marks.

The prompt is ``TEMPLATES[task][aspect].format(src=x)`` and the hypothesis follows it after one space (the scored
tokens are the hypothesis's, by the lm-evaluation-harness split of :meth:`CausalLM.split_tokens`). The instruction
wordings are GPTScore's own:

* D2T: ``asp_definition`` of the GPTScore repository's ``datas/demos/d2t/*_demos.json`` (informativeness,
  naturalness, quality), followed as in its ``score_d2t.py`` by a newline, the text and ``In other words ,``;
* summarization (``... for the following text: {src}`` + ``Tl;dr``) and MT (``Rewrite the following text ...:
  {src} In other words,``): the aspect table of the GPTScore paper, as its public re-implementations quote it
  (the repository ships the D2T prompts only).

Directions: ``s2h`` (the prompt carries the source; GPTScore's summarization use), ``r2h`` (it carries the
reference; GPTScore's ``ref_hypo``), ``h2r`` (the hypothesis in the prompt, the reference scored; ``hypo_ref``),
``f`` (``max_k (r2h_k + h2r_k) / 2`` over the references, GPTScore's ``avg_f``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlmeval.errors import InputError

TEMPLATES: dict[str, dict[str, str]] = {
    "SUM": {
        "COV": "Generate a summary with as much semantic coverage as possible for the following text: {src}\n\nTl;dr",
        "FAC": "Generate a summary with consistent facts for the following text: {src}\n\nTl;dr",
        "CON": "Generate factually consistent summary for the following text: {src}\n\nTl;dr",
        "INF": "Generate an informative summary that captures the key points of the following text: {src}\n\nTl;dr",
        "COH": "Generate a coherent summary for the following text: {src}\n\nTl;dr",
        "REL": "Generate a relevant summary with consistent details for the following text: {src}\n\nTl;dr",
        "FLU": "Generate a fluent and grammatical summary for the following text: {src}\n\nTl;dr",
    },
    "WMT": {
        "ACC": "Rewrite the following text with its core information and consistent facts: {src} In other words,",
        "FLU": "Rewrite the following text to make it more grammatical and well-written: {src} In other words,",
        "MQM": "Rewrite the following text into high-quality text with its core information: {src} In other words,",
    },
    "D2T": {
        "INF": "Convert the following text into another expression that preserves key information:\n"
        "{src} In other words ,",
        "NAT": "Convert the following text into another expression that is as natural as a native speaker:\n"
        "{src} In other words ,",
        "QUA": "Convert the following text into another expression that is fluent and grammatically correct:\n"
        "{src} In other words ,",
    },
}

#: the GPTScore aspect that judges each benchmark dimension (dlmeval's dimension names; WMT's DA is adequacy)
DIMENSION_ASPECT: dict[tuple[str, str], str] = {
    ("SUM", "coherence"): "COH",
    ("SUM", "consistency"): "CON",
    ("SUM", "fluency"): "FLU",
    ("SUM", "relevance"): "REL",
    ("SUM", "informativeness"): "INF",
    ("SUM", "litepyramid_recall"): "COV",
    ("SUM", "fact"): "FAC",
    ("D2T", "informativeness"): "INF",
    ("D2T", "naturalness"): "NAT",
    ("D2T", "quality"): "QUA",
    ("WMT", "DARR"): "ACC",
}
DIRECTIONS = ("s2h", "r2h", "h2r", "f")


def template_for(task: str, aspect: str) -> str:
    """GPTScore's instruction template for a task (``SUM``, ``WMT``, ``D2T``) and aspect (``COH``, ``ACC``, ...)."""
    if task not in TEMPLATES:
        raise InputError(f"no GPTScore templates for task {task!r}; choose one of {', '.join(TEMPLATES)}")
    if aspect not in TEMPLATES[task]:
        raise InputError(
            f"no GPTScore {task} template for aspect {aspect!r}; choose one of {', '.join(TEMPLATES[task])}"
        )
    return TEMPLATES[task][aspect]


def aspect_for(task: str, dimension: str) -> str:
    """The GPTScore aspect that judges a benchmark's human dimension."""
    try:
        return DIMENSION_ASPECT[(task, dimension)]
    except KeyError:
        raise InputError(
            f"no GPTScore aspect is defined for task {task!r}, dimension {dimension!r}"
        ) from None


class GPTScorer:
    """Mean hypothesis log-probability after a GPTScore instruction prompt, with a causal LM."""

    def __init__(self, model, *, template: str, batch_size: int = 8):
        if "{src}" not in template:
            raise InputError(f"a GPTScore template must contain '{{src}}', got {template!r}")
        self.model, self.template, self.batch_size = model, template, int(batch_size)

    @classmethod
    def for_aspect(cls, model, task: str, aspect: str, *, batch_size: int = 8) -> GPTScorer:
        return cls(model, template=template_for(task, aspect), batch_size=batch_size)

    def prompt(self, text: str) -> str:
        return self.template.format(src=text)

    def token_logprobs(self, contexts: Sequence[str], hypotheses: Sequence[str]) -> list[np.ndarray]:
        """Per hypothesis token, its log-probability after the prompt built from its context."""
        if len(contexts) != len(hypotheses):
            raise InputError(f"{len(contexts)} contexts but {len(hypotheses)} hypotheses")
        for i, h in enumerate(hypotheses):
            if not isinstance(h, str) or not h.strip():
                raise InputError(f"hypothesis {i} is empty: a likelihood score needs at least one token")
        prompts = [self.prompt(c) for c in contexts]
        return self.model.continuation_logprobs(
            prompts, [" " + h for h in hypotheses], batch_size=self.batch_size
        )

    def mean_logprobs(self, contexts: Sequence[str], hypotheses: Sequence[str]) -> list[float]:
        out = []
        for i, lp in enumerate(self.token_logprobs(contexts, hypotheses)):
            if lp.size == 0 or not np.all(np.isfinite(lp)):
                raise InputError(f"hypothesis {i} has no scorable tokens (or a non-finite log-probability)")
            out.append(float(lp.mean()))
        return out


def gptscore(
    scorer: GPTScorer,
    candidates: Sequence[str],
    *,
    sources: Sequence[str] | None = None,
    references: Sequence[Sequence[str] | str] | None = None,
    directions: Sequence[str] = ("s2h",),
) -> dict[str, list[float]]:
    """GPTScore's directions for every candidate: ``{direction: [score per candidate]}`` (see the module docstring)."""
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        raise InputError(f"unknown GPTScore direction(s) {bad}; choose from {', '.join(DIRECTIONS)}")
    from dlmeval.baselines.seq2seq import bartscore

    # the same directions as BARTScore's (GPTScore's ref_hypo / hypo_ref / avg_f are BARTScore's) and the best
    # reference of several (bartscore's ref_agg="max"; --ref-agg does not reach this family); only the scorer differs
    return bartscore(scorer, candidates, sources=sources, references=references, directions=directions)
