"""QuestEval (Scialom et al. 2021) by its published method, on local T5 checkpoints.

The ``questeval`` package does not install with the pinned stack (its spaCy 3.0 source build fails), so this
module follows the method of its ``questeval/questeval_metric.py`` and ``utils.py`` (read, not copied):

1. **Answer candidates** from the first ``limit_sent=5`` sentences of a text, two types in QuestEval's order:
   named entities, then noun chunks. QuestEval takes both from spaCy (``doc.ents``, ``doc.noun_chunks``); spaCy is
   not available here (nor nltk's tagger / chunker data), so :func:`extract_answers` is **regex-based** and says so
   in every run configuration (:data:`EXTRACTION`): "entities" are maximal runs of capitalised words or numbers
   (a sentence-initial stop word dropped), "noun chunks" are maximal runs of non-stop-word tokens between stop
   words and punctuation (RAKE's candidate phrases; stop words: scikit-learn's English list).
2. **Question generation** by a T5 QG checkpoint (``ThomasNLG/t5-qg_squad1-en``) on ``"sv1 </s> {answer} </s>
   {text}"`` (the ``sv1`` prefix that checkpoint was trained with), greedy decoding (``num_beams=1``, no sampling),
   sources cut at 512 tokens, generation length the checkpoint's own generation config (QuestEval passes none).
3. **Question answering** by a T5 QA checkpoint (``ThomasNLG/t5-qa_squad2neg-en``) on ``"{question} </s> {text}"``
   of the *other* text, greedy; **answerability** = 1 - p(first token of "unanswerable") at the first decoder
   step (QuestEval's ``keep_score_idx``).
4. **Scores**: for questions from text A answered on text B, the mean over the concatenated lists of SQuAD token F1
   (answer vs. the answer the question was generated from) and answerability, each clipped to [0, 1]; 0 when A has
   no question. **Precision** = questions from the hypothesis answered on the source (or reference), **recall** =
   questions from the source answered on the hypothesis, **F** = their arithmetic mean (``np.average`` of the two
   in QuestEval's ``_calculate_score_from_logs``); either text empty: 0.

Left out, as QuestEval's defaults for text2text leave them out or as this stack cannot run them: the answer
BERTScore (``list_scores`` default includes it; it needs ``bert-base-multilingual-cased``), the summarization
weighter (``do_weighter=False`` by default), the round-trip consistency (``do_consistency=False``), and the
data-to-text table models (the family compares D2T outputs with their references instead).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence
from pathlib import Path

import torch

from dlmeval.baselines.sentences import split_sentences

QG_MODEL = "ThomasNLG/t5-qg_squad1-en"
QA_MODEL = "ThomasNLG/t5-qa_squad2neg-en"
#: how answer candidates are found (recorded in run configurations: QuestEval's are spaCy's)
EXTRACTION = "regex: capitalised/number runs (entities), stop-word-delimited runs (noun chunks)"
SEP = "</s>"

_TOKEN = re.compile(r"\w+(?:[-'.,]\w+)*|[^\w\s]")
_PUNCT = frozenset(string.punctuation)


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def _is_entity_token(tok: str) -> bool:
    return tok[:1].isupper() or tok[:1].isdigit()


def extract_answers(text: str, *, limit_sent: int | None = 5) -> list[str]:
    """Answer candidates of ``text``: its "entities", then its "noun chunks" (see the module docstring), each in
    text order, repeats kept (as QuestEval keeps spaCy's lists), from the first ``limit_sent`` sentences."""
    sents = split_sentences(text)
    if limit_sent is not None:
        sents = sents[:limit_sent]
    stop = _stop_words()
    ents: list[str] = []
    chunks: list[str] = []
    for sent in sents:
        toks = _TOKEN.findall(sent)
        run: list[str] = []
        for i, tok in enumerate(toks + [""]):
            if tok and _is_entity_token(tok) and not (i == 0 and tok.lower() in stop):
                run.append(tok)
            else:
                if run:
                    ents.append(" ".join(run))
                run = []
        run = []
        for tok in toks + [""]:
            if tok and tok.lower() not in stop and re.match(r"\w", tok):
                run.append(tok)
            else:
                if run:
                    chunks.append(" ".join(run))
                run = []
    return ents + chunks


def squad_f1(pred: str, gold: str) -> float:
    """SQuAD v2's token F1 (lower case, punctuation and articles removed; two empty answers agree: 1).
    Hand-written: a dozen lines, and the field's copy lives in an evaluation script, not a kept package."""

    def tokens(s: str) -> list[str]:
        s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
        return re.sub(r"\b(a|an|the)\b", " ", s).split()

    p, g = tokens(pred), tokens(gold)
    if not p or not g:
        return float(p == g)
    same = sum((collections.Counter(p) & collections.Counter(g)).values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


class T5Generator:
    """A T5 checkpoint decoding greedily: the texts and p(``keep_id``) at the first decoder step."""

    def __init__(
        self, directory: str | Path, *, device=None, batch_size: int = 8, max_source_length: int = 512
    ):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from dlmeval.models.base import resolve_device

        self.directory = Path(directory)
        self.device = resolve_device(device)
        self.batch_size = int(batch_size)
        self.max_source_length = int(max_source_length)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.directory), local_files_only=True)
        self.module = (
            AutoModelForSeq2SeqLM.from_pretrained(str(self.directory), local_files_only=True)
            .to(self.device)
            .eval()
        )
        self.truncated = 0

    def identity(self, role: str) -> dict:
        from dlmeval.baselines.checkpoints import weights_digest

        return {
            "name": self.directory.name,
            "family": f"questeval-{role}",
            "weights_sha256": weights_digest(self.directory),
        }

    @torch.no_grad()
    def generate(self, inputs: Sequence[str], keep_id: int | None = None) -> tuple[list[str], list[float]]:
        texts: list[str] = []
        probs: list[float] = []
        for s in range(0, len(inputs), self.batch_size):
            batch = list(inputs[s : s + self.batch_size])
            self.truncated += sum(
                len(ids) > self.max_source_length for ids in self.tokenizer(batch)["input_ids"]
            )
            enc = self.tokenizer(
                batch, max_length=self.max_source_length, truncation=True, padding=True, return_tensors="pt"
            ).to(self.device)
            out = self.module.generate(
                **enc, num_beams=1, do_sample=False, output_scores=True, return_dict_in_generate=True
            )
            texts += self.tokenizer.batch_decode(
                out.sequences, skip_special_tokens=True, clean_up_tokenization_spaces=True
            )
            if keep_id is not None:
                probs += torch.softmax(out.scores[0].float(), dim=-1)[:, keep_id].tolist()
        return texts, probs


class QuestEvalScorer:
    """QuestEval precision / recall / F between hypotheses and compared texts (sources or references).

    Question generation and answering are cached per text and per (question, text) within a scorer, so a source
    shared by many hypotheses is questioned once (QuestEval's own log cache, kept in memory here)."""

    def __init__(
        self,
        qg_dir: str | Path,
        qa_dir: str | Path,
        *,
        qg_prefix: str | None = "sv1",
        device=None,
        batch_size: int = 8,
        limit_sent: int | None = 5,
        answerability: bool = True,
    ):
        self.qg = T5Generator(qg_dir, device=device, batch_size=batch_size)
        self.qa = (
            self.qg
            if Path(qa_dir) == Path(qg_dir)
            else T5Generator(qa_dir, device=device, batch_size=batch_size)
        )
        self.qg_prefix = qg_prefix
        self.limit_sent = limit_sent
        self.answerability = bool(answerability)
        self.unanswerable_id = self.qa.tokenizer("unanswerable")["input_ids"][0]
        self._questions: dict[str, tuple[list[str], list[str]]] = {}
        self._answers: dict[tuple[str, str], tuple[str, float]] = {}

    @property
    def truncated(self) -> int:
        return self.qg.truncated + (self.qa.truncated if self.qa is not self.qg else 0)

    def identity(self) -> list[dict]:
        return [self.qg.identity("qg"), self.qa.identity("qa")]

    def qg_input(self, answer: str, context: str) -> str:
        pre = f"{self.qg_prefix} {SEP} " if self.qg_prefix else ""
        return f"{pre}{answer} {SEP} {context}"

    @staticmethod
    def qa_input(question: str, context: str) -> str:
        return f"{question} {SEP} {context}"

    def questions(self, texts: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        """``(answers, questions)`` per text (none for an empty text)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._questions]
        owner, inputs, golds = [], [], []
        for t in todo:
            self._questions[t] = ([], [])
            if not t.strip():
                continue
            for a in extract_answers(t, limit_sent=self.limit_sent):
                owner.append(t)
                golds.append(a)
                inputs.append(self.qg_input(a, t))
        got, _ = self.qg.generate(inputs)
        for t, a, q in zip(owner, golds, got):
            self._questions[t][0].append(a)
            self._questions[t][1].append(q)
        return [self._questions[t] for t in texts]

    def answers(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        """``(answer text, answerability)`` per (question, context)."""
        todo = [p for p in dict.fromkeys(pairs) if p not in self._answers]
        texts, probs = self.qa.generate([self.qa_input(q, c) for q, c in todo], keep_id=self.unanswerable_id)
        for p, a, pu in zip(todo, texts, probs):
            self._answers[p] = (a, 1.0 - pu)
        return [self._answers[p] for p in pairs]

    def _base(self, asked: tuple[list[str], list[str]], context: str) -> float:
        golds, qs = asked
        if not qs:
            return 0.0
        got = self.answers([(q, context) for q in qs])
        vals = [squad_f1(a, g) for (a, _), g in zip(got, golds)]
        if self.answerability:
            vals += [u for _, u in got]
        vals = [min(1.0, max(0.0, v)) for v in vals]
        return sum(vals) / len(vals)

    def score(self, hypotheses: Sequence[str], compared: Sequence[str]) -> list[dict[str, float]]:
        """``{"precision", "recall", "f"}`` per (hypothesis, compared text) pair."""
        if len(hypotheses) != len(compared):
            raise ValueError("QuestEval: one compared text per hypothesis")
        self.questions(list(hypotheses) + list(compared))
        out = []
        for h, c in zip(hypotheses, compared):
            if not h.strip() or not c.strip():
                out.append({"precision": 0.0, "recall": 0.0, "f": 0.0})
                continue
            p = self._base(self._questions[h], c)
            r = self._base(self._questions[c], h)
            out.append({"precision": p, "recall": r, "f": (p + r) / 2})
        return out


def tiny_questeval(directory: str | Path, *, seed: int = 0) -> Path:
    """A tiny random T5 checkpoint (one directory serving as both QG and QA model, for tests) over a word-level
    tokenizer that knows ``unanswerable``, ``sv1`` and the tiny word list. Weights are a pure function of ``seed``;
    ``<pad>`` / ``<unk>`` (decoded to nothing) are never generated, so generated text has words to compare."""
    from dlmeval.models.tiny import tiny_t5

    words = ["<pad>", "</s>", "<unk>", "unanswerable", "sv1", "?", ".", ",", "what", "who", "where",
             "Paris", "France", "London", "England", "The", "In", "1990"]  # fmt: skip
    return tiny_t5(
        directory,
        words,
        seed=seed,
        max_length=512,
        join_decoder=True,
        tie_word_embeddings=False,
        never_generate=("<pad>", "<unk>"),
    )
