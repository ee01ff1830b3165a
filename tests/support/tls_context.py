"""One verifying TLS context for every HTTP client a test process makes.

``httpx.Client()`` (and each ``httpx.get`` and ``httpx.post``, which make one a call) loads
certifi's bundle of certificate authorities into a new ``ssl.SSLContext``: about 25 ms of CPU,
even for a plain ``http://`` URL, which never uses it. The suite makes thousands (each poll of
a polling loop in a test, each VM's poll in the soak), a large share of its CPU. A context
made once and shared verifies exactly as a new one would (the standard library's contexts are
safe to share between connections and threads, and no test speaks HTTP/2, whose
connections would set other protocols on it), so the clients behave the same; only the
loading is done once. Clients given their own context (``verify=``) or certificate keep
theirs. The processes the tests start are untouched: this is the test process's own setting.
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any

import httpx._transports.default as httpx_transports


def share_the_default_tls_context() -> None:
    """Make httpx's transports of this process take one shared context for the default
    ``verify=True``; a no-op when httpx no longer makes its contexts there."""
    make = getattr(httpx_transports, "create_ssl_context", None)
    if make is None or getattr(make, "shared", False):
        return

    @functools.cache
    def default(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
        context: ssl.SSLContext = make(verify=True, cert=None, trust_env=trust_env)
        return context

    def create(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is True and cert is None:
            return default(
                trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
            )
        context: ssl.SSLContext = make(verify=verify, cert=cert, trust_env=trust_env)
        return context

    create.shared = True  # type: ignore[attr-defined]
    httpx_transports.create_ssl_context = create  # type: ignore[attr-defined]


__all__ = ["share_the_default_tls_context"]
