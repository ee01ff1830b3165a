"""What runs on a VM loads no server framework (STYLE.md habit 17, "A light client side").

The SDK, the agent and the CLI's client commands run inside VMs, where the server stack would
be paid for on every start and never used; only ``forewarn serve`` (and in-process scenario
runs) import it. Each check runs in a fresh interpreter, since this test process has long since
imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_STACK = ("fastapi", "starlette", "uvicorn", "httptools", "forewarn.server")

LOADED = f"""
import json, sys
print(json.dumps(sorted(m for m in {SERVER_STACK!r} if m in sys.modules)))
"""


def server_modules_after(code: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", code + LOADED],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(completed.stdout.splitlines()[-1])
    return loaded


def run_cli(*args: str) -> str:
    """``forewarn ARGS`` in this interpreter, as the console script runs it."""
    return f"import sys\nfrom forewarn.cli import main\nsys.argv = ['forewarn', *{args!r}]\n" + (
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
    )


@pytest.mark.parametrize(
    "code",
    [
        "import forewarn.client",
        "import forewarn.agent",
        "import forewarn.cli",
        "import forewarn.registry",
        "import forewarn.scenario.client",
        run_cli("agent", "--help"),
        run_cli("vm", "restart", "--help"),
        run_cli("host", "--help"),
        run_cli("scenario", "run", "--help"),
        run_cli("scenario", "list"),
        run_cli("record", "--help"),
        run_cli("replay", "--help"),
        "import forewarn.trace.recorder",
        run_cli("scenario", "show", "--builtin", "live-migration"),
    ],
)
def test_the_client_side_loads_no_server_stack(code: str) -> None:
    assert server_modules_after(code) == []


def test_the_operation_registry_needs_nothing_beyond_the_standard_library() -> None:
    """Every adapter builds on :mod:`forewarn.registry`, the CLI included, so it may not pull
    in a validation or HTTP library either."""
    code = "import forewarn.registry"
    probe = "\nimport sys\nprint(sorted(m for m in ('pydantic', 'httpx', 'click', 'yaml') if m in sys.modules))"
    completed = subprocess.run(
        [sys.executable, "-c", code + probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.strip() == "[]"


def test_the_pytest_plugin_loads_no_web_framework() -> None:
    """The plugin is loaded by every pytest run in a user's environment; it serves the
    endpoint (httptools) but has no use for the control API's framework."""
    loaded = server_modules_after("import forewarn.testing")
    assert not {"fastapi", "starlette", "uvicorn"} & set(loaded), loaded


def test_the_check_sees_the_server_stack_when_it_is_loaded() -> None:
    """The probe itself works: the control API's modules do load the stack."""
    loaded = server_modules_after("import forewarn.server.runner, forewarn.server.control")
    assert {"fastapi", "starlette", "uvicorn", "forewarn.server"} <= set(loaded)


@pytest.mark.parametrize(
    "code",
    [
        "import forewarn.testing",
        run_cli("verify", "--list"),
        "from forewarn.testing import ForewarnPlatform\n"
        "with ForewarnPlatform() as platform:\n    platform.restart('vm0')\n",
    ],
)
def test_what_needs_no_pytest_runs_where_pytest_is_not_installed(code: str) -> None:
    """``forewarn verify`` and ``ForewarnPlatform`` as a context manager (docs/testing.md)
    run where pytest is not installed: a wheel installed with pipx, the container image. The
    image's smoke test found ``forewarn verify`` failing there on ``import pytest``."""
    blocked = "import sys\nsys.modules['pytest'] = None  # as if not installed\n"
    completed = subprocess.run(
        [sys.executable, "-c", blocked + code],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
