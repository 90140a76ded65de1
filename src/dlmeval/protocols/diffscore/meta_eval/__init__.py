"""The DiffScore meta-evaluation suite on the 12 BARTScore benchmarks (DiffScore paper, Tables 1-3).

Usage (not run here: minutes of work on the shared data)::

    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite
    report = run_suite(SuiteOptions(benchmarks=("SummEval", "gu-en"), limit=20), store=RunStore())
    report.tables["sum"]            # paper-style wide table, one row per metric, columns labelled by protocol


What runs, per benchmark (:func:`scoring_frame` reads each benchmark's format into one layout):

* baselines: sentence BLEU, ROUGE-1/2/L F1, METEOR (family ``lexical``); BERTScore-style greedy-matching F1 and
  MoverScore-style ``1 - EMD`` over all-MiniLM-L6-v2 token embeddings (``embedding``); all against the references
  (the best one counts), against the source for the factuality sets Rank19 / QAGS (they have no reference);
* autoregressive likelihood scores with the AR model (``ar``): s2h, h2s, r2h, h2r, F = (r2h + h2r) / 2, sbi =
  (s2h + h2s) / 2 and the marginal, where the benchmark has the texts (no s2h/h2s for WMT, whose source is not
  English; no reference directions for the factuality sets); see :mod:`dlmeval.baselines.likelihood`;
* DiffScore with the diffusion model (``diffscore``) in the configurations the paper maps the benchmark's human
  dimensions to (:data:`~dlmeval.protocols.diffscore.paper_protocols.DIMENSION_CONFIG`): ``bidir`` is computed as
  cond + reverse, which also gives those two; WMT conditions on the reference;
* DiffScore-FT (``--ft``, family ``ft``): DiffScore with a LoRA adapter trained on (source, reference) pairs from
  outside the evaluated benchmark, see :mod:`dlmeval.protocols.diffscore.ft` (this package only calls it).

Resumption. Every score is written to the run store as soon as its chunk is computed, keyed
``"{item}@{content}|{metric}"`` (the item id starts with the benchmark: ``SummEval/M11/...``, ``gu-en/17@.../better``;
``content`` is a digest of every text the score is computed from, so a changed data file under ``--data-dir``
recomputes what changed instead of reading back the old numbers; the summary run's configuration holds a digest
of every data file, so its id and signature change with the data), in one run per component (one per metric
family: baselines, AR model, diffusion model + estimator, DiffScore-FT), so changing one component (``--fast``,
another AR model) recomputes only that component, and a ``--limit`` run's scores are reused by the full run. Work
goes in fixed chunks of distinct texts (an output text that recurs, as WMT system outputs do, is scored once), and
a chunk is written in one transaction (:func:`~.work.run_chunks`, the one loop over work chunks): a killed run
loses at most the chunk in flight, and the rerun recomputes exactly the same chunks with the same batches, so the
tables come out identical.

Tables (stored in the summary run and written to ``--out`` as CSV and Markdown): ``results`` (long: benchmark,
dimension, protocol, metric, value, n, bootstrap CI), ``comparisons`` (DiffScore against every other metric:
Williams test or paired bootstrap), the paper-style ``mt`` / ``sum`` / ``d2t`` tables of the primary protocols,
``secondary`` (the other protocols) and ``timing`` (seconds per benchmark and component in this session).

Layout of the package (the suite, the evaluation and the tables go through the two registries; names of
families appear only where one row is compared with another: a family's ``comparisons``, the table marks, and
``Suite.compute_diffscore``, the DiffScore seam the two DiffScore families share):

=================  ===========================================================================================
``benchmarks``     :class:`Benchmark` entries and their registry (``register_benchmark``, ``get_benchmark``),
                   the BARTScore readers, :func:`scoring_frame`, :func:`judged_for`
``families``       the :class:`MetricFamily` interface and its registry (``register_family``, ``get_family``)
``baselines``      ``lexical`` and ``embedding``; ``ar``: the AR likelihood family; ``diffscore``, ``ft``;
                   ``bartscore``, ``gptscore`` (with ``paper_marks``, the paper's significance marks)
``work``           :class:`Unit`, :func:`make_units`, :func:`run_chunks` (THE chunk loop), the timer
``inputs``         :class:`SuiteInputs`: options, benchmark frames, models (validated before a store opens)
``suite``          :class:`Suite`: component runs in a store, scoring over benchmarks x families, score vectors
``evaluate``       result records and significance comparisons of one benchmark
``tables``         paper-style tables, Markdown, ``--out`` files; ``runner``: :func:`run_suite`
=================  ===========================================================================================

Adding a metric family: one module with a :class:`MetricFamily` subclass decorated with ``@register_family``
(``name``, ``kind``, ``order``; ``configuration``, ``metrics``, ``compute``, ``label``; optionally ``load``,
``models``, ``applies``, ``mapped`` + ``mapped_source``, ``comparisons``, ``score``; see :mod:`.families`), and
its import below (its ``rank`` places its rows in the tables). ``--metrics NAME`` then runs it (every family
with ``default = True`` runs without ``--metrics``), its scores go to a run of their own, and its rows appear in
the tables and the comparisons it asks for.

Adding a benchmark (another format too): a reader ``(benchmark, data_dir, limit) -> frame`` with the
:func:`scoring_frame` columns, and one ``register_benchmark(Benchmark(name=..., task=..., dimensions=...,
protocols=..., reader=..., data_file=..., table=...))`` at the bottom of :mod:`.benchmarks` or in a module
imported below; see docs/diffscore.md.
"""

from __future__ import annotations

from dlmeval.lazy import lazy_exports

# the metric families register when their modules are imported here: adding one is its module + its import
# (the family's `rank`, not the import order, places its rows). These modules import nothing heavy at the top, so
# the command line reads the families' options (`MetricFamily.options`) without pandas or torch.
from dlmeval.protocols.diffscore.meta_eval.alignscore import AlignScoreFamily
from dlmeval.protocols.diffscore.meta_eval.ar import AR_DIRECTIONS, ARFamily, ar_directions_for
from dlmeval.protocols.diffscore.meta_eval.bartscore import BARTScoreFamily
from dlmeval.protocols.diffscore.meta_eval.baselines import (
    EMBEDDING_METRICS,
    LEXICAL_METRICS,
    EmbeddingFamily,
    LexicalFamily,
    lexical_metrics,
)
from dlmeval.protocols.diffscore.meta_eval.diffscore import (
    DIFFSCORE_CONFIGS,
    DiffScoreFamily,
    diffscore_calls,
    score_diffscore_chunk,
)
from dlmeval.protocols.diffscore.meta_eval.families import (
    METRIC_FAMILIES,
    FamilyOption,
    MetricFamily,
    family_names,
    get_family,
    register_family,
)
from dlmeval.protocols.diffscore.meta_eval.ft import DiffScoreFTFamily
from dlmeval.protocols.diffscore.meta_eval.geval import GEvalFamily
from dlmeval.protocols.diffscore.meta_eval.gptscore import GPTScoreFamily
from dlmeval.protocols.diffscore.meta_eval.questeval import QuestEvalFamily
from dlmeval.protocols.diffscore.meta_eval.unieval import UniEvalFamily

# the rest is read on first use (PEP 562): the benchmarks, the options, the suite and its tables need pandas
_LAZY = {
    "benchmarks": (
        "BENCHMARKS",
        "SUITES",
        "TABLE_ORDER",
        "TASK_PROMPTS",
        "Benchmark",
        "BenchmarkSource",
        "data_digest",
        "dimensions",
        "get_benchmark",
        "judged_for",
        "register_benchmark",
        "scoring_frame",
    ),
    "inputs": ("SuiteInputs",),
    "options": ("FAMILIES", "SUITE_VERSION", "FTOptions", "SuiteOptions"),
    "runner": ("SuiteReport", "run_suite"),
    "suite": ("Component", "Suite"),
    "tables": ("TABLE_NOTES", "markdown_table", "markdown_tables", "paper_tables", "write_outputs"),
    "work": (
        "Timer",
        "Unit",
        "make_units",
        "read_results",
        "run_chunks",
        "unit_keys",
    ),
}
_MODULE_OF = {name: mod for mod, names in _LAZY.items() for name in names}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF, _LAZY)


__all__ = [
    "AR_DIRECTIONS",
    "ARFamily",
    "AlignScoreFamily",
    "BARTScoreFamily",
    "BENCHMARKS",
    "Benchmark",
    "Component",
    "DIFFSCORE_CONFIGS",
    "DiffScoreFTFamily",
    "DiffScoreFamily",
    "EMBEDDING_METRICS",
    "EmbeddingFamily",
    "FAMILIES",
    "FamilyOption",
    "FTOptions",
    "GEvalFamily",
    "GPTScoreFamily",
    "LEXICAL_METRICS",
    "LexicalFamily",
    "METRIC_FAMILIES",
    "MetricFamily",
    "SUITES",
    "SUITE_VERSION",
    "Suite",
    "SuiteInputs",
    "SuiteOptions",
    "BenchmarkSource",
    "SuiteReport",
    "TABLE_NOTES",
    "TABLE_ORDER",
    "TASK_PROMPTS",
    "Timer",
    "QuestEvalFamily",
    "UniEvalFamily",
    "Unit",
    "ar_directions_for",
    "data_digest",
    "diffscore_calls",
    "dimensions",
    "family_names",
    "get_benchmark",
    "get_family",
    "judged_for",
    "lexical_metrics",
    "make_units",
    "markdown_table",
    "markdown_tables",
    "paper_tables",
    "read_results",
    "register_benchmark",
    "register_family",
    "run_chunks",
    "run_suite",
    "score_diffscore_chunk",
    "scoring_frame",
    "unit_keys",
    "write_outputs",
]
