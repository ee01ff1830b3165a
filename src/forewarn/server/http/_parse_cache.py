"""Requests already parsed, kept by their bytes and shared by every connection: a VM polls
with the same bytes every second, and a fleet's pollers differ only in their Host, so most
polls skip the HTTP parser altogether (:class:`_ParsedRequests`)."""

from __future__ import annotations

import dataclasses
import re
import sys
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

    What it keeps is bounded in bytes (``limits.PARSED_BYTES``), not in entries: a request of
    2 KiB with a hundred short headers parses into ten times its size, so a count of entries
    alone would let distinct requests of that kind hold hundreds of MiB.
    """

    __slots__ = ("_bytes", "_entries", "_sizes")

    def __init__(self) -> None:
        self._entries: dict[bytes, _Parsed] = {}
        # What each entry holds, in bytes (held_bytes), and all of them together.
        self._sizes: dict[bytes, int] = {}
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """The bytes the kept parses hold, as :func:`held_bytes` counts them."""
        return self._bytes

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
        """Remember ``data``'s parse. When full, the newest entries make room: a fleet with
        more distinct polls than fit cycles through them, and starting afresh, or dropping
        the oldest, would drop each before it came round again, so that none was ever found;
        this way all but the overflow are."""
        if len(data) > limits.CACHEABLE_REQUEST:
            return
        key, host = _host_free(data)
        if host is not None:
            if parsed.headers.get("host") != host:  # another Host header folded into it
                return
            headers = {name: value for name, value in parsed.headers.items() if name != "host"}
            parsed = dataclasses.replace(parsed, headers=headers)
        if key in self._entries:  # parsed again meanwhile (two connections at once)
            return
        size = held_bytes(key, parsed)
        while self._entries and self._bytes + size > limits.PARSED_BYTES:
            newest, _ = self._entries.popitem()
            self._bytes -= self._sizes.pop(newest)
        if size > limits.PARSED_BYTES:  # never: a request this large is not kept at all
            return
        self._entries[key] = parsed
        self._sizes[key] = size
        self._bytes += size


#: What an entry holds beside its key and parse: its slots in the two dicts (a hash, two
#: pointers and the table's spare room each) and the size recorded.
_ENTRY_OVERHEAD = 2 * 3 * 8 * 3 // 2 + sys.getsizeof(1 << 40)


def held_bytes(key: bytes, parsed: _Parsed) -> int:
    """The bytes an entry holds: its key, the parse and everything only it refers to (the
    strings it was decoded into, its headers' names and values, what the endpoint decided
    from it), as ``sys.getsizeof`` counts each object."""
    size = sys.getsizeof(key) + sys.getsizeof(parsed) + _ENTRY_OVERHEAD
    size += sum(map(sys.getsizeof, (parsed.method, parsed.path, parsed.query, parsed.body)))
    headers = parsed.headers
    size += sys.getsizeof(headers)
    for name, value in headers.items():
        size += sys.getsizeof(name) + sys.getsizeof(value)
    checked = parsed.checked
    if isinstance(checked, ImdsResponse):  # a refusal made from its bytes
        size += sys.getsizeof(checked) + sys.getsizeof(checked.body)
    elif checked is not None:  # its query, parsed (shared while the endpoint's cache has it)
        size += sys.getsizeof(checked) + sys.getsizeof(checked.query)
        for name, value in checked.query.items():
            size += sys.getsizeof(name) + sys.getsizeof(value)
    return size


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
