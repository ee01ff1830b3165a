"""A second ``forewarn serve`` that cannot start leaves the running one's token alone (README
"Security": the token is written where the CLI finds it; a start-up failure is one line and
exit status 1); a refused token is one line saying which token was sent and where the
server's is.

Seen by a newcomer: a second serve failing because the control port was taken had already
replaced the running server's token file, so the CLI was locked out of the running server
(401). The token is written only once both listeners are bound, which no serve can do while
another holds its control address.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from e2e_support import free_port, start_up_lines

LOOPBACK = ["127.0.0.1"]


def _environment(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FOREWARN_TOKEN", "FOREWARN_CONTROL")}
    env["FOREWARN_RUNTIME_DIR"] = str(runtime)
    return env


def test_a_serve_refused_its_control_port_keeps_the_running_server_s_token(
    tmp_path: Path,
) -> None:
    env = _environment(tmp_path / "runtime")
    port, other_port, control = (free_port(LOOPBACK) for _ in range(3))
    serve = [sys.executable, "-m", "forewarn", "serve", "--control", f"127.0.0.1:{control}"]
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen([*serve, "--bind", f"127.0.0.1:{port}"], stdout=out, env=env)
    try:
        start_up_lines(log, first, "control: http")
        token_file = tmp_path / "runtime" / f"control-127.0.0.1-{control}.token"
        token = token_file.read_text()

        def forewarn(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "forewarn", *args]
            environ = {**env, **extra}
            return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=environ)

        second = forewarn(*serve[3:], "--bind", f"127.0.0.1:{other_port}")
        assert second.returncode == 1, second.stderr
        assert f"the control API cannot listen on 127.0.0.1:{control}" in second.stderr
        assert token_file.read_text() == token, "the running server's token was replaced"
        listed = forewarn("vm", "list", "--control", f"127.0.0.1:{control}")
        assert listed.returncode == 0, listed.stderr
        assert "vm0" in listed.stdout
        # A wrong token is one clear line, not the answer's JSON.
        refused = forewarn(
            "vm", "list", "--control", f"127.0.0.1:{control}", FOREWARN_TOKEN="not-the-token"
        )
        assert refused.returncode == 1
        assert refused.stderr == (
            f"Error: 401: the control API at 127.0.0.1:{control} refused the token in "
            f"FOREWARN_TOKEN: unset it to use the one forewarn serve wrote to {token_file}, "
            "or set it to that token\n"
        )
        # A file the server did not write (another user's serve, a container's): named.
        token_file.write_text("a-token-of-another-serve\n")
        stale = forewarn("vm", "list", "--control", f"127.0.0.1:{control}")
        assert stale.stderr == (
            f"Error: 401: the control API at 127.0.0.1:{control} refused the token in "
            f"{token_file}, which is not its own (a serve run by another user or in a "
            "container writes its own file): set FOREWARN_TOKEN to its token\n"
        )
        token_file.unlink()
        none = forewarn("vm", "list", "--control", f"127.0.0.1:{control}")
        assert none.stderr == (
            "Error: 401: the control API needs its token: Authorization: Bearer <token>, "
            "FOREWARN_TOKEN, or the file forewarn serve wrote (see its start-up lines); none "
            f"was sent (FOREWARN_TOKEN is unset, no {token_file})\n"
        )
    finally:
        first.terminate()
        first.wait(10)
