"""LoRA adapters on a :class:`~dlmeval.models.base.DiffusionLM`, through ``peft``.

An adapter directory is what ``peft`` writes and reads: ``adapter_config.json`` (a ``LoraConfig``) and
``adapter_model.safetensors`` with the keys ``PeftModel.save_pretrained`` uses (``base_model.model.<module
path>.lora_A.weight``), so the directory also loads with ``PeftModel.from_pretrained`` onto the same Hugging Face
module. dlmeval injects the LoRA layers into the model's own module in place (``peft.inject_adapter_in_model``):
the family adapters keep their references to the trunk and the head, and every interface (``score_positions``,
``logits_at``) runs through the adapted layers.

``dlmeval_train.json`` beside them (written by ``dlmeval train``) records the training settings and the layout the
adapter was trained on (chat template on or off, prompt); :func:`load_adapter` reads the layout back so that the
scorer's default layout is the training layout.

Identity. A model with an adapter reports ``adapter = {"path", "sha256"}`` in its identity (the hash is of the
adapter files' bytes), and its weight hash covers the LoRA tensors, so a run on base + adapter never shares a
record with a run on the base model, nor with one on another adapter.

Base. ``dlmeval_train.json`` records the identity of the base the adapter was trained on (``base_identity``, with
its ``weights_sha256``). :func:`load_adapter` compares it with the model it is loaded onto: another base (a
same-shaped model with other weights, another architecture) is refused with both named, unless the caller passes
``any_base=True`` (``DLMEVAL_ADAPTER_ANY_BASE=1``, CLI ``dlmeval --adapter-any-base ...``); the identity's
``adapter.base`` then says ``overridden`` with both hashes, so the run records it. The hash covers the dtype, so a
base loaded in another dtype than at training cannot be compared: ``adapter.base`` says ``unverified`` and why.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from dlmeval.errors import InputError, ModelNotFoundError
from dlmeval.models.validate import first_line as _first_line

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
TRAIN_SETTINGS = "dlmeval_train.json"
#: the opt-out of the base check (``dlmeval --adapter-any-base``)
ANY_BASE_ENV = "DLMEVAL_ADAPTER_ANY_BASE"
#: the key prefix ``PeftModel.save_pretrained`` writes (the wrapper's ``base_model.model``)
PEFT_PREFIX = "base_model.model."

#: attention projections LoRA goes into when no target modules are given, by the names the families use
#: (BERT-style ``query/key/value``; LLaDA / Dream / Llama ``q_proj/k_proj/v_proj``; ModernBERT ``Wqkv``)
DEFAULT_TARGETS: tuple[tuple[str, ...], ...] = (
    ("query", "key", "value"),
    ("q_proj", "k_proj", "v_proj"),
    ("Wqkv",),
)


@dataclass(frozen=True)
class AdapterInfo:
    path: str
    sha256: str
    settings: dict
    base: dict | None = None  # the base check (check_base): expected / found weights hash and the outcome

    def identity(self) -> dict:
        out = {"path": self.path, "sha256": self.sha256}
        # only an outcome other than a match goes into the identity: a matching base is what every run had before
        # the check existed, so their run ids stay
        if self.base is not None and self.base.get("check") != "match":
            out["base"] = dict(self.base)
        return out


def default_targets(module: torch.nn.Module) -> list[str]:
    """The attention projections of ``module`` (:data:`DEFAULT_TARGETS`), or an error naming its linear layers."""
    names = {n.split(".")[-1] for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)}
    for cand in DEFAULT_TARGETS:
        if all(c in names for c in cand):
            return list(cand)
    raise InputError(
        f"cannot guess LoRA target modules from the linear layers {sorted(names)[:12]}; pass them "
        "(--target-modules)"
    )


def attach_lora(
    model,
    *,
    r: int,
    alpha: float,
    dropout: float,
    targets: Sequence[str] | None = None,
    seed: int = 0,
    base_name: str | None = None,
):
    """Inject fresh LoRA layers into ``model.module`` (in place), freeze every base weight and return the
    ``LoraConfig``. The ``lora_A`` initialisation draws from a generator seeded by ``seed`` (``lora_B`` starts at
    zero, so the adapted model starts equal to the base)."""
    from peft import LoraConfig, inject_adapter_in_model

    if getattr(model, "adapter", None) is not None:
        raise InputError("this model already carries a LoRA adapter; load the base model to train a new one")
    if r < 1 or alpha <= 0 or not 0 <= dropout < 1:
        raise InputError(
            f"LoRA needs rank >= 1, alpha > 0 and dropout in [0, 1); got {r}, {alpha}, {dropout}"
        )
    tg = list(targets) if targets else default_targets(model.module)
    cfg = LoraConfig(
        r=int(r),
        lora_alpha=alpha,
        lora_dropout=float(dropout),
        target_modules=tg,
        bias="none",
        base_model_name_or_path=base_name or getattr(model, "source", None),
    )
    for p in model.module.parameters():
        p.requires_grad_(False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) % (2**63))
        try:
            inject_adapter_in_model(cfg, model.module)
        except ValueError as e:  # peft: a target module that the model does not have
            raise InputError(f"LoRA target modules {tg}: {_first_line(e)}") from None
    _lora_float32(model.module)
    for n, p in model.module.named_parameters():
        p.requires_grad_("lora_" in n)
    model.invalidate_identity()
    return cfg


def _lora_float32(module: torch.nn.Module) -> None:
    """LoRA weights in float32 on the module's device, also on a bfloat16 base (peft casts the layer input to the
    adapter's dtype): training updates them in full precision, and a loaded adapter holds exactly the saved
    float32 tensors, so a model scored right after training and one loaded from the directory agree."""
    dev = next(module.parameters()).device
    for n, p in module.named_parameters():
        if "lora_" in n and (p.dtype != torch.float32 or p.device != dev):
            p.data = p.data.to(device=dev, dtype=torch.float32)


def save_adapter(model, out_dir: str | Path, lora_config, settings: dict | None = None) -> AdapterInfo:
    """Write ``model``'s LoRA weights as a PEFT adapter directory (and ``settings`` as ``dlmeval_train.json``), with a
    model card (``README.md``: dlmeval's version and the settings)."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sd = get_peft_model_state_dict(model.module, save_embedding_layers=False)
    if not sd:
        raise InputError("the model has no LoRA weights to save")
    tensors = {PEFT_PREFIX + k: v.detach().to("cpu").contiguous() for k, v in sd.items()}
    save_file(tensors, str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    lora_config.save_pretrained(str(out))
    if settings is not None:
        (out / TRAIN_SETTINGS).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    from dlmeval.models.card import write_model_card

    base = (settings or {}).get("base_model", {}).get("source") if isinstance(settings, dict) else None
    write_model_card(out, kind="adapter", settings=dict(settings or {}), base_model=base)
    return AdapterInfo(str(out.resolve()), adapter_sha256(out), dict(settings or {}))


def adapter_sha256(path: str | Path) -> str:
    """A hash of the adapter's config and weights (file names and bytes)."""
    d = Path(path)
    h = hashlib.sha256()
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        h.update(name.encode())
        h.update((d / name).read_bytes())
    return h.hexdigest()


def check_adapter_dir(path: str | Path) -> Path:
    d = Path(path).expanduser()
    if not d.is_dir():
        raise ModelNotFoundError(f"adapter {path}: not a directory (train one with `dlmeval train`)")
    missing = [n for n in (ADAPTER_CONFIG, ADAPTER_WEIGHTS) if not (d / n).is_file()]
    if missing:
        raise ModelNotFoundError(
            f"adapter {path}: {', '.join(missing)} missing; an adapter directory holds {ADAPTER_CONFIG} and "
            f"{ADAPTER_WEIGHTS} (as `dlmeval train` and peft write them)"
        )
    return d


def _read_settings(d: Path) -> dict:
    if not (d / TRAIN_SETTINGS).is_file():
        return {}
    try:
        settings = json.loads((d / TRAIN_SETTINGS).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _base_label(ident: dict) -> str:
    name = ident.get("name") or ident.get("source") or "?"
    src = ident.get("source")
    if src and str(src) != str(name):
        name = f"{name} from {src}"
    return (
        f"{name} (weights sha256 {str(ident.get('weights_sha256') or '?')[:12]}, {ident.get('dtype', '?')})"
    )


def _trained_on(settings: dict) -> str:
    base = settings.get("base_identity")
    return f" (it was trained on {_base_label(base)})" if isinstance(base, dict) and base else ""


def check_base(model, path: str | Path, settings: dict, any_base: bool | None = None) -> dict | None:
    """Compare the base recorded in ``settings`` (``dlmeval_train.json``) with ``model`` (before the adapter is
    injected). Returns what the identity records (None: no base recorded, e.g. a peft adapter from elsewhere);
    raises :class:`~dlmeval.errors.InputError` on another base unless ``any_base`` (default: ``ANY_BASE_ENV``)."""
    want = settings.get("base_identity")
    if not isinstance(want, dict) or not want.get("weights_sha256"):
        return None
    found = model.identity().as_dict()
    rec = {"expected": want["weights_sha256"], "found": found["weights_sha256"]}
    if want.get("dtype") and want["dtype"] != found["dtype"]:
        return {**rec, "check": f"unverified: trained on a {want['dtype']} base, loaded as {found['dtype']}"}
    if rec["expected"] == rec["found"]:
        return {**rec, "check": "match"}
    if any_base is None:
        any_base = os.environ.get(ANY_BASE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    if not any_base:
        raise InputError(
            f"adapter {path} was trained on {_base_label(want)} but is being loaded onto {_base_label(found)}; "
            "load the base it was trained on, or pass `dlmeval --adapter-any-base ...` to apply it anyway (the run "
            "records it)"
        )
    return {**rec, "check": "overridden (--adapter-any-base)"}


def load_adapter(model, path: str | Path, *, any_base: bool | None = None) -> AdapterInfo:
    """Load the PEFT adapter at ``path`` onto ``model`` (in place, inference mode) and record it in the model's
    identity. Refuses an adapter whose weights do not all fit the model's modules, and one trained on another base
    (see :func:`check_base`; ``any_base=True`` applies it anyway and the identity records that)."""
    from peft import LoraConfig, inject_adapter_in_model, set_peft_model_state_dict
    from safetensors.torch import load_file

    d = check_adapter_dir(path)
    if getattr(model, "adapter", None) is not None:
        raise InputError("this model already carries a LoRA adapter; load the base model again")
    settings = _read_settings(d)
    trained_on = _trained_on(settings)
    try:
        cfg = LoraConfig.from_pretrained(str(d))
    except (ValueError, TypeError, json.JSONDecodeError) as e:
        raise InputError(f"adapter {path}: {ADAPTER_CONFIG} is not a LoRA config ({e})") from None
    cfg.inference_mode = True
    try:
        weights = load_file(str(d / ADAPTER_WEIGHTS))
    except Exception as e:  # safetensors raises its own error type for a damaged file
        raise ModelNotFoundError(f"adapter {path}: cannot read {ADAPTER_WEIGHTS} ({e})") from None
    weights = {k[len(PEFT_PREFIX) :] if k.startswith(PEFT_PREFIX) else k: v for k, v in weights.items()}
    # the base check reads the weights before any LoRA layer is injected
    base = check_base(model, path, settings, any_base)
    try:
        inject_adapter_in_model(cfg, model.module)
    except ValueError as e:
        raise InputError(f"adapter {path} does not fit this model{trained_on}: {_first_line(e)}") from None
    _lora_float32(model.module)
    try:
        res = set_peft_model_state_dict(model.module, weights)
    except RuntimeError as e:  # a tensor of another shape (another rank, another model size)
        raise InputError(
            f"adapter {path} does not fit this model{trained_on}: {_first_line(e).rstrip(':')}"
        ) from None
    unexpected = list(getattr(res, "unexpected_keys", []) or [])
    if unexpected or not weights:
        raise InputError(
            f"adapter {path} does not fit this model{trained_on}: {len(unexpected)} of its tensors have no module "
            f"here (e.g. {unexpected[:2]})"
        )
    for p in model.module.parameters():
        p.requires_grad_(False)
    model.module.eval()
    info = AdapterInfo(str(d.resolve()), adapter_sha256(d), settings, base)
    attach_info(model, info)
    return info


def attach_info(model, info: AdapterInfo) -> None:
    """Record ``info`` on the model: its identity names the adapter, and the layout it was trained on becomes the
    model's default (an adapter trained without the chat template switches it off)."""
    model.adapter = info
    model.identity_extra = {**getattr(model, "identity_extra", {}), "adapter": info.identity()}
    layout = info.settings.get("layout") or {}
    if layout.get("chat") is False:
        model.has_chat_template = False
    model.invalidate_identity()
