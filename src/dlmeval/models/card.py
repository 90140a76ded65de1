"""Model cards: the ``README.md`` that makes a saved model or adapter directory a standard Hugging Face one.

Every directory dlmeval writes (a LoRA adapter from ``dlmeval train``, the default model's export) gets a card: a
YAML header the hub reads (``library_name``, ``base_model``, ``tags``, ``license``) and a body that states the
dlmeval version that wrote it, how to load it, and every setting (the same JSON as ``dlmeval_train.json`` /
the safetensors metadata). The card is not part of an adapter's digest (config and weights only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD = "README.md"


def write_model_card(
    directory: str | Path,
    *,
    kind: str,
    settings: dict[str, Any],
    base_model: str | None = None,
    license: str = "apache-2.0",
    usage: str = "",
) -> Path:
    """Write ``directory/README.md``; ``kind`` is ``adapter`` (a PEFT LoRA adapter) or ``model``."""
    from dlmeval import __version__

    lib = "peft" if kind == "adapter" else "transformers"
    head = ["---", f"library_name: {lib}", f"license: {license}", "tags:", "- dlmeval", "- masked-diffusion"]
    if base_model:
        head.append(f"base_model: {json.dumps(str(base_model))}")
    head.append("---")
    what = "LoRA adapter" if kind == "adapter" else "masked diffusion language model"
    body = [
        "",
        f"# {Path(directory).name}",
        "",
        f"A {what} written by dlmeval {__version__} (https://pypi.org/project/dlmeval/).",
        "",
        "## How to load",
        "",
        "```python",
        usage.strip()
        or (
            "from peft import PeftModel\n# base = the model named in the settings below\n"
            f"model = PeftModel.from_pretrained(base, {str(Path(directory).name)!r})"
            if kind == "adapter"
            else f"from transformers import AutoModelForMaskedLM\nmodel = AutoModelForMaskedLM.from_pretrained({str(Path(directory).name)!r})"
        ),
        "```",
        "",
        "## Settings",
        "",
        f"dlmeval version: {__version__}",
        "",
        "```json",
        json.dumps(settings, indent=2, sort_keys=True, default=str),
        "```",
        "",
    ]
    path = Path(directory) / CARD
    path.write_text("\n".join(head + body), encoding="utf-8")
    return path
