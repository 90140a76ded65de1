"""dlmeval.store.lease on a store from before its tables: ``leases``, ``stops`` and ``claims`` are created by the
first write that needs them, and a store without them reads as one with nothing held, stopped or claimed."""

from __future__ import annotations

import sqlite3

from dlmeval.store import RunStore, lease


def test_a_store_without_the_lease_tables_reads_and_gets_them_on_write(tmp_path):
    path = tmp_path / "old.sqlite"
    with RunStore(path) as st:
        st.open_run("toy", {"n": 1}, [], 0, command_line="dlmeval toy").put("a", {"x": 1})
    con = sqlite3.connect(path)
    for name in ("leases", "stops", "claims"):
        con.execute(f"DROP TABLE IF EXISTS {name}")
    con.commit()
    assert [lease._has_table(con, n) for n in ("leases", "stops", "claims", "runs")] == [False] * 3 + [True]
    assert lease.leases(con) == {} and lease.stops(con) == {}
    con.close()
    with RunStore(path) as st:
        (info,) = st.list_runs()
        assert info["status"] == "running" and "lease" not in info  # no lease: nothing can be said
        run = st.get_run(info["run_id"])
        run.put("b", {"x": 2})  # a write takes the lease: the table is created
        held = lease.leases(st._conn)
        assert list(held) == [info["run_id"]] and lease._has_table(st._conn, "leases")
        run.finish()
        assert lease.leases(st._conn) == {} and st.list_runs()[0]["status"] == "done"
