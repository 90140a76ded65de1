"""UniEval (Zhong et al. 2022) as its authors score: Boolean question answering over a T5 checkpoint.

The checkpoint reads ``question: ... </s> summary: ... </s> document: ...`` and the score is
``p(Yes) / (p(Yes) + p(No))`` from the first decoder step's softmax (UniEval's ``metric/scorer.py``: the input
truncated to ``max_length=1024`` tokens, the "Yes" / "No" ids the first token of each word). The questions,
per (task, dimension), are those of UniEval's ``utils.add_question``; consistency and fluency in summarization (and
the fact-checking consistency) are the mean over the output's sentences, the others one question per output
(``metric/evaluator.py``). Checkpoints: ``MingZhong/unieval-sum`` (summarization and data-to-text) and
``MingZhong/unieval-fact`` (factual consistency).

Written here rather than importing UniEval: it is no package (a repository of scripts that download their
checkpoints by hub id); the scoring is a dozen lines over transformers. Sentences are split with nltk's Punkt
(``sent_tokenize`` when its ``punkt_tab`` data is installed, else Punkt's untrained default parameters; the
configuration records which).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from dlmeval.baselines.sentences import split_sentences, splitter_name  # noqa: F401  (re-exported)
from dlmeval.errors import InputError

SUM_MODEL = "MingZhong/unieval-sum"
FACT_MODEL = "MingZhong/unieval-fact"

#: (task, dimension) -> (question, output field, context field or None, context kind: "src" | "ref" | None)
QUESTIONS: dict[tuple[str, str], tuple[str, str, str | None, str | None]] = {
    ("summarization", "fluency"): ("Is this a fluent paragraph?", "paragraph", None, None),
    ("summarization", "coherence"): (
        "Is this a coherent summary to the document?",
        "summary",
        "document",
        "src",
    ),
    ("summarization", "consistency"): (
        "Is this claim consistent with the document?",
        "claim",
        "document",
        "src",
    ),
    ("summarization", "relevance"): (
        "Is this summary relevant to the reference?",
        "summary",
        "reference",
        "ref",
    ),
    ("data2text", "naturalness"): ("Is this a fluent utterance?", "utterance", None, None),
    ("data2text", "informativeness"): (
        "Is this sentence informative according to the reference?",
        "sentence",
        "reference",
        "ref",
    ),
    ("fact", "consistency"): ("Is this claim consistent with the document?", "claim", "document", "src"),
}
#: dimensions scored as the mean over the output's sentences (UniEval's evaluator)
SENTENCE_LEVEL = {("summarization", "consistency"), ("summarization", "fluency"), ("fact", "consistency")}


def bool_qa_input(task: str, dimension: str, output: str, context: str | None = None) -> str:
    """UniEval's input text for one output (``utils.add_question``)."""
    if (task, dimension) not in QUESTIONS:
        raise InputError(f"UniEval has no question for task {task!r}, dimension {dimension!r}")
    q, out_field, ctx_field, kind = QUESTIONS[(task, dimension)]
    text = f"question: {q} </s> {out_field}: {output}"
    if ctx_field is not None:
        if context is None:
            raise InputError(f"UniEval {task} {dimension} needs the {kind}")
        text += f" </s> {ctx_field}: {context}"
    return text


class UniEvalScorer:
    """``p(Yes) / (p(Yes) + p(No))`` of a UniEval T5 checkpoint for Boolean-QA inputs."""

    def __init__(
        self,
        directory: str | Path,
        *,
        name: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        max_length: int = 1024,
    ):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from dlmeval.models.base import resolve_device

        self.directory = Path(directory)
        self.name = name or self.directory.name
        self.device = resolve_device(device)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.directory), local_files_only=True)
        self.module = (
            AutoModelForSeq2SeqLM.from_pretrained(str(self.directory), local_files_only=True)
            .to(self.device)
            .eval()
        )
        self.pos_id = self.tokenizer("Yes")["input_ids"][0]
        self.neg_id = self.tokenizer("No")["input_ids"][0]
        self.truncated = 0

    def identity(self) -> dict:
        from dlmeval.baselines.checkpoints import weights_digest

        return {"name": self.name, "family": "unieval", "weights_sha256": weights_digest(self.directory)}

    @torch.no_grad()
    def score(self, inputs: Sequence[str]) -> list[float]:
        out: list[float] = []
        start = self.module.config.decoder_start_token_id
        for s in range(0, len(inputs), self.batch_size):
            batch = list(inputs[s : s + self.batch_size])
            full = self.tokenizer(batch)["input_ids"]
            self.truncated += sum(len(ids) > self.max_length for ids in full)
            enc = self.tokenizer(
                batch, max_length=self.max_length, truncation=True, padding=True, return_tensors="pt"
            ).to(self.device)
            dec = torch.full((len(batch), 1), start, dtype=torch.long, device=self.device)
            logits = (
                self.module(
                    input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], decoder_input_ids=dec
                )
                .logits[:, 0]
                .float()
            )
            probs = torch.softmax(logits, dim=-1)
            pos, neg = probs[:, self.pos_id], probs[:, self.neg_id]
            out += (pos / (pos + neg)).tolist()
        return out

    def dimension_scores(
        self, task: str, dimension: str, outputs: Sequence[str], contexts: Sequence[str | None]
    ) -> list[float]:
        """One score per output: sentence-averaged where UniEval averages, else one question per output."""
        if (task, dimension) in SENTENCE_LEVEL:
            inputs, owner = [], []
            for i, (o, c) in enumerate(zip(outputs, contexts)):
                for sent in split_sentences(o):
                    inputs.append(bool_qa_input(task, dimension, sent, c))
                    owner.append(i)
            got = self.score(inputs)
            sums, counts = [0.0] * len(outputs), [0] * len(outputs)
            for i, v in zip(owner, got):
                sums[i] += v
                counts[i] += 1
            return [a / n for a, n in zip(sums, counts)]
        return self.score([bool_qa_input(task, dimension, o, c) for o, c in zip(outputs, contexts)])


def tiny_unieval(directory: str | Path, *, seed: int = 0) -> Path:
    """A tiny random T5 checkpoint over a word-level tokenizer that knows ``Yes`` / ``No`` and UniEval's question
    words (for tests: loaded exactly as a real UniEval checkpoint). Weights are a pure function of ``seed``."""
    from dlmeval.models.tiny import tiny_t5

    words = ["<pad>", "</s>", "<unk>", "Yes", "No", "question", ":", "summary", "document", "claim",
             "paragraph", "reference", "utterance", "sentence", "Is", "coherent", "consistent", "fluent",
             "relevant", "informative", "according", "?"]  # fmt: skip
    return tiny_t5(directory, words, seed=seed, max_length=1024)
