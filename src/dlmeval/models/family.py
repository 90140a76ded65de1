"""The model-family registry: one :class:`Family` of facts per family, registered once by the family's own module.

Everything that needs to know a family reads it here: the spec parser and loaders (:mod:`dlmeval.models.registry`),
``dlmeval models``, ``dlmeval check-model`` (which rows apply, the attention kind and shift to expect), the sampler
(the family's own schedule) and ``care --plan`` (NFE from the model's real schedule). A family is

* one module in ``dlmeval/models/`` (its adapter class and loader, importing torch and transformers inside the
  functions that use them, so that reading the registry loads neither: ``dlmeval models``), ending in one
  ``FAMILIES.add(...)`` call;
* one entry of :data:`FAMILY_MODULES` so that the registry imports it.

Spec forms: a family with ``prefix="llada"`` reads ``llada:PATH``; a family with ``prefix=None`` is one model
named ``name`` (``default``); ``standin="tiny-llada"`` names the family's tiny stand-in (tests).

>>> from dlmeval.models.family import family_for_spec
>>> fam, path, standin = family_for_spec("dream:/models/Dream-v0-Base-7B")
>>> fam.name, fam.logit_shift, fam.native_schedule, path
('dream', 1, 'dream', '/models/Dream-v0-Base-7B')

This module imports nothing heavy (no torch): the facts are plain data, loaders are called, not imported here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dlmeval.errors import InputError
from dlmeval.registry import Registry

#: the modules that register the built-in families (imported on first use of :data:`FAMILIES`); a new family
#: module adds its dotted name here
FAMILY_MODULES: tuple[str, ...] = (
    "dlmeval.models.default",
    "dlmeval.models.hf_mlm",
    "dlmeval.models.llada",
    "dlmeval.models.dream",
    "dlmeval.models.lladamoe",
    "dlmeval.models.a2d",
    "dlmeval.models.diffullama",
    "dlmeval.models.bert_chat",
    "dlmeval.models.causal_loading",
)

KINDS = ("diffusion", "causal")
#: how a family's network attends: every position sees every position; causal over finished blocks and
#: bidirectional inside the current one (block diffusion, BD3LM); or left-to-right (AR)
ATTENTION_KINDS = ("bidirectional", "block-causal", "causal")
#: where the first token's predicting position comes from: the tokenizer's own special tokens, a BOS the adapter
#: prepends (Dream, for a shifted head), or none
BOS_RULES = ("tokenizer", "prepend", "none")
#: where a mask id may come from, in the order the loader tries them (the first found wins; a disagreement warns)
MASK_SOURCES = ("config", "generation config", "tokenizer")
CHAT_TEMPLATE_USE = ("none", "optional", "required")
#: the output rows a likelihood normalises over: the tokenizer's ids (dlmeval's rule: the padded vocabulary rows past
#: the tokenizer are left out) or every row of the head (``F.cross_entropy`` over the raw logits)
VOCAB_ROWS = ("tokenizer", "all")

#: the check-model rows (:mod:`dlmeval.models.checks`); a family lists those that apply to it
CHECK_ROWS = (
    "mask id",
    "eos ids",
    "pad id",
    "alignment",
    "attention",
    "vocab padding",
    "batch",
    "padding",
    "gradient",
    "sampler",
)


@dataclass(frozen=True)
class LoadOptions:
    """What every loader takes besides the path (one object instead of forwarded keywords); ``model_options``: the
    family's own options (:class:`ModelOption`) from the spec, checked and converted, every declared one present
    (its default where the spec names none)."""

    device: str | None = None
    dtype: Any = None
    trust_remote_code: bool = False
    allow_download: bool = False
    seed: int = 0
    model_options: Mapping[str, Any] = field(default_factory=dict)


def _as_bool(v: str) -> bool:
    low = v.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a boolean (true / false)")


@dataclass(frozen=True)
class ModelOption:
    """An option a family accepts, declared by the family (``Family.options``) and given in the model spec after a
    ``?``: ``toy:PATH?scale=2,tie=true`` (so it travels wherever a spec goes: ``--model``, a protocol's spec, the
    run's model list). ``type`` converts the text (``int``, ``float``, ``str``, ``bool``: true / false); ``choices``
    limits the values; ``check(value)`` returns an error text for a value out of range (None when fine).
    The registry checks every option before anything loads (:func:`family_for_spec`) and passes the values in
    :attr:`LoadOptions.model_options`; they are part of the model's identity, so they make their own runs."""

    name: str
    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: str, spec: str, family: str) -> Any:
        conv = _as_bool if self.type is bool else self.type
        try:
            value = conv(raw)
        except (TypeError, ValueError) as e:
            what = getattr(self.type, "__name__", "value")
            raise InputError(
                f"model {spec!r}: option {self.name}={raw!r} is not a valid {what} ({e}); {self.describe(family)}"
            ) from None
        why = None
        if self.choices is not None and value not in self.choices:
            why = f"not one of {', '.join(map(str, self.choices))}"
        elif self.check is not None:
            why = self.check(value)
        if why:
            raise InputError(f"model {spec!r}: option {self.name}={raw!r} is {why}; {self.describe(family)}")
        return value

    def describe(self, family: str) -> str:
        return f"{family}'s {self.name}: {self.help or getattr(self.type, '__name__', '')} (default {self.default!r})"


def _frozen(m: Mapping | None) -> Mapping:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True, eq=False)
class Family:
    """Facts of one model family. Only ``name``, ``kind``, ``description`` and ``load`` are required.

    ``load(path, options)`` returns the model (a :class:`~dlmeval.models.base.DiffusionLM` or
    :class:`~dlmeval.models.causal.CausalLM`); ``load_standin(options)`` the tiny stand-in. ``native_samplers``
    maps the family's own sampler names (Dream's ``alg`` values, LLaDA's ``remasking`` values) to the dlmeval
    strategy that reproduces each (:mod:`dlmeval.sampling.strategies`); ``generation`` holds the generation
    settings the family's own sampler uses when called as its model card calls it (what dlmeval reproduces:
    docs/models.md). ``aliases`` are other names of the family (the adapter's identity label, ``hf-mlm``)."""

    name: str
    kind: str
    description: str
    load: Callable[[str, LoadOptions], Any]
    prefix: str | None = None
    aliases: tuple[str, ...] = ()
    standin: str | None = None
    load_standin: Callable[[LoadOptions], Any] | None = None
    standin_description: str = ""
    available: Callable[[], tuple[bool, str]] | None = None
    adapter: type | None = None  # the DiffusionLM / CausalLM subclass the loader builds
    # ---- checkpoint facts
    remote_code: bool = False
    model_type: str | None = None  # what a checkpoint config's model_type must contain (remote-code families)
    max_length_key: str = "max_position_embeddings"
    mask_sources: tuple[str, ...] = MASK_SOURCES
    default_mask_id: int | None = None  # the documented fallback, used with a warning
    #: the mask token's text the family's own code sets (dllm's get_tokenizer: ``<|mask|>``), looked up in the
    #: tokenizer's vocabulary when none of ``mask_sources`` names an id (before ``default_mask_id``)
    mask_token: str | None = None
    default_eos_ids: tuple[int, ...] = ()
    bos: str = "tokenizer"
    padding_side: str = "right"
    tokenizer_quirks: tuple[str, ...] = ()
    chat_template: str = "optional"
    # ---- network facts
    logit_shift: int = 0
    attention: str = "bidirectional"
    #: the rows the family's own likelihood code normalises over (:data:`VOCAB_ROWS`); the masked-scoring core
    #: applies it when a caller asks for the family's rule (dlmeval's default stays ``tokenizer``)
    likelihood_vocab: str = "tokenizer"
    # ---- sampling facts
    native_schedule: str = "linear"
    native_samplers: Mapping[str, str] = field(default_factory=dict)
    generation: Mapping[str, Any] = field(default_factory=dict)
    #: the block size the stand-in was trained with (block diffusion), where it differs from ``generation``'s
    standin_block_length: int | None = None
    # ---- checks and releases
    checks: tuple[str, ...] = CHECK_ROWS
    hub_ids: tuple[str, ...] = ()
    module: str = ""
    # ---- options the family accepts in its spec (``toy:PATH?name=value``), checked by the registry
    options: tuple[ModelOption, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "native_samplers", _frozen(self.native_samplers))
        object.__setattr__(self, "generation", _frozen(self.generation))
        for what, value, allowed in (
            ("kind", self.kind, KINDS),
            ("attention", self.attention, ATTENTION_KINDS),
            ("bos", self.bos, BOS_RULES),
            ("chat_template", self.chat_template, CHAT_TEMPLATE_USE),
            ("padding_side", self.padding_side, ("left", "right")),
            ("likelihood_vocab", self.likelihood_vocab, VOCAB_ROWS),
        ):
            if value not in allowed:
                raise ValueError(f"family {self.name!r}: {what} {value!r} is not one of {allowed}")
        unknown = set(self.mask_sources) - set(MASK_SOURCES)
        if unknown:
            raise ValueError(f"family {self.name!r}: unknown mask sources {sorted(unknown)}")
        unknown = set(self.checks) - set(CHECK_ROWS)
        if unknown:
            raise ValueError(f"family {self.name!r}: unknown check rows {sorted(unknown)}; see CHECK_ROWS")
        if self.logit_shift not in (0, 1):
            raise ValueError(f"family {self.name!r}: logit_shift must be 0 or 1")
        if self.standin and self.load_standin is None:
            raise ValueError(f"family {self.name!r} names a stand-in {self.standin!r} but no load_standin")
        if self.kind == "diffusion" and self.native_schedule not in ("linear", "dream"):
            raise ValueError(f"family {self.name!r}: unknown native_schedule {self.native_schedule!r}")
        names = [o.name for o in self.options]
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise ValueError(f"family {self.name!r}: option names must be distinct identifiers, got {names}")

    @property
    def spec(self) -> str:
        """The spec form: ``prefix:PATH`` or the bare name."""
        return f"{self.prefix}:PATH" if self.prefix else self.name

    def applies(self, check: str) -> bool:
        return check in self.checks

    def strategy_for(self, native: str) -> str:
        """The dlmeval strategy that reproduces the family's own sampler ``native``."""
        if native not in self.native_samplers:
            raise InputError(
                f"{self.name} has no native sampler {native!r}; it has {', '.join(self.native_samplers) or 'none'}"
            )
        return self.native_samplers[native]

    def parse_options(self, raw: Mapping[str, str], spec: str) -> dict[str, Any]:
        """The family's options from the spec's ``name=value`` texts, converted and checked, every declared option
        present (its default where ``raw`` lacks it); an unknown name or a bad value raises :class:`InputError`."""
        declared = {o.name: o for o in self.options}
        for name in raw:
            if name not in declared:
                takes = ", ".join(declared) if declared else "no options"
                raise InputError(
                    f"model {spec!r}: {self.name} has no option {name!r}; it takes {takes} (see `dlmeval models`)"
                )
        return {n: o.parse(raw[n], spec, self.name) if n in raw else o.default for n, o in declared.items()}

    def block_length(self, standin: bool = False) -> int | None:
        """The block size the family's own sampler runs with (block diffusion), its stand-in's when ``standin``;
        None for a family that does not sample in blocks."""
        if self.attention != "block-causal":
            return None
        if standin and self.standin_block_length is not None:
            return self.standin_block_length
        block = self.generation.get("block_length")
        return None if block is None else int(block)

    def facts(self) -> dict[str, Any]:
        """The family's facts as plain data (``dlmeval models --json``, docs)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "spec": self.spec,
            "standin": self.standin,
            "remote_code": self.remote_code,
            "mask_sources": list(self.mask_sources),
            "mask_token": self.mask_token,
            "default_mask_id": self.default_mask_id,
            "default_eos_ids": list(self.default_eos_ids),
            "bos": self.bos,
            "padding_side": self.padding_side,
            "logit_shift": self.logit_shift,
            "likelihood_vocab": self.likelihood_vocab,
            "attention": self.attention,
            "native_schedule": self.native_schedule,
            "native_samplers": dict(self.native_samplers),
            "generation": dict(self.generation),
            "tokenizer_quirks": list(self.tokenizer_quirks),
            "chat_template": self.chat_template,
            "checks": list(self.checks),
            "hub_ids": list(self.hub_ids),
        } | (
            {"options": {o.name: {"default": o.default, "help": o.help} for o in self.options}}
            if self.options
            else {}
        )


def _check_unique_forms(name: str, fam: Family) -> None:
    """A spec prefix, bare name or stand-in name may belong to one family only."""
    mine = {f for f in (fam.prefix, fam.standin) if f}
    if fam.prefix is None:
        mine.add(fam.name)
    for other in _REGISTRY.values():
        theirs = {f for f in (other.prefix, other.standin) if f}
        if other.prefix is None:
            theirs.add(other.name)
        clash = mine & theirs
        if clash:
            raise ValueError(f"family {name!r}: spec form {sorted(clash)[0]!r} is taken by {other.name!r}")


_REGISTRY: Registry[Family] = Registry("model family", on_add=_check_unique_forms)
_loaded = False


def load_families() -> None:
    """Import the modules of :data:`FAMILY_MODULES` (once): each registers its family. The registry finds the
    families by name; no module of the layer below imports a family back."""
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in FAMILY_MODULES:
            importlib.import_module(mod)


class _Families:
    """:data:`FAMILIES`: the registry, with the built-in family modules imported on first read."""

    def _ensure(self) -> Registry[Family]:
        load_families()
        return _REGISTRY

    def add(self, name: str, fam: Family, *, aliases: tuple[str, ...] = ()) -> Family:
        if fam.name != name:
            raise ValueError(f"family registered as {name!r} is named {fam.name!r}")
        return _REGISTRY.add(name, fam, aliases=tuple(aliases) + tuple(fam.aliases))

    def __getattr__(self, item):
        return getattr(self._ensure(), item)

    def __contains__(self, name) -> bool:
        return name in self._ensure()

    def __iter__(self):
        return iter(self._ensure())

    def __len__(self) -> int:
        return len(self._ensure())

    def __getitem__(self, name: str) -> Family:
        return self._ensure()[name]

    def __repr__(self) -> str:
        return repr(self._ensure())


#: every model family; ``FAMILIES.get("dream")``, ``FAMILIES.values()``. Registration: ``FAMILIES.add(name, Family)``
FAMILIES = _Families()


def path_loader(
    label: str, example: str, load: Callable[..., Any], *, remote_code: bool = False, **fixed: Any
) -> Callable[[str, LoadOptions], Any]:
    """``Family.load`` for a family loader ``load(path, device=, dtype=, allow_download=, **fixed)`` (and
    ``trust_remote_code=`` when ``remote_code``): an empty path is refused, ``label`` naming the spec and ``example``
    showing one."""

    def load_path(path: str, opts: LoadOptions) -> Any:
        if not path:
            raise InputError(f"{label}: needs a path, e.g. {example}")
        kw = {"trust_remote_code": opts.trust_remote_code} if remote_code else {}
        return load(
            path, device=opts.device, dtype=opts.dtype, allow_download=opts.allow_download, **fixed, **kw
        )

    return load_path


def register_family(fam: Family) -> Family:
    """Register ``fam`` under its name (and aliases); the one call a family module ends with."""
    return FAMILIES.add(fam.name, fam)


def family_of(model: Any) -> Family | None:
    """The registered family of a loaded model (by its ``family`` label), or None for an unregistered adapter."""
    label = getattr(model, "family", None)
    return FAMILIES.get(label) if isinstance(label, str) and label in FAMILIES else None


def split_spec(spec: str) -> tuple[str, str]:
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("empty model spec; see `dlmeval models`")
    if ":" in spec and not Path(spec).exists():
        head, _, rest = spec.partition(":")
        return head, rest
    return spec, ""


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """``(spec without its options, {name: value text})``: ``toy:PATH?scale=2,tie=true`` ->
    ``("toy:PATH", {"scale": "2", "tie": "true"})``; a spec without ``?`` (or an existing path that has one) has
    none. A part that is not ``NAME=VALUE``, or a name given twice, raises :class:`InputError`."""
    if not isinstance(spec, str) or "?" not in spec or Path(spec).exists():
        return spec, {}
    base, _, text = spec.partition("?")
    raw: dict[str, str] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise InputError(
                f"model spec {spec!r}: {part!r} is not NAME=VALUE; options follow the spec as {base}?NAME=VALUE,..."
            )
        if name in raw:
            raise InputError(f"model spec {spec!r}: option {name!r} is given twice")
        raw[name] = value.strip()
    return base, raw


def family_for_spec(spec: str) -> tuple[Family, str, bool]:
    """``(family, path, is_standin)`` of a spec string; an unknown form raises :class:`InputError` listing the
    forms, and so does an option the family does not declare or a bad option value (:func:`resolve_spec`)."""
    fam, path, standin, _ = resolve_spec(spec)
    return fam, path, standin


def resolve_spec(spec: str) -> tuple[Family, str, bool, dict[str, Any]]:
    """``(family, path, is_standin, options)`` of a spec string: the family's options checked and converted
    (:meth:`Family.parse_options`)."""
    base, raw = split_options(spec)
    fam, path, standin = _family_for(base, spec)
    return fam, path, standin, fam.parse_options(raw, spec)


def _family_for(spec: str, full: str) -> tuple[Family, str, bool]:
    head, path = split_spec(spec)
    fams = FAMILIES.values()
    for fam in fams:
        if path == "" and fam.standin and head.lower() == fam.standin.lower():
            return fam, "", True
        if path == "" and fam.prefix is None and head.lower() == fam.name.lower():
            return fam, "", False
    if head != spec or ":" in spec:
        for fam in fams:
            if fam.prefix and head.lower() == fam.prefix.lower():
                return fam, path, False
    standins = [f.standin for f in fams if f.standin]
    if head.startswith("tiny-"):
        raise InputError(f"unknown model spec {full!r}; the stand-ins are {', '.join(standins)}")
    raise InputError(
        f"unknown model spec {full!r}; the forms are {', '.join(f.spec for f in fams)} and the stand-ins "
        f"{', '.join(standins)} (see `dlmeval models`)"
    )


def families(kind: str | None = None) -> list[Family]:
    """The registered families (of one ``kind``), in registration order."""
    return [f for f in FAMILIES.values() if kind is None or f.kind == kind]
