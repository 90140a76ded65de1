"""The texts of a Care sweep: prompt prefixes of exactly ``prefix_tokens`` tokens under a model's tokenizer, the
human reference texts MAUVE compares with, the digest of every data file read, and the generated text as it
follows its prefix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlmeval.errors import InputError
from dlmeval.protocols.care.spec import CareSpec


@dataclass(frozen=True)
class PromptItem:
    item_id: str
    ids: list[int]  # special prefix tokens (e.g. [CLS]) + exactly prefix_tokens content tokens
    text: str  # the prefix decoded without special tokens


def data_identity(spec: CareSpec, data_dir=None) -> dict[str, str]:
    """A digest of every data file the sweep reads (prompt / reference sources, downstream tasks), for the run
    configurations: item keys are positional (``webtext/17``), so changed data must make another run."""
    from dlmeval.data import tasks as T
    from dlmeval.data.paths import data_dir as resolve
    from dlmeval.data.paths import file_digest

    files = {"webtext": T.WEBTEXT_FILE, "lm1b": T.LM1B_FILE}
    used = [files[s] for s in dict.fromkeys(spec.generation.sources) if s in files]
    d = spec.downstream
    if d.enabled:
        tasks = (
            (T.ARC_CHALLENGE_FILE, d.arc.n),
            (T.HUMANEVAL_FILE, d.humaneval.n),
            (T.GSM8K_FILE, d.gsm8k.n),
        )
        used += [f for f, n in tasks if n]
    root = resolve(data_dir)
    return {str(f): file_digest(root / f) for f in used if (root / f).is_file()}


def source_texts(source: str, data_dir) -> list[str]:
    from dlmeval.data.tasks import load_lm1b_reference, load_webtext_reference

    loader = {"webtext": load_webtext_reference, "lm1b": load_lm1b_reference}[source]
    return [r.text for r in loader(data_dir)]


def special_prefix(model) -> list[int]:
    """The ids a family puts before a text ([CLS], <bos>, ...), without trailing EOS ids."""
    ids = model.encode("", add_special_tokens=True)
    eos = set(model.eos_token_ids)
    while ids and ids[-1] in eos:
        ids.pop()
    return ids


def build_prompts(model, source: str, n: int, prefix_tokens: int, data_dir=None) -> list[PromptItem]:
    """``n`` prefixes of exactly ``prefix_tokens`` content tokens from the first half of ``source``'s texts.

    ``webtext`` (documents of <= 61 words): the first documents that alone have ``prefix_tokens`` tokens, cut there.
    ``lm1b`` (single sentences): consecutive sentences joined by a space until there are enough tokens, cut there.
    Item ids name the first text used (``webtext/12``), so they are stable across models.
    """
    texts = source_texts(source, data_dir)
    pool = texts[: len(texts) // 2]
    special = special_prefix(model)
    out: list[PromptItem] = []
    i = 0
    while i < len(pool) and len(out) < n:
        start = i
        if source == "webtext":
            ids = model.encode(pool[i], add_special_tokens=False)
            i += 1
            if len(ids) < prefix_tokens:
                continue
        else:
            ids = []
            while i < len(pool) and len(ids) < prefix_tokens:
                ids += model.encode(pool[i], add_special_tokens=False)
                i += 1
            if len(ids) < prefix_tokens:
                break
        full = special + ids[:prefix_tokens]
        out.append(PromptItem(f"{source}/{start}", full, model.decode(full)))
    if len(out) < n:
        raise InputError(
            f"only {len(out)} {source} prefixes of {prefix_tokens} tokens are available for {getattr(model, 'name', '')}, "
            f"{n} were asked for; lower generation.n_prompts or generation.prefix_tokens"
        )
    return out


def build_references(source: str, n: int, words: int, data_dir=None) -> list[str]:
    """``n`` human reference texts of ``words`` whitespace words from the second half of ``source`` (disjoint from
    the prompts): consecutive texts joined by a space and cut at ``words`` words; model-independent."""
    texts = source_texts(source, data_dir)
    pool = texts[len(texts) // 2 :]
    out: list[str] = []
    buf: list[str] = []
    for t in pool:
        buf += t.split()
        if len(buf) >= words:
            out.append(" ".join(buf[:words]))
            buf = []
            if len(out) == n:
                return out
    raise InputError(
        f"the {source} reference pool gives only {len(out)} texts of {words} words; lower metrics.n_reference "
        "or metrics.reference_words"
    )


def continuation_text(model, prefix_ids: Sequence[int], gen_ids: Sequence[int], fallback: str) -> str:
    """The generated text exactly as it follows the decoded prefix (keeps a leading space; WordPiece pieces that
    glue onto the prefix keep no space)."""
    head = model.decode(list(prefix_ids))
    full = model.decode(list(prefix_ids) + list(gen_ids))
    if full.startswith(head):
        return full[len(head) :]
    return (" " + fallback) if fallback else ""


def model_label(model_spec: str) -> str:
    """The name a model has in the tables: the spec, with a path shortened to its last part
    (``llada:/models/LLaDA-8B-Base`` -> ``llada:LLaDA-8B-Base``)."""
    kind, sep, rest = model_spec.partition(":")
    if not sep or not rest:
        return model_spec
    return f"{kind}:{Path(rest.rstrip('/')).name or rest}"


__all__ = [
    "PromptItem",
    "build_prompts",
    "build_references",
    "continuation_text",
    "data_identity",
    "model_label",
    "source_texts",
    "special_prefix",
]
