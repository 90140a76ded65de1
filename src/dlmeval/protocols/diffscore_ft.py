"""DiffScore-FT: LoRA fine-tuning of the diffusion model on (source, reference) pairs, evaluated by document k-fold.

The paper (section 3.3, appendix D) fine-tunes on CNN/DailyMail (source document, reference summary) pairs with
only the summary masked (``mask_prompt_loss``), LoRA r=16, alpha=32. Here the pairs come from the benchmark itself,
so that no evaluated document's text is ever trained on: every document is put in one of k folds by a hash of
(seed, benchmark, document id) (:func:`fold_of`, independent of ``--limit`` and of which documents are selected),
and the candidates of fold f are scored by a model trained on the (source, reference) pairs of ALL the benchmark's
documents outside fold f (every distinct reference of a document is one pair). Training goes through
:class:`dlmeval.train.diffusion.Trainer` with ``TrainConfig(lora=True, ...)`` and
:func:`~dlmeval.train.diffusion.conditional_examples` (``[CLS] source [SEP] target [SEP]``, only the target
eligible for masking), the layout DiffScore's ``cond`` configuration scores.

Applies to the benchmarks with references: SummEval, Newsroom, REALSumm (summaries) and BAGEL, SFHOT, SFRES
(meaning representation -> text). Not to Rank19 / QAGS (no reference) nor WMT (the default models are English-only;
the paper's DiffScore-FT-WMT trains on parallel data). The fine-tuned model is scored with the same estimator and
configurations as the zero-shot one, without a prompt or chat template (the paper's FT model is the base model).

Cost. The CPU default is small: 30 steps of batch 8 per fold (``FTOptions``). A fold's checkpoint lives in the
work directory while its candidates are scored (a killed run resumes training from it) and is deleted once every
candidate of the fold is in the store. GPU recipe: ``dlmeval meta-eval --ft --ft-steps 1000 --ft-batch-size 32
--ft-folds 5 --device cuda`` (the paper trains for the epochs of BARTScore's fine-tuning on CNN/DM).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.seeding import derive_seed

log = logging.getLogger("dlmeval.meta_eval.ft")


def fold_of(seed: int, benchmark: str, doc_id: str, folds: int) -> int:
    """The fold of a document: a hash of (seed, benchmark, document id) modulo ``folds``."""
    if folds < 2:
        raise InputError(f"k-fold needs at least 2 folds, got {folds}")
    return derive_seed(seed, "ft-fold", benchmark, str(doc_id)) % folds


def training_pairs(frame: pd.DataFrame, benchmark: str, fold: int, folds: int, seed: int) -> list[dict]:
    """``{source, target}`` pairs of every document NOT in ``fold``: its source with each distinct reference."""
    pairs, seen = [], set()
    for doc, src, refs in zip(frame["doc_id"], frame["cond_source"], frame["targets"]):
        if doc in seen or fold_of(seed, benchmark, doc, folds) == fold:
            continue
        seen.add(doc)
        for r in dict.fromkeys(refs):
            pairs.append({"source": src, "target": r})
    if not pairs:
        raise InputError(f"{benchmark}: no training documents outside fold {fold} of {folds}")
    return pairs


def train_fold_model(suite, benchmark: str, fold: int, pairs: list[dict], work_dir: Path):
    """A fresh copy of the diffusion model with LoRA adapters trained on ``pairs`` (resumes from ``work_dir``)."""
    from dlmeval.models.registry import load_diffusion
    from dlmeval.train.diffusion import TrainConfig, Trainer, conditional_examples

    o = suite.opts
    ft = o.ft_options
    model = load_diffusion(
        o.dlm, device=o.device, dtype=o.dtype, trust_remote_code=o.trust_remote_code, seed=o.seed
    )
    max_len = min(int(ft.max_len or model.max_length), int(model.max_length))
    cfg = TrainConfig(
        steps=ft.steps,
        batch_size=ft.batch_size,
        lr=ft.lr,
        warmup=max(1, ft.steps // 10),
        lora=True,
        lora_r=ft.lora_r,
        lora_alpha=ft.lora_alpha,
        seed=derive_seed(o.seed, "ft-train", benchmark, fold) % (2**31),
        eval_every=ft.steps + 1,
        checkpoint_every=max(1, ft.steps // 3),
    )
    examples = conditional_examples(model, pairs, max_len)
    trainer = Trainer(model, examples, [], cfg, work_dir, log=log.info)
    trainer.fit(progress=o.progress)
    model.train_mode(False)
    return model


def score_ft(
    suite, name: str, frame: pd.DataFrame, units: Sequence, metrics: Sequence[str], done: set[str]
) -> int:
    """Score the pending units of every fold with that fold's fine-tuned model; returns the units computed."""
    from dlmeval.data.paths import cache_dir
    from dlmeval.protocols.meta_eval import _keys, run_chunks, scoring_frame

    o = suite.opts
    ft = o.ft_options
    comp = suite.component("ft")
    task = frame["task"].iat[0]
    folds = int(ft.folds)
    unit_fold = {u.uid: fold_of(o.seed, name, frame["doc_id"].iat[u.rows[0]], folds) for u in units}
    root = Path(ft.work_dir) if ft.work_dir else cache_dir() / "meta-eval-ft" / comp.run.run_id
    full = None
    n = 0
    for fold in range(folds):
        fu = [u for u in units if unit_fold[u.uid] == fold]
        if not fu or all(k in done for u in fu for k in _keys(frame, u, metrics)):
            continue
        if full is None:
            full = scoring_frame(name, o.data_dir, None)  # training uses every document outside the fold
        work = root / name / f"fold{fold}"
        model = train_fold_model(suite, name, fold, training_pairs(full, name, fold, folds, o.seed), work)
        key = f"ft:{name}:{fold}"

        def compute(chunk, model=model, key=key):
            return suite._compute_diffscore(
                frame, chunk, task, prefix="diffscore-ft", model=model, cache_key=key
            )

        n += run_chunks(
            comp.run,
            frame,
            fu,
            metrics,
            compute,
            chunk_size=o.chunk_size,
            done=done,
            label=f"{name} DiffScore-FT fold {fold}",
            progress=o.progress,
        )
        suite._scorers.pop((key, task), None)
        del model
        shutil.rmtree(
            work, ignore_errors=True
        )  # every candidate of the fold is stored: the checkpoint is spent
    return n
