"""The control API from Python: what the CLI and the scenario runner both speak through.

It wraps any :class:`httpx.Client`, so the same code talks to ``forewarn serve`` over a socket
or to the control app in the same process (:mod:`forewarn.scenario._asgi`), where a test owns the
manual clock and nothing listens on a port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from forewarn.control_token import find_token
from forewarn.defaults import CONTROL_API as API
from forewarn.errors import ForewarnError, reason
from forewarn.nesting import load_json

if TYPE_CHECKING:
    import httpx


class ControlError(ForewarnError):
    """The control API answered with an error, or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ControlUnreachableError(ControlError):
    """Nothing answered at the control API's address (refused, reset, timed out)."""

    def __init__(self, base: str, exc: httpx.HTTPError) -> None:
        why = reason(exc)
        super().__init__(f"cannot reach the control API at {base}: {why}")
        self.base = base
        self.reason = why


def segment(name: str) -> str:
    """``name`` quoted as one path segment, whatever characters a host name holds."""
    return quote(name, safe="")


class ControlClient:
    """Calls ``/api/v1`` routes and returns their JSON, raising :class:`ControlError`."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    @property
    def base(self) -> str:
        return f"{str(self.http.base_url).rstrip('/')}{API}"

    def request(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        import httpx  # loaded already: ``self.http`` is its client

        try:
            response = self.http.request(method, API + path, json=payload, params=params)
        except httpx.HTTPError as exc:
            raise ControlUnreachableError(self.base, exc) from None
        if response.status_code >= 400:
            raise ControlError(
                f"{response.status_code}: {_message(response)}", response.status_code
            )
        return self._decoded(response, API + path)

    def _decoded(self, response: httpx.Response, path: str) -> Any:
        """The answer's JSON (None when it has no body): read as untrusted, its nesting
        bounded (forewarn.nesting), whatever answered at the control address."""
        if not response.content:
            return None
        try:
            return load_json(response.content)
        except ValueError:
            base = str(self.http.base_url).rstrip("/")
            raise ControlError(f"{base}{path} did not answer JSON; is it forewarn?") from None

    def arm(
        self, method: str, path: str, api_version: str, payload: Mapping[str, Any] | None = None
    ) -> Any:
        """One of the Azure Resource Manager routes the control port also serves (outside
        ``/api/v1``); their errors are ARM's envelope, ``{"error": {"code", "message"}}``."""
        import httpx  # loaded already: ``self.http`` is its client

        try:
            response = self.http.request(
                method, quote(path, safe="/"), params={"api-version": api_version}, json=payload
            )
        except httpx.HTTPError as exc:
            raise ControlUnreachableError(self.base, exc) from None
        if response.status_code >= 400:
            try:
                error = load_json(response.content)["error"]
                message = f"{error['code']}: {error['message']}"
            except (ValueError, KeyError, TypeError):
                message = response.text.strip() or response.reason_phrase
            raise ControlError(f"{response.status_code}: {message}", response.status_code)
        return self._decoded(response, path)

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, payload: Mapping[str, Any] | None = None) -> Any:
        return self.request("POST", path, payload)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


def _message(response: httpx.Response) -> str:
    """An error answer's message: the ``error`` of the control API's bodies, or the
    ``detail`` text of its guard's and the framework's (a refused token, 401), else the body
    as it came."""
    try:
        body = load_json(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("error", "detail"):
            message = body.get(key)
            if isinstance(message, str):
                return message
    return response.text.strip() or response.reason_phrase


def control_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def connect(host: str, port: int, *, timeout: float = 10.0) -> httpx.Client:
    """An HTTP client for the control API of ``forewarn serve`` at ``host:port``, carrying
    its token (:func:`forewarn.control_token.find_token`) when there is one."""
    import httpx

    token = find_token(host, port)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=control_url(host, port), timeout=timeout, headers=headers)


__all__ = [
    "ControlClient",
    "ControlError",
    "ControlUnreachableError",
    "connect",
    "control_url",
    "segment",
]
