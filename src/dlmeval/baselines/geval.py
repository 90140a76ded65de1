"""G-Eval (Liu et al. 2023): a judge LM fills in an evaluation form, and the score is the probability-weighted sum
``sum_s s * p(s) / sum_s p(s)`` over the form's score tokens.

The authors estimate ``p(s)`` from 20 samples at temperature 2 (``gpt4_eval.py``); here it is read directly from the
judge's distribution, which is the quantity those samples estimate, deterministically:

* a local causal LM (any ``CausalLM`` spec): ``p(s)`` is the judge's probability of the continuation ``" s"`` after
  the form (every token of it, so a score that is two tokens is scored right), through the model's chat template
  when it has one (then the continuation is ``"s"``, the assistant's first word);
* an OpenAI-compatible endpoint (``--geval-judge http://...``): one request per form, ``max_tokens=1``,
  ``temperature=0``, ``logprobs`` with the top 20 alternatives; ``p(s)`` is the first token's probability of each
  score that appears among them (scores outside the top 20 count 0). Never needed: nothing is sent without a URL.

Prompts: the four published SummEval forms (``prompts/summeval/*_detailed.txt``: coherence, consistency, fluency
1-3, relevance) with ``{{Document}}`` / ``{{Summary}}``, character for character as ``gpt4_eval.py`` reads them
(``open(prompt_fp).read()``: text mode, so the CRLF line ends of three of the files read as LF; the consistency and
fluency files' own blank lines and trailing spaces kept; nlpyang/geval@6f84404); the paper's other dimensions have no published G-Eval
form, so :data:`FORMS` writes them in the same layout (criteria, steps, form) and labels them as dlmeval's. A
source too long for the judge's window is cut at its end (never the instructions), and the item says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlmeval.errors import InputError

_HEAD = (
    "Your task is to rate the {what} on one metric.\n\nPlease make sure you read and understand these instructions "
    "carefully. Please keep this document open while reviewing, and refer to it as needed.\n\n"
)


@dataclass(frozen=True)
class Form:
    """One G-Eval form: the prompt (with ``{{Document}}`` / ``{{Summary}}``), the score range, and provenance."""

    name: str
    prompt: str
    low: int = 1
    high: int = 5
    published: bool = True

    @property
    def scores(self) -> list[int]:
        return list(range(self.low, self.high + 1))

    def fill(self, document: str | None, output: str) -> str:
        p = self.prompt.replace("{{Summary}}", output)
        if "{{Document}}" in p:
            if document is None:
                raise InputError(f"G-Eval form {self.name} needs the source text")
            p = p.replace("{{Document}}", document)
        return p


def _summeval(
    criteria: str,
    steps: str,
    field: str,
    *,
    intro: str,
    with_doc: bool = True,
    head_gap: str = "",
    label_space: str = "",
    example_gap: str = "\n\n\n",
) -> str:
    """A SummEval form in the layout of G-Eval's files; ``head_gap``, ``label_space`` and ``example_gap`` give each
    file's own whitespace (an extra blank line before the criteria, a space after ``Source Text:`` / ``Summary:``,
    the blank lines after ``Example:``), so the filled prompt is the one ``gpt4_eval.py`` sent."""
    body = (
        f"You will be given {intro}\n\n"
        + _HEAD.format(what="summary")
        + head_gap
        + f"Evaluation Criteria:\n\n{criteria}\n\n"
    )
    if steps:
        body += f"Evaluation Steps:\n\n{steps}\n\n"
    body += "\nExample:" + example_gap
    if with_doc:
        body += f"Source Text:{label_space}\n\n{{{{Document}}}}\n\n"
    body += f"Summary:{label_space}\n\n{{{{Summary}}}}\n\n\nEvaluation Form (scores ONLY):\n\n- " + field
    return body


_ONE = "one summary written for a news article."
FORMS: dict[str, Form] = {
    "coherence": Form(
        "coherence",
        _summeval(
            "Coherence (1-5) - the collective quality of all sentences. We align this dimension with the DUC quality "
            'question of structure and coherence whereby "the summary should be well-structured and well-organized. '
            "The summary should not just be a heap of related information, but should build from sentence to a "
            'coherent body of information about a topic."',
            "1. Read the news article carefully and identify the main topic and key points.\n2. Read the summary and "
            "compare it to the news article. Check if the summary covers the main topic and key points of the news "
            "article, and if it presents them in a clear and logical order.\n3. Assign a score for coherence on a "
            "scale of 1 to 5, where 1 is the lowest and 5 is the highest based on the Evaluation Criteria.",
            "Coherence:",
            intro=_ONE,
        ),
    ),
    "consistency": Form(
        "consistency",
        _summeval(
            "Consistency (1-5) - the factual alignment between the summary and the summarized source. A factually "
            "consistent summary contains only statements that are entailed by the source document. Annotators were "
            "also asked to penalize summaries that contained hallucinated facts. ",  # the file's trailing space
            "1. Read the news article carefully and identify the main facts and details it presents.\n2. Read the "
            "summary and compare it to the article. Check if the summary contains any factual errors that are not "
            "supported by the article.\n3. Assign a score for consistency based on the Evaluation Criteria.",
            "Consistency:",
            intro="a news article. You will then be given one summary written for this article.",
            head_gap="\n",
            label_space=" ",
        ),
    ),
    "fluency": Form(
        "fluency",
        _summeval(
            "Fluency (1-3): the quality of the summary in terms of grammar, spelling, punctuation, word choice, and "
            "sentence structure.\n\n- 1: Poor. The summary has many errors that make it hard to understand or sound "
            "unnatural.\n- 2: Fair. The summary has some errors that affect the clarity or smoothness of the text, "
            "but the main points are still comprehensible.\n- 3: Good. The summary has few or no errors and is easy "
            "to read and follow.",
            "",
            "Fluency (1-3):",
            intro=_ONE,
            with_doc=False,
            head_gap="\n",
            example_gap="\n\n",
        ),
        high=3,
    ),
    "relevance": Form(
        "relevance",
        _summeval(
            "Relevance (1-5) - selection of important content from the source. The summary should include only "
            "important information from the source document. Annotators were instructed to penalize summaries which "
            "contained redundancies and excess information.",
            "1. Read the summary and the source document carefully.\n2. Compare the summary to the source document "
            "and identify the main points of the article.\n3. Assess how well the summary covers the main points of "
            "the article, and how much irrelevant or redundant information it contains.\n4. Assign a relevance "
            "score from 1 to 5.",
            "Relevance:",
            intro=_ONE,
        ),
    ),
}


def _written(name: str, what: str, criteria: str, field: str, intro: str, doc_label: str | None) -> Form:
    """A form in G-Eval's layout for a dimension the authors published none for (labelled as dlmeval's)."""
    body = (
        f"You will be given {intro}\n\n" + _HEAD.format(what=what) + f"Evaluation Criteria:\n\n{criteria}\n\n"
    )
    body += "\nExample:\n\n\n"
    if doc_label:
        body += f"{doc_label}:\n\n{{{{Document}}}}\n\n"
    body += f"{what.capitalize()}:\n\n{{{{Summary}}}}\n\n\nEvaluation Form (scores ONLY):\n\n- {field}"
    return Form(name, body, published=False)


FORMS.update(
    {
        "informativeness": _written(
            "informativeness",
            "summary",
            "Informativeness (1-5) - how well the summary captures the key information of the article.",
            "Informativeness:",
            _ONE,
            "Source Text",
        ),
        "d2t-naturalness": _written(
            "d2t-naturalness",
            "sentence",
            "Naturalness (1-5) - could the sentence have been produced by a native speaker?",
            "Naturalness:",
            "one sentence generated from a meaning representation.",
            None,
        ),
        "d2t-informativeness": _written(
            "d2t-informativeness",
            "sentence",
            "Informativeness (1-5) - does the sentence convey all the information in the reference sentence?",
            "Informativeness:",
            "a reference sentence. You will then be given one sentence generated from the same meaning "
            "representation.",
            "Reference",
        ),
        "d2t-quality": _written(
            "d2t-quality",
            "sentence",
            "Quality (1-5) - the overall quality of the sentence: fluent, grammatical and faithful to the reference.",
            "Quality:",
            "a reference sentence. You will then be given one sentence generated from the same meaning "
            "representation.",
            "Reference",
        ),
        "mt-accuracy": _written(
            "mt-accuracy",
            "translation",
            "Accuracy (1-5) - how well the translation conveys the meaning of the reference translation, with "
            "correct and fluent English.",
            "Accuracy:",
            "a reference translation. You will then be given one machine translation of the same source sentence.",
            "Reference",
        ),
    }
)


def weighted_score(logprobs: dict[int, float]) -> float:
    """``sum_s s p(s) / sum_s p(s)`` from ``{score: log p(score)}`` (log-sum-exp; NaN when no score has mass)."""
    if not logprobs:
        return float("nan")
    s = np.array(list(logprobs), dtype=np.float64)
    lp = np.array(list(logprobs.values()), dtype=np.float64)
    if not np.isfinite(lp).any():
        return float("nan")
    w = np.exp(lp - lp[np.isfinite(lp)].max())
    return float((s * w).sum() / w.sum())


class LocalJudge:
    """A causal LM as the G-Eval judge (``p(s)`` of each score continuation after the form)."""

    def __init__(self, model, *, batch_size: int = 8):
        self.model = model
        self.batch_size = int(batch_size)
        self.truncated = 0

    @property
    def name(self) -> str:
        return self.model.identity().name

    def identity(self):
        return self.model.identity()

    def _fit(self, form: Form, document: str | None, output: str) -> str:
        """The filled form, the document cut at its end so that the form fits the window (with room for a score)."""
        text = self.model.chat(form.fill(document, output))
        over = len(self.model.encode(text)) + 8 - self.model.max_length
        if over <= 0 or document is None:
            return text
        ids = self.model.encode(document)
        keep = max(0, len(ids) - over - 8)
        self.truncated += 1
        return self.model.chat(form.fill(self.model.decode(ids[:keep]), output))

    def score(self, form: Form, documents: Sequence[str | None], outputs: Sequence[str]) -> list[float]:
        chat = bool(getattr(self.model, "has_chat_template", False))
        choices = [f"{s}" if chat else f" {s}" for s in form.scores]
        requests = [(self._fit(form, d, o), choices) for d, o in zip(documents, outputs)]
        got = self.model.choice_logprobs(requests, batch_size=self.batch_size)
        return [weighted_score({s: float(np.sum(lp)) for s, lp in zip(form.scores, per)}) for per in got]


class EndpointJudge:
    """An OpenAI-compatible chat-completions endpoint as the judge (first token's top-20 log-probabilities)."""

    def __init__(
        self, url: str, model: str | None = None, *, timeout: float = 60.0, api_key: str | None = None
    ):
        if not url.startswith(("http://", "https://")):
            raise InputError(f"--geval-judge {url!r}: an endpoint is an http(s) URL")
        self.url = url.rstrip("/")
        if not self.url.endswith("/chat/completions"):
            self.url += "/chat/completions" if self.url.endswith("/v1") else "/v1/chat/completions"
        self.model_name = model or "default"
        self.timeout = timeout
        self.api_key = api_key
        self.truncated = 0

    @property
    def name(self) -> str:
        return f"{self.model_name} @ {self.url}"

    def identity(self) -> dict:
        return {"name": self.model_name, "family": "endpoint", "source": self.url}

    def _request(self, prompt: str) -> dict:
        import urllib.request

        body = {
            "model": self.model_name,
            "messages": [{"role": "system", "content": prompt}],  # as the authors send the form
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": 20,
        }
        req = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
        )
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            return json.loads(r.read().decode())

    def score(self, form: Form, documents: Sequence[str | None], outputs: Sequence[str]) -> list[float]:
        out = []
        for d, o in zip(documents, outputs):
            resp = self._request(form.fill(d, o))
            try:
                tops = resp["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            except (KeyError, IndexError, TypeError):
                raise InputError(
                    f"{self.url} returned no top_logprobs; G-Eval needs an endpoint that gives them"
                ) from None
            lp: dict[int, float] = {}
            for t in tops:
                tok = str(t.get("token", "")).strip()
                if tok.isascii() and tok.isdigit() and int(tok) in form.scores:
                    s = int(tok)
                    lp[s] = float(np.logaddexp(lp.get(s, -math.inf), float(t["logprob"])))
            out.append(weighted_score(lp))
        return out
