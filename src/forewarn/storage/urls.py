"""From a store URL to an open journal.

    memory:                                   gone when the process exits
    sqlite:///abs/path.db  (or sqlite:////abs/path.db, sqlite:relative.db)
    /a/directory                              its forewarn.sqlite3, directory created if missing
                                              (an existing file is opened as the SQLite file)
    postgresql://user@host:5432/db?namespace=fleet&schema=forewarn
                                              namespace defaults to "default", schema to "public"

PostgreSQL support is optional (``pip install 'forewarn[postgres]'``), so its driver is only
imported when a PostgreSQL URL is opened.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from forewarn.storage.errors import StoreUnavailableError, StoreUrlError
from forewarn.storage.journal import Journal
from forewarn.storage.memory import MemoryJournal
from forewarn.storage.sqlite import SqliteJournal

#: The journal file inside a data directory.
SQLITE_FILE_NAME = "forewarn.sqlite3"

# Two letters at least, so a Windows drive ("C:\\data") reads as a path, not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:`` URL names; any number of slashes after ``//`` means absolute."""
    rest = url[len("sqlite:") :]
    if rest.startswith("//"):
        rest = rest[2:]
        if not rest.startswith("/"):
            raise StoreUrlError(
                f"{url!r}: SQLite URLs have no host; write sqlite:///absolute/path.db "
                f"or sqlite:relative/path.db"
            )
        rest = "/" + rest.lstrip("/")
    if rest in ("", "/"):
        raise StoreUrlError(f"{url!r} names no file")
    return rest


def postgres_target(url: str) -> tuple[str, str | None, str | None]:
    """The libpq URL without forewarn's own parameters, then the namespace and schema."""
    parts = urlsplit(url)
    kept: list[tuple[str, str]] = []
    ours: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("namespace", "schema"):
            if key in ours:
                raise StoreUrlError(f"{key} is given twice in the store URL")
            ours[key] = value
        else:
            kept.append((key, value))
    conninfo = urlunsplit(parts._replace(query=urlencode(kept)))
    return conninfo, ours.get("namespace"), ours.get("schema")


def directory_journal_path(location: str | Path) -> Path:
    """The SQLite file for a plain path: the path itself if it is a file, else inside it."""
    path = Path(location).expanduser()
    if path.is_file():
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailableError(f"cannot create data directory {path}: {exc}") from exc
    return path / SQLITE_FILE_NAME


#: The schemes of a PostgreSQL store, the one kind several front-ends may share.
POSTGRES_SCHEMES = ("postgresql", "postgres")


def _scheme(url: str) -> str | None:
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else None


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL store."""
    return _scheme(url) in POSTGRES_SCHEMES


def open_journal(url: str) -> Journal:
    """Open (creating if needed) the journal ``url`` names."""
    if url in ("memory:", "memory://"):
        return MemoryJournal()
    scheme = _scheme(url)
    if scheme == "sqlite":
        return SqliteJournal(sqlite_path(url))
    if scheme in POSTGRES_SCHEMES:
        try:
            from forewarn.storage.postgres import DEFAULT_NAMESPACE, DEFAULT_SCHEMA, PostgresJournal
        except ImportError as exc:
            raise StoreUnavailableError(
                "PostgreSQL stores need the psycopg driver: pip install 'forewarn[postgres]'"
            ) from exc
        conninfo, namespace, schema = postgres_target(url)
        return PostgresJournal(
            conninfo,
            namespace=DEFAULT_NAMESPACE if namespace is None else namespace,
            schema=DEFAULT_SCHEMA if schema is None else schema,
        )
    if scheme is not None:
        raise StoreUrlError(
            f"unknown store {scheme!r} in {url!r}: use memory:, sqlite:///path, "
            f"postgresql://... or a directory"
        )
    if not url:
        raise StoreUrlError("an empty store URL names no store")
    return SqliteJournal(directory_journal_path(url))


__all__ = [
    "POSTGRES_SCHEMES",
    "SQLITE_FILE_NAME",
    "directory_journal_path",
    "is_postgres_url",
    "open_journal",
    "postgres_target",
    "sqlite_path",
]
