"""Quality of the embedded default diffusion LM (the numbers in MODEL.md).

    .venv/bin/python benchmarks/bench_default_model.py [--rows 96] [--sentences 500]

Prints, on the held-out 2% of ../shared/data/corpus (the fixed split by hash, packed into 128-token rows exactly as in
training):

1. masked-token NLL (nats) and top-1 accuracy at masking rates 0.15, 0.5 and 0.9 for (a) the shipped model, (b) the
   untrained start (MiniLM encoder + fresh tied MLM head), (c) a unigram baseline fitted on the training split;
2. the shuffle test: for held-out sentences of at least 8 words, a marginal reconstruction score (mean log-prob of
   hidden tokens over 8 random masks at rate 0.15) of the sentence against a word-shuffled copy of itself, with the
   same number of masks; the share of sentences that score above their shuffle;
3. a few fill-mask examples;
4. the load time of the shipped model.

Masks are seeded by (seed, rate, row) / (seed, sentence, variant, mask), so every number here is reproducible.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from dlmeval.data.corpus import load_corpus
from dlmeval.models.base import length_sorted_batches
from dlmeval.models.default import default_start_model, load_default
from dlmeval.seeding import derive_seed, numpy_rng, torch_generator
from dlmeval.train.diffusion import collate, evaluate_rows, pack_documents, sample_masks

RATES = (0.15, 0.5, 0.9)
FILL = [
    "The capital of France is [MASK].",
    "She drank a cup of [MASK] before work.",
    "The prime minister said the [MASK] would be announced next week.",
    "It was one of the best [MASK] I have ever seen.",
    "Heavy rain caused [MASK] in several towns.",
]


def unigram_eval(model, train_rows, rows, rates, batch_size, seed):
    vocab = model.vocab_size
    counts = Counter()
    for r in train_rows:
        counts.update(i for i, e in zip(r.ids, r.eligible) if e)
    total = sum(counts.values()) + vocab
    logp = {t: math.log((c + 1) / total) for t, c in counts.items()}
    floor = math.log(1 / total)
    top = counts.most_common(1)[0][0]
    out = {}
    for r in rates:
        nll = corr = n = 0
        for b in range(math.ceil(len(rows) / batch_size)):
            chunk = rows[b * batch_size : (b + 1) * batch_size]
            ids, _, elig = collate(model, chunk)
            g = torch_generator(derive_seed(seed, "eval", r, b))
            hidden = sample_masks(elig, torch.full((len(chunk),), float(r)), g)
            tgt = ids[hidden].tolist()
            nll += -sum(logp.get(t, floor) for t in tgt)
            corr += sum(t == top for t in tgt)
            n += len(tgt)
        out[f"{r:g}"] = {"nll": nll / n, "acc": corr / n, "tokens": n}
    return out


def sentences(docs, n, min_words=8):
    out = []
    for d in docs:
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", d.replace("\n", " ")):
            s = s.strip()
            if min_words <= len(s.split()) <= 40 and s[-1:] in ".!?":
                out.append(s)
            if len(out) >= n:
                return out
    return out


def shuffled(text, seed, i):
    words = text.split()
    rng = numpy_rng(seed, "shuffle-test", i)
    for _ in range(20):
        p = rng.permutation(len(words))
        if (p != np.arange(len(words))).any():
            break
    return " ".join(words[j] for j in p)


@torch.no_grad()
def marginal_scores(model, texts, keys, rate=0.15, n_masks=8, seed=0, max_tokens=8192):
    """Mean log-prob of hidden tokens over n_masks Bernoulli(rate) masks (at least one hidden) per text."""
    seqs = [model.encode(t)[: model.max_length] for t in texts]
    rows, owner = [], []
    for i, s in enumerate(seqs):
        elig = torch.zeros(1, len(s), dtype=torch.bool)
        elig[0, 1:-1] = True  # not [CLS] / [SEP]
        for k in range(n_masks):
            g = torch_generator(derive_seed(seed, "marginal", keys[i], k))
            rows.append((s, sample_masks(elig, torch.tensor([rate]), g)[0]))
            owner.append(i)
    sums = np.zeros(len(texts))
    cnt = np.zeros(len(texts))
    for batch in length_sorted_batches([len(r[0]) for r in rows], max_tokens=max_tokens):
        ids, attn = model.pad([rows[j][0] for j in batch])
        hid = torch.zeros_like(ids, dtype=torch.bool)
        for r, j in enumerate(batch):
            hid[r, : len(rows[j][0])] = rows[j][1]
        noisy = torch.where(hid, torch.full_like(ids, model.mask_token_id), ids)
        sc = model.score_positions(noisy, attn, hid, ids)
        lp = sc.logprob.cpu().numpy()
        per_row = np.zeros(len(batch))
        per_cnt = np.zeros(len(batch))
        np.add.at(per_row, sc.batch_index.cpu().numpy(), lp)
        np.add.at(per_cnt, sc.batch_index.cpu().numpy(), 1)
        for r, j in enumerate(batch):
            sums[owner[j]] += per_row[r] / per_cnt[r]
            cnt[owner[j]] += 1
    return sums / cnt


def fill_mask(model, text, k=5):
    ids, attn = model.pad([model.encode(text)])
    pos = ids == model.mask_token_id
    sc = model.score_positions(ids, attn, pos, None, top_k=k)
    return [model.tokenizer.convert_ids_to_tokens(sc.top_ids[j].tolist()) for j in range(sc.top_ids.shape[0])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=96, help="held-out 128-token rows per rate (default 96)")
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", default=None, help="model directory (default: the shipped one)")
    a = ap.parse_args()
    t = time.perf_counter()
    shipped = load_default(directory=Path(a.weights)) if a.weights else load_default()
    load_s = time.perf_counter() - t
    start = default_start_model(name="untrained-start")
    held_docs = load_corpus(split="heldout")
    held = pack_documents(shipped, held_docs, 128)[: a.rows]
    train_rows = pack_documents(shipped, load_corpus(split="train"), 128)
    print(f"held-out: {len(held_docs)} documents, {len(held)} rows x 128 tokens evaluated; seed {a.seed}")
    res = {
        "shipped": evaluate_rows(shipped, held, RATES, batch_size=32, seed=a.seed),
        "untrained start": evaluate_rows(start, held, RATES, batch_size=32, seed=a.seed),
        "unigram": unigram_eval(shipped, train_rows, held, RATES, 32, a.seed),
    }
    print("\n| model | " + " | ".join(f"NLL@{r:g} | top-1@{r:g}" for r in RATES) + " |")
    print("|---|" + "---|---|" * len(RATES))
    for name, r in res.items():
        cells = " | ".join(f"{r[f'{x:g}']['nll']:.3f} | {r[f'{x:g}']['acc']:.3f}" for x in RATES)
        print(f"| {name} | {cells} |")
    sents = sentences(held_docs, a.sentences)
    shuf = [shuffled(s, a.seed, i) for i, s in enumerate(sents)]
    keys = [f"s{i}" for i in range(len(sents))]
    print(f"\nshuffle test: {len(sents)} held-out sentences of >= 8 words, 8 masks at rate 0.15")
    for name, m in (("shipped", shipped), ("untrained start", start)):
        o = marginal_scores(m, sents, keys, seed=a.seed)
        s = marginal_scores(m, shuf, [k + "-shuf" for k in keys], seed=a.seed)
        print(
            f"  {name}: original > shuffled for {np.mean(o > s):.3f} of sentences "
            f"(mean score {o.mean():.3f} vs {s.mean():.3f})"
        )
    print("\nfill-mask (top-5, shipped model):")
    for text in FILL:
        print(f"  {text}  ->  {', '.join(fill_mask(shipped, text)[0])}")
    print(f"\nload time of the shipped model: {load_s:.2f} s")


if __name__ == "__main__":
    main()
