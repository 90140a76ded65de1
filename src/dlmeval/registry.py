"""One registry pattern for everything pluggable (model families, strategies, tasks, benchmarks, metric
families, probes, perturbations, report sections, commands).

A :class:`Registry` maps a name (and optional aliases) to an object. It refuses a second registration of a name
already taken by another object (re-registering the very same object is a no-op, so a module imported twice is
harmless), lists its entries in registration order for ``--help`` texts and error messages, and raises
:class:`~dlmeval.errors.InputError` naming the registered entries for an unknown name.

>>> from dlmeval.registry import Registry
>>> colours = Registry("colour")
>>> colours.add("red", 0xFF0000, aliases=("rouge",))
16711680
>>> colours.get("ROUGE") == colours["red"]
True
>>> colours.names()
('red',)
>>> @colours.register("green")
... def green():
...     return 0x00FF00
>>> "green" in colours, len(colours)
(True, 2)
>>> colours.add("red", 1)
Traceback (most recent call last):
...
ValueError: a colour named 'red' is registered already
>>> colours.get("blue")
Traceback (most recent call last):
...
dlmeval.errors.InputError: unknown colour 'blue'; choose one of red, green

Names are case-insensitive; the name as first given is the one :meth:`names` returns. Building blocks own their
registries (``dlmeval.sampling.strategies.STRATEGIES`` is one), so this module imports nothing of dlmeval but
:mod:`dlmeval.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from dlmeval.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object, refusing duplicates. ``kind`` names the entries in messages ("strategy", "task")."""

    def __init__(
        self,
        kind: str,
        *,
        on_add: Callable[[str, T], None] | None = None,
        order: Callable[[T], object] | None = None,
    ):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._display: dict[str, str] = {}
        self._aliases: dict[str, str] = {}
        self._on_add = on_add
        self._order = order  # entries listed by this key (stable: ties in registration order)

    # -- adding -------------------------------------------------------------------------------------------------
    def add(self, name: str, obj: T, *, aliases: tuple[str, ...] | list[str] = ()) -> T:
        """Register ``obj`` as ``name`` (and ``aliases``); returns ``obj``. A name or alias that is already taken
        by another object raises ``ValueError`` (a programming error, not a user's)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        key = name.lower()
        existing = self._lookup(key)
        if existing is not None and self._entries[existing] is not obj:
            raise ValueError(f"a {self.kind} named {name!r} is registered already")
        for a in aliases:
            target = self._lookup(a.lower())
            if target is not None and target != key:
                raise ValueError(f"{self.kind} alias {a!r} already names {self._display[target]!r}")
        if self._on_add is not None and existing is None:
            self._on_add(name, obj)
        self._entries[key] = obj
        self._display.setdefault(key, name)
        for a in aliases:
            if a.lower() != key:
                self._aliases[a.lower()] = key
        if self._order is not None:
            self._entries = dict(sorted(self._entries.items(), key=lambda kv: self._order(kv[1])))
        return obj

    def register(self, name: str | None = None, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        """Decorator form of :meth:`add`; without ``name`` the object's ``name`` attribute is used."""

        def deco(obj: T) -> T:
            n = name if name is not None else getattr(obj, "name", None)
            if not n:
                raise TypeError(f"{obj!r} needs a name to be registered as a {self.kind}")
            return self.add(n, obj, aliases=aliases)

        return deco

    def remove(self, name: str) -> None:
        """Drop an entry (tests registering a toy entry clean up with this)."""
        key = self._lookup(name.lower())
        if key is None:
            return
        del self._entries[key]
        del self._display[key]
        for a in [a for a, k in self._aliases.items() if k == key]:
            del self._aliases[a]

    def pop(self, name: str, default: T | None = None) -> T | None:
        """Remove ``name`` and return its entry (``default`` when it is not registered)."""
        key = self._lookup(str(name).lower())
        if key is None:
            return default
        obj = self._entries[key]
        self.remove(name)
        return obj

    def clear(self) -> None:
        """Drop every entry (with :meth:`update`: a test restores a registry it extended)."""
        self._entries.clear()
        self._display.clear()
        self._aliases.clear()

    def update(self, entries) -> None:
        """:meth:`add` every ``(name, obj)`` of a mapping or an iterable of pairs."""
        for name, obj in entries.items() if hasattr(entries, "items") else entries:
            self.add(name, obj)

    # -- reading ------------------------------------------------------------------------------------------------
    def _lookup(self, key: str) -> str | None:
        if key in self._entries:
            return key
        return self._aliases.get(key)

    def get(self, name: str) -> T:
        """The entry registered as ``name`` or one of its aliases; an unknown name raises ``InputError`` listing
        the registered names."""
        key = self._lookup(str(name).lower())
        if key is None:
            raise InputError(
                f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names()) or '(none)'}"
            )
        return self._entries[key]

    def canonical(self, name: str) -> str:
        """The registered spelling of ``name`` (an alias resolves to its entry's name)."""
        key = self._lookup(str(name).lower())
        if key is None:
            self.get(name)  # raises the listing error
        return self._display[key]

    def names(self) -> tuple[str, ...]:
        return tuple(self._display[k] for k in self._entries)

    def keys(self) -> tuple[str, ...]:
        return self.names()

    def items(self) -> list[tuple[str, T]]:
        return [(self._display[k], v) for k, v in self._entries.items()]

    def values(self) -> list[T]:
        return list(self._entries.values())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name.lower()) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"
