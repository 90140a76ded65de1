"""``dlmeval meta-eval``: the DiffScore meta-evaluation suite on the 12 BARTScore benchmarks, and its analyses.

    dlmeval meta-eval --suite bartscore [--benchmarks SummEval gu-en ...] [--fast] [--limit N] [--out DIR]
    dlmeval meta-eval --analysis NAME [--limit N] [--out DIR]   (NAME: see dlmeval.protocols.diffscore.analyses)

Every per-item score goes into the run store (``--store``) as it is computed, so a rerun of the same command
resumes where it stopped and prints the same tables. Tables are printed as Markdown and written to ``--out`` (default
``meta-eval-<run id>``) as CSV and Markdown. See docs/diffscore.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from dlmeval.cli.common import command_line, emit
from dlmeval.cli.options import (
    add_batching_args,
    add_estimator_group,
    add_model_args,
    add_runtime_group,
    estimator_settings,
)
from dlmeval.protocols.diffscore.analyses.registry import CLI_OPTIONS, Names
from dlmeval.protocols.diffscore.meta_eval.families import family_options, option_values

# the analyses' registry is the one list of names (read when argparse checks a value or prints help)
ANALYSES = Names()


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(n for v in values for n in v.replace(",", " ").split() if n)


def register(subparsers: argparse._SubParsersAction) -> None:
    from dlmeval.train.finetune import FinetuneConfig

    ft = FinetuneConfig()  # DiffScore-FT's training defaults (FTOptions takes them from there)
    p = subparsers.add_parser(
        "meta-eval",
        help="DiffScore meta-evaluation on the BARTScore benchmarks (+ section 6 analyses)",
        description="Meta-evaluate DiffScore, the AR likelihood scores and the BLEU / ROUGE / METEOR / "
        "BERTScore-style / MoverScore-style baselines against human judgments on the 12 BARTScore benchmarks, "
        "each with its protocol (per-document Spearman/Kendall, system-level Pearson, pairwise accuracy, "
        "Pearson, Spearman, WMT DARR Kendall-like tau), with bootstrap CIs and Williams tests. Resumable.",
    )
    p.add_argument(
        "--suite",
        default="bartscore",
        help="benchmark suite (bartscore; registered benchmarks may name others)",
    )
    p.add_argument(
        "--benchmarks",
        nargs="+",
        default=None,
        metavar="NAME",
        help="benchmarks (SummEval Newsroom REALSumm Rank19 QAGS_CNN QAGS_XSUM BAGEL SFHOT SFRES gu-en kk-en lt-en) "
        "or task groups SUM D2T WMT; default: all 12",
    )
    p.add_argument(
        "--benchmark-source",
        action="append",
        default=[],
        metavar="NAME[:SPLIT]=SOURCE",
        help="read benchmark NAME from a 🤗 dataset in the BARTScore fields (docs/diffscore.md): a hub id (read "
        "from the datasets cache, fetched only with --allow-download), a save_to_disk directory, or a parquet / "
        "JSONL / CSV file; SPLIT defaults to the only split, else test; the rows' digest is in the run; repeatable",
    )
    p.add_argument(
        "--analysis",
        default=None,
        choices=ANALYSES,
        metavar="NAME",
        help="run an analysis of the paper instead of the suite (docs/diffscore.md): %(choices)s",
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="print what the run would fill and stop: the paper table and cells each row fills, the protocols, the "
        "data source, every baseline's checkpoint and whether it is here (loads no model)",
    )
    p.add_argument(
        "--protocol",
        default="paper",
        metavar="NAME",
        help="paper (default): the correlations the DiffScore paper states (REALSumm: system-level Pearson, F variants); "
        "bartscore: BARTScore's analysis exactly (REALSumm: Spearman / Kendall per document on the recall "
        "variants, rouge1_r, bertscore_r, ...); results.csv names it (suite_protocol); docs/diffscore.md",
    )
    p.add_argument(
        "--ref-agg",
        default="mean",
        metavar="RULE",
        help="several references (SummEval's 11): mean (default; BARTScore's SUM/score.py averages every metric over "
        "the references) or max (the best reference), for ROUGE, BERTScore and MoverScore and the AR and BARTScore "
        "directions (GPTScore keeps the best reference)",
    )
    p.add_argument(
        "--text-form",
        default="bartscore",
        metavar="FORM",
        help="bartscore (default): each metric reads the text BARTScore gave it (ROUGE the tokenized pickle text "
        "lower-cased, BERTScore / MoverScore the tokenized text) and UniEval the tokenized text of its own data "
        "files; detok: the detokenized text for every metric",
    )
    p.add_argument(
        "--detokenizer",
        default=None,
        metavar="NAME",
        help="how the tokenized BARTScore text is detokenized for the metrics that read detokenized text (BLEU, "
        "METEOR, DiffScore, AR, BARTScore, ...): treebank (NLTK's) or moses (BARTScore's SUM/utils.py "
        "MosesDetokenizer, through sacremoses); default: moses under --protocol bartscore, else treebank",
    )
    p.add_argument(
        "--limit", type=int, default=None, help="first N items per benchmark (SUM: whole documents)"
    )
    p.add_argument(
        "--out", default=None, help="directory for the CSV / Markdown tables (default meta-eval-<run id>)"
    )
    add_model_args(p)
    p.add_argument(
        "--adapter", default=None, metavar="DIR", help="a LoRA adapter (`dlmeval train`) loaded onto --model"
    )
    p.add_argument("--ar-model", default="default-ar", help="AR model spec for the likelihood baselines")
    p.add_argument(
        "--ar-max-refs",
        type=int,
        default=None,
        metavar="N",
        help="AR r->h / h->r: best of the first N distinct references (default: all; SummEval has 11, and "
        "they dominate the AR cost there)",
    )
    p.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        metavar="FAMILY",
        help="metric families: lexical embedding ar diffscore, or any other registered family (default: every "
        "family that runs by default)",
    )
    # each metric family's own options (its class declares them: FamilyOption), one group per family
    groups: dict[type, argparse._ArgumentGroup] = {}
    for cls, option in family_options():
        if cls not in groups:
            groups[cls] = p.add_argument_group(_family_title(cls))
        option.add_to(groups[cls])
    g = add_estimator_group(p)
    g.add_argument(
        "--prompt",
        default="auto",
        choices=("auto", "none"),
        help="auto: task prompts for diffusion models with a chat template (summarize / describe / plain); none",
    )
    g.add_argument("--all-configs", action="store_true", help="every configuration on every benchmark")
    add_batching_args(g, "scoring")
    f = p.add_argument_group("DiffScore-FT (a LoRA adapter trained outside the evaluated benchmark)")
    f.add_argument(
        "--ft", action="store_true", help="add DiffScore-FT rows (see docs/diffscore.md, DiffScore-FT)"
    )
    f.add_argument("--ft-model", default=None, help="base model FT starts from (default: --model)")
    f.add_argument("--ft-adapter", default=None, metavar="DIR", help="a trained adapter for every benchmark")
    f.add_argument(
        "--ft-train",
        default=None,
        metavar="DATA",
        help="one training set for every benchmark: cnn_dailymail (the paper's; a hub id, read from the datasets "
        "cache, fetched with --allow-download), another hub dataset id[:config][@split], a save_to_disk "
        "directory, a parquet file, or a JSONL/CSV/TSV file of source/target pairs",
    )
    f.add_argument(
        "--ft-steps", type=int, default=None, help=f"training steps (default {ft.steps}, as `dlmeval train`)"
    )
    f.add_argument(
        "--ft-batch-size", type=int, default=None, help=f"pairs per micro-batch (default {ft.batch_size})"
    )
    f.add_argument("--ft-lr", type=float, default=None, help=f"peak learning rate (default {ft.lr:g})")
    f.add_argument("--ft-dir", default=None, help="adapters (default: <cache>/meta-eval-ft)")
    s = p.add_argument_group("statistics")
    s.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs (0: none)")
    s.add_argument("--confidence", type=float, default=0.95)
    s.add_argument("--alpha", type=float, default=0.05, help="significance level of the metric comparisons")
    s.add_argument("--ci-protocols", default="primary", choices=("primary", "all"))
    p.add_argument("--data-dir", default=None, help="data directory (default ../shared/data or DLMEVAL_DATA)")
    p.add_argument("--chunk-size", type=int, default=32, help="distinct texts per stored chunk")
    p.add_argument("--n-pairs", type=int, default=200, help="directional analysis: forward/reverse pairs")
    p.add_argument(
        "--compare-model", default=None, metavar="SPEC", help="families analysis: the second model"
    )
    p.add_argument(
        "--analysis-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the analysis (e.g. folds=5, n_tiers=3, bart=DIR, warmup=2); repeatable",
    )
    add_runtime_group(p, evaluators="the baseline models (AR, encoder, BART)")
    p.set_defaults(func=run)


def _family_title(cls) -> str:
    """The title of a metric family's group of options in --help."""
    off = "" if cls.default or not cls.listed else f"; off by default: --metrics ... {cls.name}"
    return f"{cls.options_title or cls.name} (the {cls.name} family{off})"


def _sources(values: list[str]) -> tuple[tuple[str, str, str | None], ...]:
    """``NAME[:SPLIT]=SOURCE`` values as (benchmark, source, split)."""
    from dlmeval.errors import InputError

    out = []
    for v in values:
        name, eq, source = v.partition("=")
        name, _, split = name.partition(":")
        if not eq or not name.strip() or not source.strip():
            raise InputError(
                f"--benchmark-source {v!r}: write NAME=SOURCE or NAME:SPLIT=SOURCE (e.g. SummEval=summeval.jsonl)"
            )
        out.append((name.strip(), source.strip(), split.strip() or None))
    return tuple(out)


def _options(args):
    from dlmeval.parallel import current
    from dlmeval.protocols.diffscore.meta_eval import FTOptions, SuiteOptions

    device = current().device(args.device)  # cuda:LOCAL_RANK per rank under torchrun

    return SuiteOptions(
        suite=args.suite,
        benchmarks=_names(args.benchmarks),
        limit=args.limit,
        protocol=args.protocol,
        ref_agg=args.ref_agg,
        text_form=args.text_form,
        detokenizer=args.detokenizer,
        sources=_sources(getattr(args, "benchmark_source", None) or []),
        families=_names(args.metrics),  # None: every registered family that runs by default
        dlm=args.model,
        dlm_adapter=args.adapter,
        ar=args.ar_model,
        ar_max_refs=args.ar_max_refs,
        **option_values(args),  # the families' options that were given (the others keep their defaults)
        **estimator_settings(args),
        prompt=args.prompt,
        all_configs=args.all_configs,
        ft=args.ft,
        ft_options=FTOptions(
            **{
                k: v
                for k, v in {
                    "model": args.ft_model,
                    "adapter": args.ft_adapter,
                    "train_data": args.ft_train,
                    "steps": args.ft_steps,
                    "batch_size": args.ft_batch_size,
                    "lr": args.ft_lr,
                    "work_dir": args.ft_dir,
                }.items()
                if v is not None  # what is not given keeps FTOptions' default
            },
            allow_download=args.allow_download,
        ),
        bootstrap=args.bootstrap,
        confidence=args.confidence,
        alpha=args.alpha,
        ci_protocols=args.ci_protocols,
        seed=args.seed,
        device=None if device == "auto" else device,
        evaluator_device=None if args.evaluator_device is None else current().device(args.evaluator_device),
        dtype=None if args.dtype == "auto" else args.dtype,
        data_dir=args.data_dir,
        chunk_size=args.chunk_size,
        dlm_batch_size=args.batch_size,
        dlm_max_tokens=args.max_tokens,
        trust_remote_code=args.trust_remote_code,
        allow_download=args.allow_download,
        progress=not getattr(args, "no_progress", False),
    )


def _plan(args) -> int:
    """``--plan``: the cells, protocols, data and checkpoints of the run, without torch or a store."""
    from dataclasses import replace

    from dlmeval.protocols.diffscore.meta_eval.options import SuiteOptions
    from dlmeval.protocols.diffscore.meta_eval.plan import plan_markdown, plan_tables, resolve

    base = SuiteOptions()
    opts = replace(
        base,
        suite=args.suite,
        benchmarks=_names(args.benchmarks),
        protocol=args.protocol,
        ref_agg=args.ref_agg,
        text_form=args.text_form,
        detokenizer=args.detokenizer,
        sources=_sources(getattr(args, "benchmark_source", None) or []),
        families=_names(args.metrics),
        dlm=args.model,
        ar=args.ar_model,
        data_dir=args.data_dir,
        ft=args.ft,
        **option_values(args),
    )
    tables = plan_tables(resolve(opts, run=False))
    emit(args, tables, plan_markdown(tables))
    return 0


def run(args) -> int:
    from dlmeval.errors import InputError
    from dlmeval.parallel import current, open_store
    from dlmeval.protocols.diffscore.meta_eval import Suite, SuiteInputs, run_suite, write_outputs
    from dlmeval.store.access import check_writable_store

    if getattr(args, "plan", False):
        return _plan(args)
    opts = _options(args)
    cmd_line = command_line(args)
    # validate, then open: the options, the data files and the models are checked before the store is opened
    # (or created), so a bad input leaves it exactly as it was
    if args.out is not None and not args.out.strip():
        raise InputError(
            "--out is empty; pass a directory for the tables, or leave --out out for the default"
        )
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out} is a file; pass a directory for the tables")
    if current().is_main:  # only rank 0 opens the store (the others write journals beside it)
        check_writable_store(args.store)
    if args.analysis:
        from dlmeval.protocols.diffscore.analyses.profiles import gives_profiles
        from dlmeval.protocols.diffscore.analyses.registry import get, parse_options, run_analysis

        if (
            get(args.analysis).profiles
            and opts.scheme is None
            and not gives_profiles(opts.estimator()["scheme"])
        ):
            # the default scheme estimates the score, not each S(t_k): the profile analyses take the former default
            opts = dataclasses.replace(opts, scheme="balanced")
            print(
                f"note: {args.analysis} reads the per-rate profile S(t_k), which the default estimator does not "
                "estimate; it runs with --scheme balanced (recorded in its run)",
                file=sys.stderr,
            )
        kw = parse_options(
            args.analysis, args.analysis_option, {k: getattr(args, k, None) for k in CLI_OPTIONS}
        )
    inputs = SuiteInputs(opts)  # the options resolved once into the plan the run executes (SuiteInputs.plan)
    if args.analysis:
        inputs.dlm()
    else:
        inputs.prepare()
    with open_store(args.store) as store:
        if args.analysis:
            suite = Suite(inputs, store, command_line=cmd_line)
            tables = run_analysis(args.analysis, suite, **kw)
            if not current().is_main:
                return 0  # rank 0 writes the outputs
            out = Path(args.out or f"meta-eval-{args.analysis}")
            md = {
                n: f"## {n}\n\n" + df.to_markdown(index=False, floatfmt=".3f") + "\n"
                for n, df in tables.items()
            }
            write_outputs(out, tables, md)
            text = "\n".join(
                md[n]
                for n in tables
                if not n.endswith(("_pairs", "_items", "_by_position", "_folds", "_values", "_texts"))
            )
            emit(
                args,
                {n: df.to_dict(orient="records") for n, df in tables.items()},
                text + f"\ntables: {out}/",
            )
            return 0
        report = run_suite(opts, store, command_line=cmd_line, inputs=inputs)
        if report is None:
            return 0  # data parallel: rank 0 writes the outputs
        out = Path(args.out or f"meta-eval-{report.run.run_id}")
        all_tables = {
            "results": report.results,
            "comparisons": report.comparisons,
            **report.tables,
            "timing": report.timing,
        }
        write_outputs(out, all_tables, report.markdown)
        text = "\n".join(report.markdown[n] for n in report.tables if n != "secondary")
        text += f"\nrun {report.run.run_id} ({report.run.signature.short()})\ntables: {out}/"
        payload = {
            "run_id": report.run.run_id,
            "signature": report.run.signature.short(),
            "components": report.components,
            "out": str(out),
            "results": report.results.to_dict(orient="records"),
        }
        emit(args, payload, text)
    return 0
