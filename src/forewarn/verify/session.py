"""One `forewarn verify` run from its options: attach, run the trials, leave nothing behind.

:func:`verify_handler` sets up where the handler's VM answers (the relay on loopback, on
``--bind``, or on 169.254.169.254:80 inside a network namespace of its own with
``--namespace``), starts the handler (unless ``--attach``), runs the trials and, however the
run ends, stops the handler's process group, closes the relay and deletes the namespace.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from forewarn.verify.engine import Attachment, Progress, Runner, run
from forewarn.verify.handler import HandlerProcess
from forewarn.verify.model import RunReport, VerifyError
from forewarn.verify.relay import Relay, socket_in_namespace
from forewarn.verify.stage import Trial

AZURE_ADDRESS = "169.254.169.254"


@dataclass(frozen=True)
class Options:
    """What the command line (or a caller such as the pytest plugin) asks for."""

    command: Sequence[str] = ()
    attach: bool = False
    namespace: bool = False
    bind: str | None = None
    endpoint_env: str = "FOREWARN_IMDS_ENDPOINT"
    restart_per_trial: bool = False
    profile: str = "documented"
    timing: Mapping[str, float] = field(default_factory=dict)
    checks: Mapping[str, str] = field(default_factory=dict)
    start_timeout: float = 30.0
    suite: str = "quick"
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def _address(bind: str | None, host: str, port: int) -> tuple[str, int]:
    if not bind:
        return host, port
    where, sep, number = bind.rpartition(":")
    if not sep:
        where, number = bind, str(port)
    try:
        return (where or host), int(number)
    except ValueError:
        raise VerifyError(f"--bind {bind!r}: give HOST:PORT, e.g. 127.0.0.1:8080") from None


def _ip(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=10, check=False)


@contextlib.contextmanager
def _namespace() -> Iterator[str]:
    """A network namespace with loopback up and Azure's address on it, deleted (with anything
    left running in it) however the run ends."""
    if os.geteuid() != 0:
        raise VerifyError("--namespace needs root (it makes a network namespace)")
    name = f"forewarn-verify-{os.getpid()}-{secrets.token_hex(2)}"
    try:
        added = _ip("netns", "add", name)
    except FileNotFoundError:
        raise VerifyError("--namespace needs iproute2's ip command") from None
    if added.returncode != 0:
        raise VerifyError(f"cannot make a network namespace: {added.stderr.strip()}")
    try:
        for argv in (
            ("link", "set", "lo", "up"),
            ("addr", "add", f"{AZURE_ADDRESS}/32", "dev", "lo"),
        ):
            done = _ip("netns", "exec", name, "ip", *argv)
            if done.returncode != 0:
                raise VerifyError(f"cannot set up {name}: {done.stderr.strip()}")
        yield name
    finally:
        listed = _ip("netns", "pids", name)
        for pid in listed.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        _ip("netns", "del", name)


def verify_handler(
    options: Options,
    trials: Sequence[Trial],
    *,
    progress: Progress | None = None,
    announce: Callable[[str], None] = lambda line: None,
) -> RunReport:
    """Run ``trials`` against the handler ``options`` describe; the report. ``VerifyError``
    when the run could not happen, after cleaning up."""
    if not trials:
        raise VerifyError("no trial to run")
    if options.attach and options.command:
        raise VerifyError("--attach runs no command: give one or the other")
    if not options.attach and not options.command:
        raise VerifyError("give the handler's command after --, or --attach")
    with contextlib.ExitStack() as stack:
        wrapper: tuple[str, ...] = ()
        where = ""
        if options.namespace:
            name = stack.enter_context(_namespace())
            host, port = _address(options.bind, AZURE_ADDRESS, 80)
            relay = Relay(sock=socket_in_namespace(name, host, port))
            wrapper = ("ip", "netns", "exec", name)
            where = f" in network namespace {name} (ip netns exec {name} CMD)"
        else:
            host, port = _address(options.bind, "127.0.0.1", 0)
            relay = Relay(host, port)
        relay.start()
        stack.callback(relay.stop)
        bound_host, bound_port = relay.address
        url = f"http://{bound_host}" + ("" if bound_port == 80 else f":{bound_port}")
        handler = None
        if options.attach:
            announce(f"the handler's VM answers at {url} (start the handler against it now){where}")
            description = f"a handler attached at {url}{where}"
        else:
            environ = {**options.environ, options.endpoint_env: url}
            handler = HandlerProcess(options.command, environ, wrapper=wrapper)
            stack.callback(handler.close)
            handler.check_command()
            description = handler.describe()
        attachment = Attachment(relay, handler, description, options.restart_per_trial)
        runner = Runner(
            attachment,
            profile=options.profile,
            overrides=options.timing,
            checks=options.checks,
            start_timeout=options.start_timeout,
        )
        return run(runner, trials, suite=options.suite, progress=progress)
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["AZURE_ADDRESS", "Options", "verify_handler"]
