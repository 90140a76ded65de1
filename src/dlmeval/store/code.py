"""The identity of the code behind a number (issue 32): a version from version control and a digest of the
package's files.

* :func:`code_version`: in a git checkout, the version setuptools-scm (a dependency) gives it
  (``0.1.1.dev12+g1a2b3c4d5``, with ``.dYYYYMMDD`` when the tree has uncommitted changes); else the version
  written at install time (``dlmeval/_version.py``, by setuptools-scm), else 0.1.0.
* :func:`source_digest`: SHA-256 over the relative path and bytes of every file of the installed package (code,
  specs, assets such as the stand-ins' weights; ``__pycache__`` left out). Computed once per process and cached
  on disk (``<dlmeval cache>/code-digest.json``) under a fingerprint of every file's path, size and modification
  time, so a command does not re-read 50 MB of assets each time.

Both are recorded in every run signature (``Signature.code``) and in each session of a run; neither is part of the
run id (a new commit would otherwise silently start every run over). A run opened by code with another source
digest is refused unless ``--allow-code-change`` (:data:`ALLOW_ENV`) is given, which the run records.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
#: set by ``dlmeval --allow-code-change``: a run made by other code may be resumed (the run records it)
ALLOW_ENV = "DLMEVAL_ALLOW_CODE_CHANGE"


#: written by setuptools-scm at install time with the git node and a date: the version is recorded on its own
#: (``code.version``), and a reinstall of the same sources must not give them another digest
_GENERATED = ("_version.py",)


def _files() -> list[Path]:
    return sorted(
        p
        for p in PACKAGE.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix not in (".pyc", ".pyo")
        and p.relative_to(PACKAGE).as_posix() not in _GENERATED
    )


@functools.cache
def source_digest() -> str:
    """The SHA-256 (hex) of the package's files (see the module docstring)."""
    files = _files()
    fp = hashlib.sha256()
    for p in files:
        st = p.stat()
        fp.update(f"{p.relative_to(PACKAGE).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    fingerprint = fp.hexdigest()
    cache = _cache_file()
    if cache is not None:
        try:
            kept = json.loads(cache.read_text())
            if kept.get(str(PACKAGE), {}).get("fingerprint") == fingerprint:
                return kept[str(PACKAGE)]["sha256"]
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            kept = {}
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(PACKAGE).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    digest = h.hexdigest()
    if cache is not None:
        try:
            kept = json.loads(cache.read_text()) if cache.exists() else {}
            if not isinstance(kept, dict):
                kept = {}
        except (OSError, ValueError):
            kept = {}
        kept[str(PACKAGE)] = {"fingerprint": fingerprint, "sha256": digest}
        try:
            tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(kept))
            os.replace(tmp, cache)
        except OSError:
            pass  # a read-only cache: the digest is recomputed next time
    return digest


def _cache_file() -> Path | None:
    try:
        from dlmeval.data.paths import cache_dir

        return cache_dir() / "code-digest.json"
    except OSError:
        return None


def _checkout_root() -> Path | None:
    """The root of the git checkout the package's sources are in (``src/dlmeval`` of a clone), or None."""
    root = PACKAGE.parent.parent
    if not (root / "pyproject.toml").exists() or not (root / ".git").exists():
        return None
    return root


@functools.cache
def code_version() -> str:
    """The version of the running code (see the module docstring)."""
    root = _checkout_root()
    if root is not None:
        try:
            from setuptools_scm import get_version

            return get_version(root=str(root), fallback_version="0.1.0")
        except Exception:  # noqa: BLE001 - no git on PATH or a broken checkout: the installed version below
            pass
    from dlmeval import __version__  # setuptools-scm's _version.py when installed, else the fallback

    return __version__


def code_identity() -> dict[str, str]:
    """``{"version": ..., "source_sha256": ...}`` of the running code."""
    return {"version": code_version(), "source_sha256": source_digest()}


def describe(code: dict | None) -> str:
    """``dlmeval 0.1.dev5+g1a2b3c4d (source 3f2a9c1d0b7e)``, or what is known of an older run's code."""
    if not code:
        return "code not recorded (a run made before dlmeval recorded its code)"
    return f"dlmeval {code.get('version', '?')} (source {str(code.get('source_sha256') or '?')[:12]})"


def allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "") not in ("", "0")


def check_same_code(run_id: str, before: dict | None, now: dict | None, allow: bool) -> str | None:
    """The one rule for adding results to a stored run (opening it again, importing a bundle of it): the same
    source digest, or ``allow`` (``--allow-code-change``), which returns the note the run records. Raises
    :class:`~dlmeval.errors.InputError` naming both identities otherwise."""
    from dlmeval.errors import InputError

    if (before or {}).get("source_sha256") == (now or {}).get("source_sha256"):
        return None
    if not allow:
        raise InputError(
            f"run {run_id} was made by {describe(before)}; this is {describe(now)}: adding to it would mix results "
            "of two code versions in one run; pass --allow-code-change to do it anyway (the run records it), or use "
            "another --store"
        )
    return (
        f"resumed by {describe(now)} with --allow-code-change; the run was made by {describe(before)}: results "
        "written before and after may differ"
    )
