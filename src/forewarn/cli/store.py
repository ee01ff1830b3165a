"""``forewarn store check``: verify a journal offline, by replaying it as start-up would;
``forewarn store delete``: remove a PostgreSQL namespace and everything of it.

Run ``check`` on a store that refuses to start (it names the first bad record), before
pointing front-ends at a copy, or after editing one by hand. It reads only; a SQLite data
directory in use by a running ``forewarn serve`` is refused (one writer per file).

A PostgreSQL namespace keeps the fleet, seed, profile and clock it was created with, and its
Event Grid subscriptions in a schema of its own; ``delete`` removes both, so starting afresh
under the same name leaves nothing behind (deleting the namespace's row by hand left the
Event Grid schema).
"""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def store() -> None:
    """Inspect a store (a data directory or a --store URL) without serving it."""


@store.command("check")
@click.option(
    "--store",
    "url",
    default=None,
    metavar="URL",
    envvar="FOREWARN_STORE",
    help="The store: postgresql://...?namespace=NAME or sqlite:///path (env FOREWARN_STORE).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The data directory of `forewarn serve --data-dir`.",
)
def check(url: str | None, data_dir: Path | None) -> None:
    """Replay the journal offline: a summary when every record applies, else the first
    record that does not (exit status 1)."""
    # Replaying needs the domain and the store, not the server: imported here, by the one
    # command that uses them, so the client commands stay light.
    from forewarn.errors import ForewarnError
    from forewarn.server.embedded_postgres import holds_embedded_store, store_of
    from forewarn.server.state import SQLITE_FILE, check_store, reaching_the_store

    if (url is None) == (data_dir is None):
        raise click.UsageError("give one of --store and --data-dir")
    try:
        if data_dir is not None and holds_embedded_store(data_dir):
            # a --workers fleet: its PostgreSQL, running or started for the check
            with store_of(data_dir) as embedded:
                summary = check_store(embedded)
        else:
            if data_dir is not None:
                url = f"sqlite:///{(data_dir / SQLITE_FILE).resolve()}"
            assert url is not None
            with reaching_the_store(url):
                summary = check_store(url)
    except ForewarnError as exc:
        raise click.ClickException(str(exc)) from None
    last = summary.last_at.isoformat() if summary.last_at else "none"
    click.echo(
        f"ok: {summary.records} record(s) replayed, {summary.events} live event(s), "
        f"{summary.vms} VM(s), last record at {last}, EventIds {summary.event_ids}"
    )


@store.command(
    "delete",
    epilog="""Examples:

\b
  forewarn store delete --store 'postgresql://127.0.0.1/test?namespace=lab' --yes
""",
)
@click.option(
    "--store",
    "url",
    required=True,
    metavar="URL",
    envvar="FOREWARN_STORE",
    help="The namespace to delete: postgresql://...?namespace=NAME (env FOREWARN_STORE).",
)
@click.option("--yes", is_flag=True, help="Delete without asking.")
def delete(url: str, yes: bool) -> None:
    """Delete a PostgreSQL namespace: its journal, metadata and Event Grid state. Refused
    while a front-end serves it (stop them first); a SQLite store is a file to remove."""
    from forewarn.errors import ForewarnError
    from forewarn.eventgrid.postgres import drop_outbox
    from forewarn.server.state import reaching_the_store, url_without_password
    from forewarn.storage.postgres import DEFAULT_NAMESPACE, DEFAULT_SCHEMA, PostgresJournal
    from forewarn.storage.urls import is_postgres_url, postgres_target

    if not is_postgres_url(url):
        raise click.UsageError(
            "store delete removes a PostgreSQL namespace; a SQLite store is its file "
            "(or --data-dir), removed with rm once no forewarn serve uses it"
        )
    conninfo, namespace, schema = postgres_target(url)
    name = DEFAULT_NAMESPACE if namespace is None else namespace
    shown = url_without_password(url)
    if not yes:
        click.confirm(f"delete namespace {name!r} of {shown} and its Event Grid state?", abort=True)
    try:
        with reaching_the_store(url):
            journal = PostgresJournal(
                conninfo, namespace=name, schema=DEFAULT_SCHEMA if schema is None else schema
            )
            try:
                leader = journal.leadership()
                if not leader.acquire():
                    raise click.ClickException(
                        f"a front-end is serving namespace {name!r} (it holds the leader "
                        "lock): stop every forewarn serve on it first"
                    )
                try:
                    records = journal.delete()
                    outbox = drop_outbox(url)
                finally:
                    leader.release()
            finally:
                journal.close()
    except ForewarnError as exc:
        raise click.ClickException(str(exc)) from None
    grid = "and its Event Grid state" if outbox else "(no Event Grid state)"
    click.echo(f"deleted namespace {name!r} of {shown}: {records} record(s) {grid}")


__all__ = [
    "check",
    "delete",
    "store",
]
