"""Run signatures in the style of sacrebleu's: everything that decides a result, in one printable line.

A :class:`Signature` holds the command kind, the full configuration, the identities of the models (name, family,
weights hash, dtype, device, ...), the run seed and the library versions. The run id is a hash of the parts that
decide the numbers (kind, canonical config, models, seed); library versions are recorded but left out of the id, so
that rerunning a command after an upgrade resumes the same run (the store records the version change as a warning).
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
    """Versions of dlmeval, torch, transformers, numpy and Python (read from package metadata: imports nothing)."""
    from dlmeval import __version__

    out = {"dlmeval": __version__}
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


def run_id_for(kind: str, config: Mapping[str, Any], models: list[dict[str, Any]], seed: int) -> str:
    """The deterministic run id: 16 hex digits of sha256 over (kind, canonical config, models, seed)."""
    payload = {"kind": kind, "config": dict(config), "models": models, "seed": int(seed)}
    return sha256_hex(jsonsafe.dumps(payload, canonical=True))[:16]


@dataclass
class Signature:
    kind: str
    config: dict[str, Any]
    models: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0
    versions: dict[str, str] = field(default_factory=library_versions)

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
        cfg = jsonsafe.loads(jsonsafe.dumps(dict(config)))
        return cls(
            kind=kind,
            config=cfg,
            models=model_dicts(models),
            seed=int(seed),
            versions=dict(library_versions()),
        )

    @property
    def config_sha256(self) -> str:
        return config_hash(self.config)

    @property
    def run_id(self) -> str:
        return run_id_for(self.kind, self.config, self.models, self.seed)

    def short(self) -> str:
        """One compact line, e.g. ``dlmeval:0.1.0|kind:diffscore|model:default@3f2a9c1d|dtype:float32|seed:0|
        cfg:8b1e77a0|torch:2.13.0+cpu|tf:5.24.0`` (several models are joined with ``+``)."""
        models = "+".join(
            f"{m.get('name', '?')}@{str(m.get('weights_sha256') or '?')[:8]}" for m in self.models
        )
        dtypes = sorted({str(m["dtype"]) for m in self.models if m.get("dtype")})
        v = self.versions
        parts = [
            f"dlmeval:{v.get('dlmeval', '?')}",
            f"kind:{self.kind}",
            f"model:{models or 'none'}",
            f"dtype:{'+'.join(dtypes) or 'none'}",
            f"seed:{self.seed}",
            f"cfg:{self.config_sha256[:8]}",
            f"torch:{v.get('torch', '?')}",
            f"tf:{v.get('transformers', '?')}",
        ]
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
        )

    def __str__(self) -> str:
        return self.short()
