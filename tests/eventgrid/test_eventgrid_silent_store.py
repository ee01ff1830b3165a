"""Event Grid's PostgreSQL store bounds every call on a server gone silent.

docs/scale-out.md, "A silent PostgreSQL": a server that keeps its connections open but answers
nothing held Event Grid's delivery loop (and so ``forewarn serve``'s stop on SIGTERM) for as
long as it stayed silent. Each call now waits :data:`CALL_SECONDS` at most and fails as a store
failure, which the delivery loop rides out; once the server answers again, so does the store.
The silence comes from a TCP proxy that holds what either side sends (tests/support/tcp_proxy.py).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from postgres_support import require_postgres
from tcp_proxy import TcpProxy

from forewarn.eventgrid import postgres
from forewarn.eventgrid.postgres import PostgresDeliveryStore, drop_outbox
from forewarn.storage.errors import StoreUnavailableError

BOUND = 1.0


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PostgresDeliveryStore, TcpProxy]]:
    """A delivery store of a namespace of its own, reaching the server through a proxy."""
    monkeypatch.setattr(postgres, "CALL_SECONDS", BOUND)
    server = require_postgres()
    parts = urlsplit(server)
    assert parts.hostname is not None
    namespace = f"silent_{uuid.uuid4().hex[:12]}"
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        url = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        store = PostgresDeliveryStore(f"{url}?namespace={namespace}")
        try:
            yield store, proxy
        finally:
            proxy.resume()
            store.close()
            drop_outbox(f"{server}?namespace={namespace}")


def test_a_call_on_a_silent_server_fails_within_its_bound_and_the_store_recovers(
    proxied: tuple[PostgresDeliveryStore, TcpProxy],
) -> None:
    store, proxy = proxied
    assert store.subscriptions() == []
    proxy.silence()
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(store.subscriptions())
        except BaseException as exc:  # what the call met, checked below
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    # Far past the bound, far short of what the kernel would wait (minutes): without the
    # store's own bound the call is still waiting here.
    caller.join(timeout=30)
    assert not caller.is_alive(), "the call is still waiting on the silent server"
    assert isinstance(outcome[0], StoreUnavailableError), outcome
    proxy.resume()
    assert store.subscriptions() == []  # a new connection, once the server answers
