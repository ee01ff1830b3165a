"""The CLI against the real control app in-process (no socket), on a manual clock: the
control client of a :class:`forewarn.testing.ForewarnPlatform`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from forewarn.cli import CliContext, main
from forewarn.service import ScheduledEventsService
from forewarn.testing import ForewarnPlatform

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


@dataclass
class Cli:
    """Runs ``forewarn ...``; records which control address each command connected to."""

    platform: ForewarnPlatform
    connections: list[tuple[str, int]] = field(default_factory=list)

    @property
    def service(self) -> ScheduledEventsService:
        return self.platform.service

    def connect(self, host: str, port: int) -> httpx.Client:
        self.connections.append((host, port))
        return self.platform.control_client()

    def __call__(self, *args: str, env: Mapping[str, str] | None = None) -> Result:
        return CliRunner().invoke(
            main, list(args), obj=CliContext(connect=self.connect), env=dict(env or {})
        )

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
        return result.output

    def fails(self, *args: str, code: int = 1) -> str:
        result = self(*args)
        assert result.exit_code == code, (result.exit_code, result.output)
        return result.output
