"""A hostile fleet file is refused in one line naming the file and the field, before anything
is built [ours]: the 1,000,000-VM limit counts the whole fleet, numbers are bounded in length,
a key given twice is an error rather than a silent last-wins, and an empty file is not the
zero-configuration fleet (docs/serve.md, "Several VMs": "A mistake in a fleet file is reported with
the file, the field and the reason, and nothing starts").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import forewarn.config.fleet as fleet_module
from forewarn.config.fleet import MAX_VMS, FleetFileError, load_fleet, parse_fleet

#: Ten scale sets of the per-set maximum: 591 bytes that asked for ten million VMs.
TEN_MILLION = "scaleSets:\n" + "".join(
    f"  - {{name: s{n}, capacity: 1000000, addressStart: 10.{n}.0.1}}\n" for n in range(10)
)
NO_ADDRESSES = "scaleSets:\n  - {name: web, capacity: 1000000}\n"
LONG_NUMBER = "scaleSets:\n  - name: web\n    capacity: " + "9" * 5000 + "\n"
TWICE = (
    "scaleSets:\n"
    "  - name: web\n"
    "    capacity: 2\n"
    "    addressStart: 127.0.3.1\n"
    "    capacity: 200000\n"
)


@pytest.fixture
def no_vm_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet builder fails the test at its first VM: a refusal must come before it (and
    a fleet of millions is never built here)."""

    def built(**fields: Any) -> Any:
        raise AssertionError(f"VM {fields['name']} was built before the fleet was refused")

    monkeypatch.setattr(fleet_module, "Vm", built)


@pytest.mark.usefixtures("no_vm_built")
def test_the_limit_is_on_the_whole_fleet_and_checked_before_any_vm_is_built() -> None:
    assert len(TEN_MILLION.encode()) < 600
    with pytest.raises(FleetFileError) as refused:
        parse_fleet(TEN_MILLION, "big.yaml")
    assert str(refused.value) == (
        "big.yaml: scaleSets.1.capacity: with these the fleet holds 2,000,000 VMs; "
        "at most 1,000,000 in all"
    )
    mixed = (
        f"vms: [{{name: a, address: 127.0.0.2}}]\n"
        f"scaleSets: [{{name: web, capacity: {MAX_VMS}, addressStart: 10.0.0.1}}]\n"
    )
    with pytest.raises(FleetFileError, match=r"scaleSets\.0\.capacity: .* 1,000,001 VMs"):
        parse_fleet(mixed, "mixed.yaml")


@pytest.mark.usefixtures("no_vm_built")
def test_a_set_whose_vms_cannot_be_told_apart_is_refused_before_any_is_built() -> None:
    with pytest.raises(FleetFileError, match=r"^web\.yaml: scaleSets\.0\.addressStart: with"):
        parse_fleet(NO_ADDRESSES, "web.yaml")
    with pytest.raises(FleetFileError, match=r"cloudServices\.0\.addressStart"):
        parse_fleet("cloudServices: [{name: cs, roles: [{name: Web, instances: 2}]}]", "c.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            LONG_NUMBER,
            "f.yaml: scaleSets.0.capacity: an integer of 5,000 characters (at most 32), line 3",
        ),
        (TWICE, "f.yaml: scaleSets.0: key 'capacity' is given twice, on lines 3 and 5"),
        ("vms: [{name: a, name: b}]", "f.yaml: vms.0: key 'name' is given twice, on lines 1 and 1"),
        ("", "f.yaml: the file holds no fleet"),
        ("# every VM commented out\n# vms: [{name: a}]\n", "f.yaml: the file holds no fleet"),
        ("vms: " + "[" * 40 + "]" * 40, "f.yaml: vms.0.0.0: nested deeper than 32 levels"),
        ("vms: [" * 2000, "f.yaml: not valid YAML: exceeded maximum nesting depth"),
        (
            "scaleSets: [{name: s, capacity: 1, terminateNotification: "
            "{notBeforeTimeout: PT" + "9" * 5000 + "M}}]",
            "f.yaml: scaleSets.0.terminateNotification.notBeforeTimeout: must be "
            "an ISO 8601 duration",
        ),
    ],
)
def test_hostile_values_are_one_line_naming_file_and_field(text: str, expected: str) -> None:
    with pytest.raises(FleetFileError) as refused:
        parse_fleet(text, "f.yaml")
    message = str(refused.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_aliases_cannot_make_a_small_file_stand_for_a_huge_one() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 8)]
    bomb = "\n".join(levels) + "\nvms: []\n"
    with pytest.raises(FleetFileError, match="aliases make the document stand for more than"):
        parse_fleet(bomb, "bomb.yaml")


def test_an_empty_fleet_file_is_not_the_default_fleet(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(FleetFileError, match=r"empty\.yaml: the file holds no fleet"):
        load_fleet(empty)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (TEN_MILLION, "scaleSets.1.capacity: with these the fleet holds 2,000,000 VMs"),
        (LONG_NUMBER, "scaleSets.0.capacity: an integer of 5,000 characters"),
        ("", "the file holds no fleet"),
    ],
    ids=["ten-million", "long-number", "empty"],
)
def test_serve_refuses_in_one_line_and_exit_status_1(
    tmp_path: Path, text: str, fragment: str
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(text)
    argv = [sys.executable, "-m", "forewarn", "serve", "--fleet", str(fleet)]
    argv += ["--bind", "127.0.0.1:1", "--control", "127.0.0.1:2"]  # never reached
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert finished.returncode == 1, (finished.stdout, finished.stderr)
    assert finished.stderr.count("\n") == 1, finished.stderr
    assert finished.stderr.startswith(f"Error: {fleet}: {fragment}"), finished.stderr
