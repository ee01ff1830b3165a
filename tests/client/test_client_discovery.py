"""Endpoint discovery from arguments, the environment and DHCP lease files (fixtures only).

SPEC 8: "VMs outside a virtual network find the endpoint through DHCP option 245
(WireServer address), as dhclient leases ``option unknown-245 a8:3f:81:10;`` or
systemd-networkd ``OPTION_245=A83F8110``";
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery": "For VNET
enabled VMs, Metadata Service is available from a static nonroutable IP, 169.254.169.254".
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from forewarn.client import (
    ENDPOINT_ENVIRONMENT_VARIABLE,
    Endpoint,
    discover_endpoint,
    endpoint_candidates,
    option_245_address,
)

NOW = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
WIRESERVER = "168.63.129.16"

# What dhclient writes on an Azure Ubuntu VM (shape of /var/lib/dhcp/dhclient.eth0.leases).
UBUNTU_LEASE = """\
default-duid "\\000\\001\\000\\001+\\235\\256\\203\\000\\015:\\330\\017\\256";
lease {
  interface "eth0";
  fixed-address 10.0.0.4;
  server-name "RD000D3AD80FAE";
  option subnet-mask 255.255.255.0;
  option dhcp-lease-time 4294967295;
  option routers 10.0.0.1;
  option dhcp-message-type 5;
  option dhcp-server-identifier 168.63.129.16;
  option domain-name-servers 168.63.129.16;
  option dhcp-renewal-time 4294967295;
  option rfc3442-classless-static-routes 0,10,0,0,1,32,168,63,129,16,10,0,0,1;
  option unknown-245 a8:3f:81:10;
  option dhcp-rebinding-time 4294967295;
  option domain-name "reddog.microsoft.com";  # a comment { with a brace
  renew 5 2026/11/27 10:00:00;
  rebind 5 2026/11/27 10:00:00;
  expire 4 2026/11/26 10:00:00;
}
"""


def lease(option: str, expire: str | None) -> str:
    lines = ["lease {", '  interface "eth0";', f"  option unknown-245 {option};"]
    if expire is not None:
        lines.append(f"  expire {expire};")
    return "\n".join([*lines, "}", ""])


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def discover(tmp_path: Path, *patterns: str, environ: dict[str, str] | None = None) -> Endpoint:
    return discover_endpoint(
        environ=environ or {},
        lease_paths=[str(tmp_path / pattern) for pattern in patterns],
        now=NOW,
    )


def test_ubuntu_dhclient_lease_gives_the_wireserver_address(tmp_path: Path) -> None:
    """SPEC 8: ``option unknown-245 a8:3f:81:10;`` is 168.63.129.16."""
    path = write(tmp_path / "dhcp" / "dhclient.eth0.leases", UBUNTU_LEASE)
    endpoint = discover(tmp_path, "dhcp/dhclient*.leases")
    assert endpoint == Endpoint(f"http://{WIRESERVER}", "dhcp", path)


def test_networkd_lease_gives_the_wireserver_address(tmp_path: Path) -> None:
    """SPEC 8: systemd-networkd writes ``OPTION_245=A83F8110``."""
    text = "# This is private data. Do not parse.\nADDRESS=10.0.0.4\nOPTION_245=A83F8110\n"
    write(tmp_path / "netif" / "leases" / "2", text)
    endpoint = discover(tmp_path, "netif/leases/*")
    assert endpoint.base_url == f"http://{WIRESERVER}"
    assert endpoint.source == "dhcp"


def test_expired_leases_are_ignored_and_the_last_unexpired_wins(tmp_path: Path) -> None:
    """Only unexpired leases count; dhclient appends new leases, so the last one wins."""
    text = (
        lease("a:0:0:1", "4 2026/11/26 10:00:00")  # 10.0.0.1, still valid
        + lease("a:0:0:2", "1 2026/11/16 10:00:00")  # 10.0.0.2, expired before NOW
        + lease("a:0:0:3", "never")  # 10.0.0.3, never expires: the last valid one
        + lease("a:0:0:4", "3 2026/11/18 09:00:00")  # 10.0.0.4, expired
    )
    write(tmp_path / "dhclient.leases", text)
    assert discover(tmp_path, "dhclient.leases").base_url == "http://10.0.0.3"


def test_a_lease_that_expires_exactly_now_is_expired(tmp_path: Path) -> None:
    write(tmp_path / "dhclient.leases", lease("a:0:0:1", "5 2026/11/20 12:00:00"))
    assert discover(tmp_path, "dhclient.leases").source == "default"


def test_epoch_expiry_and_missing_expiry(tmp_path: Path) -> None:
    """dhclient's ``db-time-format local`` writes ``expire epoch N;``; a lease without any
    expire statement is taken as valid."""
    future = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp())
    past = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    write(tmp_path / "a.leases", lease("a:0:0:1", f"epoch {future}"))
    write(tmp_path / "b.leases", lease("a:0:0:2", f"epoch {past}"))
    write(tmp_path / "c.leases", lease("a:0:0:3", None))
    assert discover(tmp_path, "a.leases").base_url == "http://10.0.0.1"
    assert discover(tmp_path, "b.leases").source == "default"
    assert discover(tmp_path, "c.leases").base_url == "http://10.0.0.3"


def test_unreadable_expiry_is_not_trusted(tmp_path: Path) -> None:
    write(tmp_path / "x.leases", lease("a:0:0:1", "tomorrow-ish"))
    assert discover(tmp_path, "x.leases").source == "default"


def test_no_lease_means_169_254_169_254(tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery":
    169.254.169.254."""
    write(tmp_path / "x.leases", 'lease {\n  interface "eth0";\n  expire never;\n}\n')
    endpoint = discover(tmp_path, "x.leases", "missing/*")
    assert endpoint == Endpoint("http://169.254.169.254", "default")


def test_lease_paths_are_read_in_order(tmp_path: Path) -> None:
    write(tmp_path / "dhcp" / "dhclient.eth1.leases", lease("a:0:0:2", "never"))
    write(tmp_path / "dhcp" / "dhclient.eth0.leases", lease("a:0:0:1", "never"))
    write(tmp_path / "netif" / "1", "OPTION_245=0A000009\n")
    assert discover(tmp_path, "netif/*", "dhcp/*").base_url == "http://10.0.0.9"
    # Within one pattern, files are read in name order: eth0 before eth1.
    assert discover(tmp_path, "dhcp/*", "netif/*").base_url == "http://10.0.0.1"


def test_argument_beats_environment_beats_leases(tmp_path: Path) -> None:
    """The order of discovery: argument, environment variable, leases, 169.254.169.254."""
    patterns = [str(write(tmp_path / "d.leases", UBUNTU_LEASE))]
    environ = {ENDPOINT_ENVIRONMENT_VARIABLE: "127.0.0.1:16954"}
    assert discover_endpoint(
        "http://127.0.0.2:80", environ=environ, lease_paths=patterns, now=NOW
    ) == Endpoint("http://127.0.0.2:80", "argument")
    assert discover_endpoint(environ=environ, lease_paths=patterns, now=NOW) == Endpoint(
        "http://127.0.0.1:16954", "environment", ENDPOINT_ENVIRONMENT_VARIABLE
    )
    assert discover_endpoint(environ={}, lease_paths=patterns, now=NOW).source == "dhcp"


def test_environment_variable_of_the_process_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENDPOINT_ENVIRONMENT_VARIABLE, "[::1]:16954")
    endpoint = discover_endpoint(lease_paths=[str(tmp_path / "none")])
    assert endpoint == Endpoint("http://[::1]:16954", "environment", ENDPOINT_ENVIRONMENT_VARIABLE)


@pytest.mark.parametrize(
    ("given", "base_url"),
    [
        ("169.254.169.254", "http://169.254.169.254"),
        ("127.0.0.1:16954", "http://127.0.0.1:16954"),
        ("http://127.0.0.1:16954/", "http://127.0.0.1:16954"),
        # The URL forewarn serve prints and the documented curl samples use:
        ("http://127.0.0.1:16954/metadata/scheduledevents", "http://127.0.0.1:16954"),
        ("https://imds.example:8443/prefix", "https://imds.example:8443/prefix"),
    ],
)
def test_endpoint_forms(given: str, base_url: str) -> None:
    assert discover_endpoint(given).base_url == base_url


@pytest.mark.parametrize("given", ["", "   ", "ftp://host", "http://"])
def test_endpoint_that_is_not_http_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        discover_endpoint(given)


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("a8:3f:81:10", "168.63.129.16"),
        ("A8:3F:81:10", "168.63.129.16"),
        ("a8:3f:81:9", "168.63.129.9"),  # dhclient prints bytes without leading zeros
        ("A83F8110", "168.63.129.16"),  # networkd
        ('"d@`A"', "100.64.96.65"),  # dhclient quotes an all-printable value
        ('"\\250?\\201\\020"', "168.63.129.16"),  # octal escapes in a quoted value
        ("a8:3f:81", None),
        ("a8:3f:81:10:1", None),
        ("zz:3f:81:10", None),
        ("A83F811", None),
    ],
)
def test_option_245_values(value: str, address: str | None) -> None:
    assert option_245_address(value) == address


def test_a_lease_address_keeps_169_254_169_254_behind_it(tmp_path: Path) -> None:
    """VNet VMs are given option 245 too, yet their Metadata Service is 169.254.169.254
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery"), so
    a lease address is followed by it as a fallback [ours]; an explicit or configured endpoint has
    none."""
    patterns = [write(tmp_path / "d.leases", UBUNTU_LEASE)]
    candidates = endpoint_candidates(environ={}, lease_paths=patterns, now=NOW)
    assert [c.base_url for c in candidates] == [f"http://{WIRESERVER}", "http://169.254.169.254"]
    assert len(endpoint_candidates("127.0.0.1", lease_paths=patterns, now=NOW)) == 1
    assert len(endpoint_candidates(environ={}, lease_paths=[], now=NOW)) == 1
