""":class:`SuiteInputs`: what a suite reads (options, benchmark frames, models), built and checked before any store
is opened.

The meta-eval command validates, then opens: ``SuiteInputs(opts).prepare()`` reads every benchmark's data and
loads every model the enabled families need, so a missing file or a bad model spec fails with the store exactly as
it was; the command then opens the store and builds the :class:`~.suite.Suite` over these inputs (the suite never
exists without a store). A metric family reaches the inputs through the suite's public interface (the
:class:`~.families.SuiteAPI` protocol); in :meth:`SuiteInputs.prepare` its ``load`` is called on the inputs
themselves, which is why a family's ``load`` may use only the input half of that interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from dlmeval.protocols.diffscore.meta_eval.benchmarks import scoring_frame
from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES
from dlmeval.protocols.diffscore.meta_eval.options import SuiteOptions
from dlmeval.protocols.diffscore.meta_eval.plan import MetaEvalPlan, resolve


class SuiteInputs:
    """The plan (the options resolved once: :class:`~.plan.MetaEvalPlan`), the benchmark frames (under ``limit``)
    and every model of one suite configuration, each read or loaded once. ``models`` maps a model spec string, or
    a family's model key (``"bertscore"``, ``"unieval"``, ...), to an already loaded model."""

    def __init__(self, opts: SuiteOptions | MetaEvalPlan, *, models: Mapping[str, Any] | None = None):
        self.plan = opts if isinstance(opts, MetaEvalPlan) else resolve(opts)
        self.opts = self.plan.opts
        self.given = dict(models or {})  # keys the caller loaded; never replaced
        self.benchmarks = self.plan.benchmarks
        self._loaded: dict[str, Any] = {}
        self._scorers: dict[Any, Any] = {}
        self._frames: dict[str, pd.DataFrame] = {}
        self._prepared: set[str] = set()  # "data", "models": what prepare() has checked

    def prepare(self, *, data: bool = True, models: bool = True) -> SuiteInputs:
        """Validate, then open: read every benchmark's data file and load every model the enabled families need,
        so that a missing or malformed file, a bad model spec or a bad setting fails before any run is created.
        Nothing here touches a store; a second call does nothing. Returns ``self``."""
        if data and "data" not in self._prepared:
            for name in self.benchmarks:
                self.frame(name)
                self.data_identity(name)
            self._prepared.add("data")
        if models and "models" not in self._prepared:
            for name in self.families():
                METRIC_FAMILIES[name](self).load()
            self._prepared.add("models")
        return self

    def families(self) -> list[str]:
        """The families this configuration runs, in rank (table) order."""
        return list(self.plan.families)

    # ------------------------------------------------------------------ data
    def frame(self, name: str) -> pd.DataFrame:
        """The scoring frame of a benchmark under this suite's ``limit`` (built once)."""
        if name not in self._frames:
            o = self.opts
            self._frames[name] = scoring_frame(
                name, o.data_dir, o.limit, self.plan.source(name), o.resolved_detokenizer
            )
        return self._frames[name]

    def data_identity(self, name: str) -> str | dict:
        """What a run that depends on a benchmark's whole data records of it: the data file's digest, or the
        provenance of the rows of its ``--benchmark-source`` (a digest of every row among them); the plan's, computed
        once."""
        return self.plan.data_identity(name)

    # ------------------------------------------------------------------ models
    @property
    def models(self) -> dict[str, Any]:
        """Every model known so far: the given ones, then those loaded through :meth:`model`."""
        return {**self._loaded, **self.given}

    def model(self, key: str, make: Callable[[], Any]) -> Any:
        """The model (or an object holding models, as DiffScore-FT's context) under ``key``: the caller's, else one
        loaded earlier, else ``make()``, kept for the suite's lifetime: a family's ``load`` during :meth:`prepare`
        runs on a family instance of its own, and the suite's instance finds the same load here."""
        if key in self.given:
            return self.given[key]
        if key not in self._loaded:
            self._loaded[key] = make()
        return self._loaded[key]

    def dlm(self):
        """The diffusion model (``opts.dlm`` with ``opts.dlm_adapter``)."""
        o = self.opts
        key = o.dlm if o.dlm_adapter is None else f"{o.dlm} + adapter {o.dlm_adapter}"

        def load():
            from dlmeval.models.registry import load_diffusion

            return load_diffusion(o.dlm, adapter=o.dlm_adapter, **o.load_kwargs())

        return self.model(key, load)

    def ar(self):
        """The autoregressive model of the likelihood baselines (``opts.ar``)."""
        o = self.opts

        def load():
            from dlmeval.models.registry import load_causal_lm

            return load_causal_lm(o.ar, **o.load_kwargs(evaluator=True))

        return self.model(o.ar, load)

    def embedder(self):
        """The token embedder of the embedding baselines' fallback (``opts.encoder``)."""
        from dlmeval.baselines.embedding import TokenEmbedder

        o = self.opts
        return self.model(
            f"embedder:{o.encoder}", lambda: TokenEmbedder(o.encoder, device=o.evaluator_placement)
        )

    def has_chat(self, model) -> bool:
        return bool(getattr(model, "has_chat_template", False)) and bool(
            getattr(model.tokenizer, "chat_template", None)
        )

    def scorer(self, task: str, model=None, cache_key: str = "zs", layout: dict | None = None):
        """A DiffScorer for a task on ``model`` (default: the zero-shot model with the prompt policy; any other
        model, i.e. a fine-tuned one, in its ``layout`` ``{"chat", "prompt"}``, plain when none is given), kept
        under ``(cache_key, task)`` until :meth:`release_scorer`."""
        from dlmeval.scoring import DiffScorer

        key = (cache_key, task)
        if key not in self._scorers:
            if model is None:
                model = self.dlm()
                chat = self.has_chat(model) and self.opts.prompt == "auto"
                prompt = task_prompt(task) if chat else None
            else:
                chat, prompt = bool((layout or {}).get("chat")), (layout or {}).get("prompt")
            self._scorers[key] = DiffScorer(
                model,
                seed=self.opts.seed,
                prompt=prompt,
                chat=chat,
                batch_size=self.opts.dlm_batch_size,
                max_tokens=self.opts.dlm_max_tokens,
                **self.opts.estimator(),
            )
        return self._scorers[key]

    def release_scorer(self, task: str, cache_key: str) -> None:
        """Forget the scorer kept under ``(cache_key, task)`` (DiffScore-FT: its adapter model goes with it)."""
        self._scorers.pop((cache_key, task), None)

    def open_run(self, kind: str, config: dict, models: list) -> Any:
        # a family's bug, not the user's input: a traceback, not the one-line input error
        raise RuntimeError(
            "a metric family opened its run while the suite's inputs were being prepared; a family's load() "
            "may read the data and load models only (runs open on the Suite, over a store)"
        )

    def compute_diffscore(self, *args: Any, **kwargs: Any) -> dict:
        raise RuntimeError(
            "a metric family scored while the suite's inputs were being prepared; a family's load() may read the "
            "data and load models only (scores are computed on the Suite, over a store)"
        )


def task_prompt(task: str) -> str:
    from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS, TASK_PROMPTS

    if task in TASK_PROMPTS:
        return TASK_PROMPTS[task]
    return next(b.task_prompt() for b in BENCHMARKS.values() if b.task == task)
