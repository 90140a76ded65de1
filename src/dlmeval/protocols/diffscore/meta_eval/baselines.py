"""Reference-based baseline families: ``lexical`` (sentence BLEU, ROUGE-1/2/L F1, METEOR) and ``embedding``
(BERTScore through the ``bert-score`` package, MoverScore as its authors compute it). Both compare the candidate
with every target (references, or the source where there is none) and keep the best."""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family

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
    """BERTScore through the ``bert-score`` package and MoverScore as its authors compute it
    (:mod:`dlmeval.baselines.bertscore`, :mod:`dlmeval.baselines.moverscore`). IDF weights, where switched on,
    come from the benchmark's own texts (BERTScore: its distinct references; MoverScore: its distinct references
    and its outputs), so the run configuration holds a digest of those texts per benchmark."""

    name = "embedding"
    rank = 20
    kind = "meta-eval-embedding"
    order = EMBEDDING_METRICS
    options_title = "BERTScore / MoverScore"
    options = (
        FamilyOption(
            "--encoder",
            metavar="DIR",
            help="the CPU-demo encoder directory: BERTScore's when roberta-large is not on this machine, "
            "MoverScore's without --moverscore-model (default: the shipped all-MiniLM-L6-v2; rows labelled 'CPU "
            "demo')",
        ),
        FamilyOption(
            "--bertscore-model",
            metavar="SPEC",
            help="BERTScore encoder: a directory or hub id (default: roberta-large, the paper's, when cached; "
            "fetched only with --allow-download)",
        ),
        FamilyOption(
            "--bertscore-layer",
            type=int,
            metavar="N",
            help="BERTScore layer (default: bert-score's tuned layer, 17 for roberta-large; else the last)",
        ),
        FamilyOption(
            "--bertscore-idf",
            action="store_true",
            help="BERTScore IDF weights from the benchmark's references (default off: BARTScore's runs, which "
            "the paper reports, use idf=False)",
        ),
        FamilyOption(
            "--moverscore-model", metavar="SPEC", help="MoverScore encoder (the paper's: BERT-MNLI)"
        ),
        FamilyOption("--moverscore-ngram", type=int, metavar="N", help="MoverScore n-gram (default 1)"),
        FamilyOption(
            "--moverscore-no-idf",
            field="moverscore_idf",
            action="store_false",
            help="MoverScore with uniform weights instead of IDF",
        ),
    )

    def bertscore(self):
        from dlmeval.baselines.bertscore import load_bertscore

        o = self.opts
        return self.suite.model(
            "bertscore",
            lambda: load_bertscore(
                o.bertscore_model,
                fallback=o.encoder,
                allow_download=o.allow_download,
                layer=o.bertscore_layer,
                idf=o.bertscore_idf,
                device=o.evaluator_placement,
            ),
        )

    def moverscore(self):
        from dlmeval.baselines.moverscore import load_moverscore

        o = self.opts
        return self.suite.model(
            "moverscore",
            lambda: load_moverscore(
                o.moverscore_model,
                fallback=o.encoder,
                allow_download=o.allow_download,
                n_gram=o.moverscore_ngram,
                idf=o.moverscore_idf,
                device=o.evaluator_placement,
            ),
        )

    def load(self) -> None:
        self.bertscore()
        self.moverscore()

    def _idf_texts(self, name: str) -> tuple[list[str], list[str]]:
        """The benchmark's distinct references and distinct outputs (the IDF documents)."""
        frame = self.suite.frame(name)
        refs = list(dict.fromkeys(t for ts in frame["targets"] for t in ts))
        hyps = list(dict.fromkeys(frame["candidate"]))
        return refs, hyps

    def configuration(self) -> dict[str, Any]:
        import hashlib

        bs, ms = self.bertscore(), self.moverscore()
        cfg: dict[str, Any] = {
            "metrics": list(EMBEDDING_METRICS),
            "bertscore": bs.configuration(),
            "moverscore": ms.configuration(),
        }
        if bs.idf or ms.use_idf:  # the scores depend on every text of the benchmark
            cfg["idf_texts"] = {
                b: hashlib.sha256(
                    "\x1e".join(x for part in self._idf_texts(b) for x in part).encode()
                ).hexdigest()[:16]
                for b in self.suite.benchmarks
            }
        return cfg

    def models(self) -> list[Any]:
        return [self.bertscore().identity(), self.moverscore().identity()]

    def metrics(self, bench) -> list[str]:
        return list(EMBEDDING_METRICS)

    def _prepare_idf(self, name: str) -> None:
        if getattr(self, "_idf_for", None) != name:
            refs, hyps = self._idf_texts(name)
            self.bertscore().set_idf(refs)
            self.moverscore().set_idf(refs, hyps)
            self._idf_for = name

    def compute(self, frame, chunk):
        bs, ms = self.bertscore(), self.moverscore()
        self._prepare_idf(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        cands = [r["candidate"] for r in rows]
        refs = [list(r["targets"]) for r in rows]
        before = bs.truncated + ms.truncated
        prf = bs.score(cands, refs)
        mover = ms.score(cands, refs)
        cut = bs.truncated + ms.truncated - before
        if cut:
            self.run.warn(
                f"embedding: {cut} text(s) longer than the encoder window were truncated (bert-score at "
                f"{bs.window} tokens, MoverScore at {ms.window} word pieces, as their authors' code does)"
            )
        return {
            u.uid: {
                "bertscore_f": {"score": f, "p": p, "r": r},
                "moverscore": {"score": m},
            }
            for u, (p, r, f), m in zip(chunk, prf, mover)
        }

    def label(self, metric: str) -> str:
        if metric == "bertscore_f":
            return f"BERTScore-F [{self.bertscore().label}]"
        return f"MoverScore [{self.moverscore().label}]"
