"""What the agent shows an operator: Prometheus metrics and ``/healthz`` on one small listener.

Each agent has a registry of its own (never the process-wide default), so several agents can
live in one test process. ``/healthz`` answers 200 while polls succeed and 503 once none has
for ``stale_after`` seconds, so a supervisor can tell a wedged agent from a quiet one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

HOOK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0)


class AgentMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.polls = Counter("forewarn_agent_polls", "Documents read successfully", registry=r)
        self.poll_errors = Counter(
            "forewarn_agent_poll_errors",
            "Polls that failed after the client's retries, by kind",
            ["kind"],
            registry=r,
        )
        self.incarnation = Gauge(
            "forewarn_agent_document_incarnation", "DocumentIncarnation last read", registry=r
        )
        self.events_seen = Counter(
            "forewarn_agent_events_seen",
            "Distinct events seen, by EventType and EventSource",
            ["type", "source"],
            registry=r,
        )
        self.decisions = Counter(
            "forewarn_agent_decisions", "Policy decisions, by action", ["action"], registry=r
        )
        self.approvals = Counter(
            "forewarn_agent_approvals",
            "Approvals sent, by outcome (ok, error, gave-up, dry-run)",
            ["outcome"],
            registry=r,
        )
        self.hook_duration = Histogram(
            "forewarn_agent_hook_duration_seconds",
            "How long hook commands ran, by moment",
            ["hook"],
            buckets=HOOK_BUCKETS,
            registry=r,
        )
        self.hook_failures = Counter(
            "forewarn_agent_hook_failures",
            "Hooks that failed, by moment and reason (exit-code, timeout, not-started)",
            ["hook", "reason"],
            registry=r,
        )
        self.last_success = Gauge(
            "forewarn_agent_last_successful_poll_timestamp_seconds",
            "Unix time of the last successful poll",
            registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """One sample's value (0 when absent), for tests and ``/healthz``."""
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found


class Health:
    """Whether the poll loop is alive: a success within ``stale_after`` seconds."""

    def __init__(self, stale_after: float, monotonic: Callable[[], float] = time.monotonic):
        self.stale_after = stale_after
        self._monotonic = monotonic
        self._since = monotonic()
        self._last_success: float | None = None
        self._last_error = ""

    def succeeded(self) -> None:
        self._last_success = self._monotonic()
        self._last_error = ""

    def failed(self, reason: str) -> None:
        self._last_error = reason

    def report(self) -> tuple[bool, dict[str, Any]]:
        now = self._monotonic()
        reference = self._since if self._last_success is None else self._last_success
        age = now - reference
        healthy = age <= self.stale_after
        return healthy, {
            "status": "ok" if healthy else "stale",
            "secondsSinceLastPoll": None if self._last_success is None else round(age, 3),
            "lastError": self._last_error,
        }


class MetricsServer:
    """``GET /metrics`` and ``GET /healthz`` on a thread of their own."""

    def __init__(self, host: str, port: int, metrics: AgentMetrics, health: Health) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
                elif self.path == "/healthz":
                    healthy, body = health.report()
                    self._answer(
                        200 if healthy else 503, json.dumps(body).encode(), "application/json"
                    )
                else:
                    self._answer(404, b"not found\n", "text/plain")

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Scrapes every few seconds would drown the agent's own log lines."""

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="forewarn-agent-metrics", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, so only once started
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


__all__ = [
    "HOOK_BUCKETS",
    "AgentMetrics",
    "Health",
    "MetricsServer",
]
