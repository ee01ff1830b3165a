"""The drainer against a forewarn platform: the fixture ``forewarn_platform`` comes from the
pytest plugin that installing forewarn registers; nothing here configures it.

The worker talks plain HTTP with ``requests`` to the URL the platform gives, exactly as it
would to http://169.254.169.254 on Azure. Platform time is a manual clock: the tests move it
with ``advance``, so fifteen minutes of notice cost nothing and nothing sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from drainer import Worker

from forewarn.testing import ForewarnPlatform, MakePlatform

APP_DIR = Path(__file__).resolve().parents[1]

#: Two VMs of one availability set on one host, as in the documentation's live-migration
#: example; each answers at its own loopback address.
PAIR = """
availabilitySets:
  - name: west
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 0, host: h1}
"""


@pytest.fixture
def worker(forewarn_platform: ForewarnPlatform) -> Iterator[Worker]:
    worker = Worker("vm0", forewarn_platform.url)
    yield worker
    worker.close()


def test_a_restart_drains_approves_at_once_and_recovers_after_the_reboot(
    forewarn_platform: ForewarnPlatform, worker: Worker
) -> None:
    assert worker.poll_once()
    assert not worker.draining

    (event,) = forewarn_platform.restart("vm0")
    assert worker.poll_once()

    assert worker.draining
    approval = forewarn_platform.assert_approved(event, by="vm0", within=0)
    assert approval.headers["metadata"] == "true"
    assert approval.api_version == "2020-07-01"
    # The approval started the reboot at once: while it lasts the VM cannot reach its endpoint.
    assert not worker.poll_once()
    assert worker.draining

    forewarn_platform.advance(15 * 60)  # past the impact and the Started period
    assert worker.poll_once()
    assert not worker.draining
    assert forewarn_platform.event(event) is None
    assert worker.journal[-2:] == ["Reboot is over", "recovered"]


def test_a_short_freeze_is_approved_without_draining(
    forewarn_platform: ForewarnPlatform, worker: Worker
) -> None:
    (event,) = forewarn_platform.live_migrate("host-vm0")
    worker.poll_once()

    assert not worker.draining
    forewarn_platform.assert_approved(event, by="vm0", within=0)


def test_an_event_for_the_other_vm_of_the_set_is_left_to_that_vm(
    make_forewarn_platform: MakePlatform,
) -> None:
    platform = make_forewarn_platform(fleet=PAIR)
    leader = Worker("WestNO_0", platform.url_for("WestNO_0"))
    partner = Worker("WestNO_1", platform.url_for("WestNO_1"))
    try:
        (event,) = platform.restart("WestNO_1")
        leader.poll_once()
        platform.assert_not_approved(event)
        assert not leader.draining

        partner.poll_once()
        platform.assert_approved(event, by="WestNO_1")
        assert partner.draining
        assert {r.vm for r in platform.requests(method="GET")} == {"WestNO_0", "WestNO_1"}
    finally:
        leader.close()
        partner.close()


@pytest.mark.forewarn(profile="fast")
def test_a_freeze_of_unknown_length_drains_like_a_reboot(
    forewarn_platform: ForewarnPlatform, worker: Worker
) -> None:
    event = forewarn_platform.schedule("Freeze", "vm0", duration_seconds=-1)
    worker.poll_once()
    assert worker.draining
    forewarn_platform.assert_approved(event, within=0)

    forewarn_platform.advance(60)  # the fast profile: seconds of impact and Started period
    assert worker.poll_once()
    assert not worker.draining


@pytest.mark.forewarn(fleet="vms: [{name: vm0, priority: Spot}]")
def test_the_worker_loop_in_a_thread_approves_an_eviction(
    forewarn_platform: ForewarnPlatform, worker: Worker
) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop, 0.01))
    thread.start()
    try:
        (event,) = forewarn_platform.evict("vm0")
        approval = forewarn_platform.wait_for_approval(event, timeout=5)
    finally:
        stop.set()
        thread.join(5)
    assert approval.vm == "vm0"
    assert approval.at == forewarn_platform.now  # no platform time passed: approved at once


def test_the_worker_as_its_own_process(forewarn_platform: ForewarnPlatform) -> None:
    env = {**os.environ, "PYTHONPATH": str(APP_DIR)}
    command = [sys.executable, "-m", "drainer", "--vm", "vm0", "--interval", "0.02"]
    with subprocess.Popen(
        [*command, "--endpoint", forewarn_platform.url],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            forewarn_platform.wait_for_request(timeout=10)  # it is up and polling
            (event,) = forewarn_platform.restart("vm0")
            forewarn_platform.wait_for_approval(event, timeout=10)
        finally:
            process.terminate()
            output, _ = process.communicate(timeout=10)
    assert "drainer: drained" in output
