"""Run signatures in the style of sacrebleu's: everything that decides a result, in one printable line.

A :class:`Signature` holds the command kind, the full configuration, the identities of the models (name, family,
weights hash, dtype, device, ...), the run seed, the library versions, the code (:mod:`dlmeval.store.code`: a
version from version control and a digest of the package's files) and the numerics (torch's intra-op thread
count, whether deterministic algorithms are on, the device kinds and dtypes of the models, the CPU's instruction
set as torch dispatches it).

The run id is a hash of the parts that decide the numbers: kind, canonical config, models (with their dtype and
device kind), seed, and of the numerics the thread count and the deterministic-algorithms flag (the thread count
moves scores in the last bits: 9 of 300 by up to 4.3e-7, issue 32). Library versions and the code identity are
recorded but left out of the id, so that rerunning a command after an upgrade finds the same run: the store then
refuses to resume it with other code (both identities named) unless ``--allow-code-change`` is given, and warns on
other library versions. The CPU instruction set is recorded but left out of the id: it is a property of the machine,
and what it moves (float rounding within the tolerance docs/scaling.md states) is what the guard test allows.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import operator
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dlmeval.store import jsonsafe

#: libraries whose versions every signature records, as (key in the signature, distribution name)
_LIBRARIES = (("torch", "torch"), ("transformers", "transformers"), ("numpy", "numpy"))


@functools.cache
def library_versions() -> dict[str, str]:
    """Versions of dlmeval (:func:`dlmeval.store.code.code_version`), torch, transformers, numpy and Python (read
    from package metadata: imports nothing)."""
    from dlmeval.store.code import code_version

    out = {"dlmeval": code_version()}
    for key, dist in _LIBRARIES:
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = "none"
    out["python"] = platform.python_version()
    return out


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_hash(config: Mapping[str, Any]) -> str:
    return sha256_hex(jsonsafe.dumps(dict(config), canonical=True))


def model_dicts(models: Iterable[Any] | None) -> list[dict[str, Any]]:
    """Model identities as plain dicts: accepts dicts, :class:`ModelIdentity` (``as_dict()``) or models
    (``identity()``)."""
    out = []
    for m in models or ():
        if isinstance(m, Mapping):
            d = dict(m)
        elif hasattr(m, "as_dict"):
            d = m.as_dict()
        elif hasattr(m, "identity"):
            d = m.identity().as_dict()
        else:
            raise TypeError(
                f"a model identity must be a dict, a ModelIdentity or a model; got {type(m).__name__}"
            )
        out.append(jsonsafe.loads(jsonsafe.dumps(d)))  # normalised to plain JSON values
    return out


#: the numerics that enter the run id (the others are recorded only)
ID_NUMERICS = ("threads", "deterministic")


def current_numerics(models: list[dict[str, Any]]) -> dict[str, Any]:
    """The numerics of this process for a run on ``models`` (identity dicts): torch's intra-op thread count, the
    deterministic-algorithms flag, the models' device kinds and dtypes, torch's CPU capability."""
    import torch

    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - an older or unusual build
        cap = "unknown"
    return {
        "threads": int(torch.get_num_threads()),
        "deterministic": bool(torch.are_deterministic_algorithms_enabled()),
        "devices": sorted({str(m["device"]) for m in models if m.get("device")}),
        "dtypes": sorted({str(m["dtype"]) for m in models if m.get("dtype")}),
        "cpu_capability": str(cap),
    }


def run_id_for(
    kind: str,
    config: Mapping[str, Any],
    models: list[dict[str, Any]],
    seed: int,
    numerics: Mapping[str, Any] | None = None,
) -> str:
    """The deterministic run id: 16 hex digits of sha256 over (kind, canonical config, models, seed and the
    :data:`ID_NUMERICS` of ``numerics``; a signature stored before numerics were recorded has none)."""
    payload = {"kind": kind, "config": dict(config), "models": models, "seed": int(seed)}
    if numerics is not None:
        payload["numerics"] = {k: numerics.get(k) for k in ID_NUMERICS}
    return sha256_hex(jsonsafe.dumps(payload, canonical=True))[:16]


@dataclass
class Signature:
    kind: str
    config: dict[str, Any]
    models: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0
    versions: dict[str, str] = field(default_factory=library_versions)
    #: :func:`dlmeval.store.code.code_identity` of the code that made the run (None: stored before it was recorded)
    code: dict[str, str] | None = None
    #: :func:`current_numerics` (None: stored before they were recorded; the run id then leaves them out)
    numerics: dict[str, Any] | None = None

    @classmethod
    def create(
        cls, kind: str, config: Mapping[str, Any], models: Iterable[Any] | None = None, seed: int = 0
    ) -> Signature:
        """A signature for the current environment (config and identities normalised to plain JSON)."""
        if not isinstance(kind, str) or not kind:
            raise TypeError("the run kind must be a non-empty string, e.g. 'diffscore'")
        if not isinstance(config, Mapping):
            raise TypeError(f"the run config must be a dict, got {type(config).__name__}")
        try:
            if isinstance(seed, bool):
                raise TypeError
            seed = operator.index(seed)
        except TypeError:
            raise TypeError(f"the run seed must be an integer, got {seed!r}") from None
        from dlmeval.store.code import code_identity

        cfg = jsonsafe.loads(jsonsafe.dumps(dict(config)))
        mods = model_dicts(models)
        return cls(
            kind=kind,
            config=cfg,
            models=mods,
            seed=int(seed),
            versions=dict(library_versions()),
            code=code_identity(),
            numerics=current_numerics(mods),
        )

    @property
    def config_sha256(self) -> str:
        return config_hash(self.config)

    @property
    def run_id(self) -> str:
        return run_id_for(self.kind, self.config, self.models, self.seed, self.numerics)

    def short(self) -> str:
        """One compact line, e.g. ``dlmeval:0.1.dev5+g1a2b3c4d|src:3f2a9c1d|kind:diffscore|model:default@3f2a9c1d|
        dtype:float32|seed:0|cfg:8b1e77a0|threads:1|det:0|device:cpu|torch:2.13.0+cpu|tf:5.24.0`` (several models
        are joined with ``+``; ``src``, ``threads``, ``det`` and ``device`` only where recorded)."""
        models = "+".join(
            f"{m.get('name', '?')}@{str(m.get('weights_sha256') or '?')[:8]}" for m in self.models
        )
        dtypes = sorted({str(m["dtype"]) for m in self.models if m.get("dtype")})
        v = self.versions
        code = self.code or {}
        parts = [
            f"dlmeval:{code.get('version') or v.get('dlmeval', '?')}",
            *([f"src:{code['source_sha256'][:8]}"] if code.get("source_sha256") else []),
            f"kind:{self.kind}",
            f"model:{models or 'none'}",
            f"dtype:{'+'.join(dtypes) or 'none'}",
            f"seed:{self.seed}",
            f"cfg:{self.config_sha256[:8]}",
        ]
        n = self.numerics
        if n is not None:
            parts += [
                f"threads:{n.get('threads')}",
                f"det:{int(bool(n.get('deterministic')))}",
                f"device:{'+'.join(n.get('devices') or []) or 'none'}",
            ]
        parts += [f"torch:{v.get('torch', '?')}", f"tf:{v.get('transformers', '?')}"]
        return "|".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "seed": self.seed,
            "config": self.config,
            "config_sha256": self.config_sha256,
            "models": self.models,
            "versions": self.versions,
            **({"code": self.code} if self.code is not None else {}),
            **({"numerics": self.numerics} if self.numerics is not None else {}),
            "short": self.short(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Signature:
        return cls(
            kind=d["kind"],
            config=dict(d["config"]),
            models=list(d.get("models", [])),
            seed=int(d["seed"]),
            versions=dict(d.get("versions", {})),
            code=dict(d["code"]) if d.get("code") else None,
            numerics=dict(d["numerics"]) if d.get("numerics") is not None else None,
        )

    def __str__(self) -> str:
        return self.short()
