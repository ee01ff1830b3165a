"""The control API's token: where ``forewarn serve`` keeps it and where its clients find it.

Anything that can reach the control port could otherwise drive the platform, including any
web page open in the developer's browser. ``serve`` generates a token at start (or takes
``--token`` / ``FOREWARN_TOKEN``), writes it to a file only its user can read, and requires it
on every control call; the CLI and the scenario runner read it from the environment or from
that file, so nobody has to copy it by hand. Light on purpose: clients import it.

The file is never reached through a symbolic link: one planted at its path (or at its
directory's) would have ``serve`` write the token wherever the link points, and make it
readable there. ``serve`` writes a new file beside it without following links and renames it
into place, refusing a link it finds there; clients open it with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from forewarn.errors import ForewarnError

__all__ = [
    "TOKEN_ENVIRONMENT_VARIABLE",
    "TokenFileError",
    "find_token",
    "new_token",
    "remove_token",
    "token_file",
    "token_origin",
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


class TokenFileError(ForewarnError):
    """The token file cannot be written safely (a link at its path, a directory...)."""


def write_token(host: str, port: int, token: str) -> Path:
    """Write ``token`` for ``host:port``, readable by this user only (0600), following no
    link: a new file (``O_CREAT | O_EXCL | O_NOFOLLOW``) in the directory opened with
    ``O_NOFOLLOW``, renamed over the old one; a link at either path is refused.

    Only a server that holds ``host:port`` already may call it: then no other server listens
    there, and the file it replaces is a stale one (``forewarn serve`` binds both planes
    first)."""
    path = token_file(host, port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise _refusal(path.parent, exc) from None
    temporary = f".{path.name}.{secrets.token_hex(6)}"
    try:
        if _is_link(path.name, directory):
            raise _link_refusal(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        descriptor = os.open(temporary, flags, 0o600, dir_fd=directory)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        os.replace(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory)
    except OSError as exc:
        raise _refusal(path, exc) from None
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed into place: nothing left
            os.unlink(temporary, dir_fd=directory)
        os.close(directory)
    return path


def remove_token(host: str, port: int, token: str) -> bool:
    """Remove the token file of ``host:port`` if it still holds ``token``; whether it did.

    ``serve`` calls it as it stops cleanly, so no token outlives the server it opens (a
    killed server's stays, and the next one at that address replaces it). A file holding
    another token is another server's (one at the same address in another network
    namespace, or started since this one let its port go) and is left alone. The file is
    read and removed in its directory opened without following links, as it is written."""
    path = token_file(host, port)
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        descriptor = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=directory)
        with os.fdopen(descriptor, encoding="utf-8") as handle:
            held = handle.read(1024).strip()
        if held != token:
            return False
        os.unlink(path.name, dir_fd=directory)
    except (OSError, UnicodeDecodeError):
        return False
    finally:
        os.close(directory)
    return True


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _link_refusal(path: Path) -> TokenFileError:
    return TokenFileError(
        f"refusing to write the control API's token to {path}: it is a symbolic link "
        "(forewarn never follows one there; remove it)"
    )


def _refusal(path: Path, exc: OSError) -> TokenFileError:
    if exc.errno == errno.ELOOP or path.is_symlink():  # O_NOFOLLOW met a link
        return _link_refusal(path)
    return TokenFileError(f"cannot write the control API's token to {path}: {exc.strerror}")


def find_token(host: str, port: int) -> str | None:
    """The token for the control API at ``host:port``: ``FOREWARN_TOKEN``, else the file
    the server wrote (never through a link), else None."""
    found = _found(host, port)
    return None if found is None else found[0]


def token_origin(host: str, port: int) -> str | None:
    """Where :func:`find_token` takes the token for ``host:port`` from, as a message names
    it: ``FOREWARN_TOKEN``, the file's path, or None when there is none to send."""
    found = _found(host, port)
    return None if found is None else found[1]


def _found(host: str, port: int) -> tuple[str, str] | None:
    explicit = os.environ.get(TOKEN_ENVIRONMENT_VARIABLE)
    if explicit:
        return explicit, TOKEN_ENVIRONMENT_VARIABLE
    path = token_file(host, port)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(descriptor, encoding="utf-8") as handle:
            token = handle.read(1024).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (token, str(path)) if token else None
