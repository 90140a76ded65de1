"""The Care protocol (compute-aware remasking evaluation): a sweep spec in, stored generations and tables out.

Usage (not run here: the demo spec takes minutes)::

    from dlmeval.protocols.care import load_spec, run_care
    from dlmeval.store import RunStore
    result = run_care(load_spec("care-demo"), RunStore("runs.sqlite"), out_dir="care-out")
    result.tables["headline"]


The spec is first resolved once into its plan (:func:`resolve` -> :class:`CarePlan`: corpora, cells, prompt
seeds, downstream tasks; the data read on first use and kept), which ``dlmeval care SPEC --plan`` prints and
:func:`run_care` executes. What it does, per diffusion model of the spec (one store run each, kind ``care``; the run's config is the spec
minus the other models, so adding a model later leaves the finished runs as they are):

1. prompts: per prefix source (``webtext`` = the OpenWebText stand-in, ``lm1b``) ``n_prompts`` prefixes of exactly
   ``prefix_tokens`` tokens under the model's tokenizer (:func:`build_prompts`);
2. cells: the sweep's full factorial (strategy x nominal steps x unmask temperature x seed x source), the
   compute-matched cells (strategy x NFE budget x temperature x seed x source) and the dose-response cells (remask
   fraction x seed), de-duplicated by their key (:func:`plan_cells`);
3. per cell: generations with :class:`~dlmeval.sampling.RemaskingSampler`, stored per item under
   ``gen/<cell>/<item>`` in atomic chunks of ``batch_size`` (a killed run redoes at most one chunk, with the same
   rows, so it resumes to identical numbers), then the cell's metrics under ``cell/<cell>``: English-filter
   acceptance, then on the accepted texts PPL by the external AR evaluator, MAUVE against human reference texts of
   the same source, Self-BLEU and Distinct-3; actual NFE and re-masks per sample from the sampler;
4. downstream (optional): HumanEval pass@1 (completions run in :mod:`dlmeval.sandbox`), GSM8K exact match
   (:func:`dlmeval.tasks.extract_gsm8k_answer`), and log-likelihood checks (DiffScore conditional) which no
   sampling setting can change: HellaSwag and BBH (the paper's Section 4.6 sanity checks, with GSM8K) and
   ARC-Challenge (a dlmeval addition);
5. tables (:mod:`dlmeval.protocols.care.tables`) from the stored cell records only, put on the model's run.

Finally a ``care-sweep`` run (config = the whole spec, models = every model's identity) receives the tables over all
models (with the leaderboard), and ``out_dir`` gets each table as CSV and Markdown plus ``tables.md``.

Modules: ``spec`` (the sweep spec), ``cells`` (the cells), ``plan`` (the spec resolved once, what ``--plan``
prints), ``prompts`` (prompts and references cut from texts), ``data`` (downstream items), ``metrics`` (a
cell's metrics), ``downstream`` (HumanEval, GSM8K, ARC), ``loop`` (:func:`~dlmeval.protocols.care.loop.run_units`,
the one run loop that walks cells and items and writes records), ``run`` (:func:`run_care`), ``frames`` /
``tables`` / ``comparisons`` (the tables as pure functions of the cell records), ``markdown``.

Seeds: the sampler seed of a cell is ``derive_seed(spec.seed, "care", sweep_seed)`` and each row draws from
``derive_seed(that, "sample", item_id)``, so cells that differ only in strategy, steps or temperature share their
random numbers (paired comparisons); MAUVE's k-means seed is ``derive_seed(spec.seed, "mauve", sweep_seed)``.
"""

from __future__ import annotations

from dlmeval.protocols.care.cells import Cell, canonical_cell, downstream_cells, plan_cells
from dlmeval.protocols.care.downstream import GSM8K_STOP, HUMANEVAL_STOP, gsm8k_prompt, gsm8k_strict_match
from dlmeval.protocols.care.markdown import markdown
from dlmeval.protocols.care.plan import CareOptions, CarePlan, data_identity, resolve
from dlmeval.protocols.care.prompts import (
    PromptItem,
    build_prompts,
    build_references,
    continuation_text,
    model_label,
)
from dlmeval.protocols.care.run import RUN_KIND, SWEEP_KIND, CareResult, load_tables, run_care, write_tables
from dlmeval.protocols.care.spec import CareSpec, load_spec, parse_spec
from dlmeval.protocols.common import cut_at

__all__ = [
    "GSM8K_STOP",
    "HUMANEVAL_STOP",
    "RUN_KIND",
    "SWEEP_KIND",
    "CareOptions",
    "CarePlan",
    "CareResult",
    "CareSpec",
    "Cell",
    "PromptItem",
    "build_prompts",
    "build_references",
    "canonical_cell",
    "continuation_text",
    "cut_at",
    "data_identity",
    "downstream_cells",
    "gsm8k_prompt",
    "gsm8k_strict_match",
    "load_spec",
    "load_tables",
    "markdown",
    "model_label",
    "parse_spec",
    "plan_cells",
    "resolve",
    "run_care",
    "write_tables",
]
