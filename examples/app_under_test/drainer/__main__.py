"""``python -m drainer --vm NAME``: run the worker until interrupted.

The endpoint is Azure's unless ``--endpoint`` (or ``DRAINER_IMDS_ENDPOINT``) says otherwise,
which is how its tests point it at forewarn.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from types import FrameType

from drainer.worker import AZURE_ENDPOINT, Worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="drainer")
    parser.add_argument("--vm", required=True, help="this VM's name, as events' Resources show it")
    parser.add_argument(
        "--endpoint", default=os.environ.get("DRAINER_IMDS_ENDPOINT", AZURE_ENDPOINT)
    )
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    stop = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    worker = Worker(args.vm, args.endpoint)
    print(f"drainer: watching {worker.url} as {args.vm}", flush=True)
    try:
        worker.run(stop, args.interval)
    finally:
        worker.close()
        for line in worker.journal:
            print(f"drainer: {line}", flush=True)


if __name__ == "__main__":
    main()
