"""Import the BARTScore repository's benchmark files from a local checkout into the data directory.

A checkout of neulab/BARTScore (or any directory in its layout) holds ``{SUM,D2T,WMT}/<set>/data.pkl``; the shared
data directory keeps them under ``meta-eval/bartscore/<task>/<set>/data.pkl``. :func:`import_bartscore` finds every
such file, reads it with the restricted unpickler (plain data only, never ``pickle.load``), checks it against the
loader of a known set (all seven WMT19 pairs, the six SUM and three D2T sets) or against the generic layout of its
task for any other set, and copies it (atomically: a temporary file, then a rename). A file already in place with
other bytes is kept unless ``overwrite``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from dlmeval.data import paths
from dlmeval.data.bartscore import BARTSCORE_BENCHMARKS, BARTSCORE_ROOT
from dlmeval.data.safepickle import safe_load_pickle
from dlmeval.errors import DataFormatError, InputError

TASKS = ("SUM", "D2T", "WMT")
#: the fields one entry of each task's data.pkl must have
_FIELDS = {
    "SUM": ("src", "sys_summs"),
    "D2T": ("src", "sys_summ", "ref_summs"),
    "WMT": ("src", "ref", "better", "worse"),
}


@dataclass(frozen=True)
class Imported:
    name: str
    task: str
    source: Path
    dest: Path
    rows: int  # judged outputs (SUM / D2T) or DARR pairs (WMT)
    status: str  # "copied" | "unchanged" | "kept (differs; overwrite to replace)"
    known: bool  # a set dlmeval's loaders know (else: copied, not loadable by name)


def find_sets(checkout: str | os.PathLike) -> list[tuple[str, str, Path]]:
    """``(task, set name, data.pkl)`` for every ``{SUM,D2T,WMT}/<set>/data.pkl`` under ``checkout``."""
    root = Path(checkout).expanduser()
    if not root.is_dir():
        raise InputError(f"{root} is not a directory; pass a local checkout of neulab/BARTScore")
    found = [(t, p.parent.name, p) for t in TASKS for p in sorted((root / t).glob("*/data.pkl"))]
    if not found:
        raise InputError(
            f"{root} holds no SUM/*/data.pkl, D2T/*/data.pkl or WMT/*/data.pkl (BARTScore's layout)"
        )
    return found


def _check(task: str, name: str, path: Path) -> tuple[int, bool]:
    """Rows in the file, and whether a loader knows the set (raises DataFormatError on a malformed file)."""
    data = safe_load_pickle(path)
    if not isinstance(data, dict) or not data:
        raise DataFormatError(f"{path}: expected a non-empty dict at the top level ({task} data.pkl layout)")
    for key, entry in data.items():
        missing = [f for f in _FIELDS[task] if not isinstance(entry, dict) or f not in entry]
        if missing:
            raise DataFormatError(
                f"{path}: entry {key!r} lacks {missing} (BARTScore's {task} data.pkl layout)"
            )
    b = BARTSCORE_BENCHMARKS.get(name)
    if b is None or b.task != task:
        rows = sum(len(e["sys_summs"]) for e in data.values()) if task == "SUM" else len(data)
        return rows, False
    from dlmeval.data.bartscore import (
        _frame,  # the loader's own parser: the file loads exactly as it will be read
    )

    st = path.stat()
    return len(_frame(b.name, str(path.resolve()), st.st_mtime_ns, st.st_size, False)), True


def import_bartscore(
    checkout: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    *,
    names: list[str] | None = None,
    overwrite: bool = False,
) -> list[Imported]:
    """Copy every BARTScore set of ``checkout`` (or those in ``names``) into the data directory."""
    if data_dir is not None:
        Path(data_dir).mkdir(parents=True, exist_ok=True)  # a new data directory for the imported sets
    target_root = paths.data_dir(data_dir) / BARTSCORE_ROOT
    sets = find_sets(checkout)
    if names:
        want = {n.lower() for n in names}
        unknown = want - {n.lower() for _, n, _ in sets}
        if unknown:
            raise InputError(
                f"{checkout} has no set(s) {sorted(unknown)}; it has {', '.join(n for _, n, _ in sets)}"
            )
        sets = [s for s in sets if s[1].lower() in want]
    out = []
    for task, name, src in sets:
        rows, known = _check(task, name, src)  # every file is checked before any is copied
        out.append((task, name, src, rows, known))
    done = []
    for task, name, src, rows, known in out:
        dest = target_root / task / name / "data.pkl"
        if dest.is_file() and paths.file_digest(dest) == paths.file_digest(src):
            status = "unchanged"
        elif dest.is_file() and not overwrite:
            status = "kept (differs; overwrite to replace)"
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".pkl.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
            status = "copied"
        done.append(Imported(name, task, src, dest, rows, status, known))
    return done
