"""Reading requests off a connection with httptools, checking the limits as the bytes arrive
(head size, URL, header values and count, body, no protocol upgrade), before anything is
buffered beyond them. A complete request goes to the connection's ``_answer``."""

from __future__ import annotations

import httptools

from forewarn.server.http import limits
from forewarn.server.http._parse_cache import _Parsed
from forewarn.server.http._response_bytes import _CONTINUE
from forewarn.server.http._writing import _AnswerWriter
from forewarn.server.imds import Limits, split_target
from forewarn.wire.errors import HEADER_VALUE_TOO_LONG

#: Header names and values as bytes, one character each (RFC 9110 section 5.5: field values
#: were historically ISO-8859-1, so any byte the parser lets through has a character).
_FIELD_ENCODING = "latin-1"
_UPGRADE_REFUSED = "Bad request. Protocol upgrades are not supported"
_NOT_HTTP = "Bad request. The request is not valid HTTP/1.1"


class _RefusedError(Exception):
    """Raised in a parser callback to stop parsing a request that breaks a limit."""


class _ReadingEndedError(Exception):
    """Raised once a request that ends its connection (it says close, or is HTTP/1.0 without
    keep-alive) is answered or held, to stop parsing right after it: the server "MUST NOT
    process any further requests received on that connection" (RFC 9112 section 9.6), so what
    follows in the same read is neither answered nor refused, even while that request waits
    for its answer."""


class _RequestParsing(_AnswerWriter):
    """The reading half of a connection (:class:`~forewarn.server.http.ImdsProtocol`, which
    sets the state below and answers each complete request)."""

    __slots__ = (
        "_body",
        "_cacheable",
        "_completed",
        "_head_bytes",
        "_header_count",
        "_headers",
        "_limits",
        "_parser",
        "_request_started",
        "_url",
        "_waiting_data",
    )

    _body: bytearray
    _cacheable: _Parsed | None
    _completed: int
    _head_bytes: int | None
    _header_count: int
    _headers: dict[str, str]
    _limits: Limits
    _parser: httptools.HttpRequestParser | None
    _request_started: float | None
    _turns: list[_Parsed] | None
    _url: bytearray
    _waiting_data: bytes | None

    def _answer(self, parsed: _Parsed) -> None:
        """Answer a complete request: the connection's (ImdsProtocol)."""
        raise NotImplementedError

    def _slow_path(self, data: bytes) -> None:
        # A request to switch protocols is refused as its head completes (on_headers_complete),
        # so the parser never gets as far as reporting the upgrade.
        try:
            view = memoryview(data)
            for start in range(0, len(data), limits.FEED_SLICE):
                if self._closing:
                    return
                if self._turns:  # requests wait for turns after a 429: the rest in theirs
                    self._waiting_data = bytes(view[start:]) + (self._waiting_data or b"")
                    return
                self._feed(view[start : start + limits.FEED_SLICE])
        except httptools.HttpParserCallbackError as exc:
            # Not kept in a local of this frame: the cause's traceback leads back to this
            # frame, a cycle that would keep the connection until the garbage collector runs.
            self._parser_stopped(exc.__context__)
        except httptools.HttpParserError:
            self._reply_and_close(400, _NOT_HTTP)

    def _parser_stopped(self, cause: BaseException | None) -> None:
        """A parser callback raised ``cause``: refuse the request, end reading quietly, or
        answer the 500 of an unexpected failure."""
        if isinstance(cause, _RefusedError):
            self._reply_and_close(400, str(cause))
        elif not isinstance(cause, _ReadingEndedError):
            self._internal_error(cause)

    def _feed(self, data: memoryview) -> None:
        if self._head_bytes is not None:
            self._head_bytes += len(data)
            if self._head_bytes > limits.MAX_HEAD_BYTES:
                self._reply_and_close(
                    400,
                    f"Bad request. The request head is larger than {limits.MAX_HEAD_BYTES} bytes",
                )
                return
        parser = self._parser
        if parser is None:
            parser = self._parser = httptools.HttpRequestParser(self)
        parser.feed_data(data)

    # -- httptools callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._request_started = self._loop.time()
        # Made per parsed request, not per connection: most connections only repeat a poll
        # whose parse is known (_ParsedRequests) and never need them.
        self._url = bytearray()
        self._headers = {}
        self._header_count = 0
        self._body = bytearray()

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._limits.max_url:
            raise _RefusedError(f"Bad request. The URL is longer than {self._limits.max_url} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        bounds = self._limits
        if len(value) > bounds.max_header_value:
            raise _RefusedError(HEADER_VALUE_TOO_LONG.format(bounds.max_header_value))
        # Every header line counts, repeated ones too: folding thousands of them would cost
        # quadratic time on the loop every VM shares.
        self._header_count += 1
        if self._header_count > bounds.max_headers:
            raise _RefusedError(f"Bad request. More than {bounds.max_headers} headers")
        key = name.decode(_FIELD_ENCODING).lower()
        text = value.decode(_FIELD_ENCODING)
        previous = self._headers.get(key)
        # Repeated headers fold into one comma-separated value (RFC 9110 5.3).
        self._headers[key] = text if previous is None else previous + ", " + text

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        parser = self._parser
        assert parser is not None  # only the parser calls this
        if parser.should_upgrade():
            raise _RefusedError(_UPGRADE_REFUSED)
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._limits.max_body:
            # Refused before the body is sent: a client waiting for 100 Continue gets this.
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )
        expect = self._headers.get("expect")
        if expect is not None and expect.lower() == "100-continue":
            assert self._transport is not None
            self._transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limits.max_body:
            raise _RefusedError(
                f"Request body is larger than MaxBodyLength: {self._limits.max_body}"
            )

    def on_message_complete(self) -> None:
        self._request_started = None
        self._head_bytes = 0  # what follows is the next request's head
        if self._closing:
            return
        parser = self._parser
        assert parser is not None  # only the parser calls this
        # The parser lets no byte outside ASCII into the target (RFC 9112 section 3.2) nor
        # the method (a known one), so neither decoding can fail.
        path, query = split_target(self._url.decode())
        parsed = _Parsed(
            parser.get_method().decode(),
            path,
            query,
            self._headers,
            bytes(self._body),
            parser.should_keep_alive(),
        )
        self._completed += 1
        if (
            parsed.method == "GET"
            and not parsed.body
            and len(self._url) <= limits.CACHEABLE_URL
            and "expect" not in parsed.headers
        ):
            self._cacheable = parsed
        self._answer(parsed)
        if not parsed.keep_alive:
            raise _ReadingEndedError
