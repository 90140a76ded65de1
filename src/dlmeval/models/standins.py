"""Family stand-ins that load the way real LLaDA and Dream checkpoints load.

:func:`standin_checkpoint` writes a tiny checkpoint directory in the cache: ``config.json`` with ``auto_map``,
dlmeval's own model code (``assets/standins/*.py``, written from the families' published interfaces; no family
code is copied), the tokenizer files and ``model.safetensors``. :func:`load_standin` loads it with the family
loader (``load_llada`` / ``load_dream``: ``AutoConfig`` / ``AutoTokenizer`` / ``AutoModel`` with
``trust_remote_code=True``), so every test on ``tiny-llada`` / ``tiny-dream`` runs through the real load path.

What each stand-in reproduces (what the real code exposed, issue 12):

* LLaDA: the outer forward takes ``inputs_embeds`` (the inner model ``input_embeddings``) and raises on any other
  keyword; a 2-D attention mask; a fast tokenizer that adds BOS and a Llama-3-style chat template that starts
  with BOS; the mask token ``<|mdm_mask|>`` known to the config only (the tokenizer has no mask role); EoT
  ``<|eot_id|>`` only in the chat template; a model vocabulary padded past the tokenizer's.
* Dream: a 4-D boolean attention mask and position ids consumed as given (a 2-D mask is refused); the output at
  ``i - 1`` predicts token ``i``; a *slow* tokenizer (no offsets) that adds no BOS; ``<|im_end|>`` only in the chat
  template; ``diffusion_generate`` (Dream's sampler semantics); a config whose ``bos_token_id`` is the tokenizer's
  EOS (as Dream's); a padded model vocabulary.

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
import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import torch

from dlmeval.models.tiny import TINY_WORDS, word_level

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "standins"
CODE = {
    "llada": ("standin_layers.py", "configuration_tiny_llada.py", "modeling_tiny_llada.py"),
    "dream": (
        "standin_layers.py",
        "configuration_tiny_dream.py",
        "modeling_tiny_dream.py",
        "tokenization_tiny_dream.py",
    ),
}
#: bump when the builder changes what it writes
BUILD_VERSION = 1
#: the model vocabularies are padded to a multiple of this past the tokenizer (LLaDA: 126,464 rows for a 126,349
#: token tokenizer; Dream: 152,064 for 151,667)
VOCAB_MULTIPLE = 64
TRAIN_STEPS = 150

LLADA_SPECIALS = [
    "<|endoftext|>",
    "<|startoftext|>",
    "[UNK]",
    "<|mdm_mask|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
DREAM_SPECIALS = ["<|unk|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]

LLADA_CHAT = (
    "{% for m in messages %}{% set c = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
    "m['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set c = bos_token + c %}{% endif %}"
    "{{ c }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)
DREAM_CHAT = (
    "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nyou are a helpful assistant .<|im_end|>\\n' }}"
    "{% endif %}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _words() -> list[str]:
    seen: list[str] = []
    for w in TINY_WORDS:
        if w not in seen:
            seen.append(w)
    return seen


def _padded(n: int) -> int:
    return -(-n // VOCAB_MULTIPLE) * VOCAB_MULTIPLE + VOCAB_MULTIPLE // 2


def _code_hash() -> str:
    h = hashlib.sha256(f"{BUILD_VERSION}:{TRAIN_STEPS}:{VOCAB_MULTIPLE}".encode())
    h.update(" ".join(TINY_WORDS).encode())
    for f in sorted({f for fs in CODE.values() for f in fs}):
        h.update((ASSETS / f).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def standin_checkpoint(
    kind: str, *, seed: int = 0, layers: int = 2, hidden: int = 32, root: Path | None = None
) -> Path:
    """The directory of the ``kind`` (``llada`` / ``dream``) stand-in, built on first use (in ``root``, by default
    ``<dlmeval cache>/standins``)."""
    if kind not in CODE:
        raise ValueError(f"no stand-in for {kind!r}; choose llada or dream")
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
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1))


def _llada_tokenizer(out: Path) -> dict[str, int]:
    from tokenizers import decoders, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(_words() + LLADA_SPECIALS)}
    tk = word_level(vocab)
    tk.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A",
        pair="<|startoftext|> $A $B",
        special_tokens=[("<|startoftext|>", vocab["<|startoftext|>"])],
    )
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token="[UNK]",
        additional_special_tokens=["<|mdm_mask|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        model_max_length=128,
    )
    tok.chat_template = LLADA_CHAT
    tok.save_pretrained(str(out))
    return vocab


def _dream_tokenizer(out: Path) -> dict[str, int]:
    vocab = {t: i for i, t in enumerate(_words() + DREAM_SPECIALS)}
    _write_json(out / "vocab.json", vocab)
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "TinyDreamTokenizer",
            "auto_map": {"AutoTokenizer": ["tokenization_tiny_dream.TinyDreamTokenizer", None]},
            "add_bos_token": False,
            "bos_token": "<|beginoftext|>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "mask_token": "<|mask|>",
            "unk_token": "<|unk|>",
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "chat_template": DREAM_CHAT,
            "model_max_length": 128,
            "clean_up_tokenization_spaces": False,
        },
    )
    return vocab


def _build(kind: str, out: Path, *, seed: int, layers: int, hidden: int, weights: bool = True) -> None:
    """Write the checkpoint directory; ``weights=False`` writes everything but ``model.safetensors`` (the caller
    puts the shipped file there)."""
    from transformers import AutoConfig, AutoModel

    for f in CODE[kind]:
        shutil.copyfile(ASSETS / f, out / f)
    if kind == "llada":
        vocab = _llada_tokenizer(out)
        v = _padded(len(vocab))
        eos, mask, bos = vocab["<|endoftext|>"], vocab["<|mdm_mask|>"], vocab["<|startoftext|>"]
        cfg = {
            "architectures": ["TinyLLaDAModelLM"],
            "auto_map": {
                "AutoConfig": "configuration_tiny_llada.TinyLLaDAConfig",
                "AutoModel": "modeling_tiny_llada.TinyLLaDAModelLM",
                "AutoModelForCausalLM": "modeling_tiny_llada.TinyLLaDAModelLM",
            },
            "model_type": "llada",
            "d_model": hidden,
            "n_heads": 4,
            "n_kv_heads": 4,
            "n_layers": layers,
            "mlp_hidden_size": 2 * hidden,
            "vocab_size": v,
            "embedding_size": v,
            "max_sequence_length": 128,
            "mask_token_id": mask,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "use_cache": False,
            "tie_word_embeddings": False,
        }
        gen = {"bos_token_id": bos, "eos_token_id": eos}
    else:
        vocab = _dream_tokenizer(out)
        v = _padded(len(vocab))
        eos, mask, bos = vocab["<|endoftext|>"], vocab["<|mask|>"], vocab["<|beginoftext|>"]
        cfg = {
            "architectures": ["TinyDreamModel"],
            "auto_map": {
                "AutoConfig": "configuration_tiny_dream.TinyDreamConfig",
                "AutoModel": "modeling_tiny_dream.TinyDreamModel",
            },
            "model_type": "Dream",
            "vocab_size": v,
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 128,
            "mask_token_id": mask,
            "bos_token_id": eos,  # Dream's config names <|endoftext|> as BOS; its tokenizer's BOS is <|beginoftext|>
            "eos_token_id": eos,
            "pad_token_id": eos,
            "tie_word_embeddings": False,
        }
        gen = {
            "alg": "origin",
            "alg_temp": None,
            "eps": 0.001,
            "steps": 512,
            "mask_token_id": None,
            "bos_token_id": eos,
            "eos_token_id": eos,
            "pad_token_id": eos,
        }
    _write_json(out / "config.json", cfg)
    _write_json(out / "generation_config.json", gen)
    if not weights:
        return
    config = AutoConfig.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
    with torch.random.fork_rng(devices=[]), single_thread():
        torch.manual_seed(seed)
        module = AutoModel.from_config(config, trust_remote_code=True)
        _train(module, kind, [vocab[w] for w in _words()], mask=mask, bos=bos, seed=seed)
    module.eval()
    module.save_pretrained(str(out), safe_serialization=True)
    # save_pretrained rewrites config.json and generation_config.json; keep ours (the released files' layout)
    _write_json(out / "config.json", cfg)
    _write_json(out / "generation_config.json", gen)


def _train(module, kind: str, words: list[int], *, mask: int, bos: int, seed: int) -> None:
    """A few seconds of masked-token training on successor sequences, with the family's alignment."""
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
        if kind == "dream":
            z = torch.cat([z[:, :1], z[:, :-1]], dim=1)
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
