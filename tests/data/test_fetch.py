"""`dlmeval data list|fetch` (#26): the catalog's hashes are those of the shared files; fetching from a local HTTP
server on 127.0.0.1 keeps only files whose SHA-256 matches; `data list` shows what came from where; the demo
stops in one line naming `dlmeval data fetch` when its data is missing."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.data import catalog

SMALL = ("humaneval", "bartscore-Rank19", "bartscore-LICENSE")


@pytest.fixture
def mirror(tmp_path, data_root):
    """A copy of a few shared files served over HTTP on 127.0.0.1 (a daemon thread; shut down at the end of the
    test, and by a 120 s timer if the test hangs), plus one file whose bytes were changed."""
    root = tmp_path / "mirror"
    for n in SMALL:
        f = catalog.FILES[n]
        (root / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(data_root) / f.path, root / f.path)
    bad = catalog.FILES["bartscore-QAGS_XSUM"]
    (root / bad.path).parent.mkdir(parents=True, exist_ok=True)
    data = bytearray((Path(data_root) / bad.path).read_bytes())
    data[100] ^= 0xFF  # same size, other bytes
    (root / bad.path).write_bytes(bytes(data))
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Timer(120, server.shutdown)
    stop.daemon = True
    stop.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        stop.cancel()
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        self.server.requests.append(self.path)


def test_catalog_hashes_are_the_shared_files(data_root):
    """Every catalogued file is in the shared data directory with the recorded size and SHA-256."""
    for f in catalog.FILES.values():
        p = Path(data_root) / f.path
        assert p.stat().st_size == f.size, f.name
        assert hashlib.sha256(p.read_bytes()).hexdigest() == f.sha256, f.name
    assert set(catalog.GROUPS["demo"]) <= set(catalog.FILES.names())
    # the BARTScore files download from the repository at the commit the data README names
    assert catalog.FILES["bartscore-SummEval"].url.endswith(
        "/neulab/BARTScore/248f511cb34ae3753fc81f7d7a945de5bfe33458/SUM/SummEval/data.pkl"
    )


def test_fetch_from_a_local_server_verifies_hashes(tmp_path, mirror, capsys):
    url, server = mirror
    dest = tmp_path / "data"
    base = ["data", "fetch", "--data-dir", str(dest), "--base-url", url]
    assert main([*base, *SMALL]) == 0
    out = capsys.readouterr().out
    assert "3 file(s) fetched and verified, 0 already present" in out
    for n in SMALL:
        f = catalog.FILES[n]
        assert hashlib.sha256((dest / f.path).read_bytes()).hexdigest() == f.sha256
    rec = json.loads((dest / ".dlmeval-sources.json").read_text())
    assert rec["tasks/HumanEval.jsonl.gz"]["url"] == f"{url}/tasks/HumanEval.jsonl.gz"
    # a second fetch finds them present and asks the server for nothing
    n_requests = len(server.requests)
    assert main([*base, *SMALL]) == 0
    assert "0 file(s) fetched and verified, 3 already present" in capsys.readouterr().out
    assert len(server.requests) == n_requests
    # changed bytes: refused, nothing saved, one line
    assert main([*base, "bartscore-QAGS_XSUM"]) == 2
    err = capsys.readouterr().err
    assert "does not match dlmeval's record" in err and "not saved" in err
    assert [line for line in err.splitlines() if line.startswith("dlmeval: error")] == err.splitlines()[-1:]
    f = catalog.FILES["bartscore-QAGS_XSUM"]
    assert not (dest / f.path).exists() and not (dest / (f.path + ".part")).exists()
    # a file the server does not have: one line naming the command to rerun
    assert main([*base, "gsm8k"]) == 2
    err = capsys.readouterr().err
    assert "cannot fetch gsm8k" in err and "dlmeval data fetch" in err
    # data list: present / missing, and where each present file came from
    assert main(["--json", "data", "list", "--data-dir", str(dest), "--verify"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["files"]}
    assert rows["humaneval"]["status"] == "verified"
    assert rows["humaneval"]["fetched_from"] == f"{url}/tasks/HumanEval.jsonl.gz"
    assert rows["gsm8k"]["status"] == "missing" and rows["bartscore-QAGS_XSUM"]["status"] == "missing"
    assert sum(r["status"] != "missing" for r in rows.values()) == 3
    assert main(["data", "list", "--data-dir", str(dest)]) == 0
    assert "3 of 25 present" in capsys.readouterr().out


def test_fetch_refuses_unknown_and_unfetchable_names(tmp_path, capsys):
    assert main(["data", "fetch", "--data-dir", str(tmp_path), "nope"]) == 2
    assert "unknown data file or group 'nope'" in capsys.readouterr().err
    assert main(["data", "fetch", "--data-dir", str(tmp_path), "corpus-abc_news"]) == 2
    assert "no single public file" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written, no network


def test_fetch_if_missing_uses_an_existing_data_dir(data_root, capsys):
    assert (
        main(
            [
                "data",
                "fetch",
                "demo",
                "--if-missing",
                "--data-dir",
                str(data_root),
                "--base-url",
                "http://0.0.0.0:9",
            ]
        )
        == 0
    )
    assert "present in" in capsys.readouterr().out


def test_demo_without_data_stops_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DLMEVAL_DATA", str(tmp_path / "none"))

    def no_models(*a, **k):
        raise AssertionError("models loaded before the data check")

    monkeypatch.setattr("dlmeval.models.load_diffusion", no_models)
    assert main(["--store", str(tmp_path / "s.sqlite"), "demo", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "dlmeval data fetch demo" in err and err.count("\n") == 1
    assert not (tmp_path / "s.sqlite").exists()
