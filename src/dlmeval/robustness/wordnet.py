"""WordNet 3.0 from Debian's ``wordnet-base`` package, read with nltk's reader (never an nltk download).

Debian installs the dictionary files under ``/usr/share/wordnet`` (``apt-get install -y wordnet-base``); set
``DLMEVAL_WORDNET`` to use another WordNet 3.0 ``dict`` directory. Two gaps between that directory and what
:class:`nltk.corpus.reader.wordnet.WordNetCorpusReader` expects are bridged here:

* Debian does not ship the ``lexnames`` file; its 45 lines are fixed by the WordNet 3.0 format (lexnames(5WN),
  installed by the same package as ``man 5WN lexnames``), so :data:`LEXNAMES` holds them and the reader serves
  them from memory.
* nltk maps a non-default WordNet onto its own downloadable ``wordnet`` corpus (``map_wn``) for the multilingual
  OMW functions; dlmeval uses no OMW data, so that mapping is switched off (it would otherwise look for a download).

nltk only reads from directories on ``nltk.data.path``; the WordNet directory is appended to it once.
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from pathlib import Path

from dlmeval.errors import InputError

DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
INSTALL_HINT = (
    "synonym substitution needs WordNet 3.0: install Debian's wordnet-base package "
    "(apt-get install -y wordnet-base, files under /usr/share/wordnet) or set DLMEVAL_WORDNET to a WordNet "
    "3.0 dict directory"
)

#: WordNet 3.0 lexicographer file names in file-number order (lexnames(5WN)); Debian omits the file.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive "
    "noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity "
    "noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change verb.cognition "
    "verb.communication verb.competition verb.consumption verb.contact verb.creation verb.emotion "
    "verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_SYNTACTIC = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
_REQUIRED = ("index.noun", "data.noun", "index.verb", "data.verb", "index.adj", "data.adj", "noun.exc")


def wordnet_dir() -> Path:
    return Path(os.environ.get("DLMEVAL_WORDNET") or DEFAULT_WORDNET_DIR)


def wordnet_available(directory: str | os.PathLike | None = None) -> bool:
    d = Path(directory) if directory is not None else wordnet_dir()
    return all((d / f).is_file() for f in _REQUIRED)


@functools.lru_cache(maxsize=4)
def _load(directory: str):
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _Reader(WordNetCorpusReader):
        def open(self, fileid):
            if fileid == "lexnames":
                return io.StringIO(
                    "".join(f"{i:02d}\t{n}\t{_SYNTACTIC[n.split('.')[0]]}\n" for i, n in enumerate(LEXNAMES))
                )
            return super().open(fileid)

        def map_wn(self, version="wordnet"):
            return None  # no OMW mapping (module docstring)

    if directory not in nltk.data.path:
        nltk.data.path.append(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": expected, see above
        return _Reader(directory, None)


def load_wordnet(directory: str | os.PathLike | None = None):
    """The nltk WordNet reader over Debian's files (cached per directory); InputError naming the package if absent."""
    d = Path(directory) if directory is not None else wordnet_dir()
    if not wordnet_available(d):
        raise InputError(f"{INSTALL_HINT} (looked in {d})")
    return _load(str(d.resolve()))


@functools.lru_cache(maxsize=65536)
def _synonyms_cached(directory: str, word: str) -> tuple[str, ...]:
    wn = _load(directory)
    w = word.lower()
    bases = {w}
    for pos in ("n", "v", "a", "r"):
        m = wn.morphy(w, pos)
        if m:
            bases.add(m.lower())

    def count(s) -> int:
        return sum(lemma.count() for lemma in s.lemmas() if lemma.name().lower() in bases)

    synsets = wn.synsets(w)
    counted = [s for s in synsets if count(s) > 0]
    if counted:
        # the word's most frequent senses first (SemCor counts in cntlist.rev); uncounted senses are too rare
        # to be a plausible substitute without word-sense disambiguation
        synsets = sorted(counted, key=lambda s: -count(s))
    for s in synsets:
        cands = []
        for lemma in s.lemmas():
            name = lemma.name()
            if name.isalpha() and name.lower() not in bases and name not in cands:
                cands.append(name)
        if cands:
            return tuple(cands)
    return ()


def synonyms(word: str, directory: str | os.PathLike | None = None) -> tuple[str, ...]:
    """Single-word WordNet synonyms of ``word`` from its most frequent sense that has any.

    Senses are ordered by how often ``word`` (or its base form) was tagged with them in SemCor; senses never tagged
    are ignored when any sense was. The synonyms of the first sense with a single-word lemma other than the word
    and its base forms are returned, in WordNet's order, in dictionary form (not re-inflected). Empty if none.
    """
    d = Path(directory) if directory is not None else wordnet_dir()
    load_wordnet(d)
    return _synonyms_cached(str(d.resolve()), word)
