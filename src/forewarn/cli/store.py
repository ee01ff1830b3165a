"""``forewarn store check``: verify a journal offline, by replaying it as start-up would.

Run it on a store that refuses to start (it names the first bad record), before pointing
front-ends at a copy, or after editing one by hand. It reads only; a SQLite data directory
in use by a running ``forewarn serve`` is refused (one writer per file).
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


__all__ = [
    "check",
    "store",
]
