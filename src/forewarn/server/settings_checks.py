"""What ``forewarn serve``'s settings may be, checked before anything opens or listens, and
the addresses they name.

A setting that cannot work (a TLS certificate that does not load, a control API offered
beyond this machine under a token nobody chose) is one clear line before the journal is
opened, so a refused start touches nothing; the listening addresses and the ``Host``
headers the control API answers are derived here from the same settings.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING

from forewarn.errors import ForewarnError

if TYPE_CHECKING:
    from forewarn.domain.vms import Vm
    from forewarn.server.runner import ServeSettings

__all__ = [
    "ExposureError",
    "TlsSettingsError",
    "accepted_hosts",
    "check_control_exposure",
    "check_settings",
    "check_tls",
    "is_loopback",
    "listen_addresses",
    "url_for",
]


class TlsSettingsError(ForewarnError):
    """The control API's TLS certificate or key cannot be used."""


class ExposureError(ForewarnError):
    """The control API would be reachable from elsewhere with no chosen token."""


def check_settings(settings: ServeSettings) -> None:
    """Every check of this module, in the order their refusals are worth reading."""
    check_control_exposure(settings)
    check_tls(settings)


def check_tls(settings: ServeSettings) -> None:
    """Refuse TLS settings that cannot work before anything listens: one clear line."""
    if settings.control_tls is None:
        return
    if settings.tls_cert is None:
        raise TlsSettingsError(
            "--control-tls needs --tls-cert (and --tls-key unless the "
            "certificate file holds the key)"
        )
    # Each file read on its own first: ssl names neither when one of them cannot be opened.
    for what, option, path in (
        ("certificate", "--tls-cert", settings.tls_cert),
        ("key", "--tls-key", settings.tls_key),
    ):
        if path is None:
            continue
        try:
            path.read_bytes()
        except OSError as exc:
            raise TlsSettingsError(
                f"cannot read the TLS {what} {path}: {exc.strerror or exc}; check {option}"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as exc:
        key = "" if settings.tls_key is None else f" with the key {settings.tls_key}"
        raise TlsSettingsError(
            f"cannot use the TLS certificate {settings.tls_cert}{key}: {exc}"
        ) from None


def check_control_exposure(settings: ServeSettings) -> None:
    """Refuse to offer the control API beyond this machine under a token nobody chose."""
    if settings.token is None and not is_loopback(settings.control_host):
        raise ExposureError(
            f"refusing to serve the control API on {settings.control_host} without a token: "
            "pass --token (or FOREWARN_TOKEN), or --control 127.0.0.1:PORT"
        )


def listen_addresses(settings: ServeSettings, vms: Sequence[Vm]) -> list[tuple[str, int]]:
    """The bind address, plus each VM's own address on the same port.

    A wildcard bind address (``0.0.0.0``, ``::``) already receives every VM's connections,
    each told apart by the address it arrived at, so it is the one listener however many VMs
    there are: the way to serve a large fleet inside a network namespace of its own.
    """
    addresses = [(settings.host, settings.port)]
    if _is_wildcard(settings.host):
        return addresses
    for vm in vms:
        if vm.address is not None and vm.address != settings.host:
            addresses.append((vm.address, settings.port))
    return addresses


def accepted_hosts(host: str, port: int) -> list[str] | None:
    """The ``Host`` headers the control API answers: its own names on loopback (so a page
    on another name, rebound to 127.0.0.1, is refused); any elsewhere, where the token alone
    decides."""
    if not is_loopback(host):
        return None
    names = {host, "localhost", "127.0.0.1", "[::1]"}
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:
        hosts += list(names)
    return hosts


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}" + ("" if port == 80 else f":{port}")


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
