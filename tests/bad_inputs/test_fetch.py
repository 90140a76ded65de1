"""The bad-input battery for `dlmeval data fetch` (issue 32, item 7): servers on 127.0.0.1 that trickle bytes,
stop sending, never answer, close early or answer 404, and bad arguments (a malformed --base-url, a zero or
negative clock, a directory where the file goes). Each case is one line on stderr, exit code 2, no traceback, and
no `.part` file left behind; each runs in a few seconds (small clocks passed as options, every server bounded in
bytes and time)."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from dlmeval.cli.main import main
from dlmeval.data import catalog

FILE = catalog.FILES["humaneval"]
#: the most a slow handler runs (seconds), so that no test can hang on its server
BOUND_S = 4.0


class _Handler(http.server.BaseHTTPRequestHandler):
    """``/<mode>/<data path>``: ``trickle`` one byte every 50 ms, ``stall`` ten bytes then silence, ``silent``
    no answer at all, ``short`` a tenth of the file then a closed connection, anything else 404."""

    def log_message(self, *a):
        pass

    def _headers(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(FILE.size))
        self.end_headers()
        self.wfile.flush()

    def do_GET(self):  # noqa: N802 (http.server's name)
        mode = self.path.strip("/").split("/", 1)[0]
        start = time.monotonic()
        try:
            if mode == "trickle":
                self._headers()
                for _ in range(200):
                    if time.monotonic() - start > BOUND_S:
                        break
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            elif mode == "stall":
                self._headers()
                self.wfile.write(b"x" * 10)
                self.wfile.flush()
                time.sleep(BOUND_S)
            elif mode == "silent":
                time.sleep(BOUND_S)
            elif mode == "short":
                self._headers()
                self.wfile.write(b"x" * (FILE.size // 10))
                self.wfile.flush()
                self.close_connection = True
            else:
                self.send_error(404, "Not Found")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the CLI's imports done once here, so that the timed commands below time the fetch only
    assert main(["data", "list", "--data-dir", str(tmp_path_factory.mktemp("warm"))]) == 0
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _fetch(capsys, dest: Path, *args: str) -> tuple[int, str, float]:
    t0 = time.monotonic()
    rc = main(["data", "fetch", "--data-dir", str(dest), *args, "humaneval"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert out == "", out
    return rc, err, took


def _one_error_line(err: str) -> str:
    """The error line; fetch may print its "fetching ..." progress line before it."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("dlmeval: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert all(ln.startswith(("dlmeval: error: ", "fetching ")) for ln in lines), err
    assert "Traceback" not in err
    return errors[0]


def _no_part(dest: Path) -> None:
    assert not list(dest.rglob("*.part")), list(dest.rglob("*"))
    assert not (dest / FILE.path).exists()


# (name, mode on the server, clock options, message fragment, most seconds the command may take)
SERVER_CASES = [
    ("trickle-passes-the-deadline", "trickle", ["--timeout", "2", "--deadline", "0.5"],
     "not done after 0.5 s (--deadline)", 3.0),
    ("stall-passes-the-timeout", "stall", ["--timeout", "0.3", "--deadline", "30"],
     "no bytes for 0.3 s (--timeout) after 10 of", 3.0),
    ("silent-server", "silent", ["--timeout", "0.3", "--deadline", "30"], "no answer for 0.3 s (--timeout)", 3.0),
    ("closes-early", "short", ["--timeout", "2"], f"the connection closed after {FILE.size // 10} of {FILE.size} bytes",
     3.0),
    ("http-404", "missing", ["--timeout", "2"], "HTTP 404 Not Found", 3.0),
]  # fmt: skip


@pytest.mark.parametrize("name,mode,clocks,message,most", SERVER_CASES, ids=[c[0] for c in SERVER_CASES])
def test_fetch_from_a_bad_server_is_one_line_and_leaves_no_part(
    server, tmp_path, capsys, name, mode, clocks, message, most
):
    dest = tmp_path / "data"
    rc, err, took = _fetch(capsys, dest, "--base-url", f"{server}/{mode}", *clocks)
    assert rc == 2
    line = _one_error_line(err)
    assert message in line and "cannot fetch humaneval" in line, line
    assert took < most, took
    _no_part(dest)


# (name, options, message fragment): refused before any connection
ARG_CASES = [
    ("base-url-no-scheme", ["--base-url", "127.0.0.1:8000/data"], "is not an http(s) URL"),
    ("base-url-typo-scheme", ["--base-url", "htp://127.0.0.1/data"], "is not an http(s) URL"),
    ("base-url-no-host", ["--base-url", "http:///data"], "is not an http(s) URL"),
    ("base-url-bad-port", ["--base-url", "http://127.0.0.1:99999/data"], "is not an http(s) URL"),
    ("base-url-port-not-a-number", ["--base-url", "http://127.0.0.1:port/data"], "is not an http(s) URL"),
    ("base-url-space", ["--base-url", "http://127.0.0.1/my data"], "is not an http(s) URL"),
    ("timeout-negative", ["--timeout", "-1"], "--timeout must be a positive number of seconds, got -1.0"),
    ("timeout-zero", ["--timeout", "0"], "--timeout must be a positive number of seconds"),
    ("timeout-nan", ["--timeout", "nan"], "--timeout must be a positive number of seconds"),
    ("deadline-zero", ["--deadline", "0"], "--deadline must be a positive number of seconds"),
    ("deadline-inf", ["--deadline", "inf"], "--deadline must be a positive number of seconds"),
]  # fmt: skip


@pytest.mark.parametrize("name,args,message", ARG_CASES, ids=[c[0] for c in ARG_CASES])
def test_fetch_refuses_a_bad_argument_in_one_line(tmp_path, capsys, monkeypatch, name, args, message):
    def no_network(*a, **k):
        raise AssertionError("a connection was opened for a refused argument")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    dest = tmp_path / "data"
    rc, err, _ = _fetch(capsys, dest, *args)
    assert rc == 2
    assert message in _one_error_line(err)
    assert not dest.exists()  # nothing created


def test_fetch_into_a_directory_where_the_file_goes(server, tmp_path, capsys):
    dest = tmp_path / "data"
    (dest / FILE.path).mkdir(parents=True)
    rc, err, _ = _fetch(capsys, dest, "--base-url", f"{server}/short")
    assert rc == 2
    line = _one_error_line(err)
    assert f"{dest / FILE.path} is a directory" in line and "move it away" in line
    assert (dest / FILE.path).is_dir() and not list(dest.rglob("*.part"))


def test_fetch_where_a_file_stands_in_for_the_folder(server, tmp_path, capsys):
    dest = tmp_path / "data"
    dest.mkdir()
    (dest / Path(FILE.path).parent).write_text("not a folder")
    rc, err, _ = _fetch(capsys, dest, "--base-url", f"{server}/short")
    assert rc == 2
    assert "cannot create" in _one_error_line(err)
    assert not list(dest.rglob("*.part"))


def test_an_interrupted_fetch_removes_its_part(tmp_path, monkeypatch):
    """Ctrl-C in the middle of a file: the interrupt goes on up, the `.part` file does not stay."""
    from dlmeval.data import fetch as fetching

    class _Resp:
        headers = {"Content-Length": str(FILE.size)}

        def __init__(self):
            self.calls = 0

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def read1(self, n):
            self.calls += 1
            if self.calls > 2:
                raise KeyboardInterrupt
            return b"x" * 100

    monkeypatch.setattr("urllib.request.urlopen", lambda *a, **k: _Resp())
    dest = tmp_path / "data"
    seen = []
    real_open = open

    def spy_open(path, *a, **k):
        seen.append(Path(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", spy_open)
    with pytest.raises(KeyboardInterrupt):
        fetching.fetch([FILE], dest, base_url="http://127.0.0.1:9")
    assert any(p.name.endswith(".part") for p in seen)  # the download did write a .part file
    assert not list(dest.rglob("*.part")) and not (dest / FILE.path).exists()
