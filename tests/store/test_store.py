"""The run store: signatures, resume, JSON safety, atomic writes, crash safety, sharding and the ``runs`` CLI."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlmeval.cli.main import main as cli_main
from dlmeval.errors import InputError
from dlmeval.store import (
    RunStore,
    Signature,
    jsonsafe,
    rank_and_world_size,
    resolve_store_path,
    shard,
)
from dlmeval.store import signature as signature_mod

SRC = Path(__file__).resolve().parents[2] / "src"
SHA = "3f2a9c1d" + "0" * 56
MODEL = {
    "name": "default",
    "family": "default",
    "source": "embedded",
    "weights_sha256": SHA,
    "dtype": "float32",
    "device": "cpu",
}
CONFIG = {"task": "summeval", "estimator": "masked", "ratios": [0.15, 0.3], "samples": 4}


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


def strict(text: str):
    """json.loads that refuses the non-standard NaN/Infinity tokens."""

    def bad(tok):
        raise AssertionError(f"non-standard JSON token {tok}")

    return json.loads(text, parse_constant=bad)


# ---------------------------------------------------------------------------------------------- signatures
def test_signature_is_deterministic_and_short_line_has_the_documented_fields():
    a = Signature.create("diffscore", CONFIG, [MODEL], seed=0)
    b = Signature.create("diffscore", dict(reversed(list(CONFIG.items()))), [dict(MODEL)], seed=0)
    assert a.run_id == b.run_id and a.short() == b.short() and a.as_dict() == b.as_dict()
    assert re.fullmatch(r"[0-9a-f]{16}", a.run_id)
    v = a.versions
    n = a.numerics
    assert a.short() == (
        f"dlmeval:{v['dlmeval']}|src:{a.code['source_sha256'][:8]}|kind:diffscore|model:default@3f2a9c1d|"
        f"dtype:float32|seed:0|cfg:{a.config_sha256[:8]}|threads:{n['threads']}|det:0|device:cpu|"
        f"torch:{v['torch']}|tf:{v['transformers']}"
    )
    assert v["dlmeval"] == a.code["version"]
    assert set(v) == {"dlmeval", "torch", "transformers", "numpy", "python"}
    assert v["torch"].startswith("2.13.0")
    assert Signature.from_dict(a.as_dict()) == a
    # any change of what decides the numbers changes the id
    assert Signature.create("diffscore", {**CONFIG, "samples": 5}, [MODEL], 0).run_id != a.run_id
    assert (
        Signature.create("diffscore", CONFIG, [{**MODEL, "weights_sha256": "f" * 64}], 0).run_id != a.run_id
    )
    assert Signature.create("diffscore", CONFIG, [{**MODEL, "dtype": "bfloat16"}], 0).run_id != a.run_id
    assert Signature.create("care", CONFIG, [MODEL], 0).run_id != a.run_id
    two = Signature.create(
        "diffscore", CONFIG, [MODEL, {**MODEL, "name": "ar", "weights_sha256": "ab" * 32}], 0
    )
    assert "|model:default@3f2a9c1d+ar@abababab|" in two.short()


def test_signature_accepts_model_identity_objects_and_rejects_bad_seeds():
    from dlmeval.models.base import ModelIdentity

    ident = ModelIdentity("default", "default", "embedded", SHA, "float32", "cpu", 103)
    s = Signature.create("demo", {}, [ident], seed=np.int64(3))
    assert s.models == [ident.as_dict()] and s.seed == 3
    with pytest.raises(TypeError, match="seed"):
        Signature.create("demo", {}, [], seed=1.5)
    with pytest.raises(TypeError, match="cannot store"):
        Signature.create("demo", {"x": object()}, [], seed=0)


# ---------------------------------------------------------------------------------------------- runs
def test_same_command_reopens_the_same_run_and_resumes(tmp_path):
    path = tmp_path / "s.sqlite"
    with RunStore(path) as s:
        r = s.open_run("diffscore", CONFIG, [MODEL], seed=0, command_line="dlmeval meta-eval")
        r.put("a", {"x": 1})
        r.put_many([("b", {"x": 2}), ("c", {"x": 3})])
        rid = r.run_id
    with RunStore(path) as s:  # a new process would see the same
        r2 = s.open_run("diffscore", dict(CONFIG), [MODEL], seed=0)
        assert r2.run_id == rid
        assert r2.done_keys() == {"a", "b", "c"}
        assert r2.status == "running"
        assert len(r2.sessions()) == 2 and r2.sessions()[0]["command_line"] == "dlmeval meta-eval"
        r2.finish()
        assert r2.status == "done"
        assert len(s.list_runs()) == 1


def test_different_seed_or_config_makes_a_new_run(store):
    r0 = store.open_run("diffscore", CONFIG, [MODEL], seed=0)
    r0.put("a", {"x": 1})
    r1 = store.open_run("diffscore", CONFIG, [MODEL], seed=1)
    r2 = store.open_run("diffscore", {**CONFIG, "samples": 8}, [MODEL], seed=0)
    assert len({r0.run_id, r1.run_id, r2.run_id}) == 3
    assert r1.done_keys() == set() and r2.done_keys() == set() and r0.done_keys() == {"a"}
    assert [r["run_id"] for r in store.list_runs()] == [r0.run_id, r1.run_id, r2.run_id]
    assert [r["n_items"] for r in store.list_runs()] == [1, 0, 0]


def test_library_version_change_is_a_warning_not_a_new_run(store, monkeypatch):
    r = store.open_run("diffscore", CONFIG, [MODEL], seed=0)
    real = dict(signature_mod.library_versions())
    monkeypatch.setattr(signature_mod, "library_versions", lambda: {**real, "torch": "9.9.9"})
    again = store.open_run("diffscore", CONFIG, [MODEL], seed=0)
    assert again.run_id == r.run_id and len(store.list_runs()) == 1
    (w,) = again.warnings()
    assert f"torch {real['torch']} -> 9.9.9" in w
    assert again.signature.versions["torch"] == real["torch"]  # the signature stays the creating one
    assert again.sessions()[-1]["versions"]["torch"] == "9.9.9"
    store.open_run("diffscore", CONFIG, [MODEL], seed=0)
    assert again.warnings() == [w] and again.warning_records()[0]["count"] == 2


def test_warnings_are_deduplicated_in_first_seen_order(store):
    r = store.open_run("demo", {}, [], seed=0)
    assert r.warn("b happened") is True
    assert r.warn("a happened") is True
    assert r.warn("b happened") is False
    assert r.warnings() == ["b happened", "a happened"]
    assert [w["count"] for w in r.warning_records()] == [2, 1]


def test_nan_and_infinities_round_trip_as_strict_json(store, tmp_path):
    r = store.open_run("demo", {"eps": float("inf")}, [], seed=0)
    result = {
        "nan": float("nan"),
        "inf": math.inf,
        "ninf": -math.inf,
        "f32": np.float32(0.25),
        "i64": np.int64(7),
        "arr": np.array([1.0, np.nan]),
        "nested": {"v": [float("nan"), 1e-300]},
        "t": (1, 2),
        "none": None,
        "s": "NaN",
    }
    r.put("k", result)
    got = r.get("k")
    assert math.isnan(got["nan"]) and got["inf"] == math.inf and got["ninf"] == -math.inf
    assert got["f32"] == 0.25 and got["i64"] == 7 and isinstance(got["i64"], int)
    assert got["arr"][0] == 1.0 and math.isnan(got["arr"][1])
    assert math.isnan(got["nested"]["v"][0]) and got["nested"]["v"][1] == 1e-300
    assert got["t"] == [1, 2] and got["none"] is None and got["s"] == "NaN"
    assert r.get("missing") is None and r.get("missing", {}) == {}
    raw = sqlite3.connect(store.path).execute("SELECT result FROM items").fetchone()[0]
    assert strict(raw)["nan"] == {"$float": "nan"}
    assert math.isinf(r.signature.config["eps"])
    df = r.items()
    assert list(df["key"]) == ["k"] and math.isnan(df.loc[0, "nan"]) and df.loc[0, "ninf"] == -math.inf
    with pytest.raises(TypeError, match="must be a dict"):
        r.put("bad", [1, 2])


def test_put_many_is_all_or_nothing(store):
    r = store.open_run("demo", {}, [], seed=0)
    r.put("before", {"x": 0})

    def pairs():
        yield "a", {"x": 1}
        yield "b", {"x": 2}
        raise RuntimeError("boom in the middle of the batch")

    with pytest.raises(RuntimeError, match="boom"):
        r.put_many(pairs())
    assert r.done_keys() == {"before"}
    with pytest.raises(TypeError):
        r.put_many([("c", {"x": 3}), ("d", object())])
    assert r.done_keys() == {"before"}
    # the store is still usable and a later batch commits whole
    assert r.put_many({"a": {"x": 1}, "b": {"x": 2}}) == 2
    assert r.done_keys() == {"before", "a", "b"}
    r.put("a", {"x": 10})  # an existing key is replaced
    assert r.get("a") == {"x": 10} and len(r) == 3


def test_items_are_in_natural_key_order_with_flattened_columns(store):
    r = store.open_run("demo", {}, [], seed=0)
    r.put_many([(f"item-{i}", {"score": i / 2, "m": {"nfe": i}, "key": "inner"}) for i in (10, 2, 1)])
    df = r.items()
    assert list(df.columns) == ["key", "score", "result.key", "m.nfe"]
    assert list(df["key"]) == ["item-1", "item-2", "item-10"]
    assert list(df["m.nfe"]) == [1, 2, 10]
    empty = store.open_run("demo", {}, [], seed=1).items()
    assert list(empty.columns) == ["key"] and len(empty) == 0
    # a key made of a superscript digit (str.isdigit but not int()-able) sorts as text instead of crashing
    odd = store.open_run("demo", {}, [], seed=2)
    odd.put_many([("²", {"score": 1.0}), ("1", {"score": 2.0})])
    assert list(odd.items()["key"]) == ["1", "²"]


def test_results_with_prefix_match_the_prefix_exactly_and_stay_in_their_run(store):
    r = store.open_run("demo", {}, [], seed=0)
    other = store.open_run("demo", {}, [], seed=1)
    r.put_many(
        {
            "SummEval/M1|bleu": {"score": 1.0},
            "SummEval/M2|bleu": {"score": math.nan},
            "SummEval2/M1|bleu": {"score": 3.0},  # shares the first 8 characters only
            "S_mmEval/x|bleu": {"score": 4.0},  # '_' would match any character under LIKE
            "gu-en/0|bleu": {"score": 5.0},
        }
    )
    other.put("SummEval/M9|bleu", {"score": 9.0})
    got = r.results_with_prefix("SummEval/")
    assert list(got) == ["SummEval/M1|bleu", "SummEval/M2|bleu"]  # key order, this run only
    assert got["SummEval/M1|bleu"] == {"score": 1.0} and math.isnan(got["SummEval/M2|bleu"]["score"])
    assert r.done_keys("SummEval/") == set(got)
    assert r.done_keys("S_mm") == {"S_mmEval/x|bleu"} and r.results_with_prefix("%") == {}
    assert r.done_keys("") == r.done_keys() and len(r.done_keys()) == 5
    assert other.results_with_prefix("SummEval/") == {"SummEval/M9|bleu": {"score": 9.0}}


def test_tables_round_trip_with_dtypes_index_and_nan(store):
    r = store.open_run("demo", {}, [], seed=0)
    df = pd.DataFrame(
        {
            "metric": ["spearman", "kendall", "pearson"],
            "rho": [0.5, float("nan"), -math.inf],
            "n": [10, 20, 30],
            "sig": [True, False, True],
        }
    ).set_index("metric")
    r.put_table("summary", df)
    back = r.get_table("summary")
    pd.testing.assert_frame_equal(back, df)
    plain = pd.DataFrame({"a": [1.5, 2.5], "when": pd.to_datetime(["2024-01-01", "2024-06-30"])})
    r.put_table("plain", plain)
    pd.testing.assert_frame_equal(r.get_table("plain"), plain)
    r.put_table("summary", df.iloc[:1])  # replaced
    assert len(r.get_table("summary")) == 1
    assert r.tables() == ["summary", "plain"]  # creation order
    with pytest.raises(InputError, match="no table 'nope'"):
        r.get_table("nope")


def test_run_id_prefixes_and_unknown_ids(store):
    runs = [store.open_run("demo", {}, [], seed=s) for s in range(17)]  # 17 ids: two share a first digit
    r = runs[0]
    assert store.get_run(r.run_id).run_id == r.run_id
    assert store.get_run(r.run_id[:10].upper()).run_id == r.run_id
    first = [x.run_id[0] for x in runs]
    dup = next(c for c in first if first.count(c) > 1)
    with pytest.raises(InputError, match="matches"):
        store.get_run(dup)
    with pytest.raises(InputError, match="no run"):
        store.get_run("f" * 16 if not any(x.run_id == "f" * 16 for x in runs) else "0" * 16)
    with pytest.raises(InputError, match="not a run id"):
        store.get_run("zz-top")


def test_store_location(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.setenv("DLMEVAL_STORE", str(tmp_path / "env.sqlite"))
    assert resolve_store_path(tmp_path / "x.sqlite") == tmp_path / "x.sqlite"
    assert resolve_store_path(None) == tmp_path / "env.sqlite"
    assert resolve_store_path(tmp_path) == tmp_path / "runs.sqlite"  # a directory
    monkeypatch.delenv("DLMEVAL_STORE")
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda name: str(tmp_path / "data" / name))
    assert resolve_store_path() == tmp_path / "data" / "dlmeval" / "runs.sqlite"
    with pytest.raises(InputError, match="no run store"):
        RunStore(tmp_path / "missing.sqlite", must_exist=True)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(InputError, match="not a dlmeval run store"):
        RunStore(junk)
    with RunStore(tmp_path / "wal.sqlite") as s:
        assert s.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ---------------------------------------------------------------------------------------------- sharding
def test_shard_is_strided_and_partitions():
    items = list(range(10))
    assert shard(items, 0, 3) == [0, 3, 6, 9]
    assert shard(items, 1, 3) == [1, 4, 7]
    assert shard(items, 2, 3) == [2, 5, 8]
    assert shard(iter(items), 0, 1) == items
    assert sorted(sum((shard(items, k, 4) for k in range(4)), [])) == items
    for rank, world in [(3, 3), (-1, 2), (0, 0)]:
        with pytest.raises(InputError):
            shard(items, rank, world)
    assert rank_and_world_size({}) == (0, 1)
    assert rank_and_world_size({"RANK": "2", "WORLD_SIZE": "4"}) == (2, 4)
    with pytest.raises(InputError):
        rank_and_world_size({"RANK": "4", "WORLD_SIZE": "4"})


# ---------------------------------------------------------------------------------------------- crash safety
WORKER = textwrap.dedent('''
    """Processes N items, storing each as it goes; KILL_AFTER=k hard-kills the process after k items."""
    import os
    import sys

    import numpy as np

    from dlmeval.seeding import derive_seed
    from dlmeval.store import RunStore, shard

    N = 40


    def compute(seed, i):
        rng = np.random.default_rng(derive_seed(seed, f"item-{i}"))
        draws = rng.normal(size=3)
        return {"mean": float(draws.mean()), "draws": draws.tolist(), "pick": int(rng.integers(0, 1000)),
                "maybe_nan": float("nan") if i % 7 == 0 else float(draws[0])}


    def main(store_path, mode="put", rank=0, world=1, kill_after=None, seed=0):
        store = RunStore(store_path)
        run = store.open_run("demo", {"n": N, "test": "kill"}, [{"name": "tiny", "weights_sha256": "ab" * 32,
                             "dtype": "float32", "device": "cpu"}], seed=seed)
        done_keys = run.done_keys()
        todo = [i for i in shard(range(N), rank, world) if f"item-{i}" not in done_keys]
        done = 0
        if mode == "put":
            for i in todo:
                run.put(f"item-{i}", compute(seed, i))
                done += 1
                if kill_after is not None and done >= kill_after:
                    os._exit(17)
        else:  # batches of 4 in one transaction each; the kill lands while a transaction is open
            def batch_pairs(batch):
                nonlocal done
                for i in batch:
                    if kill_after is not None and done >= kill_after:
                        os._exit(17)
                    yield f"item-{i}", compute(seed, i)
                    done += 1
            for b in range(0, len(todo), 4):
                run.put_many(batch_pairs(todo[b:b + 4]))
        run.finish()
        store.close()


    if __name__ == "__main__":
        kill = os.environ.get("KILL_AFTER")
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(kill) if kill else None)
''')


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    d = tmp_path_factory.mktemp("worker")
    (d / "store_worker.py").write_text(WORKER)
    sys.path.insert(0, str(d))
    import store_worker

    yield d / "store_worker.py", store_worker
    sys.path.remove(str(d))
    sys.modules.pop("store_worker", None)


def _spawn(script, store_path, mode="put", rank=0, world=1, kill_after=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    env.pop("KILL_AFTER", None)
    if kill_after is not None:
        env["KILL_AFTER"] = str(kill_after)
    return subprocess.Popen(
        [sys.executable, str(script), str(store_path), mode, str(rank), str(world)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc, expect_rc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == expect_rc, err
    return proc.returncode


def _snapshot(path):
    with RunStore(path) as s:
        (info,) = s.list_runs()
        run = s.get_run(info["run_id"])
        return (
            run.run_id,
            run.signature.short(),
            run.status,
            jsonsafe.dumps(run.results(), canonical=True),
            run.items(),
        )


@pytest.fixture(scope="module")
def reference(worker, tmp_path_factory):
    """The uninterrupted run (in-process: same code path as the workers)."""
    path = tmp_path_factory.mktemp("ref") / "ref.sqlite"
    worker[1].main(path)
    return _snapshot(path)


def test_a_killed_run_resumes_to_results_identical_to_an_uninterrupted_run(worker, reference, tmp_path):
    script, _ = worker
    path = tmp_path / "killed.sqlite"
    _finish(_spawn(script, path, kill_after=13), 17)
    with RunStore(path) as s:
        (info,) = s.list_runs()
        assert info["n_items"] == 13 and info["status"] == "interrupted"  # its process is gone (store.lease)
    _finish(_spawn(script, path), 0)
    rid, short, status, results, items = _snapshot(path)
    assert (rid, short, status) == reference[:3] and status == "done"
    assert results == reference[3]
    assert len(items) == 40
    pd.testing.assert_frame_equal(items, reference[4])
    with RunStore(path) as s:
        assert len(s.get_run(rid).sessions()) == 2


def test_a_kill_inside_a_transaction_leaves_no_half_written_batch(worker, reference, tmp_path):
    script, module = worker
    path = tmp_path / "mid.sqlite"
    _finish(
        _spawn(script, path, mode="many", kill_after=10), 17
    )  # batches 0-3, 4-7 committed; 8, 9 in flight
    with RunStore(path) as s:
        (info,) = s.list_runs()
        assert s.get_run(info["run_id"]).done_keys() == {f"item-{i}" for i in range(8)}
    module.main(path, mode="many")  # resume (in-process)
    assert _snapshot(path)[3] == reference[3]


def test_two_ranks_writing_one_store_concurrently_equal_one_process(worker, reference, tmp_path):
    script, _ = worker
    path = tmp_path / "ranks.sqlite"
    procs = [_spawn(script, path, mode="many", rank=k, world=2) for k in range(2)]
    for p in procs:
        _finish(p, 0)
    assert _snapshot(path)[3] == reference[3]


# ---------------------------------------------------------------------------------------------- CLI
@pytest.fixture
def filled(tmp_path):
    path = tmp_path / "cli.sqlite"
    with RunStore(path) as s:
        r = s.open_run("diffscore", CONFIG, [MODEL], seed=0, command_line="dlmeval meta-eval --task summeval")
        r.put_many([(f"item-{i}", {"score": i / 4, "nan": float("nan")}) for i in range(3)])
        r.put_table("summary", pd.DataFrame({"metric": ["spearman"], "rho": [0.42]}))
        r.warn("3 items were truncated to the model window")
        r.finish()
        return path, r.run_id, r.signature.short()


def test_cli_runs_list_and_show(filled, capsys):
    path, rid, short = filled
    assert cli_main(["--store", str(path), "runs", "list"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith(rid))
    assert line.split() == [rid, "diffscore", "default", *line.split()[3:5], "done", "3"]
    assert cli_main(["--json", "--store", str(path), "runs", "list"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["runs"][0]["run_id"] == rid and listed["runs"][0]["n_items"] == 3
    assert listed["runs"][0]["signature"] == short
    assert cli_main(["runs", "show", rid[:6], "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"signature: {short}" in out and "3 items were truncated" in out
    assert (
        "[summary] 1 rows x 2 columns" in out and "0.42" in out and "dlmeval meta-eval --task summeval" in out
    )
    assert cli_main(["--json", "--store", str(path), "runs", "show", rid]) == 0
    shown = strict(capsys.readouterr().out)
    assert shown["signature"]["config"] == CONFIG and shown["signature"]["models"] == [MODEL]
    assert shown["tables"]["summary"] == {"columns": ["metric", "rho"], "rows": [["spearman", 0.42]]}
    assert shown["warnings"][0]["message"].startswith("3 items")


def test_cli_runs_export(filled, tmp_path, capsys):
    path, rid, short = filled
    csv = tmp_path / "out.csv"
    assert cli_main(["--store", str(path), "runs", "export", rid[:8], "--format", "csv", "-o", str(csv)]) == 0
    assert short in capsys.readouterr().out
    df = pd.read_csv(csv)
    assert list(df.columns) == ["key", "score", "nan"] and list(df["score"]) == [0.0, 0.25, 0.5]
    assert df["nan"].isna().all()
    js = tmp_path / "out.json"
    assert cli_main(["--store", str(path), "runs", "export", rid, "-o", str(js)]) == 0  # format from suffix
    data = strict(js.read_text())
    assert data["signature"]["short"] == short and len(data["items"]) == 3
    back = jsonsafe.loads(js.read_text())
    assert math.isnan(back["items"][0]["result"]["nan"]) and back["items"][2]["result"]["score"] == 0.5
    capsys.readouterr()
    assert cli_main(["--store", str(path), "runs", "export", rid, "--table", "summary"]) == 0
    assert capsys.readouterr().out.splitlines() == ["metric,rho", "spearman,0.42"]


def test_cli_unknown_run_missing_store_and_bad_output_exit_2(filled, tmp_path, capsys):
    path, rid, _ = filled
    other = "0" * 16 if not rid.startswith("0") else "f" * 16
    assert cli_main(["--store", str(path), "runs", "show", other]) == 2
    assert "no run" in capsys.readouterr().err
    assert cli_main(["--store", str(path), "runs", "export", other, "-o", str(tmp_path / "x.csv")]) == 2
    assert cli_main(["--store", str(tmp_path / "absent.sqlite"), "runs", "show", rid]) == 2
    assert "no run store" in capsys.readouterr().err
    assert not (tmp_path / "absent.sqlite").exists()
    assert (
        cli_main(["--store", str(path), "runs", "export", rid, "-o", str(tmp_path / "no" / "dir.csv")]) == 2
    )
    assert cli_main(["--store", str(path), "runs", "show", rid, "--rows", "0"]) == 0
    assert cli_main(["--store", str(tmp_path / "empty.sqlite"), "runs"]) == 0  # default action: list
    assert "no runs in" in capsys.readouterr().out
