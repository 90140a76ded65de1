"""Download catalogued data files (:mod:`dlmeval.data.catalog`) on explicit request, verifying their SHA-256.

A file is written to ``<path>.part`` beside its place, hashed while it streams, and moved into place only when its
size and SHA-256 equal the catalog's; otherwise the partial file is deleted and :class:`InputError` says what came
back. Each kept file is recorded in ``.dlmeval-sources.json`` of the data directory (the URL it came from, its
hash, when), which ``dlmeval data list`` shows. ``base_url`` fetches from a mirror that holds the files under
their data-directory paths (e.g. a copy of another machine's data directory served over HTTP).

Each file has two clocks (issue 32): ``timeout`` (``--timeout``), the longest wait for the connection or for the
next byte (a server that stops sending is cut after it), and ``deadline`` (``--deadline``), the most a whole file
may take (a server that trickles a byte now and then is cut when it passes). A failed or interrupted download
leaves no ``.part`` file; the next run starts that file again (the files are at most a few MB).

Written with :mod:`urllib.request` (standard library) rather than ``huggingface_hub`` / ``requests`` / ``pooch``:
the sources are plain files at fixed commits of GitHub repositories, and a hash check is all the verification they
need; pooch (over requests) has only a per-read timeout, so neither a stall timeout that a trickling server cannot
reset nor a deadline per file, which is why this module keeps its own read loop (``read1``: one receive per call,
so the clocks are checked between receives rather than after a 64 KB block that may never fill).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dlmeval.data.catalog import DataFile
from dlmeval.errors import InputError

SOURCES_FILE = ".dlmeval-sources.json"
BLOCK = 1 << 16
#: the default clocks: seconds without a byte (connecting or reading), seconds for a whole file
TIMEOUT = 60.0
DEADLINE = 600.0


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sources(root: Path) -> dict[str, dict]:
    """The fetch records of a data directory: ``{path: {"name", "url", "sha256", "fetched"}}``."""
    p = Path(root) / SOURCES_FILE
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def status(f: DataFile, root: Path | None, *, verify: bool = False) -> str:
    """``missing``, ``present`` (right size; with ``verify`` its hash checked: ``verified`` or ``modified``)."""
    if root is None:
        return "missing"
    p = Path(root) / f.path
    if not p.is_file():
        return "missing"
    if p.stat().st_size != f.size:
        return "modified"
    if verify:
        return "verified" if sha256_of(p) == f.sha256 else "modified"
    return "present"


@dataclass
class Fetched:
    file: DataFile
    path: Path
    action: str  # "fetched" or "present"
    url: str | None = None


def check_base_url(base_url: str | None) -> None:
    """A mirror URL must be ``http://HOST[:PORT][/PATH]`` or ``https://...`` (or ``file:///DIR``); else one line."""
    if base_url is None:
        return
    try:
        u = urllib.parse.urlsplit(base_url)
        port_ok = u.port is None or 0 < u.port < 65536
    except ValueError:  # a port that is not a number, a bad IPv6 literal
        u, port_ok = None, False
    ok = (
        u is not None
        and port_ok
        and not any(c.isspace() for c in base_url)
        and ((u.scheme in ("http", "https") and bool(u.hostname)) or (u.scheme == "file" and bool(u.path)))
    )
    if not ok:
        raise InputError(
            f"--base-url {base_url!r} is not an http(s) URL of a mirror; pass e.g. http://HOST:PORT/data (the "
            "files under their data-directory paths)"
        )


def check_seconds(value: float, option: str) -> float:
    """A clock setting: a positive, finite number of seconds; else one line naming ``option``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InputError(f"{option} must be a positive number of seconds, got {value!r}")
    return float(value)


def url_of(f: DataFile, base_url: str | None) -> str | None:
    if base_url:
        return base_url.rstrip("/") + "/" + f.path
    return f.url


def fetch(
    files: Iterable[DataFile],
    root: str | os.PathLike,
    *,
    base_url: str | None = None,
    timeout: float = TIMEOUT,
    deadline: float = DEADLINE,
    echo: Callable[[str], None] | None = None,
) -> list[Fetched]:
    """Download each of ``files`` into ``root`` unless it is there with the catalog's hash; returns what was done.
    ``timeout``: seconds without a byte before a file is given up; ``deadline``: seconds a whole file may take.
    The first file that cannot be fetched or does not match its hash raises InputError (files before it are
    kept: a rerun fetches only what is missing)."""
    root = Path(root)
    files = list(files)
    check_base_url(base_url)
    timeout = check_seconds(timeout, "--timeout")
    deadline = check_seconds(deadline, "--deadline")
    unfetchable = [f.name for f in files if url_of(f, base_url) is None]
    if unfetchable:
        raise InputError(
            f"{', '.join(unfetchable)}: no single public file to download (re-packed from NLTK's corpus archives; "
            "see dlmeval data list for the source); copy them from an existing data directory or pass --base-url"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the data directory {root}: {e.strerror or e}") from None
    out = []
    for f in files:
        dest = root / f.path
        if dest.exists() and not dest.is_file():
            raise InputError(
                f"cannot fetch {f.name}: {dest} is a directory (or another non-file); move it away and rerun "
                "`dlmeval data fetch`"
            )
        if dest.is_file() and dest.stat().st_size == f.size and sha256_of(dest) == f.sha256:
            out.append(Fetched(f, dest, "present"))
            continue
        url = url_of(f, base_url)
        if echo:
            echo(f"fetching {f.name} ({f.size / 1e6:.1f} MB) from {url}")
        _download(f, url, dest, timeout, deadline)
        _record(root, f, url)
        out.append(Fetched(f, dest, "fetched", url))
    return out


class _Clock(Exception):
    """A download that ran past one of its clocks (the message says which)."""


def _download(f: DataFile, url: str, dest: Path, timeout: float, deadline: float) -> None:
    """``url`` into ``dest`` through ``dest.part``, kept only with the catalog's size and hash; the ``.part`` file
    is removed on every failure (an error, a clock, Ctrl-C)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(
            f"cannot fetch {f.name}: cannot create {dest.parent} ({e.strerror or e}); a file may stand where a "
            "directory should"
        ) from None
    part = dest.with_name(dest.name + ".part")
    if part.exists() and not part.is_file():
        raise InputError(
            f"cannot fetch {f.name}: {part} is a directory; move it away and rerun `dlmeval data fetch`"
        )
    h = hashlib.sha256()
    n = 0
    declared = None
    kept = False
    start = time.monotonic()
    try:
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "dlmeval"})
            with urllib.request.urlopen(req, timeout=timeout) as resp, open(part, "wb") as fh:
                declared = resp.headers.get("Content-Length")
                while True:
                    if time.monotonic() - start > deadline:
                        raise _Clock(f"not done after {deadline:g} s (--deadline), {n} of {f.size} bytes in")
                    try:
                        block = resp.read1(BLOCK)
                    except TimeoutError:
                        raise _Clock(
                            f"no bytes for {timeout:g} s (--timeout) after {n} of {f.size}"
                        ) from None
                    if not block:
                        break
                    n += len(block)
                    if n > f.size:
                        break  # more bytes than the catalog's file: refused below without reading the rest
                    h.update(block)
                    fh.write(block)
            if time.monotonic() - start > deadline:
                raise _Clock(f"not done after {deadline:g} s (--deadline)")
        except _Clock as e:
            raise InputError(
                f"cannot fetch {f.name} from {url}: {e}; rerun `dlmeval data fetch` (or raise the limit)"
            ) from None
        except urllib.error.HTTPError as e:
            raise InputError(
                f"cannot fetch {f.name} from {url}: HTTP {e.code} {e.reason}; check the URL (or --base-url) and rerun "
                "`dlmeval data fetch`"
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            why = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            if isinstance(why, TimeoutError) or isinstance(e, TimeoutError):
                why = f"no answer for {timeout:g} s (--timeout)"
            raise InputError(
                f"cannot fetch {f.name} from {url}: {why}; check the network (or --base-url) and rerun "
                "`dlmeval data fetch`"
            ) from None
        got = h.hexdigest()
        if declared is not None and declared.isascii() and declared.isdigit() and n < int(declared):
            raise InputError(
                f"cannot fetch {f.name} from {url}: the connection closed after {n} of {declared} bytes; rerun "
                "`dlmeval data fetch`"
            )
        if n != f.size or got != f.sha256:
            size = f"{n} bytes" if n <= f.size else f"more than {f.size} bytes"
            raise InputError(
                f"{f.name} from {url} does not match dlmeval's record (sha256 {f.sha256[:16]}..., {f.size} bytes; "
                f"got {got[:16]}..., {size}): not saved"
            )
        try:
            os.replace(part, dest)
        except OSError as e:
            raise InputError(f"cannot fetch {f.name}: cannot write {dest} ({e.strerror or e})") from None
        kept = True
    finally:
        if not kept:
            part.unlink(missing_ok=True)


def _record(root: Path, f: DataFile, url: str) -> None:
    rec = sources(root)
    rec[f.path] = {
        "name": f.name,
        "url": url,
        "sha256": f.sha256,
        "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = root / (SOURCES_FILE + ".tmp")
    tmp.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, root / SOURCES_FILE)
