"""The control API's token: where ``forewarn serve`` keeps it and where its clients find it.

Anything that can reach the control port could otherwise drive the platform, including any
web page open in the developer's browser. ``serve`` generates a token at start (or takes
``--token`` / ``FOREWARN_TOKEN``), writes it to a file only its user can read, and requires it
on every control call; the CLI and the scenario runner read it from the environment or from
that file, so nobody has to copy it by hand. Light on purpose: clients import it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = [
    "TOKEN_ENVIRONMENT_VARIABLE",
    "find_token",
    "new_token",
    "token_file",
    "write_token",
]

TOKEN_ENVIRONMENT_VARIABLE = "FOREWARN_TOKEN"
RUNTIME_DIR_ENVIRONMENT_VARIABLE = "FOREWARN_RUNTIME_DIR"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _runtime_dir() -> Path:
    explicit = os.environ.get(RUNTIME_DIR_ENVIRONMENT_VARIABLE)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "forewarn"
    return Path.home() / ".local" / "state" / "forewarn"


def token_file(host: str, port: int) -> Path:
    """Where the server listening at ``host:port`` keeps its token."""
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)
    return _runtime_dir() / f"control-{safe}-{port}.token"


def write_token(host: str, port: int, token: str) -> Path:
    """Write ``token`` for ``host:port``, readable by this user only (0600).

    Only a server that holds ``host:port`` already may call it: then no other server listens
    there, and the file it replaces is a stale one (``forewarn serve`` binds both planes
    first)."""
    path = token_file(host, port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)  # an older file may have had other bits
    return path


def find_token(host: str, port: int) -> str | None:
    """The token for the control API at ``host:port``: ``FOREWARN_TOKEN``, else the file
    the server wrote, else None."""
    explicit = os.environ.get(TOKEN_ENVIRONMENT_VARIABLE)
    if explicit:
        return explicit
    try:
        return token_file(host, port).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
