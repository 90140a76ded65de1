"""The protocols' one run skeleton (:mod:`dlmeval.protocols.skeleton`): a toy protocol through it (runs, identities,
warnings, given models kept, resumption, outputs), and Care and robustness wired through it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dlmeval.protocols import skeleton
from dlmeval.protocols.skeleton import Hooks, run_protocol
from dlmeval.store import RunStore


class ToyModel:
    def __init__(self, name: str, scale: int):
        self.name, self.scale = name, scale

    def identity(self) -> dict:
        return {"name": self.name, "family": "toy", "weights_sha256": f"w{self.scale}"}


def toy_hooks(calls: dict, *, fail_on: str | None = None) -> Hooks:
    """Each model squares 0..3 times its scale (only the pending keys), puts a ``sums`` table and warns once."""

    def compute(entry, model, run):
        calls["compute"].append(entry)
        done = run.done_keys()
        for i in range(4):
            if f"x/{i}" not in done:
                if fail_on == f"{entry}/{i}":
                    raise KeyboardInterrupt("injected")
                run.put(f"x/{i}", {"y": model.scale * i * i})
        recs = [{"model": entry, **run.get(f"x/{i}")} for i in range(4)]
        run.put_table("sums", pd.DataFrame([{"model": entry, "y": sum(r["y"] for r in recs)}]))
        run.warn(f"{entry} is a toy")
        return recs

    def load(entry):
        calls["load"].append(entry)
        return ToyModel(entry, scale=3)

    def write(tables, out, sig):
        calls["write"].append(sig)
        out.mkdir(parents=True, exist_ok=True)
        (out / "all.csv").write_text(tables["all"].to_csv(index=False))
        return out

    return Hooks(
        kind="toy",
        whole_kind="toy-whole",
        load=load,
        config=lambda entry: {"entry": entry, "n": 4},
        compute=compute,
        whole_config={"n": 4},
        tables=lambda done: {
            "all": pd.DataFrame([r for recs in done.records for r in recs]),
            "runs": pd.DataFrame({"model": list(done.run_ids), "run_id": list(done.run_ids.values())}),
        },
        seed=7,
        announce=lambda entry: f"toy: {entry}",
        identities=[{"name": "judge", "family": "toy", "weights_sha256": "j"}],
        notes=lambda tables: [f"{len(tables['all'])} rows"],
        write=write,
    )


def model_names(store, run_id: str) -> list[str]:
    sig = store.execute("SELECT signature FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
    return [m["name"] for m in json.loads(sig)["models"]]


def new_calls() -> dict:
    return {"compute": [], "load": [], "write": []}


def test_a_toy_protocol_through_the_skeleton(tmp_path, monkeypatch):
    freed = []
    monkeypatch.setattr(skeleton, "empty_cuda", lambda: freed.append(1))
    calls, said = new_calls(), []
    given = ToyModel("a", scale=1)
    with RunStore(tmp_path / "s.sqlite") as store:
        done = run_protocol(
            toy_hooks(calls),
            ["a", "b"],
            store,
            models={"a": given},
            say=said.append,
            out_dir=tmp_path / "out",
        )
        runs = {r["kind"]: r for r in store.list_runs()}
        assert sorted(r["kind"] for r in store.list_runs()) == ["toy", "toy", "toy-whole"]
        a, b = (store.get_run(done.run_ids[m]) for m in "ab")
        whole = store.get_run(done.whole.run_id)
        assert a.get("x/3") == {"y": 9} and b.get("x/3") == {"y": 27}
        assert [a.status, b.status, whole.status] == ["done", "done", "done"]
        # every run lists its model, then the shared identities; the whole lists every model, then them
        assert model_names(store, a.run_id) == ["a", "judge"]
        assert model_names(store, whole.run_id) == ["a", "b", "judge"]
        assert a.get_table("sums")["y"].tolist() == [14] and b.get_table("sums")["y"].tolist() == [42]
        assert whole.get_table("all")["y"].sum() == 56
        assert whole.get_table("runs")["run_id"].tolist() == [done.run_ids["a"], done.run_ids["b"]]
        assert whole.warnings() == ["8 rows"]
    assert runs["toy-whole"]["run_id"] == done.whole.run_id
    assert calls["load"] == ["b"] and calls["compute"] == ["a", "b"]  # the given model is not loaded
    assert len(freed) == 1  # only the loaded one is freed
    assert said == [f"toy: a -> run {done.run_ids['a']}", f"toy: b -> run {done.run_ids['b']}"]
    assert done.warnings == ["a: a is a toy", "b: b is a toy", "8 rows"]
    assert calls["write"] == [done.signature] and done.out_dir == tmp_path / "out"
    assert (tmp_path / "out" / "all.csv").read_text() == done.tables["all"].to_csv(index=False)
    assert set(done.seconds) == {"a", "b"}


def test_the_skeleton_resumes_into_the_same_runs_and_tables(tmp_path):
    path = tmp_path / "s.sqlite"
    with RunStore(path) as store:
        ref = run_protocol(toy_hooks(new_calls()), ["a", "b"], store)
    crash = tmp_path / "c.sqlite"
    with RunStore(crash) as store, pytest.raises(KeyboardInterrupt):
        run_protocol(toy_hooks(new_calls(), fail_on="b/2"), ["a", "b"], store)
    with RunStore(crash) as store:
        statuses = {r["run_id"]: r["status"] for r in store.list_runs()}
        assert statuses == {ref.run_ids["a"]: "done", ref.run_ids["b"]: "running"}  # no whole run yet
        assert len(store.get_run(ref.run_ids["b"])) == 2  # b/0 and b/1 were written before the crash
        got = run_protocol(toy_hooks(new_calls()), ["a", "b"], store)
    assert got.run_ids == ref.run_ids and got.whole.run_id == ref.whole.run_id
    for name in ref.tables:
        pd.testing.assert_frame_equal(got.tables[name], ref.tables[name])


def test_each_model_run_is_synced_before_it_finishes(tmp_path, monkeypatch):
    """A warning raised on a rank other than 0 after compute's last work_loop waits in that rank's outbox: the
    skeleton syncs each model run before finishing it, so rank 0 records it."""
    from dlmeval.store.db import Run

    order = []
    monkeypatch.setattr(skeleton, "sync", lambda run: order.append(("sync", run.run_id)))
    finish = Run.finish

    def finish_in_order(self, *a, **k):
        order.append(("finish", self.run_id))
        return finish(self, *a, **k)

    monkeypatch.setattr(Run, "finish", finish_in_order)
    with RunStore(tmp_path / "s.sqlite") as store:
        done = run_protocol(toy_hooks(new_calls()), ["a", "b"], store)
    for rid in done.run_ids.values():
        assert order.index(("sync", rid)) < order.index(("finish", rid))


def test_the_skeleton_writes_no_outputs_without_out_dir(tmp_path):
    calls = new_calls()
    with RunStore(tmp_path / "s.sqlite") as store:
        done = run_protocol(toy_hooks(calls), ["a"], store)
    assert calls["write"] == [] and done.out_dir is None and done.signature


class Stop(Exception):
    pass


def _spy(monkeypatch, module) -> dict:
    seen = {}

    def spy(hooks, entries, store, **kw):
        seen.update(hooks=hooks, entries=list(entries))
        raise Stop

    monkeypatch.setattr(module, "run_protocol", spy)
    return seen


def test_care_and_robust_run_through_the_skeleton(tmp_path, monkeypatch):
    """Both protocols hand their model loop to :func:`run_protocol` (a second copy of it would not be seen)."""
    from dlmeval.models import tiny_model
    from dlmeval.protocols import care, robust
    from dlmeval.protocols.care import run as care_run
    from dlmeval.protocols.robust import run as robust_run

    seen = _spy(monkeypatch, care_run)
    spec = care.load_spec("care-tiny")
    with RunStore(tmp_path / "c.sqlite") as store, pytest.raises(Stop):
        care.run_care(spec, store, progress=False, models={"tiny-causal": tiny_model("causal")})
    h = seen["hooks"]
    assert (h.kind, h.whole_kind, seen["entries"]) == ("care", "care-sweep", list(spec.models))
    data = care.data_identity(spec, None, allow_download=False)  # the corpora's file digests
    assert h.config("tiny-llada") == {**spec.config("tiny-llada"), "data": data}
    assert h.whole_config == {**spec.config(), "data": data}

    seen = _spy(monkeypatch, robust_run)
    spec = robust.load_spec("robust-tiny")
    with RunStore(tmp_path / "r.sqlite") as store, pytest.raises(Stop):
        robust.run_robust(spec, store, progress=False)
    h = seen["hooks"]
    assert (h.kind, h.whole_kind) == ("robust", "robust-spec")
    assert [(e.role, h.name(e)) for e in seen["entries"]] == [("dlm", "tiny-bert"), ("ar", "tiny-causal")]
