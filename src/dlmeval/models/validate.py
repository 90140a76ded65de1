"""Checks of a checkpoint directory that every family's loader runs before it builds anything (issue 32): each
failure is one :class:`~dlmeval.errors.CheckpointError` line naming the file that is missing or disagrees and what
to do, instead of a traceback from deep inside transformers or an ``IndexError`` in the first forward pass.

* :func:`check_dir`: the directory itself, ``config.json`` (a JSON object), the weights (``model.safetensors``,
  ``pytorch_model.bin`` or a sharded index whose shards are there), the tokenizer files, and the code files a
  config's ``auto_map`` names; a family passes what it needs (:class:`Needs`);
* :func:`load_tokenizer`: ``AutoTokenizer.from_pretrained`` with whatever it raises turned into one line;
* :func:`check_ids_fit`: the special ids the adapter feeds to the network (mask, pad, BOS) inside the embedding
  table (a tokenizer with an added token the weights were never resized for);
* :func:`from_pretrained_checked`: the network loaded with transformers' loading report, refusing weights that
  do not fit the config's class (a size mismatch, parameters the checkpoint lacks, tensors the class has no place
  for: a Qwen2 state dict under a LLaMA config loses its q/k/v biases without a word otherwise).

Nothing here knows a family: each family module calls these with its own label, spec prefix and facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlmeval.errors import CheckpointError

#: files that hold a checkpoint's weights (one suffices; an index names its shards)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
#: files that hold a tokenizer's vocabulary (a fast tokenizer's tokenizer.json, sentencepiece, BPE or WordPiece)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "vocab.txt",
)
#: the fix named when files are missing
COPY_FIX = "copy them from the released checkpoint into the directory"


#: the transformers releases the LLaDA and Dream remote code runs on (pinned in pyproject.toml; docs/models.md):
#: 5.x fails inside both families' code, 4.55 and older do not take ``dtype=``
SUPPORTED_TRANSFORMERS = ">=4.56,<4.58"


def transformers_status() -> tuple[str, bool]:
    """``(installed version, whether it is inside SUPPORTED_TRANSFORMERS)``, read from the installed package's
    metadata (importing transformers costs seconds; ``dlmeval models`` prints this line, #36)."""
    from importlib.metadata import version

    from packaging.specifiers import SpecifierSet

    v = version("transformers")
    return v, v in SpecifierSet(SUPPORTED_TRANSFORMERS)


@dataclass(frozen=True)
class Needs:
    """What a family's directory must hold besides ``config.json``."""

    weights: bool = True
    tokenizer: bool = True
    code: bool = False  # the modules a config's auto_map names (remote-code families)


def _where(label: str, path: Path | str) -> str:
    return f"{label} checkpoint {path}"


def read_config_file(path: Path | str, label: str) -> dict:
    """``config.json`` of ``path`` as a dict; missing, not a file, not JSON or not an object: one line."""
    d = Path(path)
    f = d / "config.json"
    if not f.exists():
        raise CheckpointError(
            f"{_where(label, d)}: no config.json; pass the directory of a released checkpoint (config.json, "
            "weights and tokenizer files)"
        )
    if not f.is_file():
        raise CheckpointError(f"{_where(label, d)}: config.json is not a file; replace it with the release's")
    try:
        cfg = json.loads(f.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(
            f"{_where(label, d)}: config.json is not UTF-8 text; replace it with the release's"
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"{_where(label, d)}: config.json is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "replace it with the release's"
        ) from None
    if not isinstance(cfg, dict):
        raise CheckpointError(
            f"{_where(label, d)}: config.json holds a JSON {type(cfg).__name__}, not an object; replace it with "
            "the release's"
        )
    return cfg


def _weights_problem(d: Path) -> str | None:
    present = [n for n in WEIGHT_FILES if (d / n).is_file()]
    if not present:
        return "no weights (model.safetensors, pytorch_model.bin or a sharded *.index.json)"
    index = next((n for n in present if n.endswith(".index.json")), None)
    if index and len(present) == 1:
        try:
            shards = sorted(set(json.loads((d / index).read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return f"{index} is not a weight index (no weight_map)"
        missing = [s for s in shards if not (d / str(s)).is_file()]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            return f"{index} names weight shard {missing[0]}{more}, which is not there"
    return None


def _tokenizer_problem(d: Path) -> str | None:
    if any((d / n).is_file() for n in TOKENIZER_FILES) or any(d.glob("*.tiktoken")):
        return None
    return "no tokenizer files (tokenizer.json, tokenizer.model, vocab.json or vocab.txt, with tokenizer_config.json)"


def _code_problem(d: Path, cfg: Mapping) -> str | None:
    auto = cfg.get("auto_map")
    if not isinstance(auto, Mapping):
        return None
    missing = []
    for ref in auto.values():
        for r in ref if isinstance(ref, (list, tuple)) else [ref]:
            if not isinstance(r, str) or "--" in r or "." not in r:
                continue  # a hub reference ("repo--module.Class") or None: not a local file
            f = r.rsplit(".", 1)[0].replace(".", "/") + ".py"
            if not (d / f).is_file() and f not in missing:
                missing.append(f)
    if missing:
        return f"config.json's auto_map names {' and '.join(missing)}, not there (the model code *.py files)"
    return None


def check_dir(path: str | Path, label: str, needs: Needs = Needs()) -> dict:
    """Check a local checkpoint directory for what a family needs (see the module doc); returns its
    ``config.json``. Everything missing is named in the one line."""
    d = Path(path)
    if not d.exists():
        raise CheckpointError(f"{_where(label, d)}: no such directory")
    if not d.is_dir():
        raise CheckpointError(f"{_where(label, d)}: is a file; pass the checkpoint's directory")
    cfg = read_config_file(d, label)
    problems = [
        p
        for p in (
            _weights_problem(d) if needs.weights else None,
            _tokenizer_problem(d) if needs.tokenizer else None,
            _code_problem(d, cfg) if needs.code else None,
        )
        if p
    ]
    if problems:
        raise CheckpointError(f"{_where(label, d)}: {'; '.join(problems)}; {COPY_FIX}")
    return cfg


def check_model_type(
    cfg: Mapping, allowed: Sequence[str], path: str | Path, label: str, hint: str = ""
) -> str:
    """The config's ``model_type``, which must contain one of ``allowed``; else one line naming it and ``hint``."""
    mt = str(cfg.get("model_type", "") or "")
    if not any(a in mt.lower() for a in allowed):
        what = f"a {mt!r}" if mt else "no model_type in its config.json, not a"
        hint = hint or "use the spec of its family (see `dlmeval models`)"
        raise CheckpointError(
            f"{path} is {what} model{'' if not mt else ','} not {label} ({' / '.join(allowed)}); {hint}"
        )
    return mt


def load_tokenizer(path: str | Path, label: str, **kw: Any):
    """``AutoTokenizer.from_pretrained(path, **kw)``; any failure is one line naming the tokenizer files."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path), **kw)
    except Exception as e:  # transformers raises OSError, ValueError, TypeError, ImportError, ... here
        raise CheckpointError(
            f"{_where(label, path)}: the tokenizer files cannot be read ({type(e).__name__}: {first_line(e)}); "
            f"replace tokenizer*.json and the vocabulary files with the release's"
        ) from None
    if isinstance(tok, bool) or not callable(getattr(tok, "convert_tokens_to_ids", None)):
        raise CheckpointError(
            f"{_where(label, path)}: no tokenizer could be built from its files; {COPY_FIX}"
        )
    return tok


def embedding_rows(cfg: Mapping) -> int | None:
    """The number of rows of the input embedding a config declares (``embedding_size`` where a family pads it,
    else ``vocab_size``), or None."""
    for key in ("embedding_size", "vocab_size"):
        v = cfg.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def check_ids_fit(
    ids: Mapping[str, int | None], rows: int | None, path: str | Path, label: str, *, tokenizer: Any = None
) -> None:
    """Every named id (``{"mask id": 114, ...}``) inside ``[0, rows)``; else one line naming the id, its token and
    the table (the tokenizer has tokens the weights were never resized for)."""
    if rows is None:
        return
    for what, tid in ids.items():
        if tid is None:
            continue
        if not 0 <= int(tid) < rows:
            tok = ""
            if tokenizer is not None:
                try:
                    tok = f" ({tokenizer.convert_ids_to_tokens(int(tid))})"
                except Exception:  # an id the tokenizer does not know either
                    tok = ""
            raise CheckpointError(
                f"{_where(label, path)}: the {what} {tid}{tok} is past the embedding table ({rows} rows, "
                "config.json vocab_size): the tokenizer has tokens the weights were not resized for; use the "
                "tokenizer files released with these weights"
            )


#: parameter names transformers reports as missing that hold no learned weights
_BUFFERS = ("rotary_emb.inv_freq", "position_ids")


def from_pretrained_checked(auto_cls: Any, path: str | Path, label: str, *, strict: bool = True, **kw: Any):
    """``auto_cls.from_pretrained(path, **kw)`` with its loading report: weights of the wrong shape, parameters the
    checkpoint lacks (they would stay random) or, with ``strict``, tensors the config's class has no place for are
    one line naming the first and the config to fix. Returns ``(module, notes)``: with ``strict=False`` unused
    tensors are a note instead (remote-code families, whose classes we do not know)."""
    try:
        module, info = auto_cls.from_pretrained(str(path), output_loading_info=True, **kw)
    except RuntimeError as e:
        if "size mismatch" in str(e):
            which = next(ln.strip() for ln in str(e).splitlines() if "size mismatch" in ln)
            raise CheckpointError(
                f"{_where(label, path)}: a weight's shape does not match config.json ({which[:240]}); the "
                "config and the weights come from different checkpoints: use the release's config.json"
            ) from None
        raise
    missing = [k for k in info.get("missing_keys", []) if not k.endswith(_BUFFERS)]
    unexpected = [k for k in info.get("unexpected_keys", []) if not k.endswith(_BUFFERS)]
    mismatched = list(info.get("mismatched_keys", []))
    cls = type(module).__name__
    if mismatched:
        raise CheckpointError(
            f"{_where(label, path)}: weight {mismatched[0][0] if isinstance(mismatched[0], tuple) else mismatched[0]} "
            f"has another shape than {cls} of config.json expects; use the release's config.json"
        )
    if missing:
        raise CheckpointError(
            f"{_where(label, path)}: the weights lack {missing[0]}"
            + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
            + f" that {cls} (config.json) needs, so they would stay random: the config's model_type or the weights "
            "are wrong; use the release's files"
        )
    notes = []
    if unexpected:
        text = (
            f"{_where(label, path)}: the weights hold {unexpected[0]}"
            + (f" and {len(unexpected) - 1} more tensors" if len(unexpected) > 1 else "")
            + f" that {cls} (config.json) has no place for"
        )
        if strict:
            raise CheckpointError(
                text + ": the config's model_type does not match the weights; use the release's config.json"
            )
        notes.append(text + "; they are not used")
    return module, notes


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
