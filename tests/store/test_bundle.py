"""Run bundles, their import and merge, verification records, and the explicit shard of the work loop (#39).

The fast tests use small toy runs; the slow ones a real ``care-tiny`` run (the issue's "must show": export, import
into an empty store, ``leaderboard verify`` on 4 units says verified; a changed record is refused by name; the
leaderboard has a status column; independent shard jobs merge into the run one job writes)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.cli.options import parse_shard
from dlmeval.errors import InputError
from dlmeval.parallel import fixed_chunks, work_loop
from dlmeval.parallel.verify import sample_units
from dlmeval.store import RunStore, jsonsafe
from dlmeval.store.bundle import export_bundle, import_bundle, read_bundle, record_digest
from dlmeval.store.verification import compare_records, run_status


# ================================================================================================ helpers
def toy_run(store: RunStore, keys=range(6), seed: int = 0):
    import pandas as pd

    run = store.open_run(
        "toy", {"n": 6, "what": "squares"}, [{"name": "m", "weights_sha256": "ab" * 32}], seed
    )
    run.put_many([(f"item/{i}", {"square": i * i, "text": f"t{i}", "x": i / 3}) for i in keys])
    run.put_table("summary", pd.DataFrame({"n": [len(list(keys))], "mean": [1.5]}))
    run.warn("a warning")
    run.finish()
    return run


def rewrite(src: Path, dst: Path, edit) -> None:
    """Copy a bundle, passing every member's text through ``edit(name, text) -> text``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, edit(info.filename, zin.read(info).decode("utf-8")))


def change_record(key: str, field: str, value):
    def edit(name: str, text: str) -> str:
        if not name.endswith("items.jsonl"):
            return text
        out = []
        for line in text.splitlines():
            d = jsonsafe.loads(line)
            if d["key"] == key:
                d["result"][field] = value
            out.append(jsonsafe.dumps(d))
        return "\n".join(out) + "\n"

    return edit


def redigest(path: Path) -> None:
    """Recompute every digest of a bundle in place (a forger who rewrites records and digests alike)."""
    with zipfile.ZipFile(path) as z:
        texts = {i.filename: z.read(i).decode("utf-8") for i in z.infolist()}
    man = jsonsafe.loads(texts.pop("manifest.json"))
    for name, text in texts.items():
        if name.endswith("items.jsonl"):
            rid = name.split("/")[1]
            for line in text.splitlines():
                d = jsonsafe.loads(line)
                man["records"][rid][d["key"]] = record_digest(d["result"])
    import hashlib

    man["members"] = {n: hashlib.sha256(t.encode()).hexdigest() for n, t in texts.items()}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("manifest.json", jsonsafe.dumps(man))
        for n, t in texts.items():
            z.writestr(n, t)
    path.write_bytes(buf.getvalue())


# ================================================================================================ fast
def test_compare_records_names_fields_and_applies_the_tolerance():
    a = {"text": "the cat", "nfe": 16, "rate": 0.5, "nested": {"v": [1.0, 2.0]}}
    same = compare_records(a, json.loads(json.dumps(a)))
    assert same == {"identical": True, "max_abs_diff": 0.0, "ok": True, "diffs": []}
    close = compare_records(a, {**a, "rate": 0.5 + 1e-9}, rtol=1e-5, atol=1e-6)
    assert close["ok"] and not close["identical"] and close["max_abs_diff"] == pytest.approx(1e-9)
    exact = compare_records(a, {**a, "rate": 0.5 + 1e-9})
    assert not exact["ok"] and exact["diffs"] == [{"field": "rate", "stored": 0.5, "new": 0.5 + 1e-9}]
    text = compare_records(a, {**a, "text": "the dog", "nested": {"v": [1.0, 3.0]}}, rtol=1, atol=1)
    assert not text["ok"] and [d["field"] for d in text["diffs"]] == ["text"]  # numbers within 1, text exact
    assert compare_records({"x": float("nan")}, {"x": float("nan")})["identical"]
    assert not compare_records({"x": 1}, {"x": 1, "y": 2})["ok"]  # a field only one side has


def test_bundle_round_trip_into_an_empty_store_is_exact_and_idempotent(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as a:
        run = toy_run(a)
        m1 = export_bundle(run, tmp_path / "b.zip")
        export_bundle(run, tmp_path / "b2.zip")
        want = (run.results(), run.get_table("summary"), run.signature.as_dict(), run.warnings(), run.status)
    assert (tmp_path / "b.zip").read_bytes() == (tmp_path / "b2.zip").read_bytes()  # deterministic
    assert m1["runs"] == [run.run_id] and len(m1["records"][run.run_id]) == 6
    with zipfile.ZipFile(tmp_path / "b.zip") as z:
        names = set(z.namelist())
        assert not any(n.endswith((".pkl", ".pickle")) for n in names)
    p = f"runs/{run.run_id}/"
    assert {
        p + n for n in ("signature.json", "spec.json", "inputs.json", "code.json", "environment.json")
    } <= names
    with RunStore(tmp_path / "b.sqlite") as b:
        done = import_bundle(b, tmp_path / "b.zip")
        assert done.runs[run.run_id] == {"added": 6, "present": 0, "tables": 1}
        got = b.get_run(run.run_id)
        assert got.results() == want[0] and got.get_table("summary").equals(want[1])
        assert (got.signature.as_dict(), got.warnings(), got.status) == want[2:]
        before = b.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        again = import_bundle(b, tmp_path / "b.zip")
        assert again.added == 0 and again.present == 6
        assert b.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == before
        assert b.execute("SELECT count FROM warnings").fetchone()[0] == 1


def test_a_changed_record_signature_or_member_is_refused_naming_it(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as a:
        run = toy_run(a)
        export_bundle(run, tmp_path / "b.zip")
    rid = run.run_id
    rewrite(tmp_path / "b.zip", tmp_path / "rec.zip", change_record("item/3", "square", 10))
    with pytest.raises(InputError, match=f"record item/3 of run {rid} does not match its digest"):
        read_bundle(tmp_path / "rec.zip")

    def sig(name, text):
        if name.endswith("signature.json"):
            d = jsonsafe.loads(text)
            d["config"]["n"] = 7
            return jsonsafe.dumps(d)
        return text

    rewrite(tmp_path / "b.zip", tmp_path / "sig.zip", sig)
    with pytest.raises(InputError, match=f"the signature of run {rid} hashes to run id [0-9a-f]{{16}}"):
        read_bundle(tmp_path / "sig.zip")
    rewrite(
        tmp_path / "b.zip", tmp_path / "tab.zip", lambda n, t: t.replace("1.5", "2.5") if "tables" in n else t
    )
    with pytest.raises(InputError, match=f"member runs/{rid}/tables.json does not match its digest"):
        read_bundle(tmp_path / "tab.zip")
    with pytest.raises(InputError, match=f"it holds run {rid}, not run 0000"):
        read_bundle(tmp_path / "b.zip", expect_run="0000")
    # a run of another id under this run's name
    with RunStore(tmp_path / "c.sqlite") as c:
        other = toy_run(c, seed=1)
        export_bundle(other, tmp_path / "other.zip")

    def swap(name, text):
        return text.replace(rid, other.run_id) if name.endswith("run.json") else text

    rewrite(tmp_path / "b.zip", tmp_path / "swap.zip", swap)
    with pytest.raises(InputError, match=f"run.json is run {other.run_id}, not run {rid}"):
        read_bundle(tmp_path / "swap.zip")
    # nothing reached the store from any refused bundle
    with RunStore(tmp_path / "empty.sqlite") as e:
        for bad in ("rec", "sig", "tab", "swap"):
            with pytest.raises(InputError):
                import_bundle(e, tmp_path / f"{bad}.zip")
        assert e.list_runs() == []


def test_a_record_that_differs_from_the_store_is_refused_and_nothing_is_written(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as a:
        run = toy_run(a)
        export_bundle(run, tmp_path / "b.zip")
    rewrite(tmp_path / "b.zip", tmp_path / "forged.zip", change_record("item/4", "text", "forged"))
    redigest(tmp_path / "forged.zip")  # consistent digests: the bundle alone cannot tell
    assert read_bundle(tmp_path / "forged.zip").run_id == run.run_id
    with RunStore(tmp_path / "a.sqlite") as a:
        n = len(a.get_run(run.run_id))
        with pytest.raises(
            InputError, match=f"record item/4 of run {run.run_id} differs from the one already"
        ):
            import_bundle(a, tmp_path / "forged.zip")
        assert a.get_run(run.run_id).get("item/4")["text"] == "t4" and len(a.get_run(run.run_id)) == n


def test_bundles_of_one_runs_parts_merge_with_records_intact(tmp_path):
    with RunStore(tmp_path / "p0.sqlite") as s0, RunStore(tmp_path / "p1.sqlite") as s1:
        r0, r1 = toy_run(s0, keys=range(0, 6, 2)), toy_run(s1, keys=range(1, 6, 2))
        assert r0.run_id == r1.run_id
        export_bundle(r0, tmp_path / "p0.zip")
        export_bundle(r1, tmp_path / "p1.zip")
    with RunStore(tmp_path / "all.sqlite") as s:
        import_bundle(s, tmp_path / "p0.zip")
        import_bundle(s, tmp_path / "p1.zip")
        res = s.get_run(r0.run_id).results()
    assert list(res) == [f"item/{i}" for i in range(6)]
    assert [r["square"] for r in res.values()] == [0, 1, 4, 9, 16, 25]


def test_sample_units_is_seeded_by_seed_and_run():
    chunks = fixed_chunks(range(40), [f"k{i}" for i in range(40)], 4)
    a = sample_units(chunks, 4, 0, "abc")
    assert a == sample_units(chunks, 4, 0, "abc") and len(a) == 4
    assert [c.keys[0] for c in a] == sorted((c.keys[0] for c in a), key=lambda k: int(k[1:]))
    assert {c.keys for c in a} != {c.keys for c in sample_units(chunks, 4, 1, "abc")}
    assert sample_units(chunks, 100, 0, "abc") == chunks
    with pytest.raises(InputError, match="--sample must be at least 1"):
        sample_units(chunks, 0, 0, "abc")


def test_work_loop_shards_partition_the_chunks_whatever_is_pending():
    store = RunStore(":memory:")
    work = fixed_chunks(range(10), [f"i/{i}" for i in range(10)], 3)  # 4 chunks
    parts = []
    for i in range(3):
        run = store.open_run("toy", {"shard": i})
        if i == 0:
            run.put_many([("i/0", {"v": 0}), ("i/1", {"v": 1}), ("i/2", {"v": 2})])  # chunk 0 already done
        work_loop(run, work, lambda c: [{"v": x} for x in c.items], shard=(i, 3))
        parts.append(set(run.done_keys()))
    assert parts[0] == {f"i/{k}" for k in (0, 1, 2, 9)}  # chunks 0 and 3
    assert parts[1] == {"i/3", "i/4", "i/5"} and parts[2] == {"i/6", "i/7", "i/8"}
    assert parse_shard("1/4") == (1, 4) and parse_shard(None) is None
    for bad in ("4/4", "x", "1", "-1/2", "0/0"):
        with pytest.raises(InputError, match="--shard"):
            parse_shard(bad)


def test_cli_bundle_mistakes_are_one_line(tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    with RunStore(store) as s:
        rid = toy_run(s).run_id
    assert main(["--store", store, "runs", "import", str(tmp_path / "nope.zip")]) == 2
    assert "no bundle at" in capsys.readouterr().err
    assert (
        main(["--store", store, "runs", "export", rid, "--bundle", str(tmp_path / "b.zip"), "-o", "x.csv"])
        == 2
    )
    assert "--bundle writes the whole run" in capsys.readouterr().err
    (tmp_path / "junk.zip").write_text("not a zip")
    assert main(["--store", store, "runs", "import", str(tmp_path / "junk.zip")]) == 2
    assert "is not a dlmeval bundle" in capsys.readouterr().err
    assert main(["--store", store, "leaderboard", "verify"]) == 2
    assert "no pending Care run in" in capsys.readouterr().err
    assert main(["--store", store, "leaderboard", "verify", rid]) == 2
    assert "verification recomputes a 'care' run" in capsys.readouterr().err
    assert run_status(RunStore(store), rid)["status"] == "pending"


# ================================================================================================ care-tiny (slow)
@pytest.fixture(scope="module")
def care_tiny(tmp_path_factory, data_root):
    """A ``care-tiny`` run (both models) in its own store; returns (store path, {model: run id})."""
    from dlmeval.protocols.care import load_spec, run_care

    d = tmp_path_factory.mktemp("care-tiny")
    with RunStore(d / "runs.sqlite") as store:
        res = run_care(load_spec("care-tiny"), store, device="cpu", progress=False, data_dir=data_root)
    return d / "runs.sqlite", dict(res.model_runs)


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = main(["--no-progress", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def gen_key(bundle: Path) -> str:
    with zipfile.ZipFile(bundle) as z:
        name = next(n for n in z.namelist() if n.endswith("items.jsonl"))
        return next(
            k for k in (json.loads(x)["key"] for x in z.read(name).splitlines()) if k.startswith("gen/")
        )


@pytest.mark.slow
def test_care_tiny_bundle_imports_verifies_and_refuses_a_changed_record(
    care_tiny, tmp_path, capsys, data_root
):
    path, runs = care_tiny
    rid, other = runs["tiny-llada"], runs["tiny-bert"]
    b = tmp_path / "llada.zip"
    assert cli(capsys, "--store", path, "runs", "export", rid, "--bundle", b)[0] == 0
    empty = tmp_path / "empty.sqlite"
    rc, out, _ = cli(capsys, "--store", empty, "runs", "import", b)
    assert rc == 0 and f"run {rid} (care): 133 records added" in out
    rc, out, _ = cli(capsys, "--store", empty, "runs", "import", b)
    assert rc == 0 and "0 records added, 133 already present" in out and "(nothing new)" in out
    rc, out, _ = cli(
        capsys,
        "--store",
        empty,
        "leaderboard",
        "verify",
        rid,
        "--sample",
        4,
        "--seed",
        0,
        "--data-dir",
        data_root,
    )
    assert rc == 0, out
    assert f"run {rid}: verified" in out and "4 units, max numeric diff 0, 11 tables recomputed" in out
    assert "identical bits expected" in out
    with RunStore(empty, must_exist=True) as s:
        st = run_status(s, rid)
        assert st["status"] == "verified"
        ev = st["evidence"]
        assert ev["units"] == 4 and ev["identical"] and ev["largest_difference"] == 0.0
        assert (
            len(ev["tables_checked"]) == 11
            and ev["tables_differ"] == []
            and ev["not_compared"] == ["seconds"]
        )
        assert ev["hardware"]["device"] == "cpu" and ev["hardware"]["dtype"] == "float32" and ev["when"]
        vrun = s.get_run(ev["run_id"])
        units = [k for k in vrun.done_keys() if k.startswith("unit/")]
        assert len(units) == 4 and all(vrun.get(k)["identical"] for k in units)
    # the leaderboard has a status column: verified here, and pending for a run nobody verified
    rc, out, _ = cli(capsys, "--store", empty, "leaderboard", "-o", tmp_path / "lb")
    assert rc == 0 and "| rank | status | model |" in out and "| 1 | verified | tiny-llada |" in out
    import pandas as pd

    assert list(pd.read_csv(tmp_path / "lb.csv")["status"]) == ["verified"]
    rc, out, _ = cli(
        capsys, "--store", path, "leaderboard", "-o", tmp_path / "lb0", "--quiet", "--format", "csv"
    )
    assert set(pd.read_csv(tmp_path / "lb0.csv")["status"]) == {"pending"}
    # the status and its evidence travel in a bundle
    b2 = tmp_path / "verified.zip"
    assert cli(capsys, "--store", empty, "runs", "export", rid, "--bundle", b2)[0] == 0
    third = tmp_path / "third.sqlite"
    rc, out, _ = cli(capsys, "--store", third, "runs", "import", b2)
    assert rc == 0 and f"run {ev['run_id']} (verify): 5 records added" in out
    with RunStore(third, must_exist=True) as s:
        assert run_status(s, rid) == st

    # one record changed inside the bundle: import and verify refuse it, naming the record
    key = gen_key(b)
    bad = tmp_path / "changed.zip"
    rewrite(b, bad, change_record(key, "text", "a changed generation"))
    for args in (("runs", "import", bad), ("leaderboard", "verify", bad)):
        rc, _, err = cli(capsys, "--store", tmp_path / "x.sqlite", *args)
        assert rc == 2 and f"record {key} of run {rid} does not match its digest" in err
        assert "Traceback" not in err
    assert not (tmp_path / "x.sqlite").exists() or RunStore(tmp_path / "x.sqlite").list_runs() == []

    # the same change with every digest rewritten: the bundle imports, the recomputation catches it
    redigest(bad)
    forged = tmp_path / "forged.sqlite"
    rc, out, _ = cli(
        capsys, "--store", forged, "leaderboard", "verify", bad, "--sample", 1000, "--data-dir", data_root
    )
    assert rc == 1 and f"run {rid}: failed" in out
    assert f"differs: record {key} field text: stored 'a changed generation'" in out
    with RunStore(forged, must_exist=True) as s:
        st = run_status(s, rid)
        # the forged generation's chunk, and its cell's summary (recomputed from the stored items: MAUVE moves)
        assert st["status"] == "failed" and sorted(u[:4] for u in st["evidence"]["failed_units"]) == [
            "cell",
            "gen/",
        ]
        assert st["evidence"]["units"] == st["evidence"]["of_units"] > 4

    # a changed table (the leaderboard reads tables) with its digests rewritten: the table recomputed from the
    # records differs, whichever units are drawn
    def table(name: str, text: str) -> str:
        if not name.endswith("tables.json"):
            return text
        d = jsonsafe.loads(text)
        cols = d["leaderboard"]["columns"]
        d["leaderboard"]["data"][cols.index("mauve_none")][0] = 0.99
        return jsonsafe.dumps(d)

    tab = tmp_path / "table.zip"
    rewrite(b, tab, table)
    redigest(tab)
    rc, out, _ = cli(capsys, "--store", tmp_path / "t.sqlite", "leaderboard", "verify", tab, "--sample", 1)
    assert rc == 1 and "tables that differ from their recomputation: leaderboard" in out
    assert other  # the other model's run stays as it was: pending in the first store


@pytest.mark.slow
def test_shard_jobs_merge_into_the_run_one_job_writes(care_tiny, tmp_path, data_root):
    from dlmeval.protocols.care import load_spec, run_care

    path, runs = care_tiny
    rid = runs["tiny-llada"]
    spec = load_spec("care-tiny").replace(models=("tiny-llada",))
    for i in (0, 1):
        with RunStore(tmp_path / f"job{i}.sqlite") as s:
            res = run_care(spec, s, device="cpu", progress=False, data_dir=data_root, shard=(i, 2))
            assert res.model_runs == {"tiny-llada": rid} and s.get_run(rid).status == f"shard {i}/2"
            export_bundle(s.get_run(rid), tmp_path / f"job{i}.zip")
    with RunStore(tmp_path / "merged.sqlite") as s:
        sizes = [import_bundle(s, tmp_path / f"job{i}.zip").added for i in (0, 1)]
        assert sum(sizes) == 114 and min(sizes) > 0  # every generation, split between the jobs, none twice
        run_care(spec, s, device="cpu", progress=False, data_dir=data_root)
        merged = s.get_run(rid).results()
    with RunStore(path, must_exist=True) as s:
        single = s.get_run(rid).results()
    assert list(merged) == list(single)
    drop = {"seconds"}
    assert all(
        {k: v for k, v in merged[key].items() if k not in drop}
        == {k: v for k, v in single[key].items() if k not in drop}
        for key in single
    )


@pytest.mark.slow
def test_leaderboard_site_renders_in_chromium_with_status_flags(care_tiny, tmp_path, data_root, capsys):
    from tests.report.test_report import DomSections, chromium_exe, network_urls, page_requests, run_chromium

    path, runs = care_tiny
    store = tmp_path / "s.sqlite"
    for rid in runs.values():
        cli(capsys, "--store", path, "runs", "export", rid, "--bundle", tmp_path / f"{rid}.zip")
        cli(capsys, "--store", store, "runs", "import", tmp_path / f"{rid}.zip")
    rid = runs["tiny-bert"]
    assert cli(capsys, "--store", store, "leaderboard", "verify", rid, "--data-dir", data_root)[0] == 0
    site = tmp_path / "site"
    rc, out, _ = cli(
        capsys, "--store", store, "leaderboard", "-o", tmp_path / "lb", "--site", site, "--quiet"
    )
    assert rc == 0 and str(site / "index.html") in out
    index = (site / "index.html").read_text()
    for r in runs.values():
        assert f'href="models/{r}.html"' in index and f'href="bundles/{r}.zip"' in index
        assert (site / "models" / f"{r}.html").is_file()
        assert read_bundle(site / "bundles" / f"{r}.zip").run_id == r
    page = (site / "models" / f"{rid}.html").read_text()
    for text in (
        "largest difference",
        "identical bits",
        "bootstrap CI",
        "Actual forward passes",
        rid,
        "bundle",
    ):
        assert text in page
    assert "The spec lists no published value for this model." in page
    if chromium_exe() is None:
        pytest.skip("chromium is not installed (apt-get install -y --no-install-recommends chromium)")
    dom, netlog = run_chromium((site / "index.html").as_uri(), tmp_path / "c1", "--dump-dom")
    assert dom.count('class="status verified"') == 1 and dom.count('class="status pending"') == 1
    assert "1 verified, 1 pending, 0 failed" in dom
    assert network_urls(page_requests(netlog)) == []
    parser = DomSections()
    parser.feed(dom)
    assert len(parser.external) == 4 and all(
        (site / u).exists() for u in parser.external
    )  # links stay inside
    dom, netlog = run_chromium((site / "models" / f"{rid}.html").as_uri(), tmp_path / "c2", "--dump-dom")
    assert (
        "✓ verified" in dom and "|kind:care|model:tiny-bert@" in dom and "|src:" in dom
    )  # the code identity
    assert network_urls(page_requests(netlog)) == []
    parser = DomSections()
    parser.feed(dom)
    assert parser.external and all((site / "models" / u).resolve().exists() for u in parser.external)


def test_site_reads_published_values_from_a_leaderboard_spec_row(tmp_path):
    """A model page shows the paper's values where a care-leaderboard run lists the model's run and its spec row
    carries ``published`` (as the paper specs do): through the comparison table run_leaderboard stores, measured
    beside published; none where no row does."""
    import pandas as pd

    from dlmeval.protocols.care.leaderboard import load_leaderboard, published_comparison
    from dlmeval.protocols.published import frame
    from dlmeval.report.site import published_values

    spec = load_leaderboard("care-leaderboard")
    label = "LLaDA-8B-Base"
    with RunStore(tmp_path / "s.sqlite") as s:
        rid = toy_run(s).run_id
        table = pd.DataFrame(
            {"model": [label, "Other"], "care_run": [rid, "x"], "mauve_none": [0.9, 0.5], "gap": [0.25, 0.1]}
        )
        lb = s.open_run("care-leaderboard", spec.config())
        lb.put_table("leaderboard_rows", table)
        lb.put_table("published", frame(published_comparison(spec, table)))
        pub = published_values(s, rid)
        got = dict(zip(pub["column"], zip(pub["published"], pub["measured"])))
        assert got["mauve_none"] == (0.948, 0.9) and got["gap"][1] == 0.25
        assert published_values(s, "x").empty and published_values(s, "nope").empty


def test_a_bundle_of_the_same_run_made_with_other_versions_merges_and_says_so(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as a:
        run = toy_run(a, keys=range(3))
        export_bundle(run, tmp_path / "a.zip")
    with RunStore(tmp_path / "b.sqlite") as b:
        other = toy_run(b, keys=range(3, 6))
        sig = b.execute("SELECT signature FROM runs").fetchone()[0]
        d = jsonsafe.loads(sig)
        d["versions"]["torch"] = "9.9.9"
        with b.transaction() as c:
            c.execute("UPDATE runs SET signature = ?", (jsonsafe.dumps(d),))
        export_bundle(b.get_run(other.run_id), tmp_path / "b.zip")
    with RunStore(tmp_path / "a.sqlite") as a:
        assert import_bundle(a, tmp_path / "b.zip").added == 3
        assert len(a.get_run(run.run_id)) == 6
        assert "signature differs from the stored one in versions" in " ".join(
            a.get_run(run.run_id).warnings()
        )
        assert a.get_run(run.run_id).signature.versions["torch"] != "9.9.9"  # the store's own stays


def test_a_bundle_of_the_run_made_by_other_code_is_refused_as_a_resume_is(tmp_path, monkeypatch):
    """Importing records into a stored run follows the rule of opening it again: the same source digest, or
    --allow-code-change (recorded as a warning on the run)."""
    from dlmeval.store import code

    with RunStore(tmp_path / "a.sqlite") as a:
        run = toy_run(a, keys=range(3))
    with RunStore(tmp_path / "b.sqlite") as b:
        other = toy_run(b, keys=range(3, 6))
        d = jsonsafe.loads(b.execute("SELECT signature FROM runs").fetchone()[0])
        d["code"] = {**d["code"], "source_sha256": "ab" * 32}
        with b.transaction() as c:
            c.execute("UPDATE runs SET signature = ?", (jsonsafe.dumps(d),))
        export_bundle(b.get_run(other.run_id), tmp_path / "b.zip")
    monkeypatch.delenv(code.ALLOW_ENV, raising=False)
    with RunStore(tmp_path / "a.sqlite") as a:
        with pytest.raises(InputError, match=f"run {run.run_id} was made by .*--allow-code-change"):
            import_bundle(a, tmp_path / "b.zip")
        assert len(a.get_run(run.run_id)) == 3  # nothing written
        monkeypatch.setenv(code.ALLOW_ENV, "1")
        assert import_bundle(a, tmp_path / "b.zip").added == 3
        assert any("with --allow-code-change" in w for w in a.get_run(run.run_id).warnings())
