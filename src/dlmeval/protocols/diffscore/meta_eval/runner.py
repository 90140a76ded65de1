""":func:`run_suite`: score every pending item, then compute, store and write the tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.parallel import main_only
from dlmeval.protocols.diffscore.meta_eval.inputs import SuiteInputs
from dlmeval.protocols.diffscore.meta_eval.options import SUITE_VERSION, SuiteOptions
from dlmeval.protocols.diffscore.meta_eval.suite import Suite
from dlmeval.protocols.diffscore.meta_eval.tables import (
    absent_rows,
    markdown_tables,
    paper_tables,
    write_outputs,
)
from dlmeval.protocols.skeleton import put_whole


@dataclass
class SuiteReport:
    run: Any  # the summary run (tables)
    results: pd.DataFrame
    comparisons: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    markdown: dict[str, str]
    timing: pd.DataFrame
    components: dict[str, str]  # family -> run id
    out_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)


def run_suite(
    opts: SuiteOptions,
    store,
    *,
    out_dir: str | Path | None = None,
    command_line: str | None = None,
    models: Mapping[str, Any] | None = None,
    inputs: SuiteInputs | None = None,
) -> SuiteReport | None:
    """Score every pending item (resumably), then compute and store the tables (None on the ranks other than 0
    of a data-parallel job: rank 0 writes the tables). See the package docstring.
    ``models`` maps a model spec string (``opts.dlm``, ``opts.ar``) to an already loaded model; ``inputs`` are the
    :class:`SuiteInputs` of ``opts`` already prepared, e.g. before the store was opened (then without ``models``)."""
    if inputs is None:
        inputs = SuiteInputs(opts, models=models)
    elif inputs.opts != opts or models:
        raise ValueError("run_suite: the inputs were prepared for other options (or models were given twice)")
    suite = Suite(inputs.prepare(), store, command_line=command_line)
    suite.score_all()
    # data parallel: the ranks scored their shares; rank 0 alone evaluates and writes the tables
    with main_only(store) as main:
        return _report(suite, opts, store, out_dir, command_line) if main else None


def _report(suite: Suite, opts: SuiteOptions, store, out_dir, command_line) -> SuiteReport:
    results, comps = [], []
    for name in suite.benchmarks:
        r, c = suite.evaluate_benchmark(name)
        results += r
        comps += c
    res = pd.DataFrame(results)
    cmp_df = pd.DataFrame(comps)
    tables = paper_tables(res, absent_rows(opts))
    markdown = markdown_tables(tables, cmp_df, res, opts.alpha)
    timing = pd.DataFrame(suite.timer.rows)
    components = {f: c.run.run_id for f, c in suite.components.items()}
    all_tables = {"results": res, "comparisons": cmp_df, **tables, "timing": timing}
    # the report is the skeleton's last step (dlmeval.protocols.skeleton); the component runs are per metric
    # family, opened as the scoring loop reaches them, not one per loaded model, so the rest is the suite's own
    summary = put_whole(
        store,
        "meta-eval",
        {
            "suite_version": SUITE_VERSION,
            "suite": opts.suite,
            "benchmarks": list(suite.benchmarks),
            "limit": opts.limit,
            "data": {b: suite.data_identity(b) for b in suite.benchmarks},
            "components": components,
            "bootstrap": opts.bootstrap,
            "confidence": opts.confidence,
            "alpha": opts.alpha,
            "ci_protocols": opts.ci_protocols,
            # the suite protocol decides the primary rows and the paper tables: a bartscore run is another summary
            # run (written only when it is not the default, so the default's run ids stay)
            **({"protocol": opts.protocol} if opts.protocol != "paper" else {}),
            **({"detokenizer": d} if (d := opts.resolved_detokenizer) != "treebank" else {}),
        },
        [c.run.signature.models[0] for c in suite.components.values() if c.run.signature.models],
        {n: df if isinstance(df.index, pd.RangeIndex) else df.reset_index() for n, df in all_tables.items()},
        seed=opts.seed,
        command_line=command_line,
    )
    for c in suite.components.values():
        c.run.finish()
    od = Path(out_dir) if out_dir is not None else None
    if od is not None:
        write_outputs(od, all_tables, markdown)
    return SuiteReport(summary, res, cmp_df, tables, markdown, timing, components, od)
