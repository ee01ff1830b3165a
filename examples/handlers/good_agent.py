#!/usr/bin/env python3
"""forewarn's agent as the handler under test, with a state directory of its own.

    forewarn verify --suite quick -- python examples/handlers/good_agent.py

Runs ``forewarn agent --config agent.yaml`` (beside this file) with a fresh state directory,
removed when the agent exits, so each run starts from nothing as a new VM's agent does. The
drain hook's marker file is ``$FOREWARN_LB_MARKER`` when that is set, else ``out-of-rotation``
in the state directory. SIGTERM and SIGINT are passed on to the agent, which stops cleanly.
"""

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = Path(__file__).resolve().parent / "agent.yaml"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="forewarn-agent-") as state:
        environment = dict(os.environ)
        environment.setdefault("FOREWARN_LB_MARKER", str(Path(state) / "out-of-rotation"))
        command = [sys.executable, "-m", "forewarn", "agent", "--config", str(CONFIG)]
        agent = subprocess.Popen([*command, "--state-dir", state], env=environment)
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda received, _frame: agent.send_signal(received))
        return agent.wait()


if __name__ == "__main__":
    sys.exit(main())
