"""Options of the meta-evaluation suite (:class:`SuiteOptions`; DiffScore-FT's :class:`FTOptions` are
:mod:`dlmeval.protocols.diffscore.ft`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.ft import FTOptions  # DiffScore-FT's own options (re-exported here)
from dlmeval.protocols.diffscore.meta_eval.benchmarks import (
    SUITES,
    BenchmarkSource,
    get_benchmark,
    task_groups,
)
from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES, family_names

#: the built-in families ``--metrics`` chooses from by default (every registered family with ``default = True``)
FAMILIES = ("lexical", "embedding", "ar", "diffscore")
SUITE_VERSION = 1  # bump when a component's numbers change for the same configuration


@dataclass(frozen=True)
class SuiteOptions:
    """The suite's settings. A metric family's own fields (``bertscore_model``, ``unieval_model``, ...) are set on
    the command line by the options the family declares (``MetricFamily.options``); their defaults are here."""

    suite: str = "bartscore"
    benchmarks: tuple[str, ...] | None = None  # default: every benchmark of the suite
    limit: int | None = None
    # ``--benchmark-source NAME[:SPLIT]=SOURCE``: (benchmark, source, split) read from a 🤗 dataset (hub id, read
    # from the cache and fetched only with allow_download; save_to_disk directory; parquet / JSONL / CSV) instead
    # of the benchmark's data file
    sources: tuple[tuple[str, str, str | None], ...] = ()
    # metric families (``--metrics``); None: every registered family with ``default = True``
    families: tuple[str, ...] | None = None
    dlm: str = "default"
    dlm_adapter: str | None = None  # a LoRA adapter directory loaded onto ``dlm`` (``--adapter``)
    ar: str = "default-ar"
    # ``--protocol``: "paper" (what the DiffScore paper states) or "bartscore" (BARTScore's analysis exactly: REALSumm
    # per document on the recall variants); see paper_protocols.SUITE_PROTOCOLS and docs/diffscore.md
    protocol: str = "paper"
    # the lexical family's ROUGE (``--rouge-impl``): "rouge-score" (Google's reimplementation) or "rouge155" (the
    # ROUGE-1.5.5 Perl script with BARTScore's options, dlmeval.baselines.rouge155)
    rouge_impl: str = "rouge-score"
    # rouge155's WordNet exception lists (``--rouge-wordnet``): "empty" (BARTScore's numbers) or "2.0" (built in)
    rouge_wordnet: str = "empty"
    # several references (SummEval's 11): how ROUGE's and BERTScore's per-reference P / R / F combine
    # (``--ref-agg``). "mean": BARTScore's SUM/score.py at the commit of the shipped pickles (it averages every metric
    # over the references); the DiffScore paper names no rule; "max": the best reference
    ref_agg: str = "mean"
    # the text ROUGE, BERTScore and MoverScore read (``--text-form``): "bartscore" = BARTScore's form per metric
    # (SUM/score.py: ROUGE the tokenized text lower-cased, BERTScore and MoverScore the tokenized text as it is; the
    # DiffScore paper is silent, so BARTScore's is the default); "detok": the detokenized text for every metric
    text_form: str = "bartscore"
    # how the tokenized pickle text is detokenized for the metrics that read detokenized text (``--detokenizer``):
    # "treebank" (NLTK's TreebankWordDetokenizer, the inverse of the tokenizer that made the pickles) or "moses"
    # (BARTScore's SUM/utils.py MosesDetokenizer('en'), through sacremoses); None: the protocol's (paper: treebank,
    # the paper names none; bartscore: moses, BARTScore's own)
    detokenizer: str | None = None
    # the CPU-demo encoder of the embedding family (BERTScore when roberta-large is not on this machine, MoverScore
    # when no --moverscore-model is given); default: the shipped all-MiniLM-L6-v2
    encoder: str | None = None
    # BERTScore (bert-score): a checkpoint directory or hub id (None: roberta-large when cached, the paper's), the
    # layer (None: bert-score's tuned layer, 17 for roberta-large), IDF from the benchmark's references (off:
    # BARTScore's runs, which the paper reports, use idf=False); rescaled whenever bert-score has the baseline file
    bertscore_model: str | None = None
    bertscore_layer: int | None = None
    bertscore_idf: bool = False
    # MoverScore: an encoder directory or hub id (None: the demo encoder), n-gram size, IDF weights (on: its
    # authors' and BARTScore's setting)
    moverscore_model: str | None = None
    moverscore_ngram: int = 1
    moverscore_idf: bool = True
    moverscore_stopwords: str | None = (
        None  # a file of space-separated stop words (BARTScore's files/stopwords.txt)
    )
    # the supervised / LLM-judge baselines (each off by default; --metrics NAME runs it): a checkpoint directory or
    # hub id, None: the published checkpoint from the Hugging Face cache (fetched only with allow_download)
    unieval_model: str | None = None  # MingZhong/unieval-sum (summarization, data-to-text)
    # UniEval's one reference (relevance, informativeness): "first" (its evaluator reads one; its D2T files hold
    # BARTScore's ref_summs[0]) or "best" (the best-scoring reference)
    unieval_refs: str = "first"
    unieval_fact_model: str | None = None  # MingZhong/unieval-fact (Rank19, QAGS)
    alignscore_model: str | None = None  # an AlignScore checkpoint (.ckpt) or a converted directory
    alignscore_base: str | None = None  # the RoBERTa it was trained from (default roberta-large)
    questeval_qg_model: str | None = None  # ThomasNLG/t5-qg_squad1-en (QuestEval's question generator)
    questeval_qa_model: str | None = None  # ThomasNLG/t5-qa_squad2neg-en (its question answerer)
    # G-Eval's judge: a causal LM spec (see `dlmeval models`) or an OpenAI-compatible endpoint URL (http...);
    # None: the family cannot run
    geval_judge: str | None = None
    geval_judge_model: str | None = None  # the model name sent to an endpoint
    # the bartscore family's seq2seq checkpoint (``--bartscore-model``): a local directory, or a hub id read from the
    # Hugging Face cache (fetched only with allow_download); None: facebook/bart-large-cnn, the paper's
    bartscore_model: str | None = None
    # DiffScore estimator: a preset (dlmeval.scoring.spec.PRESETS; None: "standard"), its Fast variant, and any of
    # K, T, scheme, weighting replacing the preset's value (None: the preset's)
    preset: str | None = None
    fast: bool = False
    n_masks: int | None = None  # default: the preset's (20; 5 with fast)
    n_rates: int | None = None  # default: the preset's (10; 5 with fast)
    scheme: str | None = None  # default: the preset's ("combined"; "independent" for paper)
    weighting: str | None = None  # default: the preset's ("mlp")
    prompt: str = "auto"  # "auto": task prompts for models with a chat template; "none"
    all_configs: bool = False  # every DiffScore configuration on every benchmark, not just the mapped ones
    ft: bool = False
    ft_options: FTOptions = field(default_factory=FTOptions)
    bootstrap: int = 1000
    confidence: float = 0.95
    alpha: float = 0.05
    ci_protocols: str = "primary"  # "primary" | "all"
    seed: int = 0
    device: str | None = None
    evaluator_device: str | None = None  # the AR, encoder and BART baseline models (None: device)
    dtype: str | None = None
    data_dir: str | None = None
    chunk_size: int = 32
    ar_batch_size: int = 8
    # AR reference directions: best of the first N distinct references (None: all)
    ar_max_refs: int | None = None
    dlm_batch_size: int | None = None
    dlm_max_tokens: int | None = None  # padded tokens per DiffScore forward pass (default: the scorer's)
    trust_remote_code: bool = False
    allow_download: bool = False  # model specs may be hub ids (needs internet)
    progress: bool = True

    @property
    def resolved_detokenizer(self) -> str:
        """``detokenizer``, or the suite protocol's default (``bartscore``: Moses, as BARTScore's ``SUM/utils.py``;
        ``paper``: Treebank)."""
        if self.detokenizer is not None:
            return self.detokenizer
        return "moses" if self.protocol == "bartscore" else "treebank"

    def selected_families(self) -> tuple[str, ...]:
        """The ``--metrics`` families (the registered defaults when none were given)."""
        if self.families is not None:
            return tuple(self.families)
        return tuple(n for n in family_names() if METRIC_FAMILIES[n].default)

    def source_for(self, name: str) -> BenchmarkSource | None:
        """The dataset benchmark ``name`` is read from (None: its data file)."""
        for bench, source, split in self.sources:
            if get_benchmark(bench, self.suite).name == name:
                return BenchmarkSource(source, split, self.allow_download)
        return None

    def resolved_benchmarks(self) -> tuple[str, ...]:
        if self.suite not in SUITES:
            raise InputError(f"unknown suite {self.suite!r}; choose one of {', '.join(SUITES)}")
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS

        def here(names):  # an imported set joins the default set and its group once its file is there
            return [
                n
                for n in names
                if not BENCHMARKS[n].optional or BENCHMARKS[n].present(self.data_dir) or self.source_for(n)
            ]

        if not self.benchmarks:
            return tuple(here(SUITES[self.suite]))
        groups = task_groups(self.suite)
        out: list[str] = []
        for name in self.benchmarks:
            key = name.strip()
            if key.upper() in groups:
                out += here(groups[key.upper()])
            else:
                out.append(get_benchmark(key, self.suite).name)
        return tuple(dict.fromkeys(out))

    def estimator(self) -> dict[str, Any]:
        """The resolved DiffScore estimator settings (K, T, scheme, weighting: the keywords of DiffScorer)."""
        from dlmeval.scoring.spec import resolve_estimator

        spec = resolve_estimator(
            self.preset,
            fast=self.fast,
            n_masks=self.n_masks,
            n_rates=self.n_rates,
            scheme=self.scheme,
            weighting=self.weighting,
        )
        return {
            "n_masks": spec.n_masks,
            "n_rates": spec.n_rates,
            "scheme": spec.scheme,
            "weighting": spec.weighting,
        }

    @property
    def evaluator_placement(self) -> str | None:
        """Where the evaluator models load (the AR, encoder, BART, UniEval, ... baselines): ``evaluator_device``,
        default ``device``."""
        return self.evaluator_device or self.device

    def load_kwargs(self, *, evaluator: bool = False) -> dict[str, Any]:
        """The keywords every model of the suite is loaded with (``load_diffusion`` / ``load_causal_lm``):
        placement (``evaluator_device`` for an evaluator model, default ``device``), dtype, remote code,
        downloads, seed."""
        return {
            "device": self.evaluator_placement if evaluator else self.device,
            "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code,
            "allow_download": self.allow_download,
            "seed": self.seed,
        }

    def estimator_record(self) -> dict[str, Any]:
        """What a run records of the estimator: :meth:`estimator` plus what the names mean (the masks' distribution,
        the weight formula, the preset), so that a scheme or weighting whose meaning changes makes new runs."""
        from dlmeval.scoring.spec import EstimatorSpec

        return EstimatorSpec(**self.estimator()).as_dict()

    def check_plan(self) -> None:
        """The checks ``meta-eval --plan`` needs (names of families, benchmarks and protocols, the text and
        reference rules; no model)."""
        from dlmeval.protocols.diffscore.paper_protocols import SUITE_PROTOCOLS

        known = family_names()
        bad = [f for f in self.selected_families() if f not in known]
        if bad:
            raise InputError(f"unknown metric family {bad}; choose from {', '.join(known)}")
        if self.protocol not in SUITE_PROTOCOLS:
            raise InputError(f"--protocol {self.protocol!r}: choose one of {', '.join(SUITE_PROTOCOLS)}")
        self._check_text_rules()
        self.resolved_benchmarks()

    def _check_text_rules(self) -> None:
        """The text and reference rules (``--rouge-impl``, ``--rouge-wordnet``, ``--ref-agg``, ``--text-form``,
        ``--detokenizer``): a run and ``--plan`` both refuse a value outside the allowed ones."""
        from dlmeval.baselines.likelihood import REF_AGGS
        from dlmeval.baselines.rouge155 import EXCEPTION_LISTS
        from dlmeval.protocols.diffscore.meta_eval.baselines import ROUGE_IMPLS, TEXT_FORMS

        if self.rouge_impl not in ROUGE_IMPLS:
            raise InputError(f"--rouge-impl {self.rouge_impl!r}: choose one of {', '.join(ROUGE_IMPLS)}")
        if self.rouge_wordnet not in EXCEPTION_LISTS:
            raise InputError(
                f"--rouge-wordnet {self.rouge_wordnet!r}: choose one of {', '.join(EXCEPTION_LISTS)}"
            )
        if self.rouge_wordnet != "empty" and self.rouge_impl != "rouge155":
            raise InputError(
                "--rouge-wordnet applies to --rouge-impl rouge155 only; add --rouge-impl rouge155"
            )
        if self.ref_agg not in REF_AGGS:
            raise InputError(f"--ref-agg {self.ref_agg!r}: choose one of {', '.join(REF_AGGS)}")
        if self.text_form not in TEXT_FORMS:
            raise InputError(f"--text-form {self.text_form!r}: choose one of {', '.join(TEXT_FORMS)}")
        self._check_detokenizer()

    def _check_detokenizer(self) -> None:
        from dlmeval.data.bartscore import DETOKENIZERS

        if self.detokenizer is not None and self.detokenizer not in DETOKENIZERS:
            raise InputError(f"--detokenizer {self.detokenizer!r}: choose one of {', '.join(DETOKENIZERS)}")
        if self.resolved_detokenizer == "moses":
            import importlib.util

            if importlib.util.find_spec("sacremoses") is None:
                raise InputError(
                    "--detokenizer moses needs the package sacremoses: pip install 'sacremoses>=0.1.1,<0.3' "
                    "(or choose --detokenizer treebank)"
                )

    def check(self) -> None:
        known = family_names()
        bad = [f for f in self.selected_families() if f not in known]
        if bad:
            raise InputError(
                f"unknown metric famil{'ies' if len(bad) > 1 else 'y'} {bad}; choose from {', '.join(known)}"
            )
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be a positive number of items, got {self.limit}")
        from dlmeval.protocols.diffscore.paper_protocols import SUITE_PROTOCOLS

        if self.protocol not in SUITE_PROTOCOLS:
            raise InputError(f"--protocol {self.protocol!r}: choose one of {', '.join(SUITE_PROTOCOLS)}")
        self._check_text_rules()
        if self.unieval_refs not in ("first", "best"):
            raise InputError(f"--unieval-refs {self.unieval_refs!r}: choose one of first, best")
        if self.prompt not in ("auto", "none"):
            raise InputError(f"prompt policy must be 'auto' or 'none', got {self.prompt!r}")
        if self.ci_protocols not in ("primary", "all"):
            raise InputError(f"ci_protocols must be 'primary' or 'all', got {self.ci_protocols!r}")
        if self.bootstrap < 0:
            raise InputError(f"--bootstrap must be >= 0 resamples, got {self.bootstrap}")
        if not 0 < self.confidence < 1 or not 0 < self.alpha < 0.5:
            raise InputError("confidence must lie in (0, 1) and alpha in (0, 0.5)")
        if self.chunk_size < 1:
            raise InputError("chunk_size must be positive")
        if self.moverscore_ngram < 1:
            raise InputError(f"--moverscore-ngram must be at least 1, got {self.moverscore_ngram}")
        if self.bertscore_layer is not None and self.bertscore_layer < 0:
            raise InputError(f"--bertscore-layer must be >= 0, got {self.bertscore_layer}")
        if self.ar_max_refs is not None and self.ar_max_refs < 1:
            raise InputError(f"--ar-max-refs must be at least 1, got {self.ar_max_refs}")
        if self.ft:
            self.ft_options.check()
        for flag, v in (("--masks/-K", self.n_masks), ("--rates/-T", self.n_rates)):
            if v is not None and v < 1:
                raise InputError(f"{flag} must be at least 1, got {v}")
        self.estimator()  # an unknown preset, scheme or weighting fails here, before any work
        if self.dlm_batch_size is not None and self.dlm_batch_size < 1:
            raise InputError(f"--batch-size must be at least 1, got {self.dlm_batch_size}")
        if self.dlm_max_tokens is not None and self.dlm_max_tokens < 1:
            raise InputError(f"--max-tokens must be at least 1, got {self.dlm_max_tokens}")
        from dlmeval.models.registry import check_settings

        check_settings(self.device, self.dtype, self.seed)
        check_settings(self.evaluator_device, self.dtype, self.seed)
        chosen = self.resolved_benchmarks()
        named = [get_benchmark(b, self.suite).name for b, _, _ in self.sources]
        twice = sorted({n for n in named if named.count(n) > 1})
        if twice:
            raise InputError(
                f"--benchmark-source names {', '.join(twice)} more than once; give one source each"
            )
        unused = [n for n in named if n not in chosen]
        if unused:
            raise InputError(
                f"--benchmark-source {', '.join(unused)}: not among the benchmarks run ({', '.join(chosen)}); "
                "add it to --benchmarks"
            )
