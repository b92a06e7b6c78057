"""What envman reads from the host's environment, in one place: its cache folder, and the CA bundle a
TLS-intercepting proxy asks clients to trust. Standard library ``os`` only."""

from __future__ import annotations

import os


def cache_root() -> str:
    """envman's disk cache: ENVMAN_CACHE_DIR, else $XDG_CACHE_HOME/envman, else ~/.cache/envman."""
    return os.environ.get("ENVMAN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "envman")


def ca_bundle() -> str | None:
    """The CA file the host's TLS clients are told to trust (SSL_CERT_FILE, PIP_CERT, REQUESTS_CA_BUNDLE, in
    that order), when it exists; None: the system's store."""
    for var in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"):
        path = os.environ.get(var)
        if path and os.path.isfile(path):
            return path
    return None
