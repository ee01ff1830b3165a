"""Where forewarn listens unless told otherwise: shared by ``forewarn serve`` and its clients.

Kept in a module of its own so the CLI's client commands, the scenario client and the agent can
name the default control address without importing the server that listens there.
"""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"
#: The VM-facing endpoint (Azure serves it at 169.254.169.254:80).
DEFAULT_PORT = 16954
DEFAULT_CONTROL_PORT = 16955
#: Every control API route lives under this prefix.
CONTROL_API = "/api/v1"
#: Readiness, on the control port, answered without the token (as :data:`READY_PATH`).
HEALTH_PATH = "/healthz"
#: Readiness under the name Kubernetes' own components give it.
READY_PATH = "/readyz"
#: Liveness: answered 200 while the process serves, whatever its store does.
LIVE_PATH = "/livez"
#: The routes the control API answers without the token.
HEALTH_PATHS = frozenset({HEALTH_PATH, READY_PATH, LIVE_PATH})

__all__ = [
    "CONTROL_API",
    "DEFAULT_CONTROL_PORT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "HEALTH_PATH",
    "HEALTH_PATHS",
    "LIVE_PATH",
    "READY_PATH",
]
