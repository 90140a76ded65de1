"""The English training corpus (``corpus/*.jsonl``, one ``{"text": ...}`` document per line) and its fixed split."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dlmeval.data.paths import data_dir
from dlmeval.errors import DataFormatError


def is_heldout(text: str, percent: int = 2) -> bool:
    """The fixed held-out split: a document is held out when sha1(text) mod 100 < percent."""
    return int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16) % 100 < percent


def load_corpus(
    root: str | Path | None = None, *, split: str = "train", heldout_percent: int = 2
) -> list[str]:
    """Documents of every ``corpus/*.jsonl`` file, sorted by file name, in file order; ``split`` is train|heldout|all."""
    base = Path(root) if root else data_dir() / "corpus"
    files = sorted(base.glob("*.jsonl"))
    if not files:
        raise DataFormatError(f"no *.jsonl files under {base}")
    docs: list[str] = []
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)["text"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise DataFormatError(f"{f}:{n}: not a JSON object with a 'text' field ({e})") from None
                if not isinstance(text, str) or not text.strip():
                    continue
                held = is_heldout(text, heldout_percent)
                if split == "all" or (split == "heldout") == held:
                    docs.append(text)
    return docs
