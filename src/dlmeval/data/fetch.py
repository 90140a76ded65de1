"""Download catalogued data files (:mod:`dlmeval.data.catalog`) on explicit request, verifying their SHA-256.

A file is written to ``<path>.part`` beside its place, hashed while it streams, and moved into place only when its
size and SHA-256 equal the catalog's; otherwise the partial file is deleted and :class:`InputError` says what came
back. Each kept file is recorded in ``.dlmeval-sources.json`` of the data directory (the URL it came from, its
hash, when), which ``dlmeval data list`` shows. ``base_url`` fetches from a mirror that holds the files under
their data-directory paths (e.g. a copy of another machine's data directory served over HTTP).

Written with :mod:`urllib.request` (standard library) rather than ``huggingface_hub`` / ``requests``: the sources
are plain files at fixed commits of GitHub repositories, and a hash check is all the verification they need.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dlmeval.data.catalog import DataFile
from dlmeval.errors import InputError

SOURCES_FILE = ".dlmeval-sources.json"
BLOCK = 1 << 16


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


def url_of(f: DataFile, base_url: str | None) -> str | None:
    if base_url:
        return base_url.rstrip("/") + "/" + f.path
    return f.url


def fetch(
    files: Iterable[DataFile],
    root: str | os.PathLike,
    *,
    base_url: str | None = None,
    timeout: float = 60.0,
    echo: Callable[[str], None] | None = None,
) -> list[Fetched]:
    """Download each of ``files`` into ``root`` unless it is there with the catalog's hash; returns what was done.
    The first file that cannot be fetched or does not match its hash raises InputError (files before it are
    kept: a rerun fetches only what is missing)."""
    root = Path(root)
    files = list(files)
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
        if dest.is_file() and dest.stat().st_size == f.size and sha256_of(dest) == f.sha256:
            out.append(Fetched(f, dest, "present"))
            continue
        url = url_of(f, base_url)
        if echo:
            echo(f"fetching {f.name} ({f.size / 1e6:.1f} MB) from {url}")
        _download(f, url, dest, timeout)
        _record(root, f, url)
        out.append(Fetched(f, dest, "fetched", url))
    return out


def _download(f: DataFile, url: str, dest: Path, timeout: float) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    n = 0
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "dlmeval"})
        with urllib.request.urlopen(req, timeout=timeout) as resp, open(part, "wb") as fh:
            while block := resp.read(BLOCK):
                n += len(block)
                if n > f.size:
                    break  # more bytes than the catalog's file: refused below without reading the rest
                h.update(block)
                fh.write(block)
    except (urllib.error.URLError, OSError) as e:
        part.unlink(missing_ok=True)
        why = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise InputError(
            f"cannot fetch {f.name} from {url}: {why}; check the network (or --base-url) and rerun "
            "`dlmeval data fetch`"
        ) from None
    got = h.hexdigest()
    if n != f.size or got != f.sha256:
        part.unlink(missing_ok=True)
        size = f"{n} bytes" if n <= f.size else f"more than {f.size} bytes"
        raise InputError(
            f"{f.name} from {url} does not match dlmeval's record (sha256 {f.sha256[:16]}..., {f.size} bytes; "
            f"got {got[:16]}..., {size}): not saved"
        )
    os.replace(part, dest)


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
