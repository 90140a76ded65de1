"""dlmeval.store.verification: a run's status from its verification runs, and the index that reads those once
for a caller asking about many runs (a leaderboard, a site)."""

from __future__ import annotations

from dlmeval.store import RunStore
from dlmeval.store.bundle import attached_runs
from dlmeval.store.verification import VERIFY_KIND, run_status, verification_index, verification_runs


def _verify(store, rid: str, status: str, seed: int) -> str:
    v = store.open_run(VERIFY_KIND, {"verifies": rid, "sample": 1, "seed": seed}, [], seed)
    v.put("summary", {"units": 1, "when": f"2026-12-0{seed + 1}"})
    v.finish(status)
    return v.run_id


def test_the_verification_index_is_read_once_and_gives_each_runs_status(tmp_path, monkeypatch):
    with RunStore(tmp_path / "s.sqlite") as st:
        runs = []
        for i in range(4):
            r = st.open_run("care", {"i": i}, [], 0)
            r.finish()
            runs.append(r.run_id)
        a1 = _verify(st, runs[0], "verified", 0)
        _verify(st, runs[1], "verified", 1)
        b2 = _verify(st, runs[1], "failed", 2)
        c1 = _verify(st, runs[2], "running", 3)  # a verification that never finished decides nothing
        alone = {rid: run_status(st, rid) for rid in runs}
        calls = []
        real = type(st).list_runs
        monkeypatch.setattr(
            type(st), "list_runs", lambda self, *a, **k: calls.append(a) or real(self, *a, **k)
        )
        index = verification_index(st)
        assert calls == [(VERIFY_KIND,)]
        assert {rid: run_status(st, rid, index) for rid in runs} == alone and len(calls) == 1
        assert [alone[rid]["status"] for rid in runs] == ["verified", "failed", "pending", "pending"]
        assert alone[runs[0]]["evidence"]["run_id"] == a1 and alone[runs[1]]["evidence"]["run_id"] == b2
        assert [r.run_id for r in verification_runs(st, runs[2], index)] == [c1]
        assert verification_runs(st, runs[3], index) == [] and len(index) == 3
        assert attached_runs(st, runs[1], index) == attached_runs(st, runs[1]) and len(calls) == 2
