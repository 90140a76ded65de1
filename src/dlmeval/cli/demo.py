"""`dlmeval demo`: the main job on the embedded default models, end to end (about 600 s of CPU; README).

Steps (each stored in the run store, each printed with its run signature):

1. load the default diffusion LM and the default AR model and print their identities;
2. DiffScore vs AR likelihood on a handful of sentences and their word-shuffled copies;
3. further pillar stages registered in :data:`STAGES` (meta-evaluation, Care sweep, robustness), each small;
4. an HTML report of everything the demo just ran.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from dlmeval.cli.common import emit, model_kwargs
from dlmeval.cli.demo_verdicts import (  # noqa: F401  (re-exported: the demo's verdict functions)
    PAPER_COMMANDS,
    care_headline,
    ci_text,
    correlation_verdict,
    excludes_zero,
    longest_run,
    meta_headline,
    robust_headline,
)
from dlmeval.cli.options import add_runtime_group

SENTENCES = [
    "The committee approved the new budget after a long debate on Tuesday.",
    "She opened the window because the room was too warm.",
    "Heavy rain caused flooding in several towns along the river.",
    "The children played football in the park until it got dark.",
    "Scientists found that the drug reduced symptoms in most patients.",
    "He forgot his keys at the office and had to go back.",
]


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="run the main job on the embedded default models", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--out", default="demo-output", help="directory for tables and the report (default: demo-output)"
    )
    p.add_argument(
        "--quick", action="store_true", help="only load the models and score the example sentences"
    )
    p.add_argument("--dlm", default="default", help="diffusion model spec (default: default)")
    p.add_argument("--ar", default="default-ar", help="autoregressive model spec (default: default-ar)")
    add_runtime_group(p)
    p.set_defaults(func=run)


def _shuffle(text: str, seed: int, item: str) -> str:
    from dlmeval.seeding import numpy_rng

    words = text.rstrip(".").split()
    rng = numpy_rng(seed, "demo-shuffle", item)
    for _ in range(10):
        perm = rng.permutation(len(words))
        if list(perm) != list(range(len(words))):
            break
    return " ".join(words[i] for i in perm) + "."


def sentence_stage(dlm, ar, store, seed: int, log) -> dict:
    """DiffScore (marginal) and AR mean log-prob on sentences and shuffled copies; stored as one run."""
    import numpy as np

    from dlmeval.scoring import DiffScorer

    scorer = DiffScorer.fast(dlm, seed=seed)
    items = []
    for i, s in enumerate(SENTENCES):
        items.append((f"s{i}", s, "original"))
        items.append((f"s{i}-shuffled", _shuffle(s, seed, f"s{i}"), "shuffled"))
    config = {"stage": "sentences", "diffscore": scorer.run_config("marginal"), "ar": "mean token log-prob"}
    run = store.open_run("demo", config, [dlm.identity(), ar.identity()], seed=seed)
    from dlmeval.parallel import Chunk, work_loop

    def compute(c: Chunk) -> list[dict]:
        df = scorer.score([t for _, t, _ in c.items], config="marginal", item_ids=list(c.keys))
        ar_lp = ar.continuation_logprobs([""] * len(c.items), [t for _, t, _ in c.items])
        return [
            {"text": t, "variant": v, "diffscore": float(s), "ar_mean_logprob": float(np.mean(a))}
            for (_, t, v), s, a in zip(c.items, df["score"], ar_lp)
        ]

    # one chunk: the sentences are scored together, so a rerun recomputes exactly that batch
    work_loop(run, [Chunk(tuple(k for k, _, _ in items), items)], compute)
    res = run.items()
    wins_d = wins_a = 0
    for i in range(len(SENTENCES)):
        o, s = res[res["key"] == f"s{i}"].iloc[0], res[res["key"] == f"s{i}-shuffled"].iloc[0]
        wins_d += int(o["diffscore"] > s["diffscore"])
        wins_a += int(o["ar_mean_logprob"] > s["ar_mean_logprob"])
    summary = {
        "sentences": len(SENTENCES),
        "diffscore_prefers_original": wins_d,
        "ar_prefers_original": wins_a,
    }
    import pandas as pd

    run.put_table("shuffle_test", pd.DataFrame([summary]))
    run.finish()
    log(
        f"  DiffScore (marginal, fast) ranks the original above its shuffle for {wins_d}/{len(SENTENCES)} "
        f"sentences; AR likelihood for {wins_a}/{len(SENTENCES)}"
    )
    log(f"  signature: {run.signature.short()}")
    return {"run_id": run.run_id, "signature": run.signature.short(), **summary}


# Readable settings on the default model, from benchmarks/bench_sample_readability.py's grid (MODEL.md "Readable
# samples"): semi-autoregressive blocks of 4 at temperature 1 with nucleus 0.8 left no token 4 times in a row in 24
# webtext continuations at either of two seeds (longest runs 2 and 3; Distinct-2 0.84 / 0.86). Greedy decoding
# repeats phrases; one block, blocks of 8, nucleus 0.9 or 0.95, or temperature 0.8 leave runs of "." (4 to 32 long).
DEMO_SAMPLE = {"strategy": "none", "temperature": 1.0, "top_p": 0.8, "block_length": 4, "length": 32}
DEMO_PROMPTS = [
    "The city council met on Monday to discuss",
    "Scientists at the university have found that",
    "After the game, the coach told reporters that",
]


def sample_stage(dlm, store, seed: int, log) -> dict:
    """A few continuations from the default model with :data:`DEMO_SAMPLE`, stored as a ``sample`` run."""
    from dlmeval.metrics.diversity import distinct_n
    from dlmeval.protocols.sample import run_config, sample_prompts, store_samples
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    cfg = SamplerConfig(steps=DEMO_SAMPLE["length"], seed=seed, **DEMO_SAMPLE)
    got = sample_prompts(RemaskingSampler(dlm, cfg), DEMO_PROMPTS, [str(i) for i in range(len(DEMO_PROMPTS))])
    records = [{**r, "prompt": p} for r, p in zip(got.records, DEMO_PROMPTS)]
    run = store_samples(store, records, run_config(got, DEMO_PROMPTS), dlm, seed, command_line="dlmeval demo")
    for r, p in zip(got.records, DEMO_PROMPTS):
        log(f"  {p} ... {r['text']}  [nfe {r['nfe']}]")
    d2 = distinct_n([r["text"] for r in got.records], 2)
    run_max = max(longest_run(r["token_ids"]) for r in got.records)
    settings = ", ".join(f"{k} {v}" for k, v in DEMO_SAMPLE.items())
    log(
        f"  ({settings}; Distinct-2 {d2:.2f}, longest run of one token {run_max}; a 22M-parameter model: fluent "
        "locally, not coherent)"
    )
    log(f"  signature: {run.signature.short()}")
    return {
        "run_id": run.run_id,
        "signature": run.signature.short(),
        "distinct_2": d2,
        "longest_run": run_max,
    }


# the shipped specs the demo's pillar stages run (tests swap in the tiny ones: tiny models have 128-token windows)
CARE_SPEC = "care-mini"
ROBUST_SPEC = "robust-mini"
# the meta-evaluation stage: one real benchmark, enough outputs for a bootstrap CI of a correlation (about +-0.14
# at n = 200), DiffScore beside the reference-based baselines on the very same outputs
META_BENCHMARK = "SFHOT"
META_LIMIT = 200
META_FAMILIES = ("diffscore", "lexical", "embedding")


def _runner_kwargs(args) -> dict:
    """The model settings (``--trust-remote-code`` included) and progress bars for a protocol runner."""
    return {
        **model_kwargs(args),
        "command_line": "dlmeval demo",
        "progress": not (args.json or args.no_progress),
    }


def meta_eval_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """DiffScore-Fast, ROUGE and BERTScore-style against the human judgments of one real benchmark
    (:data:`META_BENCHMARK`, its first :data:`META_LIMIT` outputs), each correlation with its bootstrap CI."""
    from dlmeval.protocols.diffscore.meta_eval import SuiteOptions, run_suite

    opts = SuiteOptions(
        benchmarks=(META_BENCHMARK,),
        limit=META_LIMIT,
        families=META_FAMILIES,
        dlm=args.dlm,
        ar=args.ar,
        fast=True,
        bootstrap=1000,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        seed=args.seed,
        progress=not (args.json or args.no_progress),
    )
    rep = run_suite(
        opts,
        store,
        out_dir=out / "meta-eval",
        command_line="dlmeval demo",
        models={args.dlm: dlm, args.ar: ar},
    )
    headline = meta_headline(rep.results)
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {rep.run.signature.short()}")
    return {
        "run_id": rep.run.run_id,
        "signature": rep.run.signature.short(),
        "run_ids": list(rep.components.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


def care_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """The Care protocol on the shipped ``care-mini`` spec: the headline pair at nominal steps and at an equal
    actual-NFE budget, paired by seed."""
    from dlmeval.protocols.care import load_spec, run_care

    spec = load_spec(CARE_SPEC).replace(models=(args.dlm,), evaluator=args.ar)
    res = run_care(
        spec, store, out_dir=out / "care", models={args.dlm: dlm, args.ar: ar}, **_runner_kwargs(args)
    )
    model_run = res.model_runs.get(args.dlm)
    cells = store.get_run(model_run).items() if model_run else None
    headline = care_headline(cells, spec, res.tables.get("compute_matched"))
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {res.signature}")
    return {
        "run_id": res.sweep_run,
        "signature": res.signature,
        "run_ids": list(res.model_runs.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


def robust_stage(dlm, ar, store, args, out: Path, log) -> dict:
    """The robustness protocol on the shipped ``robust-mini`` spec: a task the embedded models answer above chance,
    clean and perturbed, with RDI and the DLM's advantage over the AR model with its bootstrap CI."""
    from dlmeval.protocols.robust import PairSpec, load_spec, run_robust

    spec = load_spec(ROBUST_SPEC)
    spec = spec.replace(pairs=(PairSpec(args.dlm, args.ar, label=f"{args.dlm} vs {args.ar}"),))
    res = run_robust(
        spec,
        store,
        out_dir=out / "robust",
        models={args.dlm: dlm, args.ar: ar},
        **_runner_kwargs(args),
    )
    headline = robust_headline(res.tables)
    for line in headline["lines"]:
        log(line)
    log(f"  signature: {res.signature}")
    return {
        "run_id": res.spec_run,
        "signature": res.signature,
        "run_ids": list(res.model_runs.values()),
        **{k: v for k, v in headline.items() if k != "lines"},
    }


# Pillar stages after the sentence stage: (title, callable(dlm, ar, store, args, out_dir, log) -> dict).
STAGES: list[tuple[str, object]] = [
    (
        "meta-evaluation: DiffScore-Fast, ROUGE and BERTScore-style vs human judgments (SFHOT)",
        meta_eval_stage,
    ),
    (
        "Care: remasking vs none at equal nominal steps and at equal actual passes (care-mini spec)",
        care_stage,
    ),
    ("robustness: default DLM vs default AR under character and word noise (robust-mini spec)", robust_stage),
]


@contextlib.contextmanager
def _timed(log):
    """Times a stage: wall seconds and CPU seconds of this process (all its threads), printed after it."""
    took: dict[str, float] = {}
    w0, c0 = time.perf_counter(), time.process_time()
    yield took
    took.update(wall_s=round(time.perf_counter() - w0, 1), cpu_s=round(time.process_time() - c0, 1))
    log(f"  took {took['wall_s']} s wall, {took['cpu_s']} s CPU")


def check_demo_data() -> None:
    """Stop in one line, before any model loads, when the data directory lacks a file the pillar stages read."""
    from dlmeval.data import catalog
    from dlmeval.data.fetch import status
    from dlmeval.data.paths import data_dir
    from dlmeval.errors import InputError

    try:
        root = data_dir()
    except InputError:
        root = None
    missing = [f for f in catalog.resolve(["demo"]) if status(f, root) == "missing"]
    if missing:
        mb = sum(f.size for f in missing) / 1e6
        where = f"{root} lacks" if root is not None else "no data directory holds"
        raise InputError(
            f"the demo reads public data sets and {where} {', '.join(f.name for f in missing)}: run "
            f"`dlmeval data fetch demo` (downloads {mb:.1f} MB from their sources), set DLMEVAL_DATA, or use --quick"
        )


def run(args) -> int:
    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.store import RunStore

    if not args.quick:
        check_demo_data()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def log(s: str) -> None:
        if not args.json:
            print(s, flush=True)

    store = RunStore(args.store)
    log(f"dlmeval demo: run store {store.path}")
    dlm = load_diffusion(args.dlm, **model_kwargs(args))
    ar = load_causal_lm(args.ar, **model_kwargs(args))
    for m in (dlm, ar):
        i = m.identity()
        log(f"  loaded {i.name} ({i.family}, {i.dtype}, {i.device}) weights sha256 {i.weights_sha256[:12]}")
    result = {"store": str(store.path), "stages": {}}
    log("[1] DiffScore vs AR likelihood: sentences and their word-shuffled copies")
    with _timed(log) as took:
        result["stages"]["sentences"] = sentence_stage(dlm, ar, store, args.seed, log)
    result["stages"]["sentences"]["time"] = took
    log("[1b] a sample from the default diffusion model")
    result["stages"]["sample"] = sample_stage(dlm, store, args.seed, log)
    if not args.quick:
        for n, (name, fn) in enumerate(STAGES, start=2):
            log(f"[{n}] {name}")
            with _timed(log) as took:
                result["stages"][name] = fn(dlm, ar, store, args, out, log)
            if isinstance(result["stages"][name], dict):
                result["stages"][name]["time"] = took
    try:
        from dlmeval.report import build_report

        run_ids = []
        for st in result["stages"].values():
            if isinstance(st, dict):
                run_ids += [r for r in [st.get("run_id"), *st.get("run_ids", [])] if r]
        path = build_report(store, run_ids=run_ids, out_path=out / "report.html")
        result["report"] = str(path)
        log(f"report written to {Path(path).resolve()}")
    except ImportError:
        log("(no report: dlmeval.report is not installed in this build)")
    result["wall_s"] = round(time.time() - t0, 1)
    log(f"demo finished in {result['wall_s']} s")
    if args.json:
        emit(args, result)
    return 0
