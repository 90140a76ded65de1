"""BARTScore proper: sequence-to-sequence likelihood scores with any ``AutoModelForSeq2SeqLM`` (Yuan et al. 2021).

A score is BARTScore's: the mean log-probability of the target tokens given the source,
``(1/|y|) sum_i log p(y_i | y_<i, x)``, where ``y`` is the target as the tokenizer encodes it *with* its special
tokens (BART: ``<s> ... </s>``, every one of them scored, as BARTScore's ``labels=tgt_tokens`` scores them) and
``x`` is the source fed to the encoder. The directions are BARTScore's:

========== ======================== =======================================================================
name        score                    BARTScore reading
========== ======================== =======================================================================
``s2h``     log p(hyp | src)         faithfulness (``src_hypo``)
``h2s``     log p(src | hyp)         source coverage (the reverse direction)
``r2h``     log p(hyp | ref)         precision (``ref_hypo``)
``h2r``     log p(ref | hyp)         recall (``hypo_ref``)
``f``       (r2h + h2r) / 2          F score (``avg_f``)
``sbi``     (s2h + h2s) / 2          the source-side F (what dlmeval's "paper mapping" uses for bidirectional)
``mar``     log p(hyp | empty src)   the encoder sees only its special tokens: not a BARTScore variant, the
                                     nearest seq2seq analogue of a marginal (fluency) score
========== ======================== =======================================================================

With several references (``ref_agg``): ``"max"``, ``r2h`` and ``h2r`` take the best reference and ``f`` the best
per-reference mean ``max_k (r2h_k + h2r_k) / 2`` (the ``*_max`` variants of a later BARTScore branch, commit
1dcb9eb); ``"mean"``, each averaged over the references, as SUM/score.py does at 248f511, the commit of the
pickles and of the published tables (the meta-evaluation's default, ``--ref-agg``).

The paper's checkpoint is ``facebook/bart-large-cnn`` (406M). Loading is offline by default
(``local_files_only``): pass a local checkpoint directory, or ``allow_download=True`` where there is internet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from dlmeval.baselines.likelihood import check_ref_agg, flat_references, reduce_references
from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.base import (
    ModelIdentity,
    length_sorted_batches,
    model_identity,
    resolve_device,
    resolve_dtype,
)

BART_LARGE_CNN = "facebook/bart-large-cnn"
DIRECTIONS = ("s2h", "h2s", "r2h", "h2r", "f", "sbi", "mar")
#: BARTScore's own truncation (``max_length=1024`` for source and target alike)
MAX_LENGTH = 1024


class Seq2SeqScorer:
    """Target log-likelihoods under an encoder-decoder LM (BART, T5, ...); ``nfe`` counts forward calls."""

    family = "seq2seq"

    def __init__(
        self,
        module,
        tokenizer,
        *,
        name: str,
        source: str,
        device: torch.device | str | None = None,
        batch_size: int = 4,
        max_length: int | None = None,
        progress: bool = False,
    ):
        if not getattr(module.config, "is_encoder_decoder", False):
            raise InputError(f"{name} is not an encoder-decoder model; BARTScore needs AutoModelForSeq2SeqLM")
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        self.module, self.tokenizer, self.name, self.source = module.eval(), tokenizer, name, source
        self.device = next(module.parameters()).device if device is None else torch.device(device)
        self.batch_size = int(batch_size)
        window = getattr(module.config, "max_position_embeddings", None) or MAX_LENGTH
        self.max_length = int(min(max_length or MAX_LENGTH, window))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else module.config.pad_token_id
        if pad is None:
            raise InputError(f"{name}: neither the tokenizer nor the config has a pad token")
        self.pad_token_id = int(pad)
        start = getattr(module.config, "decoder_start_token_id", None)
        self.decoder_start_token_id = int(start if start is not None else self.pad_token_id)
        self.progress = progress
        self.nfe = 0
        self.truncated = 0  # texts cut to max_length so far
        self._sha: str | None = None

    def identity(self) -> ModelIdentity:
        return model_identity(self, next(self.module.parameters()).dtype)

    def encode(self, text: str) -> list[int]:
        """Token ids with the tokenizer's special tokens, cut to ``max_length`` as BARTScore cuts them."""
        if not isinstance(text, str):
            raise InputError(f"expected a string, got {type(text).__name__}")
        full = self.tokenizer(text, verbose=False)["input_ids"]  # the length check is ours (below)
        if len(full) > self.max_length:
            self.truncated += 1
            full = self.tokenizer(text, truncation=True, max_length=self.max_length)["input_ids"]
        return [int(t) for t in full]

    def _pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return ids.to(self.device), mask.to(self.device)

    @torch.no_grad()
    def token_logprobs(self, sources: Sequence[str], targets: Sequence[str]) -> list[np.ndarray]:
        """Per target token, log p(y_i | y_<i, source) (float64; the target's special tokens included).

        Rows go length-sorted (source + target tokens) into batches of ``batch_size``, right-padded; the logits
        are reduced to the target tokens' log-probabilities (``gathered logit - logsumexp``), so no second
        ``[batch, length, vocabulary]`` tensor is made."""
        from dlmeval.progress import progress_bar

        if len(sources) != len(targets):
            raise InputError(f"{len(sources)} sources but {len(targets)} targets")
        for i, t in enumerate(targets):
            if not isinstance(t, str) or not t.strip():
                raise InputError(f"target {i} is empty: a likelihood score needs at least one token")
        src = [self.encode(s) for s in sources]
        tgt = [self.encode(t) for t in targets]
        out: list[np.ndarray] = [np.zeros(0)] * len(src)
        batches = list(
            length_sorted_batches([len(a) + len(b) for a, b in zip(src, tgt)], batch_size=self.batch_size)
        )
        with progress_bar(f"{self.name} likelihood", len(src), enabled=self.progress) as bar:
            for batch in batches:
                s_ids, s_mask = self._pad([src[i] for i in batch])
                t_ids, t_mask = self._pad([tgt[i] for i in batch])
                # teacher forcing: the decoder reads [start, y_1 .. y_{n-1}] and predicts [y_1 .. y_n]
                # (transformers' shift_tokens_right, written out so that any encoder-decoder works alike)
                d_ids = torch.cat(
                    [torch.full_like(t_ids[:, :1], self.decoder_start_token_id), t_ids[:, :-1]], 1
                )
                d_mask = torch.cat([torch.ones_like(t_mask[:, :1]), t_mask[:, :-1]], 1)
                logits = self.module(
                    input_ids=s_ids,
                    attention_mask=s_mask,
                    decoder_input_ids=d_ids,
                    decoder_attention_mask=d_mask,
                    use_cache=False,
                ).logits
                self.nfe += 1
                logits = logits.float()
                picked = logits.gather(-1, t_ids.unsqueeze(-1)).squeeze(-1)
                lp = (picked - torch.logsumexp(logits, dim=-1)).double().cpu().numpy()
                del logits
                for r, i in enumerate(batch):
                    out[i] = lp[r, : len(tgt[i])].copy()
                bar.update(len(batch))
        return out

    def mean_logprobs(self, contexts: Sequence[str | None], texts: Sequence[str]) -> list[float]:
        """BARTScore: the mean target-token log-probability of each text given its context (``None``: an empty
        source, the encoder sees only its special tokens)."""
        srcs = ["" if c is None else c for c in contexts]
        out = []
        for i, lp in enumerate(self.token_logprobs(srcs, list(texts))):
            if lp.size == 0 or not np.all(np.isfinite(lp)):
                raise InputError(f"text {i} has no scorable tokens (or a non-finite log-probability)")
            out.append(float(lp.mean()))
        return out


def bartscore(
    scorer,
    candidates: Sequence[str],
    *,
    sources: Sequence[str] | None = None,
    references: Sequence[Sequence[str] | str] | None = None,
    directions: Sequence[str] = ("s2h", "r2h", "h2r", "f"),
    ref_agg: str = "max",
) -> dict[str, list[float]]:
    """BARTScore's directions for every candidate: ``{direction: [score per candidate]}`` (see the module table).
    ``ref_agg``: several references combine by ``"max"`` (the best reference per direction, the best per-reference
    F) or ``"mean"`` (BARTScore's SUM/score.py at the commit of its pickles, 248f511: ``ref_hypo`` and ``hypo_ref``
    averaged over the references, ``avg_f`` their mean).

    ``scorer``: a :class:`Seq2SeqScorer`, or anything with its ``mean_logprobs(contexts, texts)`` (the GPTScore
    scorer uses this function for its directions).

    ``s2h`` / ``h2s`` / ``sbi`` need one source per candidate; ``r2h`` / ``h2r`` / ``f`` one reference or a
    sequence of references per candidate (duplicates scored once)."""
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        raise InputError(f"unknown BARTScore direction(s) {bad}; choose from {', '.join(DIRECTIONS)}")
    n = len(candidates)
    want_src = any(d in directions for d in ("s2h", "h2s", "sbi"))
    want_ref = any(d in directions for d in ("r2h", "h2r", "f"))
    if want_src and (sources is None or len(sources) != n):
        raise InputError("the s2h / h2s / sbi directions need one source per candidate")
    if want_ref and (references is None or len(references) != n):
        raise InputError("the r2h / h2r / f directions need references for every candidate")
    if want_ref:
        check_ref_agg(ref_agg)  # before any forward pass
    out: dict[str, np.ndarray] = {}
    if want_src:
        if any(d in directions for d in ("s2h", "sbi")):
            out["s2h"] = np.asarray(scorer.mean_logprobs(list(sources), list(candidates)))
        if any(d in directions for d in ("h2s", "sbi")):
            out["h2s"] = np.asarray(scorer.mean_logprobs(list(candidates), list(sources)))
        if "sbi" in directions:
            out["sbi"] = (out["s2h"] + out["h2s"]) / 2
    if "mar" in directions:
        out["mar"] = np.asarray(scorer.mean_logprobs([None] * n, list(candidates)))
    if want_ref:
        flat_c, flat_r, owner = flat_references(candidates, references)
        r2h = np.asarray(scorer.mean_logprobs(flat_r, flat_c))
        h2r = np.asarray(scorer.mean_logprobs(flat_c, flat_r))
        for name, vals in (("r2h", r2h), ("h2r", h2r), ("f", (r2h + h2r) / 2)):
            out[name] = reduce_references(vals, owner, n, ref_agg)
    return {d: [float(x) for x in out[d]] for d in directions}


def load_seq2seq(
    spec: str | Path = BART_LARGE_CNN,
    *,
    allow_download: bool = False,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    batch_size: int = 4,
    max_length: int | None = None,
    progress: bool = False,
    name: str | None = None,
    hint: str = "pass a local checkpoint directory",
) -> Seq2SeqScorer:
    """A :class:`Seq2SeqScorer` from a local checkpoint directory or a hub id (offline unless
    ``allow_download``: a hub id is then read from the local Hugging Face cache only). ``hint`` names the option
    that points at a local checkpoint in the caller's interface; it goes into the error message."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    path = Path(spec)
    local = path.exists()
    if not local and str(spec).startswith((".", "/", "~")):
        raise ModelNotFoundError(f"seq2seq checkpoint directory {spec} does not exist; {hint}")
    kw = {"local_files_only": not allow_download, "trust_remote_code": False}
    try:
        cfg = AutoConfig.from_pretrained(str(spec), **kw)
    except OSError as e:
        if local:
            raise ModelNotFoundError(f"{spec} is not a Hugging Face checkpoint directory ({e})") from None
        what = "" if str(spec) == BART_LARGE_CNN else f" (BARTScore's is {BART_LARGE_CNN})"
        raise ModelNotFoundError(
            f"the seq2seq checkpoint {spec!r}{what} is not on this machine; "
            f"{hint}, or allow downloading where there is internet"
        ) from None
    if not getattr(cfg, "is_encoder_decoder", False):
        raise InputError(f"{spec} is not an encoder-decoder model ({cfg.architectures}); BARTScore needs one")
    dev = resolve_device(device)
    dt = resolve_dtype(dtype if dtype not in (None, "auto") else "float32", dev)
    tok = AutoTokenizer.from_pretrained(str(spec), **kw)
    module = AutoModelForSeq2SeqLM.from_pretrained(str(spec), dtype=dt, **kw).to(dev).eval()
    return Seq2SeqScorer(
        module,
        tok,
        name=name or (path.name if local else str(spec).rsplit("/", 1)[-1]),
        source=str(spec),
        device=dev,
        batch_size=batch_size,
        max_length=max_length,
        progress=progress,
    )


def tiny_bart(directory: str | Path, *, seed: int = 0, layers: int = 1, d_model: int = 16) -> Path:
    """Write a tiny random BART checkpoint (config, weights, word-level tokenizer over
    :data:`dlmeval.models.tiny.TINY_WORDS` that wraps texts as ``<bos> ... <eos>``, as BART's ``<s> ... </s>``)
    to ``directory`` and return it: a stand-in that :func:`load_seq2seq` loads the way it loads a real one.
    Weights are a pure function of ``seed``."""
    from tokenizers import processors
    from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerFast

    from dlmeval.models.tiny import tiny_vocab, word_level

    vocab = tiny_vocab()
    tk = word_level(vocab)
    tk.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>",
        pair="<bos> $A <eos> <eos> $B <eos>",
        special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])],
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="[PAD]",
        unk_token="[UNK]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    cfg = BartConfig(
        vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=vocab["[PAD]"],
        bos_token_id=vocab["<bos>"],
        eos_token_id=vocab["<eos>"],
        decoder_start_token_id=vocab["<eos>"],  # BART starts decoding from </s>
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BartForConditionalGeneration(cfg).eval()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(d))
    tok.save_pretrained(str(d))
    return d
