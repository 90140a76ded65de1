"""The catalog of the data files dlmeval reads: where each one comes from and the SHA-256 of its bytes.

Every benchmark, task set and reference text that dlmeval's commands and tests read from the data directory
(:func:`dlmeval.data.paths.data_dir`) is listed here with its public source (a file at a fixed commit of the
repository that publishes it) and the SHA-256 of its content. ``dlmeval data fetch NAME`` downloads a file only on
that explicit request and keeps it only when its hash matches; ``dlmeval data list`` shows which files are present
and where each came from. The hashes were computed from the files as their sources publish them (each equal to the
upstream blob at the commit named).

The ``corpus/`` training texts are re-packed by the default model's authors from NLTK's corpus archives
(``nltk/nltk_data``): the catalog records their hash and origin, but they have no single file to download
(``fetchable`` is False) except ``webtext_valid``, which is the upstream file unchanged.

Groups name sets of files: ``demo`` (what ``dlmeval demo`` reads), ``bartscore``, ``tasks``, ``reference-text``,
``corpus``, ``all``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlmeval.registry import Registry

BARTSCORE = "https://raw.githubusercontent.com/neulab/BARTScore/248f511cb34ae3753fc81f7d7a945de5bfe33458/"
ADVERSARIAL_DECODER = (
    "https://raw.githubusercontent.com/Isinlor/AdversarialDecoder/2aaaf1fc62f5e3f1b4f43d09a04f69ac521544cc/"
)


@dataclass(frozen=True)
class DataFile:
    """One file of the data directory: ``path`` relative to it, its download ``url`` (None when it has no single
    upstream file), the SHA-256 of its bytes and its size, and what the source says about it."""

    name: str
    path: str
    sha256: str
    size: int
    url: str | None
    source: str
    license: str

    @property
    def fetchable(self) -> bool:
        return self.url is not None


FILES: Registry[DataFile] = Registry("data file")
GROUPS: Registry[tuple[str, ...]] = Registry("data group")


def _add(*args, **kw) -> DataFile:
    f = DataFile(*args, **kw)
    return FILES.add(f.name, f)


_BART = (
    # (name, path in the BARTScore repository, sha256, bytes)
    (
        "SummEval",
        "SUM/SummEval/data.pkl",
        "008f1639a3352f0248cac88b74ff431c27287a027a888902ef425a26005f0acf",
        1176833,
    ),
    (
        "Newsroom",
        "SUM/Newsroom/data.pkl",
        "277795f19d17fef0077061708d468e020c90071854508e774f4addae8a4a0ed5",
        419155,
    ),
    (
        "REALSumm",
        "SUM/REALSumm/data.pkl",
        "1f9c97d27e8fe3ade81f76ea33dc6d3b5b333a602b1c568130306039bd701942",
        1510489,
    ),
    (
        "Rank19",
        "SUM/Rank19/data.pkl",
        "19f2a41a6ebc33e69f04b53829dd47844df4b7a3f8fc8225776b66f34e88ff0d",
        149521,
    ),
    (
        "QAGS_CNN",
        "SUM/QAGS_CNN/data.pkl",
        "51deeef7dd0b181ac4072db234e41cb128b44ee42854a71d01d37371f5b53289",
        515731,
    ),
    (
        "QAGS_XSUM",
        "SUM/QAGS_XSUM/data.pkl",
        "9a49d4b689b093380dfb8627327ce94c8ef1af91cde9cc4ddd0f293b1ac17733",
        557039,
    ),
    (
        "BAGEL",
        "D2T/BAGEL/data.pkl",
        "67f2bc57e47501ba3afb00fabb9a4790db2b0828b982799d76c0efe3c6e89ee1",
        289110,
    ),
    (
        "SFHOT",
        "D2T/SFHOT/data.pkl",
        "00492d3f73341198663eca78cf07cef83a0b4834a6ba15a33a1ea79257f62e61",
        1900431,
    ),
    (
        "SFRES",
        "D2T/SFRES/data.pkl",
        "7712d435ff79bb0b42191b8b868c1fe7ae26ae6399829a9b74fd6cb6d76690da",
        1189812,
    ),
    (
        "gu-en",
        "WMT/gu-en/data.pkl",
        "9a3995e133a2bfc280cfbe57d1b7027d812ab075b54c3b1841471b3b9d6a0e44",
        3083502,
    ),
    (
        "kk-en",
        "WMT/kk-en/data.pkl",
        "cac631542aa21a1a712d724e5b0cd95198544d03abb22cf007b5a5acc53181e7",
        1934187,
    ),
    (
        "lt-en",
        "WMT/lt-en/data.pkl",
        "ea0b47ae5618fc64f1a37ee6699b6078ae59ba243771b6402194393b90ff144f",
        3844714,
    ),
    ("LICENSE", "LICENSE", "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4", 11357),
)
for _name, _rel, _sha, _size in _BART:
    _add(
        f"bartscore-{_name}",
        f"meta-eval/bartscore/{_rel}",
        _sha,
        _size,
        BARTSCORE + _rel,
        f"neulab/BARTScore @ 248f511c : {_rel}",
        "Apache-2.0",
    )

_add(
    "gsm8k",
    "tasks/gsm8k_test.jsonl",
    "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    749738,
    "https://raw.githubusercontent.com/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/"
    "grade_school_math/data/test.jsonl",
    "openai/grade-school-math @ 3101c7d5 : grade_school_math/data/test.jsonl",
    "MIT",
)
_add(
    "arc-challenge",
    "tasks/arc_challenge_test.jsonl",
    "1ae3aeedf1951d881cbd5c2e3a31e78a1993d251479afbe4cb413b6707244636",
    365606,
    "https://raw.githubusercontent.com/mosaicml/llm-foundry/8c8dd48f72168c5d51e2f7b151595892a8fba43d/"
    "scripts/eval/local_data/world_knowledge/arc_challenge.jsonl",
    "mosaicml/llm-foundry @ 8c8dd48f : scripts/eval/local_data/world_knowledge/arc_challenge.jsonl",
    "Apache-2.0",
)
_add(
    "triviaqa",
    "tasks/triviaqa_test.tsv",
    "041ed9ddd2977c7fe452d290cf60e1f7e0a803977b0f912e234d218261c10e57",
    4098200,
    "https://raw.githubusercontent.com/castorini/anserini-tools/5b819c1a45c8a0a3ec9426f476694f44a29dfaf3/"
    "topics/topics.dpr.trivia.test.txt",
    "castorini/anserini-tools @ 5b819c1a : topics/topics.dpr.trivia.test.txt",
    "none stated",
)
_add(
    "humaneval",
    "tasks/HumanEval.jsonl.gz",
    "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
    44877,
    "https://raw.githubusercontent.com/openai/human-eval/6d43fb980f9fee3c892a914eda09951f772ad10d/"
    "data/HumanEval.jsonl.gz",
    "openai/human-eval @ 6d43fb98 : data/HumanEval.jsonl.gz",
    "MIT",
)
_add(
    "webtext-test",
    "reference-text/webtext_test.jsonl",
    "08a0a853b267d95e4afbe54adf41ebd84d87dc292c07251e153ed480d55510dd",
    1417947,
    ADVERSARIAL_DECODER + "data/webtext.test.jsonl",
    "Isinlor/AdversarialDecoder @ 2aaaf1fc : data/webtext.test.jsonl",
    "none stated",
)
_add(
    "lm1b-heldout",
    "reference-text/lm1b_heldout-00000.txt",
    "265dccd51762253e20425c21ff6ddf09e6da2e11a365da399b0390eebb2d52c8",
    829492,
    "https://raw.githubusercontent.com/G4mble/TEST_PatientInformationLeaflet/"
    "88276fa2dfb6709d00e4b88012f22e66ba71611a/src/main/resources/text_input/news.en.heldout-00000-of-00050",
    "G4mble/TEST_PatientInformationLeaflet @ 88276fa2 : src/main/resources/text_input/"
    "news.en.heldout-00000-of-00050 (LM1B held-out shard 0)",
    "none stated",
)
_add(
    "corpus-webtext_valid",
    "corpus/webtext_valid.jsonl",
    "1f58c79d6a596a51bec2cfd2c8ab6b30169b04ff7d7c04e1b10dd261efb14544",
    1417601,
    ADVERSARIAL_DECODER + "data/webtext.valid.jsonl",
    "Isinlor/AdversarialDecoder @ 2aaaf1fc : data/webtext.valid.jsonl",
    "none stated",
)
_NLTK = (
    # (name, sha256, bytes, archive, licence): re-packed as JSONL (one document a line), no single upstream file
    (
        "abc_news",
        "94b9118a9bb7cf7497d0b022ec59eef7123f01fdcb201216b658ad7387a6fc06",
        4114685,
        "abc",
        "none stated",
    ),
    (
        "movie_reviews",
        "a9d14290d9d17622acf0d15a74805291b562de52972abb58b2b353ddd445e318",
        7888593,
        "movie_reviews",
        "CC BY 4.0",
    ),
    (
        "state_union",
        "27e214103b231cbeae41fc4ddc11a64ffe0430a8f95798f694d9e41fd2340880",
        2083820,
        "state_union",
        "public domain",
    ),
    (
        "inaugural",
        "ed19649df9424f4bc9c70262622d3645926e45eefe2b7df1aec3f54a035831e6",
        811895,
        "inaugural",
        "public domain",
    ),
    (
        "nltk_webtext",
        "b004354a7510b1bfdeea83d03551b22fadbc5c2fca5fbc9a5458060844e81464",
        1764190,
        "webtext",
        "none stated",
    ),
)
for _name, _sha, _size, _zip, _lic in _NLTK:
    _add(
        f"corpus-{_name}",
        f"corpus/{_name}.jsonl",
        _sha,
        _size,
        None,
        f"nltk/nltk_data @ 5db857e6 : packages/corpora/{_zip}.zip, re-packed as JSONL (one document a line)",
        _lic,
    )

GROUPS.add("bartscore", tuple(n for n in FILES.names() if n.startswith("bartscore-")))
GROUPS.add("tasks", ("gsm8k", "arc-challenge", "triviaqa", "humaneval"))
GROUPS.add("reference-text", ("webtext-test", "lm1b-heldout"))
GROUPS.add("corpus", tuple(n for n in FILES.names() if n.startswith("corpus-")))
#: what `dlmeval demo` reads: the meta-evaluation set (SFHOT) and its licence, the web text (Care's prompts and
#: references, the robustness stage's cloze task)
GROUPS.add("demo", ("bartscore-SFHOT", "bartscore-LICENSE", "webtext-test"))
GROUPS.add("all", FILES.names())


def resolve(names) -> list[DataFile]:
    """The files named by ``names`` (file names or group names, case-insensitive), each once, in catalog order;
    an unknown name raises InputError listing the files and groups."""
    from dlmeval.errors import InputError

    want: set[str] = set()
    for n in names:
        if n in GROUPS:
            want.update(GROUPS[n])
        elif n in FILES:
            want.add(FILES[n].name)
        else:
            raise InputError(
                f"unknown data file or group {n!r}; groups: {', '.join(GROUPS.names())}; files: "
                f"{', '.join(FILES.names())} (dlmeval data list)"
            )
    return [FILES[n] for n in FILES.names() if n in want]
