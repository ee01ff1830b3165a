"""One wildcard listener for a whole fleet, inside a network namespace of the test's own.

``forewarn serve --bind 0.0.0.0:80`` opens one VM-facing socket however many VMs the fleet
has, and tells each VM by the address its connection arrived at, as a per-VM listener would
(SPEC 1: a VM is told apart by the address its request arrives at). The namespace is
private, so the wildcard reaches nothing but the namespace's own loopback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import Namespace, ServerProcess, namespace_for_test, run, serve_argv

pytestmark = [pytest.mark.e2e, pytest.mark.netns]

VM_COUNT = 300
CONTROL = "127.0.0.1:16955"

#: Asks every VM's own address who answers there, and how many sockets listen on port 80.
_POLL_EVERY_VM = """
import json, sys, time, urllib.request
addresses = json.loads(sys.argv[1])
deadline = time.monotonic() + 20
names = {}
for address in addresses:
    url = (f"http://{address}/metadata/instance/compute/name"
           "?api-version=2021-02-01&format=text")
    request = urllib.request.Request(url, headers={"Metadata": "true"})
    while True:
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                names[address] = response.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
print(json.dumps(names))
"""


def _address(n: int) -> str:
    return f"127.0.{1 + n // 250}.{1 + n % 250}"


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    with namespace_for_test() as created:
        yield created


def test_one_wildcard_listener_serves_every_vm_at_its_own_address(
    namespace: Namespace, tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "vms:\n"
        + "".join(f"  - {{name: vm{n:03d}, address: {_address(n)}}}\n" for n in range(VM_COUNT))
    )
    argv = serve_argv(bind="0.0.0.0:80", control=CONTROL, seed=1, fleet=fleet)
    server = ServerProcess(namespace.argv(*argv), tmp_path / "serve.log")
    try:
        addresses = [_address(n) for n in range(VM_COUNT)]
        polled = subprocess.run(
            namespace.argv(sys.executable, "-c", _POLL_EVERY_VM, json.dumps(addresses)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert polled.returncode == 0, polled.stderr + server.output()
        names = json.loads(polled.stdout)
        assert names == {_address(n): f"vm{n:03d}" for n in range(VM_COUNT)}
        listening = run(namespace.argv("ss", "-ltnH", "sport = :80"), timeout=10)
        assert listening.returncode == 0, listening.stderr
        assert len(listening.stdout.splitlines()) == 1, listening.stdout
        server.assert_healthy()
    finally:
        server.stop()
