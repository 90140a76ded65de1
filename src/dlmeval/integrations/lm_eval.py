"""lm-evaluation-harness interop: dlmeval's diffusion LMs as an lm-eval model named ``dlmeval``.

Optional: needs ``pip install 'dlmeval[lm-eval]'`` (lm-eval is never a hard dependency). Importing this module
registers the model with lm-eval's registry::

    import lm_eval
    import dlmeval.integrations.lm_eval  # noqa: F401  (registers "dlmeval")

    results = lm_eval.simple_evaluate(
        model="dlmeval",
        model_args="model=default,steps=128,strategy=none,temperature=0.0,gen_length=128",
        tasks=["arc_challenge"],
    )

or from the shell: ``dlmeval lm-eval`` is lm-eval's own command line with the model registered, every argument
passed unchanged (lm-eval 0.4.13 reads no plugin entry points, so plain ``lm_eval --model dlmeval`` cannot find it;
``python -m dlmeval.integrations.lm_eval`` is the same command)::

    dlmeval lm-eval --model dlmeval --model_args model=default,steps=128 --tasks gsm8k
    torchrun --nproc_per_node 8 -m dlmeval lm-eval --model dlmeval --model_args model=default --tasks gsm8k

Under ``torchrun`` / ``accelerate launch`` each rank answers its share of the documents and rank 0 gathers
(:mod:`dlmeval.integrations.lm_eval_dist`); ``group=doc`` (the default) batches requests within a document only,
so the numbers equal one process's bit for bit (``group=all``: batches span documents, faster in one process).

Model arguments: ``model`` (a dlmeval spec: ``default``, ``llada:PATH``, ``dream:PATH``, ``hf:PATH``, ``tiny-*``),
``device``, ``dtype``, ``trust_remote_code``, ``allow_download``; sampling: ``strategy`` (``none``,
``high_entropy``, ...), ``steps`` (nominal) or ``nfe`` (compute-matched budget), ``gen_length`` (default: the
request's ``max_gen_toks``, else 128), ``block_length``, ``remask_fraction``, ``accounting`` (``paper`` or ``refill``,
:mod:`dlmeval.sampling.config`), ``temperature`` (the unmask temperature, Care's controlled factor),
``task_temperature`` (what a task's own ``temperature`` does: ``ignore``, the default: the model argument wins and a
differing request value is reported once in ``lm.warnings``; ``use``: the request's value replaces it; ``refuse``:
an error), ``seed``, ``batch_size``, ``group`` (``doc``: batches never span documents, see above); likelihoods:
``likelihood`` (``dlmeval``, ``llada`` or ``dllm``: whose convention, :mod:`dlmeval.integrations.lm_eval_ll`),
``ll_estimator`` (under ``likelihood=dlmeval``: ``diffscore`` with ``n_masks`` / ``n_rates``, or ``llada``),
``mc_num`` (128), ``mc_batch``, ``cfg`` (classifier-free guidance, ``likelihood=llada``), ``check_greedy``,
``vocab`` (the rows LLaDA's estimator normalises over: by default ``family``, the family's own rule, wherever a
family's likelihood code is reproduced, and ``tokenizer`` under the DiffScore estimator; ``tokenizer`` / ``all`` /
``family`` explicitly, :mod:`dlmeval.integrations.lm_eval_ll`);
``nfe_log`` (a JSONL file that receives one record per request).

How each request type is answered:

* ``loglikelihood(context, continuation)``: by the ``likelihood`` convention. The default is the DiffScore
  conditional estimator (:class:`dlmeval.scoring.DiffScorer`, ``weighting="elbo_norm"``): the continuation masked at
  T rates x K masks with the context visible, ``score x n_tokens`` (a Monte Carlo ELBO, a lower bound on the
  log-likelihood); ``is_greedy``: the argmax reproduces the continuation with all of it masked. The scorer lays out
  context and continuation with the tokenizer's pair template (a separator between them,
  :mod:`dlmeval.scoring.configs`); ``ll_estimator=llada`` runs LLaDA's ``get_log_likelihood`` on that layout
  (:mod:`dlmeval.scoring.llada_ll`; estimands in docs/care.md); ``likelihood=llada`` / ``dllm`` reproduce those
  harnesses (their layout, estimator, guidance and greedy check);
* ``loglikelihood_rolling(text)``: the marginal estimator (the whole text masked), ``score x n_tokens``;
* ``generate_until(context, gen_kwargs)``: :class:`dlmeval.sampling.RemaskingSampler` with the model arguments,
  cut at the first ``until`` string.

Every request's actual NFE (forward passes) is recorded: ``lm.nfe_records`` (and the ``nfe_log`` file) hold one
dict per request ``{"type", "index", "nfe", ...}``; ``lm.nfe_total`` sums them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from typing import Any

try:  # optional dependency
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    HAVE_LM_EVAL = True
except ImportError:  # pragma: no cover - exercised only without lm-eval
    HAVE_LM_EVAL = False
    LM = object  # type: ignore[assignment,misc]

    def register_model(*names):  # type: ignore[no-redef]
        return lambda cls: cls


from dlmeval.errors import InputError

from .lm_eval_ll import LikelihoodConventions
from .lm_eval_ll import as_bool as _bool
from .lm_eval_ll import request_id as _request_id

MODEL_NAME = "dlmeval"
_log = logging.getLogger("dlmeval.lm_eval")
#: what a task's own ``temperature`` generation argument does (model argument ``task_temperature``)
TASK_TEMPERATURE = ("ignore", "use", "refuse")
#: how requests are batched (model argument ``group``)
GROUPS = ("doc", "all")
#: the ``loglikelihood`` estimators under ``likelihood=dlmeval`` (module doc)
LL_ESTIMATORS = ("diffscore", "llada")


def _opt_int(v: Any) -> int | None:
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "none")):
        return None
    return int(v)


def _batch_size(v: Any) -> int:
    """lm-eval's ``--batch_size``: a number, or ``auto`` / ``auto:N`` (no probing here: the scorer bounds its
    forward batches by rows and tokens itself, so ``auto`` means the default of 16 requests)."""
    if isinstance(v, str) and v.strip().lower().startswith("auto"):
        return 16
    try:
        return max(1, int(v))
    except (TypeError, ValueError):
        raise InputError(f"batch_size={v!r}; give a positive integer or auto") from None


@register_model(MODEL_NAME)
class DlmevalLM(LikelihoodConventions, LM):
    """A dlmeval :class:`~dlmeval.models.base.DiffusionLM` behind lm-eval's ``LM`` interface (module docstring)."""

    def __init__(
        self,
        model: str = "default",
        *,
        device: str = "auto",
        dtype: str = "auto",
        trust_remote_code: bool | str = False,
        allow_download: bool | str = False,
        strategy: str = "none",
        steps: int | str | None = None,
        nfe: int | str | None = None,
        gen_length: int | str | None = None,
        block_length: int | str | None = None,
        remask_fraction: float | str = 0.15,
        temperature: float | str = 0.0,
        task_temperature: str = "ignore",
        accounting: str = "paper",
        seed: int | str = 0,
        batch_size: int | str = 16,
        n_masks: int | str = 5,
        n_rates: int | str = 5,
        ll_estimator: str = "diffscore",
        mc_num: int | str = 128,
        mc_batch: int | str | None = None,
        likelihood: str = "dlmeval",
        cfg: float | str = 0.0,
        check_greedy: bool | str | None = None,
        vocab: str | None = None,
        nfe_log: str | None = None,
        group: str = "doc",
        lm=None,
        **unused: Any,
    ):
        if not HAVE_LM_EVAL:
            raise InputError(
                "lm-eval is not installed; `pip install 'dlmeval[lm-eval]'` to use this integration"
            )
        super().__init__()
        from dlmeval.models import load_diffusion
        from dlmeval.sampling import STRATEGIES

        from .lm_eval_dist import join_group, lm_eval_device

        self._par = join_group()
        self._rank, self._world_size = self._par.rank, self._par.world_size
        if lm is None:
            lm = load_diffusion(
                str(model),
                device=lm_eval_device(device, self._par),
                dtype=dtype,
                trust_remote_code=_bool(trust_remote_code),
                allow_download=_bool(allow_download),
            )
        self.lm = lm
        if strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        self.strategy = strategy
        self.steps = _opt_int(steps)
        self.nfe_budget = _opt_int(nfe)
        if self.steps is not None and self.nfe_budget is not None:
            raise InputError("give steps (nominal) or nfe (a forward-pass budget), not both")
        self.gen_length = _opt_int(gen_length)
        self.block_length = _opt_int(block_length)
        self.remask_fraction = float(remask_fraction)
        self.temperature = float(temperature)
        if task_temperature not in TASK_TEMPERATURE:
            raise InputError(
                f"task_temperature={task_temperature!r}; choose one of {', '.join(TASK_TEMPERATURE)} (ignore: "
                "the unmask temperature of the model arguments wins over a task's generation temperature)"
            )
        self.task_temperature = task_temperature
        self.accounting = accounting
        self.warnings: list[str] = []
        self.seed = int(seed)
        self._batch_size = _batch_size(batch_size)
        if group not in GROUPS:
            raise InputError(
                f"group={group!r}; choose one of {', '.join(GROUPS)} (doc: a batch never spans two documents, so "
                "the numbers do not depend on how lm-eval splits documents over ranks; all: batches span documents)"
            )
        self.group = group
        #: requests this process answered, by type (under torchrun: this rank's share)
        self.request_counts: dict[str, int] = {}
        self.request_seconds: dict[str, float] = {}
        self.n_masks, self.n_rates = int(n_masks), int(n_rates)
        if ll_estimator not in LL_ESTIMATORS:
            raise InputError(
                f"ll_estimator={ll_estimator!r}; choose one of {', '.join(LL_ESTIMATORS)} (diffscore: the DiffScore "
                "conditional estimator; llada: LLaDA's get_log_likelihood with stratified mask counts)"
            )
        self.ll_estimator = ll_estimator
        self.mc_num = int(mc_num)
        self._set_likelihood(likelihood, cfg, check_greedy, _opt_int(mc_batch), vocab)
        self.nfe_log = nfe_log
        self.nfe_records: list[dict[str, Any]] = []
        self.unused_args = dict(unused)
        self._scorers: dict[str, Any] = {}

    # ------------------------------------------------------------------ lm-eval plumbing
    def get_model_info(self) -> dict[str, Any]:
        """What lm-eval adds to its results' ``config``: the likelihood settings with every default resolved
        (a default that changes, e.g. ``vocab``, shows in the stored results)."""
        return {"dlmeval_likelihood": self.likelihood_info()}

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def device(self):
        return self.lm.device

    # lm-eval's data-parallel contract: evaluate() builds this rank's share of the documents (rank / world_size)
    # and gathers the per-document metrics on rank 0 through these collectives (gloo, JSON payloads)
    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def all_gather(self, tensor):
        from .lm_eval_dist import all_gather_tensor

        return all_gather_tensor(self._par, tensor)

    def gather_object(self, obj, dst: int = 0):
        from .lm_eval_dist import gather_object

        return gather_object(self._par, obj, dst)

    def barrier(self) -> None:
        self._par.barrier()

    # chat templates (--apply_chat_template): the model's tokenizer's own template
    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.lm.tokenizer, "name_or_path", self.lm.name)).replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return getattr(self.lm.tokenizer, "chat_template", None) or ""

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        tok = self.lm.tokenizer
        if not getattr(self.lm, "has_chat_template", False) or not getattr(tok, "chat_template", None):
            raise InputError(
                f"model {self.lm.name} has no chat template; run without --apply_chat_template (or choose a model "
                "whose tokenizer has one)"
            )
        return tok.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )

    def _groups(self, requests) -> list[list[int]]:
        """Indices of ``requests`` batched together: with ``group=doc`` one list per document (lm-eval gives
        every request its task and document), so a document's numbers never depend on which other documents share
        its rank; ``group=all``: one list."""
        if self.group == "all":
            return [list(range(len(requests)))] if requests else []
        out: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            out.setdefault((getattr(r, "task_name", None), getattr(r, "doc_id", None)), []).append(i)
        return list(out.values())

    @contextlib.contextmanager
    def _answering(self, requests):
        """Count and time one call's requests; logs ``lm-eval rank R/W: N TYPE requests in S s`` at its end (the
        per-rank share under torchrun; benchmarks/bench_lm_eval_dp.py reads it)."""
        t0 = time.perf_counter()
        yield
        if not requests:
            return
        kind, secs = requests[0].request_type, time.perf_counter() - t0
        self.request_counts[kind] = self.request_counts.get(kind, 0) + len(requests)
        self.request_seconds[kind] = self.request_seconds.get(kind, 0.0) + secs
        _log.info(
            "lm-eval rank %d/%d: %d %s requests in %.2f s",
            self._rank,
            self._world_size,
            len(requests),
            kind,
            secs,
        )

    @property
    def nfe_total(self) -> int:
        return int(sum(r["nfe"] for r in self.nfe_records))

    def _record(self, recs: list[dict[str, Any]]) -> None:
        self.nfe_records.extend(recs)
        if self.nfe_log:
            with open(self.nfe_log, "a", encoding="utf-8") as f:
                for r in recs:
                    f.write(json.dumps(r) + "\n")

    def _scorer(self, weighting: str = "elbo_norm"):
        from dlmeval.scoring import DiffScorer

        if weighting not in self._scorers:
            self._scorers[weighting] = DiffScorer(
                self.lm,
                n_masks=self.n_masks,
                n_rates=self.n_rates,
                weighting=weighting,
                seed=self.seed,
                batch_size=self._batch_size,
            )
        return self._scorers[weighting]

    # ------------------------------------------------------------------ log-likelihood
    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        with self._answering(requests):
            self._loglikelihood(requests, out)
        return out  # type: ignore[return-value]

    def _loglikelihood(self, requests, out) -> None:
        for idx in self._groups(requests):
            pairs = [tuple(requests[i].args[:2]) for i in idx]
            if self.likelihood != "dlmeval":
                res = self._loglikelihood_harness(pairs, idx)
            elif self.ll_estimator == "llada":
                res = self._loglikelihood_llada(pairs, idx)
            else:
                res = self._loglikelihood_diffscore(pairs, idx)
            for i, r in zip(idx, res):
                out[i] = r

    def loglikelihood_rolling(self, requests) -> list[float]:
        out = [0.0] * len(requests)
        with self._answering(requests):
            self._rolling(requests, out)
        return out

    def _rolling(self, requests, out: list[float]) -> None:
        for idx in self._groups(requests):
            texts = [requests[i].args[0] for i in idx]
            nfe0 = self.lm.nfe
            df = self._scorer().score(
                texts, config="marginal", item_ids=[_request_id("roll", t) for t in texts]
            )
            per = (self.lm.nfe - nfe0) / len(texts)
            self._record([{"type": "loglikelihood_rolling", "index": i, "nfe": per} for i in idx])
            for i, sc, n in zip(idx, df["score"], df["n_tokens"]):
                out[i] = float(sc) * int(n) if math.isfinite(sc) else 0.0

    # ------------------------------------------------------------------ generation
    def _sampler(self, length: int, temperature: float):
        from dlmeval.sampling import RemaskingSampler, SamplerConfig

        steps = self.steps if self.nfe_budget is None else None
        if steps is None and self.nfe_budget is None:
            steps = length
        block = self.block_length if self.block_length and length % self.block_length == 0 else None
        cfg = SamplerConfig(
            length=length,
            steps=steps,
            nfe=self.nfe_budget,
            block_length=block,
            strategy=self.strategy,
            remask_fraction=self.remask_fraction,
            temperature=temperature,
            seed=self.seed,
            accounting=self.accounting,
        )
        return RemaskingSampler(self.lm, cfg)

    def _temperature(self, kw: dict) -> float:
        """The unmask temperature of a request under ``task_temperature`` (see the module doc)."""
        if "temperature" not in kw or float(kw["temperature"]) == self.temperature:
            return self.temperature
        asked = float(kw["temperature"])
        if self.task_temperature == "use":
            return asked
        msg = (
            f"a task asks for temperature={asked:g}; the unmask temperature of the model arguments "
            f"({self.temperature:g}) is Care's controlled factor"
        )
        if self.task_temperature == "refuse":
            raise InputError(msg + "; set temperature to the task's value or task_temperature=ignore|use")
        note = msg + " and wins (task_temperature=ignore)"
        if note not in self.warnings:
            self.warnings.append(note)
            _log.warning("dlmeval lm-eval model: %s", note)
        return self.temperature

    def generate_until(self, requests) -> list[str]:
        out: list[str | None] = [None] * len(requests)
        with self._answering(requests):
            for idx in self._groups(requests):
                self._generate(requests, idx, out)
        return [o or "" for o in out]

    def _generate(self, requests, index: list[int], out: list[str | None]) -> None:
        from dlmeval.protocols.care import continuation_text, cut_at

        groups: dict[tuple[int, float, tuple[str, ...]], list[int]] = {}
        for i in index:
            r = requests[i]
            kw = dict(r.args[1] or {})
            until = kw.get("until") or []
            until = (until,) if isinstance(until, str) else tuple(until)
            length = self.gen_length or int(kw.get("max_gen_toks", 128))
            temp = self._temperature(kw)
            groups.setdefault((length, temp, until), []).append(i)
        seen: dict[str, int] = {}
        for (length, temp, until), idx in groups.items():
            sampler = self._sampler(length, temp)
            for start in range(0, len(idx), self._batch_size):
                chunk = idx[start : start + self._batch_size]
                prompts = [sampler.encode_prompt(requests[i].args[0]) for i in chunk]
                keep = self.lm.max_length - length
                prompts = [p[-keep:] if len(p) > keep else p for p in prompts]  # left-truncate long contexts
                rids = []
                for i in chunk:
                    base = _request_id("gen", requests[i].args[0], length, temp)
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    rids.append(base if n == 0 else f"{base}.{n}")
                res = sampler.sample(prompts, item_ids=rids)
                recs = res.records()
                for j, i in enumerate(chunk):
                    text = continuation_text(self.lm, prompts[j], recs[j]["token_ids"], recs[j]["text"])
                    out[i] = cut_at(text, until) if until else text
                self._record(
                    [
                        {
                            "type": "generate_until",
                            "index": i,
                            "nfe": recs[j]["nfe"],
                            "steps": int(res.config["steps"]),
                            "nfe_target": res.config["nfe"],
                            "remasks": recs[j]["remasks"],
                        }
                        for j, i in enumerate(chunk)
                    ]
                )


def main(argv: list[str] | None = None) -> int:
    """lm-eval's command line with the ``dlmeval`` model registered (``argv``: lm-eval's arguments)."""
    if not HAVE_LM_EVAL:
        raise InputError("lm-eval is not installed; `pip install 'dlmeval[lm-eval]'`")
    import sys

    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = ["lm-eval", *argv]
    cli_evaluate()
    return 0


__all__ = ["HAVE_LM_EVAL", "MODEL_NAME", "DlmevalLM", "main"]

if __name__ == "__main__":
    main()  # lm-eval's own errors: its messages and exit codes
