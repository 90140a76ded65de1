"""How a model of either role answers: one DLM and one AR implementation of "generate with confidences" and
"score choices", so that the per-item evaluation and the probes never branch on the role.

Judged span = scored span. A generation is cut at the task's stop strings before it is judged; the confidence is
computed on exactly that text. For the DLM the scored tokens are the shortest prefix of the committed answer
(before its first EOS) whose decoding covers the cut text; the bidirectional pass sees the prompt and those
tokens, plus the terminating EOS only when the answer was not cut (:func:`judged_tokens`). For the AR model
given prompt texts the cut text is re-split after the prompt and scored (``ar_token_probs``), reusing the
generation's own log-probabilities where the tokens agree; given prompt token ids (an attack optimised in token
space) it generates from exactly those ids and scores the same shortest prefix of its own generated tokens, with
the log-probabilities the generation computed (:func:`generated_token_probs`). Either way ``Answers.prompt_ids``
are the ids each answer was conditioned on.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlmeval.errors import InputError
from dlmeval.protocols.common import cut_at, diffscore_choice_scores
from dlmeval.seeding import derive_seed


@dataclass
class Answers:
    outputs: list[str]  # cut at the task's stop strings: the judged text
    probs: list[Any]  # TokenProbs of exactly that text
    extra: list[dict[str, Any]] = field(default_factory=list)  # per row: nfe, stopped_at_eos, ...
    prompt_ids: list[list[int]] = field(default_factory=list)  # per row: the ids generated from (when known)


def judged_tokens(decode, ids: Sequence[int], text: str, cut: str) -> int:
    """How many of the answer tokens ``ids`` (decoding to ``text``) make up ``cut``, a prefix of ``text``: all
    of them when nothing was cut, else the shortest prefix whose decoding is at least as long as ``cut``."""
    if cut == text:
        return len(ids)
    want = len(cut.rstrip())
    for k in range(len(ids) + 1):
        if len(decode(list(ids[:k])).rstrip()) >= want:
            return k
    return len(ids)


def generated_token_probs(model, gens: Sequence[Any], outputs: Sequence[str], *, batch_size: int = 8) -> list:
    """The :class:`~dlmeval.robustness.calibration.TokenProbs` of AR generations (``CausalLM.generate_scored``)
    judged as ``outputs`` (each its generation's text cut at the stop strings): the shortest prefix of the
    generated tokens covering the judged text (:func:`judged_tokens`), with the log-probabilities the generation
    computed from its own prompt ids. Nothing is re-encoded. An empty answer is scored by the model's first EOS id
    after the prompt (one pass), as ``ar_token_probs`` scores it."""
    from dlmeval.robustness.calibration import TokenProbs

    out: list[Any] = [None] * len(gens)
    empty = []
    for i, (g, o) in enumerate(zip(gens, outputs)):
        ids = list(g.token_ids)
        k = judged_tokens(model.decode, ids, model.decode(ids), o)
        if k:
            chosen = np.asarray(g.chosen[:k], dtype=np.float64)
            out[i] = TokenProbs(max=np.asarray(g.max[:k], dtype=np.float64), chosen=chosen,
                                commit=chosen.copy(), n_tokens=k)  # fmt: skip
        else:
            empty.append(i)
    eos = list(model.eos_token_ids)
    seqs = [list(gens[i].prompt_ids) + eos[:1] for i in empty]
    starts = [len(gens[i].prompt_ids) for i in empty]
    for i, (c, mx) in zip(empty, model.tail_logprobs(seqs, starts, batch_size=batch_size) if empty else []):
        out[i] = TokenProbs(
            max=mx, chosen=c, commit=c.copy(), n_tokens=0, note="empty answer: scored by its end token"
        )
    return out


class Responder(ABC):
    """A model of one role with the spec's settings for it."""

    role: str

    def __init__(self, spec, entry, model):
        from dlmeval.tasks import chat_formatter

        self.spec, self.entry, self.model = spec, entry, model
        self.wrap = chat_formatter(model)
        self.chat = bool(getattr(model, "has_chat_template", False))
        self.warnings: list[str] = []

    @property
    @abstractmethod
    def batch_size(self) -> int: ...

    @abstractmethod
    def generate(self, task, prompts: list, item_ids: list[str], seed: int) -> Answers:
        """Answers to ready prompts (texts after the chat template; a DLM also takes token id lists)."""

    @abstractmethod
    def choice_scorer(self, state: dict):
        """A :class:`~dlmeval.tasks.ChoiceScorer` of this model (``state``: kept per task and mode)."""

    @property
    def choice_wrap(self):
        """The wrap of the likelihood context (None: the plain text, options with a leading space)."""
        return self.wrap


class DLMResponder(Responder):
    role = "dlm"

    @property
    def batch_size(self) -> int:
        return self.entry.sampler.batch_size

    def sampler_config(self, task_name: str, seed: int):
        from dlmeval.sampling import SamplerConfig

        s = self.entry.sampler
        gen_tokens, steps = self.spec.task_or_default(task_name).budget(s.steps)
        names = {f.name for f in dataclasses.fields(SamplerConfig)}
        kw: dict[str, Any] = {}
        if s.top_p < 1.0:
            if "top_p" in names:
                kw["top_p"] = s.top_p
            else:
                self._warn(f"the sampler has no top_p: top_p = {s.top_p} is not applied (run config says so)")
        if s.eos_mode == "rank_last":
            if "eos_rank_last" in names:
                kw["eos_rank_last"] = True
            else:
                self._warn(
                    "the sampler has no eos_rank_last: eos = 'rank_last' is not applied (run config says so)"
                )
        return SamplerConfig(
            length=gen_tokens,
            steps=steps,
            block_length=s.block_length,
            strategy=s.strategy,
            remask_fraction=s.remask_fraction,
            temperature=s.temperature,
            position_temperature=s.position_temperature,
            top_k=s.top_k,
            schedule=s.schedule,
            suppress_eos=s.eos_mode == "ban",
            stop_at_eos=True,
            seed=seed,
            **kw,
        )

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    def generate(self, task, prompts, item_ids, seed) -> Answers:
        from dlmeval.robustness.calibration import CommitRecorder, dlm_token_probs
        from dlmeval.sampling import RemaskingSampler

        s = self.entry.sampler
        rec = CommitRecorder(
            self.model, suppress_eos=s.eos_mode == "ban", top_k=self.spec.calibration.commit_top_k
        )
        enc = getattr(self.model, "encode_chat", None)
        if self.chat and enc is not None:  # chat-templated texts, encoded as the family's own code does
            prompts = [enc(p) if isinstance(p, str) else p for p in prompts]
        res = RemaskingSampler(rec, self.sampler_config(task.name, seed)).sample(prompts, item_ids=item_ids)
        commit = rec.commit_logprobs(res)
        outputs, gens, commits, extra = [], [], [], []
        for b in range(len(prompts)):
            text = res.texts[b]
            out = cut_at(text, (*task.stop, *getattr(self.model, "answer_end", ())))
            ids = list(res.token_ids[b])
            k = judged_tokens(self.model.decode, ids, text, out)
            cm = commit[b]
            if k == len(ids):
                gens.append([int(t) for t in res.tokens[b]])  # the answer and its terminating EOS
            else:
                gens.append(ids[:k])  # cut at a stop string: no EOS follows the judged text
                cm = None if cm is None else cm[:k]
            commits.append(cm)
            outputs.append(out)
            extra.append(
                {
                    "nfe": int(res.nfe[b]),
                    "stopped_at_eos": bool(res.stopped_at_eos[b]),
                    "commit_misses": int(np.isnan(cm).sum()) if cm is not None else None,
                    "cut_at_stop": k < len(ids),
                }
            )
        cal = self.spec.calibration
        if cal.confidence == "unmasked":
            tps = dlm_token_probs(self.model, res.prompt_ids, gens, commit=commits)
        else:  # Eq. 4 read as p(y_i | y_\i): each position scored with it masked (robustness.masked_confidence)
            from dlmeval.robustness.masked_confidence import masked_token_probs

            tps = masked_token_probs(
                self.model, res.prompt_ids, gens, item_ids=item_ids, commit=commits,
                seed=derive_seed(self.spec.seed, "robust-confidence"),
                groups=cal.confidence_masks if cal.confidence == "kmask" else None,
            )  # fmt: skip
        return Answers(outputs, tps, extra, [list(p) for p in res.prompt_ids])

    def choice_scorer(self, state):
        from dlmeval.tasks import ChoiceScorer

        scorer = state.get("scorer")
        if scorer is None:
            from dlmeval.scoring import DiffScorer

            lk = self.spec.likelihood
            scorer = state["scorer"] = DiffScorer(
                self.model,
                n_masks=lk.n_masks,
                n_rates=lk.n_rates,
                scheme=lk.scheme,
                weighting=lk.weighting,
                seed=derive_seed(self.spec.seed, "robust-diffscore"),
            )
        return ChoiceScorer(lambda reqs: diffscore_choice_scores(scorer, reqs, strip_leading_space=self.chat))

    @property
    def choice_wrap(self):
        return None  # DiffScore scores the option after the plain question (a chat model: without the space)


class ARResponder(Responder):
    role = "ar"

    @property
    def batch_size(self) -> int:
        return self.spec.ar.batch_size

    def generate(self, task, prompts, item_ids, seed) -> Answers:
        from dlmeval.robustness.calibration import ar_token_probs

        as_ids = [not isinstance(p, str) for p in prompts]
        if any(as_ids) and not (all(as_ids) and hasattr(self.model, "generate_scored")):
            raise InputError(
                "an autoregressive model generates from token ids only through generate_scored, "
                "and from one kind of prompt per call (all texts or all token id lists)"
            )
        ar = self.spec.ar
        kw = dict(
            max_new_tokens=self.spec.task_or_default(task.name).ar_tokens,
            temperature=ar.temperature,
            top_p=ar.top_p,
            stop=task.stop,
            seed=seed,
            item_ids=item_ids,
            batch_size=ar.batch_size,
        )
        if any(as_ids):
            gens = self.model.generate_scored(prompts, **kw)
            outputs = [cut_at(g.text, task.stop) for g in gens]
            tps = generated_token_probs(self.model, gens, outputs, batch_size=ar.batch_size)
            return Answers(outputs, tps, [{} for _ in prompts], [list(g.prompt_ids) for g in gens])
        if hasattr(self.model, "generate_scored"):  # the confidences come with the generation
            gens = self.model.generate_scored(prompts, **kw)
            outputs = [cut_at(g.text, task.stop) for g in gens]
            tps = ar_token_probs(self.model, prompts, outputs, batch_size=ar.batch_size, generated=gens)
            return Answers(outputs, tps, [{} for _ in prompts], [list(g.prompt_ids) for g in gens])
        outputs = [cut_at(t, task.stop) for t in self.model.generate(prompts, **kw)]
        tps = ar_token_probs(self.model, prompts, outputs, batch_size=ar.batch_size)
        return Answers(outputs, tps, [{} for _ in prompts])

    def choice_scorer(self, state):
        from dlmeval.tasks import causal_choice_scorer

        return causal_choice_scorer(
            self.model, aggregate=self.spec.likelihood.ar_aggregate, batch_size=self.spec.ar.batch_size
        )


RESPONDERS = {"dlm": DLMResponder, "ar": ARResponder}


def responder(spec, entry, model) -> Responder:
    return RESPONDERS[entry.role](spec, entry, model)
