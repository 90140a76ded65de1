"""The careless-user battery (issue 17): every bad input, setting and fault through the CLI (in process) and the
API, each asserting the exit code, the one-line message and that the run store is exactly as it was; the inputs
that must work; and the stale-result cases (other texts or data behind an unchanged id or path give new numbers).
The hostile-user cases of issue 25 (sandbox escapes through `dlmeval care`, ranks with different inputs, adapters
on the wrong base, NaN human scores, interrupted runs, offline downloads) are in tests/bad_inputs/test_hostile.py.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.errors import DataFormatError, InputError, ModelNotFoundError, StoreError
from dlmeval.store import RunStore
from tests.conftest import tiny_care_spec

FAST = ["-K", "2", "-T", "2"]


def _dump(path: Path) -> list[str] | None:
    """The logical content of a store (None when there is no file): what "unchanged" compares."""
    if not path.exists():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([*argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A store that already holds one finished score run, the input files, and two broken model folders."""
    d = tmp_path_factory.mktemp("bad-inputs")
    (d / "sysA.jsonl").write_text(
        json.dumps({"id": "1", "candidate": "the cat sat", "source": "the cat sat on the mat"})
        + "\n"
        + json.dumps({"id": "2", "candidate": "a dog ran", "source": "the dog ran home"})
        + "\n"
    )
    (d / "sysB.jsonl").write_text(
        json.dumps({"id": "1", "candidate": "mat the on sat", "source": "the cat sat on the mat"})
        + "\n"
        + json.dumps({"id": "2", "candidate": "home ran the", "source": "the dog ran home"})
        + "\n"
    )
    store = d / "runs.sqlite"
    assert main(["--store", str(store), "--no-progress", "score", "--model", "tiny-bert"]
                + ["--candidates", str(d / "sysA.jsonl"), *FAST]) == 0  # fmt: skip
    from dlmeval.models import load_diffusion

    m = load_diffusion("tiny-bert")
    good = d / "bert"
    m.module.save_pretrained(good)
    m.tokenizer.save_pretrained(good)
    shutil.copytree(good, d / "noweights")
    (d / "noweights" / "model.safetensors").unlink()
    shutil.copytree(good, d / "truncated")
    w = (d / "truncated" / "model.safetensors").read_bytes()
    (d / "truncated" / "model.safetensors").write_bytes(w[: len(w) // 2])
    return d


@pytest.fixture
def store(base, tmp_path):
    """A private copy of the base store."""
    p = tmp_path / "runs.sqlite"
    shutil.copy(base / "runs.sqlite", p)
    return p


def _files(tmp_path: Path) -> dict[str, Path]:
    f = {
        "empty": tmp_path / "empty.txt",
        "nocand": tmp_path / "nocand.jsonl",
        "csv_nohead": tmp_path / "nohead.csv",
        "json_obj": tmp_path / "obj.json",
        "dup": tmp_path / "dup.jsonl",
        "dir": tmp_path / "adir",
        "one": tmp_path / "one.txt",
    }
    f["one"].write_text("the cat\n")
    f["empty"].write_bytes(b"")
    f["nocand"].write_text(json.dumps({"id": "1", "source": "the cat sat"}) + "\n")
    f["csv_nohead"].write_text("the cat sat,the dog ran\na cat,a dog\n")
    f["json_obj"].write_text(json.dumps({"candidate": "the cat"}))
    f["dup"].write_text(
        json.dumps({"id": "x", "candidate": "the cat"})
        + "\n"
        + json.dumps({"id": "x", "candidate": "a dog"})
        + "\n"
    )
    f["dir"].mkdir()
    return f


# (name, score arguments after the model, message fragment); {f[...]} / {base} are filled in per test
SCORE_CASES = [
    ("typo-path", ["--candidates", "cands.txtt", "--config", "marginal"], "no such file 'cands.txtt'"),
    ("no-suffix-path", ["--candidates", "data/candidates", "--config", "marginal"], "add --text"),
    ("directory", ["--candidates", "{dir}", "--config", "marginal"], "is a directory"),
    ("zero-byte", ["--candidates", "{empty}", "--config", "marginal"], "empty (0 bytes)"),
    ("jsonl-without-candidate", ["--candidates", "{nocand}"], "no 'candidate' (or 'text') field"),
    ("csv-without-header", ["--candidates", "{csv_nohead}", "--config", "marginal"], "header row"),
    ("json-not-array", ["--candidates", "{json_obj}", "--config", "marginal"], "expected a JSON array"),
    ("dup-ids", ["--candidates", "{dup}", "--config", "marginal"], "used for two different"),
    ("no-sources", ["--candidates", "the cat", "--text", "--config", "cond"], "needs --sources"),
    ("source-count", ["--candidates", "{sysA}", "--sources", "{one}"], "2 candidates but 1 sources"),
    ("K0", ["--candidates", "a cat", "--text", "--config", "marginal", "-K", "0"], "--masks/-K must be at least 1"),
    ("T0", ["--candidates", "a cat", "--text", "--config", "marginal", "-T", "0"], "--rates/-T must be at least 1"),
    ("dtype", ["--candidates", "a cat", "--text", "--config", "marginal", "--dtype", "float8"], "unknown dtype"),
    ("dtype-standin", ["--candidates", "a cat", "--text", "--config", "marginal", "--dtype", "bfloat16"],
     "float32 only"),
    ("device", ["--candidates", "a cat", "--text", "--config", "marginal", "--device", "tpu"], "--device 'tpu'"),
    ("seed", ["--candidates", "a cat", "--text", "--config", "marginal", "--seed", str(10**30)], "--seed must be"),
    ("output-dir", ["--candidates", "a cat", "--text", "--config", "marginal", "-o", "missing/dir/out.csv"],
     "does not exist"),
    ("output-kind", ["--candidates", "a cat", "--text", "--config", "marginal", "-o", "out.xlsx"], ".csv or a .jsonl"),
    ("model-spec", ["--candidates", "a cat", "--text", "--config", "marginal", "--model", "tiny-brt"],
     "unknown model spec"),
    ("no-weights", ["--candidates", "a cat", "--text", "--config", "marginal", "--model", "hf:{base}/noweights"],
     "no weights (model.safetensors"),
    ("truncated", ["--candidates", "a cat", "--text", "--config", "marginal", "--model", "hf:{base}/truncated"],
     "damaged or truncated"),
]  # fmt: skip


@pytest.mark.parametrize("name,args,message", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_score_refuses_bad_input_with_one_line_and_an_unchanged_store(
    base, store, tmp_path, capsys, monkeypatch, name, args, message
):
    monkeypatch.chdir(tmp_path)
    f = {k: str(v) for k, v in _files(tmp_path).items()}
    args = [a.format(base=base, sysA=base / "sysA.jsonl", **f) for a in args]
    if "--model" not in args:
        args = ["--model", "tiny-bert", *args]
    if name.startswith("output"):  # the output path is checked before the work: the model is never loaded

        def no_work(*a, **k):
            raise AssertionError("the model was loaded before --output was checked")

        monkeypatch.setattr("dlmeval.models.load_diffusion", no_work)
    before = _dump(store)
    rc, out, err = _cli(capsys, "--store", str(store), "--no-progress", "score", *FAST, *args)
    assert rc == 2, (out, err)
    assert err.startswith("dlmeval: error: ") and err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err and out == ""
    assert _dump(store) == before


def test_a_new_store_is_not_created_by_a_failing_command(tmp_path, capsys):
    p = tmp_path / "new.sqlite"
    rc, _, err = _cli(capsys, "--store", str(p), "score", "--model", "tiny-bert", "--candidates", "nope.txt")
    assert rc == 2 and "no such file" in err
    assert not p.exists()


def test_empty_store_path_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DLMEVAL_STORE", str(tmp_path / "default.sqlite"))
    rc, _, err = _cli(capsys, "--store", "", "score", "--model", "tiny-bert", "--candidates", "a", "--text")
    assert rc == 2 and "--store is empty" in err
    rc, _, err = _cli(capsys, "--store", "", "runs", "list")
    assert rc == 2 and "--store is empty" in err
    assert not (tmp_path / "default.sqlite").exists()
    with pytest.raises(InputError, match="--store is empty"):
        RunStore("")


# ---------------------------------------------------------------------------------------------- the store
def test_read_only_store_lists_but_refuses_writes(store, capsys, monkeypatch):
    before = _dump(store)
    os.chmod(store, 0o444)
    if os.geteuid() == 0:  # root writes through file modes: make the store read-only the way a mount would
        monkeypatch.setattr("dlmeval.store.access._writable", lambda p: False)
    try:
        rc, out, err = _cli(capsys, "--store", str(store), "runs", "list")
        assert rc == 0 and "diffscore" in out and "done" in out, err
        rc, out, err = _cli(capsys, "--store", str(store), "--no-progress", "score", "--model", "tiny-bert",
                            "--candidates", "a cat", "--text", "--config", "marginal", *FAST)  # fmt: skip
        assert rc == 2 and "is read-only" in err and err.count("\n") == 1
        with pytest.raises(StoreError, match="read-only"):
            RunStore(store)
    finally:
        os.chmod(store, 0o644)
    assert _dump(store) == before


def test_foreign_sqlite_file_is_refused_untouched(tmp_path, capsys):
    p = tmp_path / "mine.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    raw = p.read_bytes()
    for argv in (["runs", "list"], ["score", "--model", "tiny-bert", "--candidates", "a", "--text",
                                    "--config", "marginal", *FAST]):  # fmt: skip
        rc, _, err = _cli(capsys, "--store", str(p), "--no-progress", *argv)
        assert rc == 2 and "not a dlmeval run store" in err and err.count("\n") == 1
    assert p.read_bytes() == raw and sorted(os.listdir(tmp_path)) == ["mine.sqlite"]


def test_full_disk_is_one_message(tmp_path, capsys, monkeypatch):
    # SQLite's max_page_count gives the same SQLITE_FULL error as a full disk, without filling one
    orig = RunStore._init_schema

    def tight(self):
        orig(self)
        n = self._conn.execute("PRAGMA page_count").fetchone()[0]
        self._conn.execute(f"PRAGMA max_page_count = {n}")

    monkeypatch.setattr(RunStore, "_init_schema", tight)
    p = tmp_path / "full.sqlite"
    long = " ".join(["the cat sat on the mat"] * 20)  # a result (with token scores) larger than a page
    rc, _, err = _cli(capsys, "--store", str(p), "--no-progress", "score", "--model", "tiny-bert", "--tokens",
                      "--candidates", long, "--text", "--config", "marginal", *FAST)  # fmt: skip
    assert rc == 2 and "full" in err and "free disk space" in err and err.count("\n") == 1
    with RunStore(p) as s, pytest.raises(StoreError, match="full"):
        s.open_run("demo", {"x": "y" * 100_000}, [], 0)


def test_a_failing_run_does_not_change_another_runs_status(store):
    with RunStore(store) as s:
        (done,) = s.list_runs()
        assert done["status"] == "done"
        run = s.open_run("diffscore", {}, [], 0)  # a run of its own ...
        run.put("k", {"v": 1})
        # ... and a command that reopens the finished run and then fails before writing to it
        rid = done["run_id"]
        sig = s.get_run(rid).signature
        again = s.open_run(sig.kind, sig.config, sig.models, sig.seed)
        assert again.run_id == rid
    with RunStore(store) as s:
        status = {r["run_id"]: r["status"] for r in s.list_runs()}
    assert status[rid] == "done" and status[run.run_id] == "running"


def test_closed_pipe_ends_quietly(store, capsys, monkeypatch):
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written (`dlmeval runs list | head -0`)
    pipe = os.fdopen(w, "w")
    monkeypatch.setattr(sys, "stdout", pipe)
    try:
        assert main(["--store", str(store), "runs", "list"]) == 0
    finally:
        monkeypatch.undo()
        pipe.close()  # its buffer now goes to /dev/null: no second BrokenPipeError
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------- meta-eval
META = ["meta-eval", "--benchmarks", "SFHOT", "--limit", "30", "--metrics", "lexical", "--bootstrap", "0"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["-K", "0"], "--masks/-K must be at least 1"),
        (["--benchmarks", "SFHOTT"], "unknown BARTScore benchmark"),
        (["--data-dir", "{empty}"], "not found"),
        (["--metrics", "diffscore", "--model", "no-such-model"], "unknown model spec"),
        (["--seed", "-1"], "--seed must be"),
        (["--out", ""], "--out is empty"),
    ],
    ids=["K0", "benchmark", "missing-data", "model", "seed", "out"],
)
def test_meta_eval_validates_before_it_opens_a_run(store, tmp_path, capsys, args, message):
    (tmp_path / "nodata").mkdir()
    args = [a.format(empty=tmp_path / "nodata") for a in args]
    before = _dump(store)
    rc, _, err = _cli(capsys, "--store", str(store), "--no-progress", *META, *args)
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert _dump(store) == before


# ---------------------------------------------------------------------------------------------- what works
def test_inputs_that_work(tmp_path, capsys):
    (tmp_path / "c.csv").write_text(
        "id,candidate,source\na,the cat sat,the cat sat on the mat\nb,a dog,the dog\n"
    )
    (tmp_path / "c.json").write_text(json.dumps(["the cat sat", "a dog"]))
    (tmp_path / "c.tsv").write_text("text\nthe cat sat\n")
    argv = ["--no-progress", "--json", "score", "--no-store", "--model", "tiny-bert", *FAST, "--candidates"]
    rc, out, _ = _cli(capsys, *argv, str(tmp_path / "c.csv"))
    assert rc == 0
    items = json.loads(out)["items"]
    assert [r["item_id"] for r in items] == ["a", "b"]  # the header is a header, sources come from the file
    rc, out, _ = _cli(capsys, *argv, str(tmp_path / "c.json"), "--config", "marginal")
    assert rc == 0 and len(json.loads(out)["items"]) == 2
    rc, out, _ = _cli(capsys, *argv, str(tmp_path / "c.tsv"), "--config", "marginal")
    assert rc == 0 and len(json.loads(out)["items"]) == 1
    rc, out, _ = _cli(capsys, *argv, "the cat sat", "--text", "--config", "marginal")
    assert rc == 0 and json.loads(out)["items"][0]["n_tokens"] == 3


def test_special_token_text_is_plain_text_and_warned(tmp_path, capsys):
    from dlmeval.models import load_diffusion
    from dlmeval.scoring import DiffScorer

    m = load_diffusion("tiny-bert")
    s = DiffScorer(m, n_masks=2, n_rates=2)
    ids = s.formatter.tokens("the [MASK] sat [SEP]")
    assert m.mask_token_id not in ids and m.tokenizer.sep_token_id not in ids
    store = tmp_path / "s.sqlite"
    rc, out, _ = _cli(capsys, "--store", str(store), "--no-progress", "--json", "score", "--model", "tiny-bert",
                      *FAST, "--config", "marginal", "--text", "--candidates", "the [MASK] sat")  # fmt: skip
    assert rc == 0
    warns = json.loads(out)["warnings"]
    assert any("special-token text [MASK]" in w for w in warns)
    with RunStore(store) as st:
        (r,) = st.list_runs()
        assert any("special-token text" in w for w in st.get_run(r["run_id"]).warnings())


def test_unknown_token_rate_is_a_run_warning(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    rc, out, _ = _cli(capsys, "--store", str(store), "--no-progress", "score", "--model", "tiny-bert", *FAST,
                      "--config", "marginal", "--text", "--candidates", "猫が マットに 座った 😀 the")  # fmt: skip
    assert rc == 0 and "unknown to the tokenizer" in out
    with RunStore(store) as st:
        (r,) = st.list_runs()
        assert any("unknown tokens" in w for w in st.get_run(r["run_id"]).warnings())
    rc, out, _ = _cli(capsys, "--no-progress", "score", "--no-store", "--model", "tiny-bert", *FAST,
                      "--config", "marginal", "--text", "--candidates", "the cat sat")  # fmt: skip
    assert rc == 0 and "unknown" not in out


def test_api_raises_typed_errors(base, tmp_path):
    from dlmeval.data.texts import read_text_file
    from dlmeval.models import load_causal_lm, load_diffusion
    from dlmeval.scoring import DiffScorer

    with pytest.raises(ModelNotFoundError, match="no weights"):
        load_diffusion(f"hf:{base}/noweights")
    with pytest.raises(ModelNotFoundError, match="truncated"):
        load_diffusion(f"hf:{base}/truncated")
    for kw in ({"dtype": "float8"}, {"device": "tpu"}, {"seed": 2**64}):
        with pytest.raises(InputError):
            load_diffusion("tiny-bert", **kw)
        with pytest.raises(InputError):
            load_causal_lm("tiny-causal", **kw)
    with pytest.raises(InputError, match="n_masks"):
        DiffScorer(load_diffusion("tiny-bert"), n_masks=0)
    with pytest.raises(InputError, match="no candidates"):
        DiffScorer(load_diffusion("tiny-bert"), n_masks=2, n_rates=2).score([], config="marginal")
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(DataFormatError, match="0 bytes"):
        read_text_file(tmp_path / "e.jsonl")
    with pytest.raises(InputError, match="no such file"):
        read_text_file(tmp_path / "missing.txt")


# ---------------------------------------------------------------------------------------------- content identity
def _scores(capsys, *argv) -> list[float]:
    rc, out, err = _cli(capsys, "--no-progress", "--json", *argv)
    assert rc == 0, err
    return [r["score"] for r in json.loads(out)["items"]]


def test_score_same_ids_other_texts_recompute(base, store, capsys):
    common = ["score", "--model", "tiny-bert", *FAST]
    a = _scores(capsys, "--store", str(store), *common, "--candidates", str(base / "sysA.jsonl"))
    b = _scores(capsys, "--store", str(store), *common, "--candidates", str(base / "sysB.jsonl"))
    fresh_b = _scores(capsys, *common, "--no-store", "--candidates", str(base / "sysB.jsonl"))
    assert b == fresh_b and b != a
    assert _scores(capsys, "--store", str(store), *common, "--candidates", str(base / "sysA.jsonl")) == a


def _bleu(capsys, store: Path, data: Path) -> tuple[list[float], str]:
    rc, out, err = _cli(capsys, "--store", str(store), "--no-progress", "--json", *META, "--data-dir", str(data),
                        "--out", str(store.parent / "tables"))  # fmt: skip
    assert rc == 0, err
    res = json.loads(out)
    v = [r["value"] for r in res["results"] if r["metric"] == "bleu"]  # every dimension and protocol
    assert v
    return v, res["signature"]


def test_meta_eval_changed_data_recomputes(data_root, tmp_path, capsys):
    from dlmeval.data.bartscore import bartscore_path
    from dlmeval.data.safepickle import safe_load_pickle

    src = bartscore_path("SFHOT", data_root)
    changed = tmp_path / "data"
    rel = src.relative_to(data_root)
    (changed / rel).parent.mkdir(parents=True)
    data = safe_load_pickle(src)
    for key in list(data)[:10]:  # 10 of the first 30 outputs replaced by their reference
        data[key]["sys_summ"] = data[key]["ref_summs"][0]
    with open(changed / rel, "wb") as fh:
        pickle.dump(data, fh)
    store = tmp_path / "runs.sqlite"
    old, old_sig = _bleu(capsys, store, data_root)
    new, new_sig = _bleu(capsys, store, changed)  # same store, same benchmark name and settings
    fresh, fresh_sig = _bleu(capsys, tmp_path / "fresh.sqlite", changed)
    assert new == fresh and new != old
    assert new_sig == fresh_sig != old_sig


CARE_SPEC = tiny_care_spec("care-identity", tasks={"humaneval": {"n": 1, "gen_tokens": 8, "timeout_s": 5}})


def _care_data(root: Path, words: list[str]) -> Path:
    import gzip

    (root / "reference-text").mkdir(parents=True)
    (root / "tasks").mkdir()
    with open(root / "reference-text" / "webtext_test.jsonl", "w") as fh:
        for i in range(12):
            fh.write(json.dumps({"text": " ".join(words[(i + j) % len(words)] for j in range(14))}) + "\n")
    he = {"task_id": "HumanEval/0", "prompt": "def one():\n", "entry_point": "one",
          "canonical_solution": "    return 1\n", "test": "def check(f):\n    assert f() == 1\n"}  # fmt: skip
    with gzip.open(root / "tasks" / "HumanEval.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(he) + "\n")
    return root


def test_care_changed_data_makes_another_run_and_records_the_sandbox(tmp_path):
    from dlmeval.models.tiny import TINY_WORDS
    from dlmeval.protocols import care
    from dlmeval.protocols.care import load_spec

    words = [w for w in TINY_WORDS if w.isalpha()]
    (tmp_path / "s.toml").write_text(CARE_SPEC)
    spec = load_spec(tmp_path / "s.toml")
    a = _care_data(tmp_path / "a", words)
    b = _care_data(tmp_path / "b", words[::-1])  # other prompts behind the same file name and item ids
    with RunStore(tmp_path / "runs.sqlite") as st:
        ra = care.run_care(spec, st, data_dir=a, progress=False)
        rb = care.run_care(spec, st, data_dir=b, progress=False)
        run_a, run_b = (st.get_run(r.model_runs["tiny-llada"]) for r in (ra, rb))
        assert run_a.run_id != run_b.run_id
        pa = {k: v["prefix"] for k, v in run_a.results().items() if k.startswith("gen/")}
        pb = {k: v["prefix"] for k, v in run_b.results().items() if k.startswith("gen/")}
        assert pa.keys() == pb.keys() and all(pa[k] != pb[k] for k in pa)
        # the isolation the HumanEval code had is recorded in the run
        iso = [w for w in run_a.warnings() if "ran in the sandbox with isolation" in w]
        assert len(iso) == 1 and ("nobody" in iso[0] or "same-user" in iso[0])
    # ... and the report shows the run's notes (a store with that note alone: figures of a Care run are slow)
    from dlmeval.report import build_report

    with RunStore(tmp_path / "note.sqlite") as st:
        r = st.open_run("code-check", {}, [], 0)
        r.warn(iso[0])
        r.finish()
        build_report(st, None, tmp_path / "report.html")
    import html

    assert html.escape(iso[0]) in (tmp_path / "report.html").read_text()


def test_a_failing_meta_eval_leaves_the_finished_shared_run_done(data_root, tmp_path, capsys, monkeypatch):
    store = tmp_path / "runs.sqlite"
    base = [
        "--store",
        str(store),
        "--no-progress",
        *META,
        "--data-dir",
        str(data_root),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(base) == 0
    capsys.readouterr()
    with RunStore(store) as st:
        (lex,) = [r for r in st.list_runs() if r["kind"] == "meta-eval-lexical"]
        assert lex["status"] == "done"

    def boom(*a, **k):
        raise RuntimeError("the DiffScore component crashed")

    monkeypatch.setattr("dlmeval.protocols.diffscore.meta_eval.Suite.compute_diffscore", boom)
    with pytest.raises(RuntimeError, match="crashed"):  # a failure after the runs were opened
        main([*base, "--metrics", "lexical", "diffscore", "--model", "tiny-bert", "-K", "2", "-T", "2"])
    with RunStore(store) as st:
        status = {r["kind"]: r["status"] for r in st.list_runs()}
    # the run the failure stopped is `failed` with the error (issue 32), the finished one stays done
    assert status["meta-eval-lexical"] == "done" and status["meta-eval-diffscore"] == "failed"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["care", "care-tiny", "--models", "llada:/nonexistent/llada"], "does not exist here"),
        (["care", "care-tiny", "--models", "tiny-causal"], "autoregressive model"),
        (["robust", "robust-tiny", "--dlm", "nope:thing"], "unknown model spec"),
    ],
)
def test_care_and_robust_check_models_before_the_store_exists(tmp_path, capsys, argv, message):
    store = tmp_path / "never.sqlite"
    rc, _, err = _cli(capsys, "--store", str(store), "--no-progress", *argv)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not store.exists()  # validate, then open: no store file was created
