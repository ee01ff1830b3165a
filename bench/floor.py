"""The least a Python server on uvloop costs per poll, measured beside forewarn and nginx.

A protocol that answers each request at an address with that address's document and nothing
else: no parsing, no checks, no state, one pre-built answer per address (the bytes nginx
sends, Date and request id aside). What forewarn costs per poll above it is forewarn's own
work; what it costs above nginx but below it is the event loop's and the interpreter's, which
no change inside forewarn can remove. It is in the real workload so that a ratio target
forewarn misses is explained by a measurement made in the same run, not by a guess.

``python -m bench.floor --port PORT --documents FILE`` (FILE: JSON, address -> document)
listens on ``0.0.0.0:PORT``; run it only inside a network namespace made for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import uvloop

from bench.servers import _Process
from bench.tools import wait_for_port

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Server: IMDS/150.870.65.1854\r\nContent-Length: %d\r\n\r\n"
)
_END_OF_HEAD = b"\r\n\r\n"


class _Answer(asyncio.Protocol):
    """Every request that arrives on the connection gets the address's answer."""

    __slots__ = ("_answer", "_answers", "_transport")

    def __init__(self, answers: Mapping[str, bytes]) -> None:
        self._answers = answers
        self._answer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self._answer = self._answers[transport.get_extra_info("sockname")[0]]

    def data_received(self, data: bytes) -> None:
        # A poll is one bodiless GET; reads may hold several when the generator falls behind.
        if self._transport is not None:
            self._transport.write(self._answer * data.count(_END_OF_HEAD))


async def serve(port: int, documents: Mapping[str, bytes]) -> None:
    answers = {address: _HEAD % len(body) + body for address, body in documents.items()}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Answer(answers), "0.0.0.0", port, backlog=4096)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


class PythonFloor(_Process):
    """:func:`serve` in a process of its own, for the real workload."""

    def __init__(
        self, work: Path, documents: Mapping[str, bytes], port: int, *, prefix: Sequence[str] = ()
    ) -> None:
        self.work, self.documents, self.port, self.prefix = work, documents, port, prefix
        self.host = "0.0.0.0"

    def __enter__(self) -> PythonFloor:
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / "documents.json"
        path.write_text(
            json.dumps({address: body.decode() for address, body in self.documents.items()}),
            encoding="utf-8",
        )
        log = (self.work / "floor.out").open("wb")
        argv = [sys.executable, "-m", "bench.floor", "--port", str(self.port)]
        self.process = subprocess.Popen(
            [*self.prefix, *argv, "--documents", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        try:
            wait_for_port("127.0.0.1", self.port, self.process, timeout=30)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--documents", type=Path, required=True, help="JSON: address -> body")
    args = parser.parse_args(argv)
    documents = {
        address: body.encode()
        for address, body in json.loads(args.documents.read_text(encoding="utf-8")).items()
    }
    uvloop.run(serve(args.port, documents))


if __name__ == "__main__":
    main()
