"""A TCP relay from the front-ends' link addresses to PostgreSQL on the host's loopback.

PostgreSQL usually listens on 127.0.0.1 only, which a network namespace cannot reach: its own
loopback is another one. ``run.sh`` starts this relay in the root namespace, listening on the
host side of each namespace's veth pair, so the front-ends reach the database without it
listening anywhere new. Standard library only, so any Python 3.11 runs it.

    python3 pg_relay.py --to 127.0.0.1:5432 --listen 10.200.0.1:5432 --listen 10.200.0.5:5432
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence


def address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until its end, then half-close the other side."""
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def relay(
    target: tuple[str, int], client: asyncio.StreamReader, reply: asyncio.StreamWriter
) -> None:
    """One front-end connection, joined to a new connection to PostgreSQL."""
    try:
        upstream, sending = await asyncio.open_connection(*target)
    except OSError as exc:
        print(f"pg_relay: cannot reach {target[0]}:{target[1]}: {exc}", file=sys.stderr)
        reply.close()
        return
    try:
        await asyncio.gather(pipe(client, sending), pipe(upstream, reply))
    finally:
        for writer in (sending, reply):
            writer.close()


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--to", type=address, required=True, help="PostgreSQL's HOST:PORT")
    parser.add_argument(
        "--listen", type=address, action="append", required=True, help="HOST:PORT (repeatable)"
    )
    args = parser.parse_args(argv)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    servers = []
    for host, port in args.listen:
        try:
            servers.append(
                await asyncio.start_server(
                    lambda r, w: relay(args.to, r, w), host, port, reuse_address=True
                )
            )
        except OSError as exc:
            print(f"pg_relay: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
            return 1
    await stop.wait()
    for server in servers:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
