"""Reference-based baseline families: ``lexical`` (sentence BLEU, ROUGE-1/2/L F1, METEOR) and ``embedding``
(BERTScore-style greedy-matching F1, MoverScore-style ``1 - EMD`` over token embeddings). Both compare the
candidate with every target (references, or the source where there is none) and keep the best."""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.meta_eval.families import MetricFamily, register_family

LEXICAL_METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "meteor")
EMBEDDING_METRICS = ("bertscore_f", "moverscore")


def lexical_metrics() -> tuple[str, ...]:
    """:data:`LEXICAL_METRICS`, without METEOR on a machine without WordNet 3.0 (the suite then says so)."""
    from dlmeval.baselines.lexical import meteor_unavailable

    return (
        LEXICAL_METRICS
        if meteor_unavailable() is None
        else tuple(m for m in LEXICAL_METRICS if m != "meteor")
    )


@register_family
class LexicalFamily(MetricFamily):
    name = "lexical"
    rank = 10
    kind = "meta-eval-lexical"
    order = LEXICAL_METRICS
    LABELS = {
        "bleu": "BLEU (sacrebleu)",
        "rouge1": "ROUGE-1 F1",
        "rouge2": "ROUGE-2 F1",
        "rougeL": "ROUGE-L F1",
        "meteor": "METEOR (nltk)",
    }

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.lexical import meteor_unavailable

        return {
            "metrics": list(lexical_metrics()),
            "detokenize": True,
            "bleu": "sacrebleu-sentence",
            "rouge": "rouge-score-stemmed-F1",
            "meteor": "nltk-wordnet3.0" if meteor_unavailable() is None else "not available",
        }

    def opened(self, run) -> None:
        from dlmeval.baselines.lexical import meteor_unavailable

        why = meteor_unavailable()
        if why is not None:
            run.warn(f"METEOR not available: {why}")

    def metrics(self, bench) -> list[str]:
        return list(lexical_metrics())

    def compute(self, frame, chunk):
        from dlmeval.baselines.lexical import bleu, meteor, rouge

        out = {}
        with_meteor = "meteor" in lexical_metrics()
        for u in chunk:
            r = frame.iloc[u.rows[0]]
            rg = rouge(r["candidate"], r["targets"])
            out[u.uid] = {
                "bleu": {"score": bleu(r["candidate"], r["targets"])},
                **{k: {"score": v} for k, v in rg.items()},
            }
            if with_meteor:
                out[u.uid]["meteor"] = {"score": meteor(r["candidate"], r["targets"])}
        return out

    def label(self, metric: str) -> str:
        return self.LABELS[metric]


@register_family
class EmbeddingFamily(MetricFamily):
    name = "embedding"
    rank = 20
    kind = "meta-eval-embedding"
    order = EMBEDDING_METRICS

    def load(self) -> None:
        self.suite.embedder()

    def configuration(self) -> dict[str, Any]:
        e = self.suite.embedder()
        return {"metrics": list(EMBEDDING_METRICS), "layer": e.layer, "idf": False, "emd_weights": "uniform"}

    def models(self) -> list[Any]:
        return [self.suite.embedder().identity()]

    def metrics(self, bench) -> list[str]:
        return list(EMBEDDING_METRICS)

    def compute(self, frame, chunk):
        from dlmeval.baselines.embedding import greedy_match_f1, mover_score

        e = self.suite.embedder()
        texts = [
            t for u in chunk for t in (frame["candidate"].iat[u.rows[0]], *frame["targets"].iat[u.rows[0]])
        ]
        e.clear()  # the chunk's own batches only, so a resumed run embeds exactly as an uninterrupted one
        e.embed(texts)  # one batched pass for the chunk; the metric calls below read the cache
        out = {}
        for u in chunk:
            r = frame.iloc[u.rows[0]]
            out[u.uid] = {
                "bertscore_f": {"score": greedy_match_f1(e, r["candidate"], r["targets"])},
                "moverscore": {"score": mover_score(e, r["candidate"], r["targets"])},
            }
        return out

    def label(self, metric: str) -> str:
        lab = self.suite.embedder().label
        return {"bertscore_f": f"BERTScore-F [{lab}]", "moverscore": f"MoverScore 1-EMD [{lab}]"}[metric]
