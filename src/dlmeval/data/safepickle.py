"""Loading pickles that must hold plain data only (the BARTScore meta-evaluation files).

``pickle.load`` runs whatever a pickle asks for: a crafted file can call ``os.system`` while it is being read. The
BARTScore pickles hold only dicts, lists, strings and numbers, which the pickle machine builds from its own opcodes
without importing anything. Every code-running path in a pickle (REDUCE, BUILD, INST, OBJ, NEWOBJ, extension codes)
first needs a callable obtained through ``Unpickler.find_class``; :class:`RestrictedUnpickler` refuses every such
lookup, so nothing but built-in containers and scalars can come out of it.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

from dlmeval.errors import DataFormatError, InputError


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global: only dicts, lists, tuples, sets, strings, bytes, numbers,
    booleans and None can be loaded."""

    def __init__(self, file: io.BufferedIOBase, *, source: str) -> None:
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        raise DataFormatError(
            f"{self._source}: refused to load the pickle global {module}.{name}; dlmeval only loads pickles "
            "of plain data (dicts, lists, strings, numbers). Do not load this file with plain pickle: it may "
            "run code. Get a clean copy of the data (see shared/data/README.md)."
        )

    def persistent_load(self, pid: Any) -> Any:
        raise DataFormatError(
            f"{self._source}: refused a pickle persistent id ({pid!r}); only plain data loads"
        )


def _load(fh: io.BufferedIOBase, source: str) -> Any:
    try:
        return RestrictedUnpickler(fh, source=source).load()
    except DataFormatError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
    ) as e:
        # a truncated or corrupt file surfaces as any of these from the C unpickler
        raise DataFormatError(f"{source}: not a valid pickle file ({type(e).__name__}: {e})") from None


def safe_load_pickle(path: str | os.PathLike) -> Any:
    """Load a pickle of plain data from ``path``; raise DataFormatError (naming the file and the refused global)
    if it asks for any global, and InputError if the file does not exist."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"pickle file {p} does not exist; check the data directory (DLMEVAL_DATA or --data-dir)"
        )
    with p.open("rb") as fh:
        return _load(fh, str(p))


def safe_loads_pickle(data: bytes, *, source: str = "<bytes>") -> Any:
    """:func:`safe_load_pickle` for bytes in memory; ``source`` names them in error messages."""
    return _load(io.BytesIO(data), source)
