"""Family stand-ins that load the way real remote-code checkpoints (LLaDA, Dream) load: the building, caching and
training they share.

:func:`standin_checkpoint` writes a tiny checkpoint directory in the cache: ``config.json`` with ``auto_map``,
dlmeval's own model code (``assets/standins/*.py``, written from the families' published interfaces; no family
code is copied), the tokenizer files and ``model.safetensors``. :func:`load_standin` loads it with the family
loader (``load_llada`` / ``load_dream``: ``AutoConfig`` / ``AutoTokenizer`` / ``AutoModel`` with
``trust_remote_code=True``), so every test on ``tiny-llada`` / ``tiny-dream`` runs through the real load path.

What a directory holds is the family's own, in its module (:class:`RemoteCodeStandin`: its tokenizer files,
config and generation config, code files, alignment and loader, registered with :func:`register_remote_standin`;
what each reproduces of the real code, issue 12, is listed there); this module imports no family.

Weights: initialised under ``torch.random.fork_rng`` from the seed and then trained for a few seconds on
"successor" sequences (each word followed by the next word of :data:`TINY_WORDS`), with each family's own
alignment, so a masked token is predictable from its neighbours and a check can tell a right alignment from a
wrong one (``dlmeval check-model``). The directory is built once per (kind, seed, size, code) and reused.

Shipped weights (issue 32): trained weights depend on the CPU's instruction set (``ATEN_CPU_CAPABILITY``) and on the
thread count, so the default stand-ins (seed 0, 2 layers, hidden 32) ship their built ``model.safetensors`` in
``assets/standins/weights/`` with a manifest of SHA-256 digests (:mod:`dlmeval.models.standin_weights`); a stand-in
named in a signature is then the same bytes on every machine. The directory copies the shipped file instead of
training and checks its digest on every load. Other seeds and sizes are still trained here (with one thread, so
at least the thread count does not move them). ``python -m dlmeval.models.standin_weights`` regenerates the
shipped files by this training code.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dlmeval.models.tiny import TINY_WORDS, register_standin, word_level

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "standins"
#: bump when the builder changes what it writes
BUILD_VERSION = 1
#: the model vocabularies are padded to a multiple of this past the tokenizer (LLaDA: 126,464 rows for a 126,349
#: token tokenizer; Dream: 152,064 for 151,667)
VOCAB_MULTIPLE = 64
TRAIN_STEPS = 150


@dataclass(frozen=True)
class RemoteCodeStandin:
    """A family's ``auto_map`` stand-in ``kind``, as its module registers it (:func:`register_remote_standin`): the
    family's specifics; what every such directory shares (the padded vocabulary, the special ids, the files
    written) is this module's.

    ``tokenizer(out)`` writes the tokenizer files into the directory ``out`` and returns the vocabulary (token ->
    id); ``eos_token``, ``mask_token`` and ``bos_token`` are the texts of its special tokens; ``config(*,
    vocab_size, hidden, layers, eos, mask, bos)`` returns ``(config dict, generation config dict)`` for the padded
    model vocabulary (:func:`padded_vocab`) and those ids (the config's ``auto_map`` names the code files);
    ``code_files`` are the files of ``assets/standins`` copied into the directory (dlmeval's own code of the
    family's interface); ``logit_shift`` is the family's alignment it is trained with (1: the output at ``i - 1``
    predicts token ``i``, Dream's); ``load(path, *, device, dtype, trust_remote_code, name)`` is the family's
    loader; ``source`` (the module's file) and ``code_files`` are hashed into the cache key."""

    tokenizer: Callable[[Path], dict[str, int]]
    eos_token: str
    mask_token: str
    bos_token: str
    config: Callable[..., tuple[dict, dict]]
    code_files: tuple[str, ...]
    load: Callable[..., object]
    logit_shift: int = 0
    source: str = ""

    def files(self, out: Path, *, hidden: int, layers: int) -> tuple[dict[str, int], dict, dict, int, int]:
        """Write the tokenizer files into ``out``; ``(vocab, config dict, generation config dict, mask id, bos
        id)``."""
        vocab = self.tokenizer(out)
        eos, mask, bos = (vocab[t] for t in (self.eos_token, self.mask_token, self.bos_token))
        cfg, gen = self.config(
            vocab_size=padded_vocab(len(vocab)), hidden=hidden, layers=layers, eos=eos, mask=mask, bos=bos
        )
        return vocab, cfg, gen, mask, bos


#: kind -> its family's stand-in recipe, registered by the family's module
_RECIPES: dict[str, RemoteCodeStandin] = {}


def register_remote_standin(kind: str, recipe: RemoteCodeStandin) -> None:
    """Register stand-in ``kind`` (``tiny-<kind>``) and its loader for :func:`dlmeval.models.tiny.tiny_model`."""
    _RECIPES[kind] = recipe
    register_standin(kind, functools.partial(load_standin, kind, recipe.load))


def kinds() -> tuple[str, ...]:
    """The registered ``auto_map`` stand-ins (every family module imported first)."""
    from dlmeval.models.family import load_families

    load_families()  # the family modules register their stand-ins on import
    return tuple(_RECIPES)


def _recipe(kind: str) -> RemoteCodeStandin:
    if kind not in _RECIPES and kind not in kinds():
        raise ValueError(f"no stand-in for {kind!r}; choose {' or '.join(_RECIPES)}")
    return _RECIPES[kind]


def words() -> list[str]:
    """The stand-ins' words: :data:`~dlmeval.models.tiny.TINY_WORDS` without repeats, in order (every stand-in's
    vocabulary holds them, and its training sequences run through them)."""
    seen: list[str] = []
    for w in TINY_WORDS:
        if w not in seen:
            seen.append(w)
    return seen


def padded_vocab(n: int) -> int:
    """The model vocabulary of a stand-in whose tokenizer has ``n`` tokens: padded past it as the released
    checkpoints are (to the next multiple of :data:`VOCAB_MULTIPLE`, plus half of one), so that the rows no token
    names are exercised."""
    return -(-n // VOCAB_MULTIPLE) * VOCAB_MULTIPLE + VOCAB_MULTIPLE // 2


def fast_tokenizer(
    out: Path,
    specials: list[str],
    *,
    bos: str | None = None,
    template: tuple[str, str] | None = None,
    extra_words: tuple[str, ...] = (),
    specials_first: bool = True,
    **roles: Any,
):
    """Write a word-level fast tokenizer over :func:`words` (then ``extra_words``) and ``specials`` into ``out``
    (every stand-in with a fast tokenizer: the family passes its specifics); returns ``(tokenizer, vocab)``.

    The ids run through ``specials`` then the words (``specials_first=False``: the words first); ``template``:
    the ``(single, pair)`` templates of the post-processor (``("[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]")``),
    ``bos`` the token prepended when no template is given, neither: nothing added; ``roles`` are the tokenizer's
    special-token keywords (``eos_token=``, ``mask_token=``, ...; ``unk_token`` defaults to ``[UNK]``) and its
    ``chat_template``."""
    from tokenizers import decoders, processors
    from transformers import PreTrainedTokenizerFast

    if bos is not None and template is not None:
        raise ValueError("fast_tokenizer: give bos or template, not both")
    ws = words() + list(extra_words)
    ordered = list(dict.fromkeys(specials + ws if specials_first else ws + specials))
    vocab = {t: i for i, t in enumerate(ordered)}
    unk = roles.pop("unk_token", "[UNK]")
    tk = word_level(vocab, unk)
    if template is None and bos is not None:
        template = (f"{bos} $A", f"{bos} $A $B")
    if template is not None:
        single, pair = template
        named = dict.fromkeys(t for t in f"{single} {pair}".split() if not t.startswith("$"))
        tk.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=[(t, vocab[t]) for t in named]
        )
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    chat = roles.pop("chat_template", None)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token=unk, model_max_length=128, **roles)
    if chat:
        tok.chat_template = chat
    tok.save_pretrained(str(out))
    return tok, vocab


def _code_hash() -> str:
    h = hashlib.sha256(f"{BUILD_VERSION}:{TRAIN_STEPS}:{VOCAB_MULTIPLE}".encode())
    h.update(" ".join(TINY_WORDS).encode())
    recipes = [_RECIPES[k] for k in sorted(kinds())]
    for f in sorted({f for r in recipes for f in r.code_files}):
        h.update((ASSETS / f).read_bytes())
    for src in sorted({r.source for r in recipes if r.source}):
        h.update(Path(src).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def standin_checkpoint(
    kind: str, *, seed: int = 0, layers: int = 2, hidden: int = 32, root: Path | None = None
) -> Path:
    """The directory of the ``kind`` (a registered one, :func:`kinds`: ``llada`` / ``dream``) stand-in, built on
    first use (in ``root``, by default ``<dlmeval cache>/standins``)."""
    _recipe(kind)
    return cached_checkpoint(_build, _code_hash, kind, seed, layers, hidden, str(root) if root else None)


@lru_cache(maxsize=128)
def cached_checkpoint(
    build, code_hash, kind: str, seed: int, layers: int, hidden: int, root: str | None
) -> Path:
    """The directory ``tiny-<kind>-s<seed>-l<layers>-h<hidden>-<code_hash()>`` of a stand-in, written by
    ``build(kind, tmp, seed=, layers=, hidden=)`` the first time (:func:`built_once`); looked up once per process
    (every family's stand-ins use this)."""
    from dlmeval.models.standin_weights import install, shipped, verify

    stem = f"tiny-{kind}-s{seed}-l{layers}-h{hidden}"
    ship = shipped(stem)
    if ship is None:
        name = f"{stem}-{code_hash()}"
        return built_once(name, lambda tmp: build(kind, tmp, seed=seed, layers=layers, hidden=hidden), root)

    def from_shipped(tmp: Path) -> None:
        build(kind, tmp, seed=seed, layers=layers, hidden=hidden, weights=False)
        install(stem, tmp / "model.safetensors")

    name = f"{stem}-{code_hash()}-w{ship[:12]}"
    final = built_once(name, from_shipped, root)
    if not verify(stem, final / "model.safetensors"):  # a damaged cache entry: rebuilt from the shipped file
        shutil.rmtree(final, ignore_errors=True)
        final = built_once(name, from_shipped, root)
    return final


def built_once(name: str, build, root: str | None = None) -> Path:
    """The stand-in checkpoint directory ``name`` under ``root`` (default ``<dlmeval cache>/standins``), written
    by ``build(tmp_dir)`` the first time: into a temporary directory renamed into place, so a killed build or two
    processes building at once never leave a half-written checkpoint. ``name`` carries a hash of the code that
    builds it (every family's stand-ins use this)."""
    from dlmeval.data.paths import cache_dir

    base = Path(root) if root else cache_dir() / "standins"
    base.mkdir(parents=True, exist_ok=True)
    final = base / name
    if (final / "model.safetensors").exists():
        return final
    _sweep_parts(base)
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f"{final.name}.part-{os.getpid()}-"))
    try:
        build(tmp)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _sweep_parts(base: Path) -> None:
    """Remove the ``<name>.part-<pid>-*`` directories of builds whose process is gone (killed with SIGKILL or
    SIGTERM, where no ``finally`` runs); a live process's build is left alone."""
    for p in base.glob("*.part-*"):
        pid = p.name.rsplit(".part-", 1)[1].split("-", 1)[0]
        if not pid.isdigit():
            shutil.rmtree(p, ignore_errors=True)  # an older layout without the pid: no live owner to wait for
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


@contextlib.contextmanager
def single_thread():
    """A context in which torch runs one intra-op thread (the stand-ins' training: its result then does not
    depend on the machine's thread count; ``tiny-bert-chat``'s did)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def write_json(path: Path, obj) -> None:
    """``obj`` as indented JSON (the layout of every file the stand-ins write)."""
    path.write_text(json.dumps(obj, indent=1))


def _build(kind: str, out: Path, *, seed: int, layers: int, hidden: int, weights: bool = True) -> None:
    """Write the checkpoint directory; ``weights=False`` writes everything but ``model.safetensors`` (the caller
    puts the shipped file there)."""
    import torch
    from transformers import AutoConfig, AutoModel

    recipe = _recipe(kind)
    for f in recipe.code_files:
        shutil.copyfile(ASSETS / f, out / f)
    vocab, cfg, gen, mask, bos = recipe.files(out, hidden=hidden, layers=layers)
    write_json(out / "config.json", cfg)
    write_json(out / "generation_config.json", gen)
    if not weights:
        return
    config = AutoConfig.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
    with torch.random.fork_rng(devices=[]), single_thread():
        torch.manual_seed(seed)
        module = AutoModel.from_config(config, trust_remote_code=True)
        _train(module, kind, [vocab[w] for w in words()], mask=mask, bos=bos, seed=seed)
    module.eval()
    module.save_pretrained(str(out), safe_serialization=True)
    # save_pretrained rewrites config.json and generation_config.json; keep ours (the released files' layout)
    write_json(out / "config.json", cfg)
    write_json(out / "generation_config.json", gen)


def _train(module, kind: str, words: list[int], *, mask: int, bos: int, seed: int) -> None:
    """A few seconds of masked-token training on successor sequences, with the family's alignment (its
    ``logit_shift``)."""
    import torch

    shift = _recipe(kind).logit_shift
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3, weight_decay=0.0)
    w = torch.tensor(words)
    module.train()
    for _ in range(TRAIN_STEPS):
        start = torch.randint(0, len(words), (32, 1), generator=g)
        x0 = w[(start + torch.arange(15)) % len(words)]
        x0 = torch.cat([torch.full((32, 1), bos), x0], dim=1)
        rate = torch.rand(32, 1, generator=g) * 0.5 + 0.1
        masked = (torch.rand(x0.shape, generator=g) < rate) & (torch.arange(16) > 0)
        xt = torch.where(masked, torch.full_like(x0, mask), x0)
        z = module(input_ids=xt).logits
        if shift:
            z = torch.cat([z[:, :shift], z[:, :-shift]], dim=1)
        loss = torch.nn.functional.cross_entropy(z[masked], x0[masked])
        opt.zero_grad()
        loss.backward()
        opt.step()


def load_standin(kind: str, load, *, seed: int = 0, device=None, layers: int = 2, hidden: int = 32):
    """Build (once) and load the ``kind`` stand-in through ``load``, its family's loader (``load_llada``,
    ``load_dream``: the family's module passes it), as a real checkpoint loads.

    ``trust_remote_code=True`` is passed here because the code in the directory is dlmeval's own, written by
    :func:`standin_checkpoint`; user checkpoints still need ``--trust-remote-code``."""
    from dlmeval.models.base import device_map_of, resolve_device

    # the stand-ins load from checkpoint directories, so --device map places them as it places a real model
    placed = device if device_map_of(device) else str(resolve_device(device))
    path = str(standin_checkpoint(kind, seed=seed, layers=layers, hidden=hidden))
    m = load(path, device=placed, dtype="float32", trust_remote_code=True, name=f"tiny-{kind}")
    m.source = f"tiny:{kind}:seed={seed}"
    return m
