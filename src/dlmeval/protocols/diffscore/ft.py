"""DiffScore-FT in the meta-evaluation, as the paper runs it: one LoRA adapter on a base model of its own, trained on
(source, reference) pairs from OUTSIDE the benchmark being evaluated, and FT rows for every benchmark.

The paper (section 3.3, appendix D) fine-tunes LLaDA-8B-Base (while zero-shot DiffScore uses LLaDA-8B-Instruct)
with LoRA r = 16, alpha = 32, dropout 0.05 on CNN/DailyMail alone, and scores every benchmark with that one model:
MT, summarization and data-to-text ("never trained on D2T data"). Here:

* the base model is ``FTOptions.model`` (``--ft-model``; default: the zero-shot ``--model``), loaded fresh for every
  adapter, so the zero-shot model is never trained;
* training is :func:`dlmeval.train.finetune.finetune` with the paper's LoRA settings (:class:`FTOptions` defaults;
  the layout of the scorer: the chat template when the base has one, the pair scored with the same layout);
* **the training data** (cross-benchmark scheme). CNN/DM is not in the shared data. What stands in: the
  (source, reference) pairs of the summarization benchmarks with references (:data:`POOL_NOTE`: SummEval and
  REALSumm are CNN/DM test articles with their references, Newsroom is Newsroom) -- the benchmark being evaluated
  is never among them: benchmark B is scored by an adapter trained on the pairs of the pool benchmarks other than
  B, minus every pair whose source or reference shares a 13-word sequence (or, for a text under 13 words, its
  whole word sequence) with any text of B's full data file (:func:`decontaminate`; the 13-gram overlap test of the
  GPT-3 contamination analysis). The same SummEval articles appear, re-formatted, in REALSumm and QAGS-CNN, which
  is why the check is on word sequences and not on whole texts. Benchmarks whose training sets come out equal
  share one adapter (every non-pool benchmark without overlap). D2T and WMT are thus never trained on, as in the
  paper;
* ``FTOptions.train_data`` (``--ft-train cnn_dailymail``, a hub dataset id, a ``datasets`` directory, a parquet or
  a pairs file: :mod:`dlmeval.protocols.diffscore.ft_data`): one training set for every benchmark, used as given (the
  paper's scheme with the real CNN/DM); ``FTOptions.adapter``
  (``--ft-adapter DIR``): an adapter trained before (``dlmeval train``), used for every benchmark, no training.

Adapters are cached by content: ``<work dir>/<key>`` where the key hashes the base model's identity, the training
settings and the training pairs, so every run (another estimator, ``--limit``) reuses them, and a killed training
resumes from its checkpoint. Nothing here imports the meta-evaluation: it hands :func:`score_ft` an
:class:`FTContext` (how to load the base, how to read a benchmark's full frame, which benchmarks form the pool) and
a ``score_with(model, layout)`` callable that scores the benchmark's pending units with a model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dlmeval.errors import InputError
from dlmeval.parallel import current
from dlmeval.train.finetune import FinetuneConfig

log = logging.getLogger("dlmeval.meta_eval.ft")

#: what stands in for CNN/DM (docs/diffscore.md, "DiffScore-FT")
POOL_NOTE = (
    "the (source, reference) pairs of the summarization benchmarks with references (SummEval, REALSumm: CNN/DM "
    "test articles with their references; Newsroom), minus the evaluated benchmark, minus any pair sharing a "
    "13-word sequence with the evaluated benchmark's texts"
)
NGRAM = 13
#: the training defaults FT takes from ``dlmeval train`` (listed once, in :class:`FinetuneConfig`)
_TRAIN = FinetuneConfig()


@dataclass(frozen=True)
class FTOptions:
    """DiffScore-FT: the base model, where the adapter comes from, and the training settings (defaults:
    :class:`dlmeval.train.finetune.FinetuneConfig`'s, the paper's LoRA, as ``dlmeval train``)."""

    model: str | None = None  # the base FT starts from (the paper: LLaDA-8B-Base); None: the suite's --model
    adapter: str | None = None  # one trained adapter for every benchmark (no training)
    # one training set for every benchmark (None: the cross-benchmark pool): a pairs file, a datasets directory or
    # parquet file, or a hub dataset id (``cnn_dailymail``: the paper's; :mod:`dlmeval.protocols.diffscore.ft_data`)
    train_data: str | None = None
    allow_download: bool = (
        False  # a hub id may be fetched (--allow-download); never part of the configuration
    )
    rank: int = _TRAIN.rank
    alpha: float = _TRAIN.alpha
    dropout: float = _TRAIN.dropout
    target_modules: tuple[str, ...] | None = _TRAIN.target_modules
    steps: int = _TRAIN.steps
    batch_size: int = _TRAIN.batch_size
    grad_accum: int = _TRAIN.grad_accum
    lr: float = _TRAIN.lr
    max_length: int | None = _TRAIN.max_length  # None: the base model's window
    chat: bool | None = _TRAIN.chat  # None: the base model's chat template when it has one (the paper)
    work_dir: str | None = None  # adapters (default: <cache>/meta-eval-ft)

    def finetune_config(self, seed: int):
        return FinetuneConfig(
            rank=self.rank,
            alpha=self.alpha,
            dropout=self.dropout,
            target_modules=tuple(self.target_modules) if self.target_modules else None,
            steps=self.steps,
            batch_size=self.batch_size,
            grad_accum=self.grad_accum,
            lr=self.lr,
            max_length=self.max_length,
            chat=self.chat,
            seed=seed,
        )

    def check(self) -> None:
        self.finetune_config(0).check()
        if self.adapter is not None and self.train_data is not None:
            raise InputError("--ft-adapter and --ft-train exclude each other (an adapter is already trained)")
        if self.adapter is not None:
            from dlmeval.models.adapters import check_adapter_dir

            check_adapter_dir(self.adapter)
        if self.train_data is not None:
            from dlmeval.protocols.diffscore.ft_data import describe_training_data

            describe_training_data(
                self.train_data, allow_download=self.allow_download
            )  # reads it: errors now

    def describe(self) -> dict[str, Any]:
        """What the FT scores depend on (the run configuration): the settings, the adapter's hash, the file's
        digest; never the work directory."""
        d = asdict(self)
        d.pop("work_dir")
        d.pop("allow_download")
        d["model"] = None  # the base model is in the run's model identities
        if self.adapter is not None:
            from dlmeval.models.adapters import adapter_sha256

            d["adapter"] = {"sha256": adapter_sha256(self.adapter)}
            for k in (
                "rank",
                "alpha",
                "dropout",
                "target_modules",
                "steps",
                "batch_size",
                "grad_accum",
                "lr",
            ):
                d.pop(k)  # the adapter's own settings count, through its hash
            d.pop("max_length"), d.pop("chat")
        if self.train_data is not None:
            from dlmeval.data.paths import file_digest
            from dlmeval.protocols.diffscore.ft_data import FILE_SUFFIXES, describe_training_data

            p = Path(self.train_data)
            if p.is_file() and p.name.lower().endswith(FILE_SUFFIXES):
                d["train_data"] = {"sha256": file_digest(p)}
            else:
                d["train_data"] = describe_training_data(self.train_data, allow_download=self.allow_download)
        d["scheme"] = (
            "given adapter" if self.adapter else "given file" if self.train_data else "cross-benchmark pool"
        )
        return json.loads(json.dumps(d, default=list))


@dataclass
class FTContext:
    """What the meta-evaluation hands DiffScore-FT.

    ``load_base()`` returns a fresh base model (it is trained in place); ``load(adapter_dir)`` the base with an
    adapter; ``frame_of(name)`` a benchmark's full scoring frame (no ``--limit``: the training set never depends
    on it); ``pool`` the benchmarks whose (source, reference) pairs may be trained on."""

    options: FTOptions
    load_base: Callable[[], Any]
    load: Callable[[str], Any]
    frame_of: Callable[[str], pd.DataFrame]
    pool: Sequence[str]
    seed: int = 0
    work_dir: Path | None = None
    progress: bool = False
    _pool_pairs: dict[str, list[dict]] = field(default_factory=dict, repr=False)
    _base_identity: dict | None = field(default=None, repr=False)
    _spare: Any = field(default=None, repr=False)

    def root(self) -> Path:
        if self.work_dir is not None:
            return Path(self.work_dir)
        if self.options.work_dir:
            return Path(self.options.work_dir)
        from dlmeval.data.paths import cache_dir

        return cache_dir() / "meta-eval-ft"


# --------------------------------------------------------------------------------------------- training sets
def benchmark_pairs(frame: pd.DataFrame) -> list[dict]:
    """``{source, target}`` pairs of a frame with references: each source with each of its distinct references,
    in file order, each pair once."""
    out, seen = [], set()
    for src, refs in zip(frame["cond_source"], frame["targets"]):
        for r in dict.fromkeys(refs):
            if (src, r) not in seen and str(r).strip():
                seen.add((src, r))
                out.append({"source": src, "target": r})
    return out


_WORD = re.compile(r"\w+")


def _grams(text: str, n: int = NGRAM) -> set[int]:
    """Hashes of the word n-grams of a text (lower-cased ``\\w+`` words); a text under ``n`` words: its whole
    word sequence."""
    w = _WORD.findall(str(text).lower())
    if len(w) < n:
        return {hash(tuple(w))} if w else set()
    return {hash(tuple(w[i : i + n])) for i in range(len(w) - n + 1)}


def text_index(frame: pd.DataFrame) -> set[int]:
    """The n-grams of every text of a benchmark frame: sources, conditioning sources, targets, candidates."""
    idx: set[int] = set()
    texts = set(frame["source"]) | set(frame["cond_source"]) | set(frame["candidate"])
    texts |= {t for ts in frame["targets"] for t in ts}
    for t in texts:
        idx |= _grams(t)
    return idx


def decontaminate(pairs: Sequence[dict], index: set[int]) -> list[dict]:
    """The pairs whose source and target share no n-gram with ``index`` (:func:`text_index`)."""
    return [p for p in pairs if not (_grams(p["source"]) & index) and not (_grams(p["target"]) & index)]


def training_pairs(ctx: FTContext, name: str) -> list[dict]:
    """The cross-benchmark training set of benchmark ``name``: the pool's pairs outside ``name``, decontaminated
    against ``name``'s full data."""
    others = [b for b in ctx.pool if b != name]
    if not others:
        raise InputError(f"DiffScore-FT: no benchmark outside {name} to train on; pass --ft-train FILE")
    pairs = []
    for b in others:
        if b not in ctx._pool_pairs:
            ctx._pool_pairs[b] = benchmark_pairs(ctx.frame_of(b))
        pairs += ctx._pool_pairs[b]
    kept = decontaminate(pairs, text_index(ctx.frame_of(name)))
    if not kept:
        raise InputError(f"DiffScore-FT: every training pair overlaps {name}")
    log.info(
        "DiffScore-FT %s: %d training pairs from %s (%d dropped for overlap)",
        name,
        len(kept),
        others,
        len(pairs) - len(kept),
    )
    return kept


# --------------------------------------------------------------------------------------------- adapters
def adapter_key(base_identity: dict, cfg, pairs: Sequence[dict]) -> str:
    from dlmeval.train.finetune import pairs_digest

    blob = json.dumps(
        {"base": base_identity, "config": asdict(cfg), "pairs": pairs_digest(pairs)},
        sort_keys=True,
        default=list,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _read_dir(d: Path) -> dict[str, str]:
    """The files of an adapter directory (base64), for the ranks that did not train it."""
    import base64

    return {
        p.name: base64.b64encode(p.read_bytes()).decode("ascii") for p in sorted(d.iterdir()) if p.is_file()
    }


def _write_dir(d: Path, files: dict[str, str]) -> None:
    """Write an adapter directory received from rank 0 (atomically; a directory already complete is kept)."""
    import base64
    import os
    import tempfile

    if _complete(d):
        return
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=d.name + ".recv-"))
    for name, data in files.items():
        (tmp / name).write_bytes(base64.b64decode(data))
    try:
        os.replace(tmp, d)
    except (
        OSError
    ):  # another rank of this node wrote it first (or a partial directory is there): use the files
        d.mkdir(exist_ok=True)
        for p in tmp.iterdir():
            os.replace(p, d / p.name)
        tmp.rmdir()


def _complete(d: Path) -> bool:
    from dlmeval.models.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, TRAIN_SETTINGS

    return all((d / n).is_file() for n in (ADAPTER_CONFIG, ADAPTER_WEIGHTS, TRAIN_SETTINGS))


def base_identity(ctx: FTContext) -> dict:
    """The identity of the base model (loaded once; the loaded copy is kept for the first training)."""
    if ctx._base_identity is None:
        base = ctx.load_base()
        ctx._base_identity = base.identity().as_dict()
        ctx._spare = base
    return ctx._base_identity


def _fresh_base(ctx: FTContext):
    base, ctx._spare = ctx._spare, None
    return base if base is not None else ctx.load_base()


def adapter_for(ctx: FTContext, name: str) -> tuple[Any, dict]:
    """``(model with the adapter for benchmark name, the layout it was trained on)``, training it if needed."""
    from dlmeval.train.finetune import finetune

    o = ctx.options
    if o.adapter is not None:
        model = ctx.load(o.adapter)
        return model, dict(model.adapter.settings.get("layout") or {"chat": False, "prompt": None})
    if o.train_data:
        from dlmeval.protocols.diffscore.ft_data import read_training_pairs

        pairs = read_training_pairs(o.train_data, allow_download=o.allow_download)
    else:
        pairs = training_pairs(ctx, name)
    cfg = o.finetune_config(ctx.seed)
    ident = {k: v for k, v in base_identity(ctx).items() if k != "device"}
    d = ctx.root() / adapter_key(ident, cfg, pairs)
    par = current()
    if par.distributed and not all(par.all_gather(_complete(d))):
        # data parallel: rank 0 trains (one adapter for the whole job: training on a GPU is not bit-exact, and the
        # ranks of one node share the directory), the other ranks receive its files and load them
        if par.is_main and not _complete(d):
            log.info(
                "training the DiffScore-FT adapter for %s (%d pairs, %d steps) in %s",
                name,
                len(pairs),
                cfg.steps,
                d,
            )
            finetune(
                _fresh_base(ctx),
                pairs,
                cfg,
                d,
                progress=ctx.progress,
                extra={"benchmark": name, "scheme": POOL_NOTE},
            )
        files = par.broadcast(_read_dir(d) if par.is_main else None)
        if not par.is_main:
            _write_dir(d, files)
        par.barrier()  # every rank holds the adapter before any of them scores with it
    if _complete(d):
        ctx._spare = None  # a stored adapter: the spare base is not needed (free its memory before loading)
        model = ctx.load(str(d))
    else:
        log.info(
            "training the DiffScore-FT adapter for %s (%d pairs, %d steps) in %s",
            name,
            len(pairs),
            cfg.steps,
            d,
        )
        model = _fresh_base(ctx)
        finetune(model, pairs, cfg, d, progress=ctx.progress, extra={"benchmark": name, "scheme": POOL_NOTE})
    return model, dict(model.adapter.settings["layout"])


def score_ft(ctx: FTContext, name: str, score_with: Callable[[Any, dict], int]) -> int:
    """Score benchmark ``name`` with its DiffScore-FT model: ``score_with(model, layout)`` scores the pending
    units (``layout``: ``{"chat", "prompt"}``, the layout the adapter was trained on); returns what it returns."""
    model, layout = adapter_for(ctx, name)
    try:
        return score_with(model, {"chat": bool(layout.get("chat")), "prompt": layout.get("prompt")})
    finally:
        del model
