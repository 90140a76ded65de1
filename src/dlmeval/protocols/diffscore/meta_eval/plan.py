"""The plan of a meta-eval suite: :func:`resolve` turns the options into one frozen :class:`MetaEvalPlan` (the
benchmarks, the dataset each is read from, the families that run; each benchmark's data digest computed on first
use and kept), which :class:`~.inputs.SuiteInputs` and the run execute and ``dlmeval meta-eval --plan`` prints
(:func:`plan_tables`): what a suite run would fill, without running it (and without importing torch).

For the chosen benchmarks and metric families: the DiffScore paper's table each benchmark goes in and the cells
(benchmark, dimension, protocol) its rows fill, the protocols under ``--protocol``, where the data come from and
whether the file is here, and every family's checkpoints (the option that sets each, its default, and whether it
is on this machine: a directory, or a hub id in the local Hugging Face cache)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlmeval.protocols.diffscore import paper_protocols as P
from dlmeval.protocols.diffscore.meta_eval.benchmarks import BENCHMARKS, get_benchmark
from dlmeval.protocols.diffscore.meta_eval.families import METRIC_FAMILIES
from dlmeval.report.fmt import PROTOCOL_TAGS

#: the DiffScore paper's tables (its section 5, captions quoted)
PAPER_TABLES = {
    "mt": "Table 1 (segment-level Kendall tau, WMT19 DARR)",
    "sum": "Table 2 (meta-evaluation on six summarization benchmarks)",
    "d2t": "Table 3 (system-level Spearman rho, data-to-text)",
}


#: SuiteOptions fields whose command-line flag is not ``--`` + the field's name
_FLAGS = {"ar": "--ar-model", "dlm": "--model", "ft_options.model": "--ft-model"}


@dataclass(frozen=True)
class _Suite:
    """What a family's ``metrics`` / ``reported`` read of its suite when planning: the options."""

    opts: Any


@dataclass(frozen=True, eq=False)
class MetaEvalPlan:
    """A suite configuration resolved once (:func:`resolve`): ``opts``, the ``benchmarks`` run (in order), the
    ``families`` that run (in rank order). The dataset a benchmark is read from (``--benchmark-source``) and the
    digest of its data are resolved on first use and kept (``reads``), for the suite's benchmarks and the others a
    family reads (DiffScore-FT's training pool)."""

    opts: Any  # SuiteOptions
    benchmarks: tuple[str, ...]
    families: tuple[str, ...]
    reads: dict = field(default_factory=dict, repr=False)

    def source(self, name: str):
        """The dataset benchmark ``name`` is read from (None: its data file)."""
        key = ("source", name)
        if key not in self.reads:
            self.reads[key] = self.opts.source_for(name)
        return self.reads[key]

    def data_identity(self, name: str) -> str | dict:
        """What a run that depends on a benchmark's whole data records of it: the data file's digest, or the
        provenance of the rows of its ``--benchmark-source`` (a digest of every row among them); computed once."""
        from dlmeval.protocols.diffscore.meta_eval.benchmarks import data_digest

        key = ("identity", name)
        if key not in self.reads:
            self.reads[key] = data_digest(name, self.opts.data_dir, self.source(name))
        return self.reads[key]


def resolve(opts, *, run: bool = True) -> MetaEvalPlan:
    """The plan of ``opts`` (reads no data): checked as a run needs (``run``: every option) or as ``--plan``
    needs (names of families, benchmarks and protocols; no model)."""
    if run:
        opts.check()
    else:
        opts.check_plan()
    families = tuple(n for n, cls in METRIC_FAMILIES.items() if cls.enabled(opts))
    return MetaEvalPlan(opts, opts.resolved_benchmarks(), families)


def _present(spec: str | None, hub_ids: tuple[str, ...]) -> tuple[str, str]:
    """``(what is used, whether it is here)`` for a checkpoint option's value (None: its default hub ids)."""
    from dlmeval.baselines.checkpoints import cached_snapshot

    if spec is not None:
        p = Path(str(spec)).expanduser()
        if p.exists():
            return str(spec), "yes (local path)"
        if "/" in str(spec) and not str(spec).startswith((".", "/", "~")):
            return str(spec), "yes (hub cache)" if cached_snapshot(str(spec)) else "no (hub id, not cached)"
        return str(spec), "dlmeval model spec (`dlmeval models`)"
    if not hub_ids:
        return "-", "-"
    for h in hub_ids:
        if cached_snapshot(h) is not None:
            return h, "yes (hub cache)"
    return hub_ids[0], "no (not in the hub cache: --allow-download or a local copy)"


def plan_settings(opts) -> list[dict[str, Any]]:
    """The text and reference rules the run applies, each with its option and where its default comes from."""
    return [
        {"setting": "suite protocol", "option": "--protocol", "value": opts.protocol},
        {"setting": "text each metric reads", "option": "--text-form", "value": opts.text_form},
        {
            "setting": "detokenizer",
            "option": "--detokenizer",
            "value": opts.resolved_detokenizer
            + ("" if opts.detokenizer else f" (the default under --protocol {opts.protocol})"),
        },
        {"setting": "several references", "option": "--ref-agg", "value": opts.ref_agg},
        {"setting": "ROUGE implementation", "option": "--rouge-impl", "value": opts.rouge_impl},
        {
            "setting": "ROUGE-1.5.5 WordNet exceptions",
            "option": "--rouge-wordnet",
            "value": opts.rouge_wordnet,
        },
        {"setting": "UniEval reference", "option": "--unieval-refs", "value": opts.unieval_refs},
    ]


def plan_tables(plan: MetaEvalPlan) -> dict[str, list[dict[str, Any]]]:
    """``{"cells": [...], "checkpoints": [...], "settings": [...]}``: one record per (benchmark, dimension,
    family) and per (family, checkpoint) of the ``--metrics`` families, and per text / reference rule."""
    opts = plan.opts
    benches = plan.benchmarks
    families = [n for n in opts.selected_families() if n in METRIC_FAMILIES]
    cells: list[dict[str, Any]] = []
    for name in benches:
        b = get_benchmark(name, opts.suite)
        protocols = b.protocols
        if opts.protocol == "bartscore" and name in P.BARTSCORE_PROTOCOLS:
            protocols = P.BARTSCORE_PROTOCOLS[name]
        src = plan.source(name)
        if src is not None:
            data, here = f"dataset {src.source}" + (f":{src.split}" if src.split else ""), "-"
        else:
            try:
                f = b.data_file(opts.data_dir)
                data, here = str(f), "yes" if f.is_file() else "no"
            except Exception as e:  # no data directory at all
                data, here = str(e), "no"
        for dim in b.dimensions:
            tag = P.DIMENSION_TAGS.get(dim, dim)
            cell = f"{name} {tag} ({PROTOCOL_TAGS[protocols[0]]})" if dim != P.DARR else f"{name} (DARR tau)"
            for fam_name in families:
                cls = METRIC_FAMILIES[fam_name]
                fam = cls(_Suite(opts))
                if not fam.applies(b):
                    continue
                rows = list(fam.reported(b))
                if cls.mapped and fam.mapped_source(b, dim) is not None:
                    rows.append(cls.mapped)
                cells.append(
                    {
                        "table": PAPER_TABLES.get(b.table, b.table),
                        "cell": cell,
                        "family": fam_name,
                        "rows": " ".join(rows),
                        "protocol": protocols[0],
                        "secondary": " ".join(protocols[1:]),
                        "suite_protocol": opts.protocol,
                        "data": data,
                        "data_here": here,
                    }
                )
    ckpts: list[dict[str, Any]] = []
    for fam_name in families:
        cls = METRIC_FAMILIES[fam_name]
        for option, what, hub_ids in cls.checkpoints:
            value = opts
            for part in option.split("."):
                value = getattr(value, part)
            used, here = _present(value, tuple(hub_ids))
            ckpts.append(
                {
                    "family": fam_name,
                    "checkpoint": what,
                    "option": _FLAGS.get(option, "--" + option.split(".")[-1].replace("_", "-")),
                    "uses": used,
                    "present": here,
                }
            )
        for what, why in cls.tools(opts):
            ckpts.append({"family": fam_name, "checkpoint": what, "option": "-", "uses": "-", "present": why})
    return {"cells": cells, "checkpoints": ckpts, "settings": plan_settings(opts)}


def plan_markdown(tables: dict[str, list[dict[str, Any]]]) -> str:
    import pandas as pd

    out = []
    for name, title in (
        ("cells", "cells each row fills"),
        ("checkpoints", "checkpoints and tools"),
        ("settings", "text and reference rules"),
    ):
        df = pd.DataFrame(tables.get(name, []))
        out.append(f"## {title}\n\n" + (df.to_markdown(index=False) if len(df) else "(none)") + "\n")
    return "\n".join(out)


__all__ = ["PAPER_TABLES", "MetaEvalPlan", "plan_markdown", "plan_tables", "resolve", "BENCHMARKS"]
