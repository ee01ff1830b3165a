"""Where the Scheduled Events endpoint is, found the way a VM has to find it.

VMs in a virtual network reach the Metadata Service at 169.254.169.254; VMs outside one
(classic VMs, cloud services) must discover the address another way
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery": "If the
VM isn't created within a Virtual Network ... additional logic is required to discover the IP
address to use"), which is the address the platform hands out as DHCP option 245 (SPEC 8). Nothing
here sends DHCP: the address is read from the lease files the VM's DHCP client already wrote.

The order, first answer wins:

1. the endpoint given to the client;
2. the ``FOREWARN_IMDS_ENDPOINT`` environment variable (``host``, ``host:port`` or a URL);
3. option 245 of the DHCP leases: dhclient lease files (``option unknown-245 a8:3f:81:10;``,
   only unexpired leases, the last one in a file wins) or systemd-networkd lease files
   (``OPTION_245=A83F8110``), read in the order of the lease paths;
4. ``169.254.169.254``.

An address found in a lease is only a candidate: DHCP option 245 is the platform's WireServer
address, which VMs inside a virtual network are given too, and on those the Metadata Service
answers at 169.254.169.254 alone. :func:`endpoint_candidates` therefore keeps 169.254.169.254
behind a lease address, and the clients move on to it when the lease address gives no
Metadata-Service answer ([ours], as the documented discovery sample checks an address before
using it).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

ENDPOINT_ENVIRONMENT_VARIABLE = "FOREWARN_IMDS_ENDPOINT"
IMDS_ADDRESS = "169.254.169.254"
IMDS_BASE_URL = f"http://{IMDS_ADDRESS}"

#: Where dhclient (Debian/Ubuntu, then Red Hat style) and systemd-networkd keep their leases.
DEFAULT_LEASE_PATHS: tuple[str, ...] = (
    "/var/lib/dhcp/dhclient*.leases",
    "/var/lib/dhclient/*.leases",
    "/run/systemd/netif/leases/*",
)

_SCHEDULED_EVENTS_SUFFIX = "/metadata/scheduledevents"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A base URL (``http://169.254.169.254``) and where it came from.

    ``source`` is ``"argument"``, ``"environment"``, ``"dhcp"`` or ``"default"``; ``detail``
    names the variable or lease file.
    """

    base_url: str
    source: str
    detail: str = ""


def normalize_base_url(text: str) -> str:
    """``host``, ``host:port``, ``[v6]:port`` or a URL, as ``scheme://host[:port]``.

    A URL that already ends in ``/metadata/scheduledevents`` is cut back to its base, so the
    URL printed by ``forewarn serve`` and the documented curl samples both work.
    """
    text = text.strip()
    if not text:
        raise ValueError("an endpoint cannot be empty")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http endpoint: {text!r}")
    path = parts.path.rstrip("/")
    if path.endswith(_SCHEDULED_EVENTS_SUFFIX):
        path = path[: -len(_SCHEDULED_EVENTS_SUFFIX)]
    return f"{parts.scheme}://{parts.netloc}{path}"


# -- option 245 ----------------------------------------------------------------------------


def _unquote_dhclient_string(text: str) -> bytes:
    """A dhclient quoted option value (``"\\250?\\201\\020"``): octal and backslash escapes."""
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            octal = re.match(r"[0-7]{1,3}", text[index + 1 : index + 4])
            if octal:
                out.append(int(octal.group(), 8) & 0xFF)
                index += 1 + len(octal.group())
                continue
            out += text[index + 1].encode("latin-1", "replace")
            index += 2
            continue
        out += char.encode("latin-1", "replace")
        index += 1
    return bytes(out)


def option_245_address(value: str) -> str | None:
    """The IPv4 address an option 245 value encodes, or None.

    Accepts dhclient's colon-separated hex (which drops leading zeros: ``a8:3f:81:10`` and
    ``a8:3f:81:9`` alike), dhclient's quoted form for printable bytes, and networkd's plain
    hex (``A83F8110``).
    """
    value = value.strip()
    raw: bytes | None = None
    if len(value) >= 2 and value[0] == value[-1] == '"':
        raw = _unquote_dhclient_string(value[1:-1])
    elif ":" in value:
        pieces = value.split(":")
        if all(re.fullmatch(r"[0-9A-Fa-f]{1,2}", piece) for piece in pieces):
            raw = bytes(int(piece, 16) for piece in pieces)
    elif re.fullmatch(r"[0-9A-Fa-f]{8}", value):
        raw = bytes.fromhex(value)
    if raw is None or len(raw) != 4:
        return None
    return ".".join(str(byte) for byte in raw)


# -- dhclient ------------------------------------------------------------------------------


def _lease_blocks(text: str) -> Iterator[list[str]]:
    """The statements of each ``lease { ... }`` block, quotes and comments respected."""
    statements: list[str] | None = None
    current: list[str] = []
    in_quote = False
    index = 0
    while index < len(text):
        char = text[index]
        if in_quote:
            current.append(char)
            if char == "\\" and index + 1 < len(text):
                current.append(text[index + 1])
                index += 1
            elif char == '"':
                in_quote = False
        elif char == '"':
            in_quote = True
            current.append(char)
        elif char == "#":
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
            continue
        elif char == "{":
            head = "".join(current).split()
            statements = [] if head and head[-1] == "lease" else None
            current = []
        elif char == ";":
            if statements is not None:
                statements.append("".join(current).strip())
            current = []
        elif char == "}":
            if statements is not None:
                yield statements
            statements = None
            current = []
        else:
            current.append(char)
        index += 1


def _lease_expiry(statement: str) -> datetime | None:
    """The expiry of an ``expire ...`` statement; None for ``never``; raises on nonsense.

    dhclient writes ``expire 4 2026/11/26 10:00:00`` (weekday, date, time, UTC) or, with
    ``db-time-format local``, ``expire epoch 1795600800``.
    """
    words = statement.split()[1:]
    if words == ["never"]:
        return None
    if len(words) == 2 and words[0] == "epoch":
        return datetime.fromtimestamp(int(words[1]), UTC)
    if len(words) == 3:
        return datetime.strptime(f"{words[1]} {words[2]}", "%Y/%m/%d %H:%M:%S").replace(tzinfo=UTC)
    raise ValueError(f"unreadable lease expiry: {statement!r}")


def dhclient_option_245(text: str, now: datetime) -> str | None:
    """The option 245 address of the last unexpired lease that carries one.

    dhclient appends each new lease to its file, so the last one is the newest; a lease whose
    expiry cannot be read is skipped rather than trusted.
    """
    found: str | None = None
    for statements in _lease_blocks(text):
        address: str | None = None
        expired = False
        for statement in statements:
            words = statement.split(None, 2)
            if len(words) == 3 and words[0] == "option" and words[1] == "unknown-245":
                address = option_245_address(words[2])
            elif words and words[0] == "expire":
                try:
                    expiry = _lease_expiry(statement)
                except ValueError:
                    expired = True
                else:
                    expired = expiry is not None and expiry <= now
        if address is not None and not expired:
            found = address
    return found


# -- systemd-networkd ----------------------------------------------------------------------


def networkd_option_245(text: str) -> str | None:
    """``OPTION_245=A83F8110`` of a networkd lease file (which exists only while it holds)."""
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "OPTION_245":
            return option_245_address(value)
    return None


# -- putting it together -------------------------------------------------------------------


def _expand(lease_paths: Iterable[str]) -> Iterator[Path]:
    for pattern in lease_paths:
        for name in sorted(glob.glob(pattern)):
            path = Path(name)
            if path.is_file():
                yield path


def lease_option_245(
    lease_paths: Sequence[str] = DEFAULT_LEASE_PATHS, *, now: datetime | None = None
) -> tuple[str, Path] | None:
    """The first option 245 address found in ``lease_paths`` (globs, read in order)."""
    moment = now or datetime.now(UTC)
    for path in _expand(lease_paths):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "unknown-245" in text:
            address = dhclient_option_245(text, moment)
        else:
            address = networkd_option_245(text)
        if address is not None:
            return address, path
    return None


def endpoint_candidates(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    lease_paths: Sequence[str] = DEFAULT_LEASE_PATHS,
    now: datetime | None = None,
) -> tuple[Endpoint, ...]:
    """The endpoints to try, in order: the discovered one, then 169.254.169.254 behind a
    lease address (see the module docstring)."""
    if explicit is not None:
        return (Endpoint(normalize_base_url(explicit), "argument"),)
    variables = os.environ if environ is None else environ
    configured = variables.get(ENDPOINT_ENVIRONMENT_VARIABLE, "").strip()
    if configured:
        return (
            Endpoint(normalize_base_url(configured), "environment", ENDPOINT_ENVIRONMENT_VARIABLE),
        )
    default = Endpoint(IMDS_BASE_URL, "default")
    leased = lease_option_245(lease_paths, now=now)
    if leased is not None:
        address, path = leased
        return (Endpoint(f"http://{address}", "dhcp", str(path)), default)
    return (default,)


def discover_endpoint(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    lease_paths: Sequence[str] = DEFAULT_LEASE_PATHS,
    now: datetime | None = None,
) -> Endpoint:
    """The first endpoint of :func:`endpoint_candidates`: where a client starts."""
    return endpoint_candidates(explicit, environ=environ, lease_paths=lease_paths, now=now)[0]
