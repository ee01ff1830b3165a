"""``forewarn serve`` starts without an HTTP client: it answers requests, it makes none.

httpx (and, through it, rich and urllib's request stack) is what the CLI's client commands
and the dashboard's scenario runs speak through; importing it cost a start a tenth of its
imports. The check runs the real ``forewarn serve`` in a fresh interpreter and looks at its
modules once it has printed its start-up lines (both planes listen), then stops it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from e2e_support import clean_environment, free_port

#: Modules looked for when the start is over: the control API's framework (which a started
#: server has loaded, so the look is known to come after the start) and the HTTP client.
WATCHED = ("fastapi", "httpx")

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


def test_a_started_serve_has_imported_no_http_client(tmp_path: Path) -> None:
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
    assert loaded == ["fastapi"], loaded
