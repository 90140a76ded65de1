"""Lexical-overlap baselines: sentence BLEU (sacrebleu), ROUGE-1/2/L (rouge-score; ROUGE-1.5.5 itself is
:mod:`dlmeval.baselines.rouge155`), METEOR (nltk).

With several references the best one counts: sacrebleu's multi-reference BLEU, rouge-score's ``score_multi`` (per
ROUGE type, the reference with the highest F1), nltk's ``meteor_score`` (the maximum over references). Duplicate
references (the D2T sets repeat theirs many times) are dropped first; that changes no score, only the cost.

METEOR's synonym stage needs WordNet 3.0. dlmeval never downloads NLTK data: it reads the Debian package
``wordnet-base`` (``apt-get install -y wordnet-base``, files in ``/usr/share/wordnet``; another directory with the
same WordNet 3.0 ``dict`` files can be given in ``$DLMEVAL_WORDNET``). NLTK's ``WordNetCorpusReader`` needs two
things that package does not give: the file ``lexnames`` (Debian leaves it out; its 45 lines are the fixed table
of WordNet 3.0's lexicographer files, documented in lexnames(5WN), and are written here from that table), and a
directory inside NLTK's allowed data roots that holds real files (its path sandbox refuses symbolic links out of
the corpus root). Its constructor also maps synsets onto NLTK's downloaded ``wordnet`` corpus (for the multilingual
OMW data, unused by METEOR); the reader here skips that mapping. So the database files are copied once (28 MB) into ``<dlmeval cache>/wordnet-3.0`` and that
directory is added to ``nltk.data.path``.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from dlmeval.errors import InputError

DEBIAN_WORDNET = Path("/usr/share/wordnet")
WORDNET_ENV = "DLMEVAL_WORDNET"
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

# WordNet 3.0 lexicographer files (number, name, syntactic category 1=noun 2=verb 3=adj 4=adv), lexnames(5WN).
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive "
    "noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity "
    "noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change verb.cognition "
    "verb.communication verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORDNET_FILES = (
    "data.noun",
    "data.verb",
    "data.adj",
    "data.adv",
    "index.noun",
    "index.verb",
    "index.adj",
    "index.adv",
    "noun.exc",
    "verb.exc",
    "adj.exc",
    "adv.exc",
)


def _refs(references: str | Sequence[str]) -> list[str]:
    if isinstance(references, str):
        references = [references]
    out = list(dict.fromkeys(r for r in references))  # distinct, in order
    if not out:
        raise InputError("a reference-based metric needs at least one reference")
    return out


# ---------------------------------------------------------------------------------------------- BLEU, ROUGE
def bleu(candidate: str, references: str | Sequence[str]) -> float:
    """Sentence BLEU (0-100) with sacrebleu's defaults (13a tokenizer, exponential smoothing, effective order)."""
    import sacrebleu

    return float(sacrebleu.sentence_bleu(candidate, _refs(references)).score)


@functools.cache
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def rouge(candidate: str, references: str | Sequence[str]) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 (rouge-score, Porter stemmer), best reference per type."""
    scores = _rouge_scorer().score_multi(_refs(references), candidate)
    return {k: float(scores[k].fmeasure) for k in ROUGE_TYPES}


def combine_references(
    per_ref: Sequence[dict[str, tuple[float, float, float]]], agg: str
) -> dict[str, tuple[float, float, float]]:
    """Per-reference ``{type: (recall, precision, f)}`` combined over the references, each of R, P, F on its
    own: ``"mean"`` or ``"max"`` (BARTScore's ``np.mean`` / ``np.max`` over ``axis=0``, SUM/score.py; the max F
    is rouge-score's ``score_multi`` F, whose best reference is chosen by F)."""
    from dlmeval.baselines.likelihood import check_ref_agg

    check_ref_agg(agg)
    if not per_ref:
        raise InputError("a reference-based metric needs at least one reference")
    f = (lambda xs: sum(xs) / len(xs)) if agg == "mean" else max
    return {k: tuple(float(f([d[k][i] for d in per_ref])) for i in range(3)) for k in per_ref[0]}  # type: ignore[misc]


def rouge_prf(
    candidate: str, references: str | Sequence[str], agg: str = "max"
) -> dict[str, tuple[float, float, float]]:
    """ROUGE-1, ROUGE-2 and ROUGE-L ``(recall, precision, f)`` with rouge-score (Porter stemmer), each against
    every distinct reference, combined by :func:`combine_references`."""
    sc = _rouge_scorer()
    per_ref = []
    for ref in _refs(references):
        s = sc.score(ref, candidate)
        per_ref.append(
            {k: (float(s[k].recall), float(s[k].precision), float(s[k].fmeasure)) for k in ROUGE_TYPES}
        )
    return combine_references(per_ref, agg)


# ---------------------------------------------------------------------------------------------- METEOR
def _wordnet_source() -> Path:
    src = Path(os.environ.get(WORDNET_ENV) or DEBIAN_WORDNET)
    missing = [f for f in _WORDNET_FILES if not (src / f).is_file()]
    if missing:
        raise InputError(
            f"METEOR needs WordNet 3.0 and {src} lacks {', '.join(missing[:3])}: install Debian's package "
            f"(apt-get install -y wordnet-base) or point ${WORDNET_ENV} at a WordNet 3.0 dict directory"
        )
    return src


def meteor_unavailable() -> str | None:
    """Why METEOR cannot run here (no WordNet 3.0), or None when it can. Callers that can do without METEOR (the
    meta-evaluation suite, ``make demo``) drop it and say so instead of stopping."""
    try:
        _wordnet_source()
    except InputError as e:
        return f"install wordnet-base ({e})"
    return None


def _staged_wordnet(cache: Path | None = None) -> Path:
    """The WordNet files copied into the dlmeval cache with a ``lexnames`` file (see the module docstring)."""
    from dlmeval.data.paths import cache_dir

    src = _wordnet_source()
    dest = (cache or cache_dir()) / "wordnet-3.0"
    stamp = dest / "dlmeval-source.txt"
    want = f"{src.resolve()}\n" + "".join(f"{f} {(src / f).stat().st_size}\n" for f in _WORDNET_FILES)
    if stamp.is_file() and stamp.read_text() == want:
        return dest
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for f in _WORDNET_FILES:
        shutil.copyfile(src / f, tmp / f)
    (tmp / "lexnames").write_text(
        "".join(f"{i:02d}\t{n}\t{_CATEGORY[n.split('.')[0]]}\n" for i, n in enumerate(_LEXNAMES))
    )
    (tmp / "dlmeval-source.txt").write_text(want)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)  # atomic: a killed copy never leaves a half-filled directory in use
    return dest


@functools.cache
def wordnet_reader():
    """NLTK's ``WordNetCorpusReader`` over the local WordNet 3.0 files (no NLTK download)."""
    import warnings

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _LocalWordNet(WordNetCorpusReader):
        # The constructor maps synsets to NLTK's own downloaded "wordnet" corpus (for the multilingual OMW data,
        # which METEOR does not use); these files ARE WordNet 3.0, so there is nothing to map.
        def map_wn(self, version="wordnet"):
            return None

    root = _staged_wordnet()
    if str(root) not in [str(p) for p in nltk.data.path]:
        nltk.data.path.append(str(root))  # NLTK's path sandbox only opens files under its data roots
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": no OMW, not needed
        return _LocalWordNet(str(root), None)


@functools.cache
def _tokenizer():
    # NLTK's Treebank tokenizer needs no data files (word_tokenize would need the punkt download)
    from nltk.tokenize import TreebankWordTokenizer

    return TreebankWordTokenizer()


def meteor(candidate: str, references: str | Sequence[str]) -> float:
    """METEOR (nltk, Lavie & Agarwal 2007 parameters, WordNet synonyms, Porter stems), best reference."""
    from nltk.translate.meteor_score import meteor_score

    tok = _tokenizer().tokenize
    refs = [tok(r) for r in _refs(references)]
    return float(meteor_score(refs, tok(candidate), wordnet=wordnet_reader()))
