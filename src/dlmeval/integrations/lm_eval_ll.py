"""The ``loglikelihood`` conventions of the lm-eval model (model argument ``likelihood``), kept apart from the
request plumbing of :mod:`dlmeval.integrations.lm_eval`.

==============  ==================================================================================================
``likelihood``  what a ``loglikelihood(context, continuation)`` request returns
==============  ==================================================================================================
``dlmeval``     (default) the continuation laid out after the context with the tokenizer's pair template; the
                estimator is ``ll_estimator``: ``diffscore`` (the DiffScore conditional ELBO x tokens) or ``llada``
                (LLaDA's ``get_log_likelihood`` on that layout); ``is_greedy``: the argmax with the whole
                continuation masked reproduces it
``llada``       LLaDA's lm-eval harness (``eval_llada.py``): lm-eval's token split of ``context + continuation``
                (:func:`dlmeval.scoring.llada_ll.llada_encode_pair`), LLaDA's estimator (``mc_num`` rows in passes of
                ``mc_batch``, default: lm-eval's ``--batch_size``, which LLaDA's harness reads as that mini-batch),
                classifier-free guidance ``cfg``, and its greedy check (``check_greedy``, default true as LLaDA's)
``dllm``        dllm's MDLM harness (``dllm/core/eval/mdlm.py``): the same split and estimator, no guidance on
                likelihoods (``cfg`` is refused), ``check_greedy`` default false
==============  ==================================================================================================

``vocab`` (model argument; :data:`dlmeval.scoring.core.VOCABS`): the output rows LLaDA's estimator and the greedy
checks normalise over. Its default (:func:`default_vocab`) follows the estimator: wherever a family's own likelihood
code runs (``likelihood=llada`` / ``dllm``, ``ll_estimator=llada``) it is ``family``, the rule of that code
(``Family.likelihood_vocab``: every row for LLaDA, Dream, A2D and BERT-Chat, whose harnesses take
``F.cross_entropy`` over the raw logits), so ``likelihood=llada`` is LLaDA's harness as published; ``vocab=tokenizer``
leaves the padded vocabulary rows past the tokenizer out (the one shim ``tests/parity/test_llada_harness.py``
records). The DiffScore estimator (``likelihood=dlmeval``, ``ll_estimator=diffscore``) keeps ``tokenizer`` and
refuses any other. The rule in force is in lm-eval's results (``config.dlmeval_likelihood``,
:meth:`LikelihoodConventions.likelihood_info`).

Every estimate's draws come from a generator seeded by (run seed, request id), so a request's value does not depend
on the other requests (LLaDA's harness draws from the global RNG in request order); given the same generator seed
the ``llada`` convention reproduces the harness's numbers (``tests/parity/test_llada_harness.py``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from dlmeval.errors import InputError

#: the conventions (module doc)
LIKELIHOODS = ("dlmeval", "llada", "dllm")


def default_vocab(likelihood: str, ll_estimator: str) -> str:
    """The ``vocab`` a convention takes when the model arguments name none: the family's rule where the family's
    own likelihood code is reproduced (LLaDA's harness, dllm's, LLaDA's estimator), the tokenizer's rows under
    the DiffScore estimator (:data:`dlmeval.scoring.core.SCORING_VOCAB`, its evidence there)."""
    from dlmeval.scoring.core import FAMILY_VOCAB, SCORING_VOCAB

    return FAMILY_VOCAB if likelihood in ("llada", "dllm") or ll_estimator == "llada" else SCORING_VOCAB


def request_id(*parts: Any) -> str:
    """A request's id (what seeds its draws): 16 hex digits of SHA-256 over its parts."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:16]


def as_bool(v: Any) -> bool:
    """A model argument as a bool (lm-eval passes ``key=value`` strings)."""
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


class LikelihoodConventions:
    """The ``loglikelihood`` of each convention; mixed into :class:`dlmeval.integrations.lm_eval.DlmevalLM`."""

    def _set_likelihood(self, likelihood: str, cfg, check_greedy, mc_batch, vocab: str | None = None) -> None:
        if likelihood not in LIKELIHOODS:
            raise InputError(
                f"likelihood={likelihood!r}; choose one of {', '.join(LIKELIHOODS)} (dlmeval: the pair layout and "
                "ll_estimator; llada: LLaDA's eval_llada.py; dllm: dllm's MDLM harness)"
            )
        self.likelihood = likelihood
        self.cfg = float(cfg)
        if self.cfg < 0:
            raise InputError(f"cfg={cfg}; classifier-free guidance takes a scale >= 0 (0: none)")
        if self.cfg > 0 and likelihood != "llada":
            raise InputError(
                f"cfg={cfg} with likelihood={likelihood}: only LLaDA's harness guides likelihoods; use "
                "likelihood=llada (dllm's applies guidance in generation only)"
            )
        self.check_greedy = as_bool(check_greedy) if check_greedy is not None else likelihood == "llada"
        from dlmeval.scoring.core import VOCABS

        if vocab is None or (isinstance(vocab, str) and vocab.strip().lower() in ("", "none")):
            vocab = default_vocab(likelihood, self.ll_estimator)
        if vocab not in VOCABS:
            raise InputError(
                f"vocab={vocab!r}; choose one of {', '.join(VOCABS)} (tokenizer: padded vocabulary rows left out; "
                "family: the rule of the family's own likelihood code)"
            )
        if vocab != "tokenizer" and likelihood == "dlmeval" and self.ll_estimator != "llada":
            raise InputError(
                f"vocab={vocab} reaches LLaDA's estimator only; use likelihood=llada / dllm or ll_estimator=llada "
                "(the DiffScore estimator normalises over the tokenizer's rows)"
            )
        self.vocab = vocab
        if mc_batch is None:
            mc_batch = self._batch_size if likelihood in ("llada", "dllm") else 16
        self.mc_batch = int(mc_batch)
        if self.mc_batch < 1 or self.mc_num < self.mc_batch:
            raise InputError(f"mc_num ({self.mc_num}) must be at least mc_batch ({self.mc_batch}) >= 1")
        if likelihood in ("llada", "dllm") and self.mc_num % self.mc_batch:
            raise InputError(
                f"mc_num ({self.mc_num}) must be a multiple of mc_batch ({self.mc_batch}) under likelihood="
                f"{likelihood} (the harness asserts it; mc_batch defaults to --batch_size)"
            )

    def likelihood_info(self) -> dict[str, Any]:
        """The likelihood settings in force, defaults resolved (lm-eval writes them into its results' ``config``
        through ``get_model_info``): the convention, the estimator, ``vocab`` as asked and the rows it means for
        this model, and the Monte Carlo sizes."""
        from dlmeval.scoring.core import vocab_rows

        return {
            "likelihood": self.likelihood,
            "ll_estimator": self.ll_estimator,
            "vocab": self.vocab,
            "vocab_rows": vocab_rows(self.lm, self.vocab),
            "mc_num": self.mc_num,
            "mc_batch": self.mc_batch,
            "cfg": self.cfg,
            "check_greedy": self.check_greedy,
        }

    def _loglikelihood_harness(self, pairs, index: list[int]) -> list[tuple[float, bool]]:
        """LLaDA's / dllm's harness (module doc)."""
        from dlmeval.scoring.llada_ll import harness_pair, llada_greedy, llada_log_likelihood
        from dlmeval.seeding import derive_seed, torch_generator

        out, recs = [], []
        for i, (c, x) in enumerate(pairs):
            ids, span = harness_pair(self.lm, c, x, f"request {index[i]}")
            nfe0 = self.lm.nfe
            gen = torch_generator(
                derive_seed(self.seed, f"lm-eval-{self.likelihood}", request_id("ll", c, x))
            )
            val = llada_log_likelihood(
                self.lm,
                ids,
                span,
                mc_num=self.mc_num,
                batch_size=self.mc_batch,
                cfg=self.cfg,
                generator=gen,
                vocab=self.vocab,
            )
            greedy = (
                llada_greedy(self.lm, ids, span, cfg=self.cfg, vocab=self.vocab)
                if self.check_greedy
                else False
            )
            recs.append(
                {
                    "type": "loglikelihood",
                    "index": index[i],
                    "nfe": self.lm.nfe - nfe0,
                    "n_tokens": span[1] - span[0],
                }
            )
            out.append((val, bool(greedy)))
        self._record(recs)
        return out

    def _loglikelihood_diffscore(self, pairs, index: list[int]) -> list[tuple[float, bool]]:
        scorer = self._scorer()
        ids = [request_id("ll", c, x) for c, x in pairs]
        nfe0 = self.lm.nfe
        df = scorer.score([x for _, x in pairs], [c for c, _ in pairs], config="cond", item_ids=ids)
        nfe_scoring = self.lm.nfe - nfe0
        greedy = self._greedy([c for c, _ in pairs], [x for _, x in pairs])
        out = []
        for i, row in enumerate(df.itertuples()):
            total = float(row.score) * int(row.n_tokens) if math.isfinite(row.score) else 0.0
            out.append((total, bool(greedy[i])))
        self._record(
            [
                {
                    "type": "loglikelihood",
                    "index": index[i],
                    "nfe": nfe_scoring / len(pairs),
                    "n_tokens": int(n),
                }
                for i, n in enumerate(df["n_tokens"])
            ]
        )
        return out

    def _loglikelihood_llada(self, pairs, index: list[int]) -> list[tuple[float, bool]]:
        """LLaDA's ``get_log_likelihood`` (:func:`dlmeval.scoring.llada_ll.llada_log_likelihood`) on the same
        token layout as the default estimator, its draws seeded by (run seed, request id)."""
        from dlmeval.scoring.llada_ll import llada_log_likelihood
        from dlmeval.seeding import derive_seed, torch_generator

        fmt = self._scorer().formatter
        out, recs = [], []
        for i, (c, x) in enumerate(pairs):
            lay = fmt.layout("cond", x, c)
            nfe0 = self.lm.nfe
            gen = torch_generator(derive_seed(self.seed, "lm-eval-llada", request_id("ll", c, x)))
            val = llada_log_likelihood(
                self.lm,
                lay.ids,
                lay.candidate,
                mc_num=self.mc_num,
                batch_size=self.mc_batch,
                generator=gen,
                vocab=self.vocab,
            )
            a, b = lay.candidate
            recs.append(
                {"type": "loglikelihood", "index": index[i], "nfe": self.lm.nfe - nfe0, "n_tokens": b - a}
            )
            out.append(val)
        greedy = self._greedy([c for c, _ in pairs], [x for _, x in pairs])
        self._record(recs)
        return [(v, bool(g)) for v, g in zip(out, greedy)]

    def _greedy(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[bool]:
        """Whether the argmax reproduces every continuation token with the whole continuation masked."""
        from dlmeval.scoring.core import MaskedRow, iter_scores

        fmt = self._scorer().formatter
        lays = [fmt.layout("cond", x, c) for c, x in zip(contexts, continuations)]
        rows = [MaskedRow(lay.ids, range(*lay.candidate)) for lay in lays]
        out = [True] * len(lays)
        for scored in iter_scores(self.lm, rows, batch_size=self._batch_size, top_k=1, vocab=self.vocab):
            for i, top in zip(scored.rows, scored.top_ids):
                a, b = lays[i].candidate
                out[i] = top[:, 0].tolist() == list(lays[i].ids[a:b])
        return out
