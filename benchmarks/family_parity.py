"""Parity of dlmeval's samplers with the families' own code at temperature 0 (docs/models.md, issue 21).

The families' files are read from where you put them (fetched from their published repositories; nothing of them
is in dlmeval): ``--dream-code DIR`` holds Dream's ``modeling_dream.py``, ``configuration_dream.py`` and
``generation_utils.py``; ``--llada-generate FILE`` is LLaDA's ``generate.py``. A tiny Dream checkpoint is built from
the Dream files (hidden 32, 2 layers, the Dream stand-in's tokenizer, 150 training steps on successor sequences,
non-zero q/k/v biases) in ``--out``; LLaDA's ``generate`` runs on ``tiny-llada``. Prints tokens equal per setting.

    python benchmarks/family_parity.py --dream-code /path/dream-files --llada-generate /path/generate.py
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import itertools
import json
import shutil
from pathlib import Path

import torch

PROMPTS = ["the a an of to", "one two three", "he she they we you i", "big small good"]


def build_dream(code: Path, out: Path) -> Path:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from dlmeval.models.standins import _train, standin_checkpoint, words

    out.mkdir(parents=True, exist_ok=True)
    for f in ("modeling_dream.py", "configuration_dream.py", "generation_utils.py"):
        shutil.copyfile(code / f, out / f)
    sd = standin_checkpoint("dream")
    for f in ("vocab.json", "tokenizer_config.json", "tokenization_tiny_dream.py"):
        shutil.copyfile(sd / f, out / f)
    s = json.loads((sd / "config.json").read_text())
    cfg = {
        "architectures": ["DreamModel"],
        "auto_map": {
            "AutoConfig": "configuration_dream.DreamConfig",
            "AutoModel": "modeling_dream.DreamModel",
        },
        "model_type": "Dream",
        "vocab_size": s["vocab_size"],
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "mask_token_id": s["mask_token_id"],
        "bos_token_id": s["eos_token_id"],
        "eos_token_id": s["eos_token_id"],
        "pad_token_id": s["eos_token_id"],
        "tie_word_embeddings": False,
        "rope_theta": 1000000.0,
    }
    gen = json.loads((sd / "generation_config.json").read_text())
    (out / "config.json").write_text(json.dumps(cfg))
    (out / "generation_config.json").write_text(json.dumps(gen))
    config = AutoConfig.from_pretrained(str(out), trust_remote_code=True)
    tok = AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m = AutoModel.from_config(config, trust_remote_code=True)
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear) and mod.bias is not None:
                torch.nn.init.normal_(mod.bias, 0.0, 0.05)
        ids = [tok.convert_tokens_to_ids(w) for w in words()]
        _train(m, "dream", ids, mask=s["mask_token_id"], bos=tok.bos_token_id, seed=0)
    m.eval().save_pretrained(str(out), safe_serialization=True)
    (out / "config.json").write_text(json.dumps(cfg))  # save_pretrained rewrites both
    (out / "generation_config.json").write_text(json.dumps(gen))
    return out


def dream_parity(path: Path, length: int = 12) -> None:
    from dlmeval.models import load_diffusion
    from dlmeval.models.family import family_of
    from dlmeval.sampling import RemaskingSampler, SamplerConfig
    from dlmeval.sampling.checks import no_mass_hook

    m = load_diffusion(f"dream:{path}", trust_remote_code=True)
    fam = family_of(m)
    enc = [m.encode(p) for p in PROMPTS]
    ids, attn = m.pad(enc)
    gc = copy.deepcopy(m.module.generation_config)
    if getattr(gc, "mask_token_id", None) is None:
        gc.mask_token_id = m.mask_token_id
    totals: dict[tuple, list[int]] = {}
    grid = itertools.product(
        (True, False), ("maskgit_plus", "topk_margin", "entropy"), (1, 3, 6, 12), (None, 5), (None, 0.9)
    )
    for hook, alg, steps, top_k, top_p in grid:
        kw = dict(generation_config=gc, attention_mask=attn, max_new_tokens=length, steps=steps, alg=alg)
        kw.update(temperature=0.0, top_p=top_p, top_k=top_k, alg_temp=None)
        if hook:
            kw["generation_logits_hook_func"] = no_mass_hook(m)
        with torch.no_grad():
            out = m.module.diffusion_generate(ids, **kw)
        theirs = getattr(out, "sequences", out)[:, ids.shape[1] :]
        cfg = SamplerConfig(
            length=length,
            steps=steps,
            strategy=fam.strategy_for(alg),
            temperature=0.0,
            top_p=top_p or 1.0,
            top_k=top_k,
            stop_at_eos=False,
        )
        res = RemaskingSampler(m, cfg).sample(enc, item_ids=[str(i) for i in range(len(enc))])
        eq = int((torch.as_tensor(res.tokens)[:, :length] == theirs).sum())
        t = totals.setdefault((hook, alg, top_k, top_p), [0, 0])
        t[0] += eq
        t[1] += theirs.numel()
    for (hook, alg, top_k, top_p), (eq, n) in totals.items():
        print(f"dream {'hook' if hook else 'no hook'} {alg} top_k={top_k} top_p={top_p}: {eq}/{n}")


def llada_parity(generate_py: Path) -> None:
    from dlmeval.models import tiny_model
    from dlmeval.sampling import RemaskingSampler, SamplerConfig

    spec = importlib.util.spec_from_file_location("llada_generate", generate_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = tiny_model("llada")
    n = len(m.tokenizer)
    orig = m.module.forward

    def no_padded_vocab(*a, **k):  # the ids dlmeval never samples get no mass, as in dlmeval
        out = orig(*a, **k)
        out.logits[..., n:] = torch.finfo(out.logits.dtype).min
        return out

    for gl, steps, bl in [(12, 12, 12), (12, 6, 12), (12, 12, 4), (12, 6, 4), (16, 8, 8), (16, 16, 4)]:
        eq = total = 0
        for p in PROMPTS:
            x = torch.tensor([m.encode(p)])
            m.module.forward = no_padded_vocab
            try:
                with torch.no_grad():
                    theirs = mod.generate(
                        m.module, x, steps=steps, gen_length=gl, block_length=bl, temperature=0.0,
                        remasking="low_confidence", mask_id=m.mask_token_id,
                    )[:, x.shape[1] :]  # fmt: skip
            finally:
                m.module.forward = orig
            cfg = SamplerConfig(length=gl, steps=steps, block_length=bl, strategy="none", stop_at_eos=False)
            ours = torch.as_tensor(RemaskingSampler(m, cfg).sample([m.encode(p)], item_ids=["0"]).tokens)[
                :, :gl
            ]
            eq += int((ours == theirs).sum())
            total += theirs.numel()
        print(f"llada low_confidence gen {gl} steps {steps} block {bl}: {eq}/{total}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dream-code", type=Path)
    ap.add_argument("--llada-generate", type=Path)
    ap.add_argument("--out", type=Path, default=Path("/tmp/dlmeval-dream-parity"))
    a = ap.parse_args()
    if a.dream_code:
        dream_parity(build_dream(a.dream_code, a.out))
    if a.llada_generate:
        llada_parity(a.llada_generate)


if __name__ == "__main__":
    main()
