"""Stores under test: each test gets a fresh one and every journal it opened is closed after.

PostgreSQL cases use the server named by ``FOREWARN_TEST_POSTGRES_URL`` (default: the local
trust-auth server, database ``test``), each in a random namespace or schema that is removed
afterwards. Without a server they skip and say why, except under ``CI``, where PostgreSQL is
part of the machine and its absence must fail the run rather than pass it quietly.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from postgres_support import require_postgres

from forewarn.storage import Journal, open_journal

BACKENDS = ("memory", "sqlite", "postgres")
DURABLE_BACKENDS = ("sqlite", "postgres")


@pytest.fixture
def postgres_url() -> str:
    """The server's URL, or a skip (a fail under CI) saying why it cannot be used."""
    return require_postgres()


def run_sql(url: str, statement: str, *params: object) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, params or None)


@dataclass
class Store:
    """One store location; ``open`` gives a new journal on it, as a restarted process would."""

    backend: str
    url: str
    opened: list[Journal] = field(default_factory=list)

    @property
    def durable(self) -> bool:
        return self.backend in DURABLE_BACKENDS

    def open(self) -> Journal:
        journal = open_journal(self.url)
        self.opened.append(journal)
        return journal

    def close_all(self) -> None:
        for journal in self.opened:
            journal.close()


def random_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    cleanup: Callable[[], None] | None = None
    if backend == "memory":
        store = Store(backend, "memory:")
    elif backend == "sqlite":
        store = Store(backend, f"sqlite:///{tmp_path / 'journal.sqlite3'}")
    else:
        url = request.getfixturevalue("postgres_url")
        namespace = random_name("test")
        store = Store(backend, f"{url}?namespace={namespace}")

        def cleanup() -> None:
            run_sql(url, "DELETE FROM public.forewarn_namespaces WHERE namespace = %s", namespace)

    try:
        yield store
    finally:
        store.close_all()
        if cleanup is not None:
            cleanup()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every backend in turn: the contract holds for all of them."""
    yield from _make_store(request.param, tmp_path, request)


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The backends whose journal outlives the process that wrote it."""
    yield from _make_store(request.param, tmp_path, request)


@pytest.fixture
def journal(store: Store) -> Journal:
    return store.open()


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL schema of the test's own, for tests that change what the schema holds."""
    schema = random_name("forewarn_test")
    try:
        yield schema
    finally:
        run_sql(postgres_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
