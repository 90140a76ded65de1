"""Per-output latency of every metric family, side by side (DiffScore paper section 6.5, appendices H and S:
"~88x higher latency than BARTScore at K = 20, ~24x at K = 5"; "K = 5 ... at 3.7x lower latency").

On the outputs of the first benchmark of ``--benchmarks`` (under ``--limit``; at most ``max_outputs``) every family
scores each output alone, one call per output, the families taking turns on the same output (so a change in the
machine's load hits all of them alike):

* ``DiffScore K=20 T=10`` and ``DiffScore-Fast K=5 T=5``: the ``cond`` configuration (the candidate masked, the
  source visible; WMT: the reference) with the suite's scheme, weighting and prompt policy;
* ``AR s2h``: the AR model's mean log p of the candidate given the source (one forward pass);
* ``GPTScore s2h (one aspect)``: the same after GPTScore's instruction prompt for the task's first aspect (the
  ``gptscore`` family scores each output once per aspect its benchmark maps to: multiply by that count);
* ``BARTScore s2h``: the seq2seq baseline (:mod:`dlmeval.baselines.seq2seq`) from the checkpoint ``bart=PATH``
  (default: the suite's ``--bartscore-model``, else ``facebook/bart-large-cnn`` from the local Hugging Face cache),
  or with ``bart=random-large`` BART-large-CNN's architecture with random weights over the AR model's tokenizer
  (:func:`random_bart_large`: the latency of BART-large-CNN, not its scores); "absent" when no checkpoint is given
  or it cannot be loaded (this machine has no BART-large-CNN);
* ``lexical``: sentence BLEU + ROUGE-1/2/L against the references (the source for Rank19 / QAGS);
* ``embedding``: the BERTScore-style greedy-matching F1 (MiniLM, its embedding cache cleared per output).

The first ``warmup`` outputs are scored once by every family before timing starts and are not timed. Wall seconds
(``time.perf_counter``) and process CPU seconds (``time.process_time``, all threads) per call go into the run,
keyed ``lat/<output>|<family>``; the run's configuration holds the thread count, the device and the estimators, so
another thread count is another run. A resumed run reuses the stored timings of finished chunks (they were
measured in another session; the ``session`` field of each record says which).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.protocols.diffscore.analyses.registry import analysis_run, register, score_items, store_tables

DIFFSCORE_SETTINGS = {"DiffScore K=20 T=10": (20, 10), "DiffScore-Fast K=5 T=5": (5, 5)}
AR_LABEL, BART_LABEL, GPT_LABEL = "AR s2h", "BARTScore s2h", "GPTScore s2h (one aspect)"
REFERENCES = (BART_LABEL, AR_LABEL)


def latency_table(per_output: pd.DataFrame, references=REFERENCES) -> pd.DataFrame:
    """One row per family (``per_output``: columns ``family``, ``seconds``, ``cpu_seconds``; families in order of
    first appearance): outputs, mean / median / p90 wall seconds per output, mean CPU seconds, and the mean's
    ratio to each reference family present (``x <family>``; NaN where that family is absent)."""
    need = {"family", "seconds", "cpu_seconds"}
    if not need <= set(per_output.columns):
        raise InputError(f"latency_table needs columns {sorted(need)}")
    rows = []
    for fam, g in per_output.groupby("family", sort=False):
        s = g["seconds"].to_numpy(dtype=np.float64)
        rows.append(
            {
                "family": fam,
                "outputs": int(s.size),
                "mean_s": float(s.mean()),
                "median_s": float(np.median(s)),
                "p90_s": float(np.quantile(s, 0.9)),
                "cpu_mean_s": float(g["cpu_seconds"].astype(float).mean()),
            }
        )
    t = pd.DataFrame(rows)
    means = dict(zip(t["family"], t["mean_s"]))
    for ref in references:
        t[f"x {ref}"] = t["mean_s"] / means[ref] if ref in means and means[ref] > 0 else np.nan
    return t


RANDOM_BART = "random-large"


def random_bart_large(tokenizer, device: str | None = None, seed: int = 0):
    """A :class:`~dlmeval.baselines.seq2seq.Seq2SeqScorer` with BART-large-CNN's architecture (12 + 12 layers,
    d_model 1024, 16 heads, FFN 4096, vocabulary 50,264: 406M parameters) and random weights, over ``tokenizer``
    (another BPE tokenizer standing in for BART's, for the token counts): its scores mean nothing, its latency
    is BART-large-CNN's for texts of the same token length. For ``bart=random-large`` where no checkpoint is on
    the machine."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    from dlmeval.baselines.seq2seq import Seq2SeqScorer

    cfg = BartConfig(
        vocab_size=max(50264, len(tokenizer)),
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        max_position_embeddings=1024,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = BartForConditionalGeneration(cfg).eval()
    if device:
        module = module.to(device)
    return Seq2SeqScorer(
        module, tokenizer, name="bart-large-cnn-architecture (random weights)", source=RANDOM_BART
    )


def _timed(fn: Callable[[], object]) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}


def _families(suite, task: str, bart: str | None) -> tuple[dict[str, Callable], dict[str, str]]:
    """``{label: fn(row)}`` of the families to time, and ``{label: why absent}``."""
    from dlmeval.baselines.embedding import greedy_match_f1
    from dlmeval.baselines.lexical import bleu, rouge
    from dlmeval.baselines.likelihood import ARScorer
    from dlmeval.scoring import DiffScorer

    o = suite.opts
    base = suite.scorer(task)  # the suite's prompt / chat policy for this task
    fams: dict[str, Callable] = {}
    absent: dict[str, str] = {}
    est = o.estimator()  # the suite's scheme and weighting, resolved from its preset
    for label, (k, t) in DIFFSCORE_SETTINGS.items():
        sc = DiffScorer(
            suite.dlm(),
            n_masks=k,
            n_rates=t,
            scheme=est["scheme"],
            weighting=est["weighting"],
            seed=o.seed,
            prompt=base.formatter.prompt,
            chat=base.formatter.use_chat,
            batch_size=o.dlm_batch_size,
            max_tokens=o.dlm_max_tokens,
        )
        fams[label] = lambda r, sc=sc: sc.score([r["candidate"]], [r["cond_source"]], config="cond")
    ar = ARScorer(suite.ar(), batch_size=o.ar_batch_size)
    fams[AR_LABEL] = lambda r: ar.mean_logprobs([r["cond_source"]], [r["candidate"]])
    # GPTScore: the same AR model after GPTScore's instruction prompt, for one aspect (the family scores each
    # output once per aspect its benchmark's dimensions map to, so its cost per output is this times that count)
    from dlmeval.baselines.gptscore import TEMPLATES, GPTScorer

    if task in TEMPLATES:
        gpt = GPTScorer.for_aspect(suite.ar(), task, next(iter(TEMPLATES[task])), batch_size=o.ar_batch_size)
        fams[GPT_LABEL] = lambda r: gpt.mean_logprobs([r["cond_source"]], [r["candidate"]])
    else:
        absent[GPT_LABEL] = f"absent (no GPTScore templates for task {task})"
    if not bart:
        # the suite's seq2seq checkpoint (--bartscore-model), else BART-large-CNN from the local cache
        from dlmeval.baselines.seq2seq import BART_LARGE_CNN

        bart = getattr(o, "bartscore_model", None) or BART_LARGE_CNN
    try:
        if bart == RANDOM_BART:
            s2s = random_bart_large(suite.ar().tokenizer, o.device, o.seed)
        else:
            from dlmeval.baselines.seq2seq import load_seq2seq

            s2s = load_seq2seq(bart, device=o.device, dtype=o.dtype, hint="pass --analysis-option bart=DIR")
        fams[BART_LABEL] = lambda r: s2s.mean_logprobs([r["cond_source"]], [r["candidate"]])
    except Exception as e:  # the baseline is optional: the table says why it is missing
        absent[BART_LABEL] = f"absent ({type(e).__name__}: {e})"
    fams["lexical BLEU+ROUGE"] = lambda r: (
        bleu(r["candidate"], r["targets"]),
        rouge(r["candidate"], r["targets"]),
    )
    emb = suite.embedder()

    def embedding(r):
        emb.clear()
        return greedy_match_f1(emb, r["candidate"], r["targets"])

    fams["embedding BERTScore-F"] = embedding
    return fams, absent


@register(
    "latency",
    help="seconds per output of every metric family side by side (DiffScore K=20 and K=5, AR, GPTScore, "
    "BARTScore if given, lexical, embedding), with ratios to BARTScore and AR",
    paper="section 6.5, appendix H, appendix S",
    options={"bart": str, "warmup": int, "max_outputs": int},
)
def run_latency(
    suite, *, bart: str | None = None, warmup: int = 2, max_outputs: int | None = None
) -> dict[str, pd.DataFrame]:
    import torch

    o = suite.opts
    name = suite.benchmarks[0]
    frame = suite.frame(name)
    if max_outputs is not None:
        frame = frame.iloc[: max(1, int(max_outputs))]
    if len(frame) <= warmup:
        raise InputError(f"latency: {len(frame)} outputs leave none to time after {warmup} warm-up outputs")
    task = frame["task"].iat[0]
    fams, absent = _families(suite, task, bart)
    threads = {"torch_threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}
    # the device type (cuda:0 and cuda:1 are the same setting: under torchrun every rank has its own)
    device = getattr(getattr(suite.dlm(), "device", None), "type", None) or str(o.device)
    run = analysis_run(
        suite,
        "latency",
        {
            "benchmark": name,
            "limit": o.limit,
            "max_outputs": max_outputs,
            "families": list(fams),
            "diffscore": {k: list(v) for k, v in DIFFSCORE_SETTINGS.items()},
            "estimator": {k: v for k, v in o.estimator().items() if k in ("scheme", "weighting")},
            "bart": bart,
            "warmup": warmup,
            "device": device,
            **threads,
        },
        [suite.dlm(), suite.ar()],
    )
    for i in range(warmup):  # not timed, not stored
        for fn in fams.values():
            fn(frame.iloc[i])
    timed = frame.iloc[warmup:].reset_index(drop=True)
    session = time.strftime("%Y-%m-%dT%H:%M:%S")

    def compute(chunk):
        out = []
        for i in chunk:
            r = timed.iloc[i]
            out.append(
                {f: {**_timed(lambda fn=fn, r=r: fn(r)), "session": session} for f, fn in fams.items()}
            )
        return out

    keys = [f"lat/{k}" for k in timed["key"]]
    got = score_items(
        run, keys, list(fams), compute, chunk_size=o.chunk_size, label="latency", progress=o.progress
    )
    per = pd.DataFrame(
        [
            {"family": f, "key": k, "seconds": rec["seconds"], "cpu_seconds": rec["cpu_seconds"]}
            for f in fams
            for k, rec in zip(timed["key"], got[f])
        ]
    )
    table = latency_table(per)
    for fam, why in absent.items():
        table = pd.concat(
            [table, pd.DataFrame([{"family": fam, "outputs": 0, "note": why}])], ignore_index=True
        )
    info = pd.DataFrame(
        [
            {
                "benchmark": name,
                "outputs_timed": len(timed),
                "warmup": warmup,
                "device": device,
                **threads,
                "sessions": ", ".join(sorted({rec["session"] for f in fams for rec in got[f]})),
            }
        ]
    )
    tables = {"latency": table, "latency_setup": info, "latency_items": per}
    store_tables(run, tables)
    return tables
