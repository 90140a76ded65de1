"""MoverScore (Zhao et al. 2019) as its authors compute it (``moverscore.py`` v1, the version BARTScore's
``SUM/score.py`` runs with ``n_gram=1, remove_subwords=True``).

Hand-written because the ``moverscore`` package cannot run here: it downloads its BERT-MNLI checkpoint at import
time and builds on ``pytorch_pretrained_bert`` and ``pyemd``, neither of which works with the pinned torch /
transformers. The computation follows the published code step by step:

1. tokens ``[CLS] + tokenize(text)[:510] + [SEP]``; per-token weights from an IDF dict (``log((N + 1) / (df + 1))``
   over the reference set for references and the hypothesis set for hypotheses; unseen ids ``log(N + 1)``), or 1
   everywhere without IDF;
2. every encoder layer's token vectors L2-normalised, and the last 5 layers pooled as the concatenation
   ``[min, mean, max]`` over layers;
3. punctuation, stop words and (``remove_subwords``) ``##`` word pieces dropped;
4. n-grams (windows of ``n_gram`` consecutive kept tokens): the IDF-weighted mean vector, weight the IDF sum;
5. vectors L2-normalised again, ground cost the *squared* Euclidean distance, masses the weights normalised to 1;
6. score ``1 - EMD`` (exact transport by POT's network simplex, :func:`~dlmeval.baselines.embedding.transport_cost`).

Several references: the best one (BARTScore stored both the mean and the max over references). An empty side
after step 3 gets ``-3`` (the lowest value: squared distances between unit vectors are at most 4). The paper's
encoder is BERT-MNLI (bert-base-uncased fine-tuned on MNLI, from the MoverScore release); any BERT-style encoder
directory works, the shipped MiniLM one is the CPU demo (labelled).
"""

from __future__ import annotations

import math
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from dlmeval.errors import InputError

WINDOW = 510  # MoverScore's truncate(): at most 510 word pieces between [CLS] and [SEP]
POOLED_LAYERS = 5
_PUNCT = set(string.punctuation)


def idf_dict(token_lists: Iterable[Sequence[int]]) -> defaultdict:
    """MoverScore's / bert-score's IDF: ``log((N + 1) / (df + 1))`` per token id, ``log(N + 1)`` for unseen ids."""
    counts: Counter = Counter()
    n = 0
    for ids in token_lists:
        counts.update(set(ids))
        n += 1
    out: defaultdict = defaultdict(lambda: math.log(n + 1))
    out.update({i: math.log((n + 1) / (c + 1)) for i, c in counts.items()})
    return out


class MoverScore:
    """MoverScore over a BERT-style encoder directory (see the module docstring for the steps)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        n_gram: int = 1,
        idf: bool = True,
        remove_subwords: bool = True,
        stop_words: Sequence[str] = (),
        device: str | None = None,
        batch_size: int = 16,
        name: str | None = None,
        demo: bool = False,
    ):
        from transformers import AutoModel, AutoTokenizer

        from dlmeval.models.base import resolve_device

        if n_gram < 1:
            raise InputError(f"--moverscore-ngram must be at least 1, got {n_gram}")
        self.directory = Path(directory)
        self.name = name or self.directory.name
        self.n_gram = int(n_gram)
        self.use_idf = bool(idf)
        self.remove_subwords = bool(remove_subwords)
        self.stop_words = frozenset(stop_words)
        self.device = resolve_device(device)
        self.batch_size = int(batch_size)
        self.demo = demo
        self.tokenizer = AutoTokenizer.from_pretrained(
            str(self.directory), use_fast=False, local_files_only=True
        )
        self.module = (
            AutoModel.from_pretrained(str(self.directory), local_files_only=True).to(self.device).eval()
        )
        positions = int(getattr(self.module.config, "max_position_embeddings", WINDOW + 2))
        self.window = min(WINDOW, positions - 2)  # a smaller encoder than BERT: its own window
        self.idf_ref: defaultdict | None = None
        self.idf_hyp: defaultdict | None = None
        self.truncated = 0

    @property
    def label(self) -> str:
        bits = [self.name, f"{self.n_gram}-gram", "idf" if self.use_idf else "uniform"]
        return ", ".join(bits) + (", CPU demo: not the paper's BERT-MNLI" if self.demo else "")

    def identity(self) -> dict:
        from dlmeval.baselines.checkpoints import weights_digest

        return {"name": self.name, "family": "moverscore", "weights_sha256": weights_digest(self.directory)}

    def configuration(self) -> dict:
        return {
            "implementation": "moverscore v1 (hand-written; see dlmeval.baselines.moverscore)",
            "n_gram": self.n_gram,
            "idf": self.use_idf,
            "remove_subwords": self.remove_subwords,
            "stop_words": sorted(self.stop_words),
            "pooled_layers": POOLED_LAYERS,
            "cost": "squared-euclidean",
            # the exact EMD's solver: POT's network simplex agrees with the former linprog LP to the last bit or
            # two (tests/fixtures/transport_linprog.json), which moves stored scores, so it is part of the run
            "transport": "pot.emd2",
            "multi_reference": "best reference",
        }

    # ------------------------------------------------------------------ tokens and weights
    def tokens(self, text: str) -> list[str]:
        tok = self.tokenizer
        pieces = tok.tokenize(text)
        if len(pieces) > self.window:
            self.truncated += 1
            pieces = pieces[: self.window]
        return [tok.cls_token, *pieces, tok.sep_token]

    def set_idf(self, references: Sequence[str], hypotheses: Sequence[str]) -> None:
        """IDF dicts from the reference set and the hypothesis set (as BARTScore's MoverScore runs)."""
        if not self.use_idf:
            return
        ids = self.tokenizer.convert_tokens_to_ids
        self.idf_ref = idf_dict(ids(self.tokens(t)) for t in references)
        self.idf_hyp = idf_dict(ids(self.tokens(t)) for t in hypotheses)

    def _weights(self, ids: list[int], ref: bool) -> np.ndarray:
        if not self.use_idf:
            return np.ones(len(ids))
        d = self.idf_ref if ref else self.idf_hyp
        if d is None:
            raise InputError("MoverScore with IDF: call set_idf(references, hypotheses) first")
        return np.array([d[i] for i in ids], dtype=np.float64)

    # ------------------------------------------------------------------ embeddings
    @torch.no_grad()
    def _embed(self, token_lists: list[list[str]]) -> list[np.ndarray]:
        """Per text ``[n_tokens, 3H]``: [min, mean, max] over the last 5 layers of L2-normalised token vectors."""
        tok = self.tokenizer
        ids = [tok.convert_tokens_to_ids(t) for t in token_lists]
        out: list[np.ndarray | None] = [None] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        pad = tok.pad_token_id or 0
        for s in range(0, len(order), self.batch_size):
            batch = order[s : s + self.batch_size]
            n = max(len(ids[i]) for i in batch)
            x = torch.full((len(batch), n), pad, dtype=torch.long)
            m = torch.zeros((len(batch), n), dtype=torch.long)
            for r, i in enumerate(batch):
                x[r, : len(ids[i])] = torch.tensor(ids[i])
                m[r, : len(ids[i])] = 1
            hs = self.module(
                input_ids=x.to(self.device), attention_mask=m.to(self.device), output_hidden_states=True
            ).hidden_states[1:]  # the encoded layers (pytorch_pretrained_bert's output_all_encoded_layers)
            h = torch.stack([v.float() for v in hs[-POOLED_LAYERS:]])  # [layers, B, L, H]
            h = h / h.norm(dim=-1, keepdim=True)
            pooled = torch.cat([h.min(0).values, h.mean(0), h.max(0).values], dim=-1).double().cpu().numpy()
            for r, i in enumerate(batch):
                out[i] = pooled[r, : len(ids[i])]
        return out  # type: ignore[return-value]

    def _keep(self, tokens: list[str]) -> list[int]:
        return [
            k
            for k, w in enumerate(tokens)
            if w not in _PUNCT and w not in self.stop_words and not (self.remove_subwords and "##" in w)
        ]

    def _ngrams(self, emb: np.ndarray, w: np.ndarray, keep: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """MoverScore's ``load_ngram``: windows of ``n_gram`` kept positions (stride 1; fewer kept positions than
        ``n_gram``: one window of all), each the weight-normalised mean vector, weighted by the weight sum."""
        k = np.asarray(keep)
        width = min(self.n_gram, len(k))
        wins = [k[s : s + width] for s in range(len(k) - width + 1)]
        vecs, weights = [], []
        for win in wins:
            ww = w[win]
            weights.append(float(ww.sum()))
            scale = ww / (ww.sum() + 1e-5)  # MoverScore's _safe_divide
            vecs.append((scale[:, None] * emb[win]).sum(0))
        return np.stack(vecs), np.asarray(weights)

    def _pair(self, ref: tuple, hyp: tuple) -> float:
        from dlmeval.baselines.embedding import transport_cost

        (re_, rw, rk), (he, hw, hk) = ref, hyp
        if not rk or not hk:
            return -3.0
        a, wa = self._ngrams(re_, rw, rk)
        b, wb = self._ngrams(he, hw, hk)
        if (
            wa.sum() <= 0 or wb.sum() <= 0
        ):  # every kept token has IDF 0: uniform masses (MoverScore divides 0 by 0)
            wa, wb = np.ones(len(a)), np.ones(len(b))
        a = a / (np.linalg.norm(a, axis=1, keepdims=True) + 1e-6)
        b = b / (np.linalg.norm(b, axis=1, keepdims=True) + 1e-6)
        cost = np.clip((a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2 * a @ b.T, 0.0, None)
        return 1.0 - transport_cost(cost, wa, wb)

    def score(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], ref_agg: str = "max"
    ) -> list[float]:
        """MoverScore of each candidate against its best reference (``ref_agg="max"``) or the mean over its
        references (``"mean"``, as BARTScore's SUM/score.py averages ``word_mover_score`` over them)."""
        from dlmeval.baselines.likelihood import check_ref_agg

        check_ref_agg(ref_agg)
        cands = list(candidates)
        refs = [[r] if isinstance(r, str) else list(dict.fromkeys(r)) for r in references]
        if len(refs) != len(cands) or any(not r for r in refs):
            raise InputError("MoverScore needs one non-empty list of references per candidate")
        texts = list(dict.fromkeys([*cands, *(t for r in refs for t in r)]))
        toks = {t: self.tokens(t) for t in texts}
        embs = dict(zip(texts, self._embed([toks[t] for t in texts])))
        conv = self.tokenizer.convert_tokens_to_ids

        def side(t: str, is_ref: bool) -> tuple:
            return embs[t], self._weights(conv(toks[t]), is_ref), self._keep(toks[t])

        agg = max if ref_agg == "max" else (lambda xs: float(np.mean(list(xs))))
        return [agg(self._pair(side(r, True), side(c, False)) for r in rs) for c, rs in zip(cands, refs)]


def load_moverscore(
    spec: str | None = None, *, fallback: str | Path | None = None, allow_download: bool = False, **kw
) -> MoverScore:
    """MoverScore over ``spec`` (a directory or hub id; None: ``fallback`` or the shipped MiniLM encoder, labelled
    as the CPU demo: the paper's BERT-MNLI is not on the hub under a canonical id)."""
    from dlmeval.baselines.checkpoints import resolve_checkpoint

    if spec is not None:
        d = resolve_checkpoint(
            spec, allow_download=allow_download, what="MoverScore", option="--moverscore-model"
        )
        return MoverScore(d, name=Path(str(spec)).name, **kw)
    if fallback is not None:
        return MoverScore(Path(fallback), demo=True, **kw)
    from dlmeval.baselines.embedding import ENCODER_NAME
    from dlmeval.models.default import minilm_dir

    return MoverScore(minilm_dir(), name=ENCODER_NAME, demo=True, **kw)
