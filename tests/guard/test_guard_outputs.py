"""Guard: every stored record and output table of the tiny runs (care-tiny, robust-tiny, meta-eval ``--limit 6``,
``score``, ``sample``; one process, and two ranks for ``score`` / ``sample``) against a digest committed beside this
file (``guard_digest.json``).

What an entry holds, so that it holds on every machine (issue 32): the entry's key (command, run id, table or file
name), the number of records of a run, a hash of everything discrete (keys, tokens, texts, NFE, integers, the
structure of every record and table, every string with its numbers taken out), and the floats themselves (JSON
floats, and numbers written with a decimal point or exponent inside strings and CSV cells). Discrete parts must be
identical; floats must agree within ``ATOL + RTOL * |x|`` (a number printed in a string also within one unit of
its last printed digit). The tolerance is measured, not guessed: the same commands with the same (shipped) weights
under ``ATEN_CPU_CAPABILITY=default``, ``avx2`` and ``avx512`` gave identical keys, counts and discrete parts, and
floats that differ by at most the figures in ``MEASURED`` (float32 rounding of other vector kernels, carried into
derived statistics); the tolerance is about ten times that, and a change of 1e-4 in a value of 1 fails
(docs/scaling.md, "Code, numerics and machines").
Bit-identity stays the test where it holds, on one machine: ranks, resumes and batch canonicalisation
(tests/parallel/test_parallel.py, tests/e2e/test_score_identity.py, tests/store/test_store.py).

The digest is written by ``python tests/guard/test_guard_outputs.py --write`` and compared entry by entry afterwards: a
structural change must leave every entry the same. A change that is meant to move numbers (and says so in its
commit) rewrites the digest in the same commit. Measured wall-clock fields (``seconds``, ``cpu_seconds``, the
``timing`` table) and the code's identity (version, source digest, CPU capability; they change with every commit
or machine by design) are left out.

Two ranks of care / robust / meta-eval are compared with one process in ``tests/parallel/test_parallel.py``. The digest was
written with WordNet installed (``make test`` installs it, scripts/system-deps.sh): without it METEOR is "not
available" and the meta-eval lexical entries differ.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import sqlite3
import sys
from pathlib import Path

import pytest

if not __package__:  # run as a script (python tests/guard/test_guard_outputs.py --write): the checkout's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.parallel.test_parallel import dlmeval  # one launcher: one process, or torchrun

DIGEST = Path(__file__).with_name("guard_digest.json")
#: left out of every record: measured wall-clock time, and the code / machine identity in a signature
WALL_CLOCK = ("seconds", "cpu_seconds", "wall_seconds", "code", "cpu_capability")
#: the largest differences measured between ATEN_CPU_CAPABILITY=default / avx2 / avx512 (same weights; each run
#: dumped with ``python tests/guard/test_guard_outputs.py --dump F.json``, compared with ``--compare A.json B.json``;
#: no discrete part differed, 2,560 of 9,092 floats did): the largest absolute difference (a Care perplexity of
#: 116.5), the largest relative one among values of magnitude 1 or more, and the ``atol`` that ``rtol = 1e-5``
#: would need (a meta-eval correlation of 0.025 over six items moved by 4.0e-6)
MEASURED = {"abs": 4.65e-6, "rel_above_1": 8.5e-7, "atol_at_rtol_1e-5": 3.7e-6}
ATOL = 4e-5
RTOL = 1e-5
#: numbers inside strings (CSV cells, text): a decimal point or an exponent; integers stay discrete
NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?(?![\w.])")
#: the code identity inside a signature line
CODE_PARTS = re.compile(r"dlmeval:[^|]*\|(?:src:[0-9a-f]*\|)?")

TEXTS = [
    "the cat sat on the mat",
    "a dog",
    "birds fly south in winter when the days grow short and the nights are cold",
    "the sun is hot today",
    "we like green tea a lot, and coffee too, but tea is what we drink in the morning",
    "it rains",
    "the river runs to the sea through the hills and the fields of the valley below",
    "one two three four five",
]
SOURCES = [f"source text number {i} about {t.split()[-1]}" for i, t in enumerate(TEXTS)]

SAMPLE_ARGS = (
    "--json sample --model tiny-llada --prompts p.txt --num-samples 2 --length 8 --steps 8 --strategy low_confidence "
    "--temperature 0.5 --batch-size 2"
).split()

COMMANDS: dict[str, tuple[int, list[str]]] = {
    "care": (1, "care care-tiny --out o-care".split()),
    "robust": (1, "robust robust-tiny --out o-robust".split()),
    "meta-eval": (
        1,
        "meta-eval --benchmarks SummEval --limit 6 --model tiny-llada --ar-model tiny-causal --masks 4 --rates 2 --bootstrap 50 --out o-meta".split(),
    ),
    "score-marginal": (
        1,
        "--json score --model tiny-llada --config marginal --candidates c.txt --masks 4 --rates 2 --output score-marginal.csv".split(),
    ),
    "score-pmi": (
        1,
        "--json score --model tiny-llada --config pmi --candidates c.txt --sources s.txt --masks 4 --rates 2 --tokens --output score-pmi.jsonl".split(),
    ),
    "score-marginal-2ranks": (
        2,
        "--json score --model tiny-llada --config marginal --candidates c.txt --masks 4 --rates 2".split(),
    ),
    "sample": (1, SAMPLE_ARGS),
    "sample-2ranks": (2, SAMPLE_ARGS),  # the same command on two ranks
}


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:20]


def _strip(v):
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if k not in WALL_CLOCK}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def _split(v, floats: list):
    """``v`` with every float replaced by a marker (appended to ``floats``: a float, or the text of a number
    printed inside a string)."""
    if isinstance(v, dict):
        return {k: _split(x, floats) for k, x in v.items()}
    if isinstance(v, list):
        return [_split(x, floats) for x in v]
    if isinstance(v, float):
        floats.append(v if math.isfinite(v) else repr(v))
        return "<f>"
    if isinstance(v, str):
        v = CODE_PARTS.sub("dlmeval:<code>|", v)

        def take(m):
            floats.append(m.group(0))
            return "<n>"

        return NUMBER.sub(take, v)
    return v


def _entry(value, n: int | None = None) -> dict:
    """The digest entry of a JSON value: its discrete hash and its floats (and ``n``, a run's record count)."""
    floats: list = []
    body = json.dumps(_split(_strip(value), floats), sort_keys=True)
    out = {"sha": _sha(body), "x": floats}
    return out if n is None else {"n": n, **out}


def _csv_entry(text: str) -> dict:
    return _entry(list(csv.reader(io.StringIO(text))))


def _run(nproc: int, args: list[str], cwd: Path) -> str:
    r = dlmeval(nproc, args, cwd=cwd, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _store_entries(store: Path, name: str) -> dict[str, dict]:
    """One entry per run (every key and stored result, wall-clock fields left out) and per table."""
    out = {}
    con = sqlite3.connect(store)
    try:
        for rid, kind in con.execute("SELECT run_id, kind FROM runs ORDER BY run_id"):
            rows = con.execute(
                "SELECT key, result FROM items WHERE run_id = ? ORDER BY key", (rid,)
            ).fetchall()
            value = [[k, json.loads(v)] for k, v in rows]
            out[f"{name}/run/{kind}/{rid}"] = _entry(value, len(rows))
        for rid, tname, data in con.execute("SELECT run_id, name, data FROM tables ORDER BY run_id, name"):
            if tname != "timing":
                out[f"{name}/table/{rid}/{tname}"] = _entry(json.loads(data))
    finally:
        con.close()
    return out


def collect(tmp: Path, names: list[str] | None = None) -> dict[str, dict]:
    """Run the guard commands in ``tmp`` and return ``{entry: {"sha", "x"[, "n"]}}``."""
    (tmp / "c.txt").write_text("\n".join(TEXTS) + "\n")
    (tmp / "s.txt").write_text("\n".join(SOURCES) + "\n")
    (tmp / "p.txt").write_text("The cat\nOnce upon a time there was\nA dog\n")
    out: dict[str, dict] = {}
    for name, (nproc, args) in COMMANDS.items():
        if names is not None and name not in names:
            continue
        store = tmp / f"{name}.sqlite"
        stdout = _run(nproc, ["--store", str(store), *args], tmp)
        if store.exists():
            out.update(_store_entries(store, name))
        if stdout.lstrip().startswith("{"):
            out[f"{name}/stdout"] = _entry(json.loads(stdout))
        for a in args:
            if a.startswith("o-"):
                for p in sorted((tmp / a).rglob("*.csv")):
                    if p.name != "timing.csv":
                        out[f"{name}/out/{p.relative_to(tmp / a)}"] = _csv_entry(p.read_text())
            elif a.endswith((".csv", ".jsonl")) and (tmp / a).exists():
                if a.endswith(".jsonl"):
                    lines = [json.loads(x) for x in (tmp / a).read_text().splitlines()]
                    out[f"{name}/file/{a}"] = _entry(lines)
                else:
                    out[f"{name}/file/{a}"] = _csv_entry((tmp / a).read_text())
    return out


def _tolerant(x) -> bool:
    """Whether a value of an entry's ``x`` is compared within the tolerance: a finite float, or a number printed
    with a decimal point. Anything else (``nan`` / ``inf``, and digits with an ``e`` but no point, which may be a hex
    digest such as ``4e686428``) must be identical."""
    if isinstance(x, float):
        return math.isfinite(x)
    return isinstance(x, str) and "." in x and bool(NUMBER.fullmatch(x)) and math.isfinite(float(x))


def _quantum(x) -> float:
    """The allowed extra difference of a value: one unit in the last printed digit of a number in a string."""
    if not isinstance(x, str):
        return 0.0
    mant = re.split("[eE]", x)[0]
    exp = int(re.split("[eE]", x)[1]) if re.search("[eE]", x) else 0
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return 10.0 ** (exp - decimals)


def differences(want: dict, got: dict, atol: float = ATOL, rtol: float = RTOL):
    """``(changed entries, largest absolute difference, largest relative difference)`` of two digests: an entry
    changes when it is missing, its record count or discrete hash differs, it has another number of floats, or a
    float differs by more than ``atol + rtol * |want| (+ its printed quantum)``."""
    changed, big_abs, big_rel = [], 0.0, 0.0
    for key in sorted(set(want) | set(got)):
        a, b = want.get(key), got.get(key)
        if (
            a is None
            or b is None
            or a.get("n") != b.get("n")
            or a["sha"] != b["sha"]
            or len(a["x"]) != len(b["x"])
        ):
            changed.append(key)
            continue
        bad = False
        for x, y in zip(a["x"], b["x"]):
            if not (_tolerant(x) and _tolerant(y)):
                bad |= x != y
                continue
            fx, fy = float(x), float(y)
            d = abs(fx - fy)
            big_abs = max(big_abs, d)
            if fx != 0:
                big_rel = max(big_rel, d / abs(fx))
            bad |= d > atol + rtol * abs(fx) + max(_quantum(x), _quantum(y))
        if bad:
            changed.append(key)
    return changed, big_abs, big_rel


@pytest.mark.slow
def test_tiny_runs_match_the_guard_digest(tmp_path):
    want = json.loads(DIGEST.read_text())
    got = collect(tmp_path)
    changed, big_abs, big_rel = differences(want, got)
    assert not changed, (
        f"{len(changed)} of {len(want)} guard entries differ: {changed[:20]} "
        f"(largest float differences: {big_abs:.3g} absolute, {big_rel:.3g} relative)"
    )
    assert len(got) > 40  # every command wrote records and tables
    assert sum(len(e["x"]) for e in got.values()) > 1000  # the floats are compared, not only hashed


def test_the_tolerance_catches_a_change_a_regression_makes():
    """A float moved by 1e-4 of itself (far less than any real change of an estimator) or a token changed fails."""
    want = json.loads(DIGEST.read_text())
    key = next(k for k, e in want.items() if any(isinstance(x, float) and abs(x) >= 1 for x in e["x"]))
    moved = json.loads(json.dumps(want))
    xs = moved[key]["x"]
    i = next(j for j, x in enumerate(xs) if isinstance(x, float) and abs(x) >= 1)
    xs[i] = xs[i] * (1 + 1e-4)
    assert differences(want, moved)[0] == [key]
    assert differences(want, want) == ([], 0.0, 0.0)
    assert differences({"k": {"sha": "a", "x": ["0.12"]}}, {"k": {"sha": "a", "x": ["0.13"]}})[0] == []
    assert differences({"k": {"sha": "a", "x": ["0.12"]}}, {"k": {"sha": "a", "x": ["0.14"]}})[0] == ["k"]
    assert differences({"k": {"sha": "a", "x": []}}, {"k": {"sha": "b", "x": []}})[0] == ["k"]
    assert differences({"k": {"sha": "a", "x": ["4e686428"]}}, {"k": {"sha": "a", "x": ["4e686429"]}})[0] == [
        "k"
    ]
    assert differences({"k": {"sha": "a", "x": ["nan"]}}, {"k": {"sha": "a", "x": ["nan"]}})[0] == []


def test_numbers_in_strings_are_floats_and_integers_stay_discrete():
    floats: list = []
    assert _split({"a": "score -1.25e-03 at item-2, 3 tokens", "b": 0.5, "c": 7}, floats) == {
        "a": "score <n> at item-2, 3 tokens",
        "b": "<f>",
        "c": 7,
    }
    assert floats == ["-1.25e-03", 0.5]
    sig = "dlmeval:0.1.1.dev3+g1a2b3c4d5|src:0a1b2c3d|kind:diffscore|cfg:3d309da6"
    assert _split(sig, []) == "dlmeval:<code>|kind:diffscore|cfg:3d309da6"


if (
    __name__ == "__main__"
):  # python tests/guard/test_guard_outputs.py --write | --dump FILE | --compare A.json B.json
    import tempfile

    if "--compare" in sys.argv:
        a, b = (json.loads(Path(f).read_text()) for f in sys.argv[sys.argv.index("--compare") + 1 :][:2])
        changed, big_abs, big_rel = differences(a, b, atol=0.0, rtol=0.0)
        within = differences(a, b)[0]
        print(f"{len(changed)} of {len(a)} entries not bit-identical; largest float differences {big_abs:.3g} "
              f"absolute, {big_rel:.3g} relative; outside the tolerance: {within}")  # fmt: skip
        sys.exit(1 if within else 0)
    if "--write" not in sys.argv and "--dump" not in sys.argv:
        sys.exit("usage: python tests/guard/test_guard_outputs.py --write | --dump FILE | --compare A B")
    with tempfile.TemporaryDirectory() as d:
        digest = collect(Path(d))
    target = DIGEST if "--write" in sys.argv else Path(sys.argv[sys.argv.index("--dump") + 1])
    lines = [f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in sorted(digest.items())]
    target.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one entry a line: a reviewable diff
    print(f"wrote {len(digest)} entries ({sum(len(e['x']) for e in digest.values())} floats) to {target}")
