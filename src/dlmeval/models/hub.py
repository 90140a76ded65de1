"""Whether a hub download can happen: one quick connection to the Hugging Face endpoint before any hub call.

Without a network, ``huggingface_hub`` retries each request with back-off (several attempts, seconds apart) and
logs every attempt before the loader's error arrives. With ``--allow-download`` dlmeval first opens one TCP
connection to the endpoint (``HF_ENDPOINT``, default ``https://huggingface.co``; the ``HTTPS_PROXY`` host when one
is set) with a short timeout. When it fails, a model already in the local cache loads from there, and any other
fails at once with one line naming the endpoint and the reason.
"""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlsplit

from dlmeval.errors import ModelNotFoundError

#: seconds to wait for the endpoint
CONNECT_TIMEOUT_S = 5.0


def _target() -> tuple[str, int, str]:
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = proxy or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    u = urlsplit(url if "://" in url else f"https://{url}")
    port = u.port or (80 if u.scheme == "http" else 443)
    return u.hostname or "huggingface.co", port, ("the proxy " if proxy else "") + url


def _resolve(host: str, port: int) -> list | str:
    """``getaddrinfo`` bounded by :data:`CONNECT_TIMEOUT_S` (a resolver without a network can take tens of
    seconds, and the socket timeout does not cover it): the addresses, or why there are none. The lookup runs in a
    daemon thread, left behind when it overruns."""
    import threading

    box: dict = {}

    def look() -> None:
        try:
            box["addrs"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            box["error"] = e.strerror or type(e).__name__

    t = threading.Thread(target=look, daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S)
    if t.is_alive():
        return f"no answer from the name resolver for {host} in {CONNECT_TIMEOUT_S:g} s"
    return box.get("addrs") or box.get("error", "no address")


@functools.cache
def _unreachable(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be reached (None when a connection opens); probed once per process."""
    addrs = _resolve(host, port)
    if isinstance(addrs, str):
        return addrs
    why = "no address"
    for family, kind, proto, _, addr in addrs:
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(CONNECT_TIMEOUT_S)
                s.connect(addr)
            return None
        except OSError as e:
            why = e.strerror or type(e).__name__
    return why


def local_files_only(path: str, allow_download: bool) -> bool:
    """What ``from_pretrained(local_files_only=...)`` gets for ``path``: True without ``allow_download``, for a
    local directory, and for a cached hub id when the hub cannot be reached; False when a download can happen.
    Raises :class:`~dlmeval.errors.ModelNotFoundError` (one line) for a hub id that is neither cached nor
    reachable."""
    from pathlib import Path

    if not allow_download:
        return True
    if Path(path).expanduser().exists():
        return False  # a local directory: transformers reads it without the network
    host, port, label = _target()
    why = _unreachable(host, port)
    if why is None:
        return False
    if in_hub_cache(path):
        return True
    raise ModelNotFoundError(
        f"cannot fetch {path!r}: the Hugging Face hub at {label} is not reachable ({why}); check the network "
        "(HF_ENDPOINT, HTTPS_PROXY), or pass a local directory"
    )


def in_hub_cache(repo_id: str) -> bool:
    """Whether a hub id is already in the local Hugging Face cache (loadable offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # not a valid repo id, or no hub library: not cached
        return False
