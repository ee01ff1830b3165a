"""Requests already parsed, kept by their bytes and shared by every connection: a VM polls
with the same bytes every second, and a fleet's pollers differ only in their Host, so most
polls skip the HTTP parser altogether (:class:`_ParsedRequests`)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from forewarn.server.http import limits
from forewarn.server.imds import Checked, ImdsResponse


@dataclass(slots=True, eq=False)
class _Parsed:
    """What httptools made of one whole request: a pure function of its bytes, shared by
    every connection that sends them, and so is what the endpoint decided from them alone
    (:attr:`ImdsRequest.checked`), once it has."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool
    checked: ImdsResponse | Checked | None = None
    #: The parse shared by every connection sending these bytes but for their Host
    #: (:class:`_ParsedRequests`), which this one is a copy of with its Host put back; None
    #: when this is no such copy.
    shared: _Parsed | None = None


class _ParsedRequests:
    """Requests already parsed, by their bytes, shared by every connection.

    A VM polls with the same bytes every second, so parsing each poll again would only redo
    work whose outcome is known. Only a read holding exactly one whole bodiless GET, arriving
    between requests, is remembered, so skipping the parser leaves it where it was. The
    endpoint still runs every check on every request: only the HTTP parsing is reused.

    VMs at their own addresses each send their own Host, and nothing the endpoint decides
    reads it, so a request whose Host is one plain name or address is kept by its bytes
    without that line (:func:`_host_free`): a fleet's polls are one entry, found by a VM's
    first poll on each new connection too, and the Host is put back for each request.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[bytes, _Parsed] = {}

    def get(self, data: bytes) -> _Parsed | None:
        key, host = _host_free(data)
        parsed = self._entries.get(key)
        if parsed is None or host is None:
            return parsed
        return _Parsed(
            parsed.method,
            parsed.path,
            parsed.query,
            {"host": host, **parsed.headers},
            parsed.body,
            parsed.keep_alive,
            parsed.checked,
            parsed,
        )

    def put(self, data: bytes, parsed: _Parsed) -> None:
        """Remember ``data``'s parse. When full, the newest entry makes room: a fleet with
        more distinct polls than entries cycles through them, and starting afresh, or
        dropping the oldest, would drop each before it came round again, so that none was
        ever found; this way all but the overflow are."""
        if len(data) > limits.CACHEABLE_REQUEST:
            return
        key, host = _host_free(data)
        if host is not None:
            if parsed.headers.get("host") != host:  # another Host header folded into it
                return
            headers = {name: value for name, value in parsed.headers.items() if name != "host"}
            parsed = dataclasses.replace(parsed, headers=headers)
        if len(self._entries) >= limits.PARSED_ENTRIES:
            self._entries.popitem()
        self._entries[key] = parsed


_HOST_LINE = b"\r\nHost: "
#: A Host that is a plain name, address or [IPv6] address, with an optional port.
_PLAIN_HOST = re.compile(rb"[A-Za-z0-9.:\[\]-]{1,255}")


def _host_free(data: bytes) -> tuple[bytes, str | None]:
    """``data`` without its Host line, and that Host; ``data`` itself and None when its head
    has no ``Host:`` line (spelled as clients send it) or its value is not plain: a value the
    parser could refuse, or that is too long, must reach the parser, so it is kept whole."""
    start = data.find(_HOST_LINE)
    head_end = data.find(b"\r\n\r\n")
    if start < 0 or start >= head_end:
        return data, None
    begin = start + len(_HOST_LINE)
    end = data.find(b"\r\n", begin)
    if _PLAIN_HOST.fullmatch(data, begin, end) is None:
        return data, None
    return data[:start] + data[end:], data[begin:end].decode("ascii")
