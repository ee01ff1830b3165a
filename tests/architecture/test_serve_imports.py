"""``forewarn serve`` answers its VMs without loading what only other parts need.

httpx (and, through it, rich and urllib's request stack) is what the CLI's client commands
and the dashboard's scenario runs speak through: a server answers requests, it makes none.
The control API's web framework, its routes and Resource Graph's KQL grammar are loaded by
the control API's first request (forewarn.server.runner.ControlApp). Together they were
half the CPU a start of one VM took. The check runs the real ``forewarn serve`` in a
fresh interpreter and looks at its modules as it prints its start-up lines (both planes
listen, the VMs are answered), then stops it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from e2e_support import clean_environment, free_port

#: Modules a start must not load: the HTTP client, the control API's web framework, the KQL
#: parser; uvicorn, which serves the control port from the start, shows the look is made.
WATCHED = ("fastapi", "httpx", "lark", "uvicorn")

STARTED = f"""
import json, os, signal, sys
import click
from forewarn.cli import main

def announce(*args, **kwargs):
    if not announce.done:
        announce.done = True
        print(json.dumps(sorted(m for m in {WATCHED!r} if m in sys.modules)), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)  # a clean stop: the token file is removed

announce.done = False
click.echo = announce
sys.argv = ["forewarn", "serve", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
"""


def test_a_started_serve_has_loaded_no_client_nor_control_framework(tmp_path: Path) -> None:
    bind, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    environment = clean_environment() | {"FOREWARN_RUNTIME_DIR": str(tmp_path)}
    argv = ["--bind", f"127.0.0.1:{bind}", "--control", f"127.0.0.1:{control}", "--clock", "manual"]
    completed = subprocess.run(
        [sys.executable, "-c", STARTED, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )
    assert completed.returncode == 0, completed.stderr
    loaded = json.loads(completed.stdout.splitlines()[0])
    assert loaded == ["uvicorn"], loaded
