"""The agent's configuration: defaults < file < environment < flags.

The file is YAML, validated with pydantic so a mistake names the file, the field and the
reason before anything runs. Every scalar top-level key has an environment variable derived
from it, ``FOREWARN_AGENT_`` plus the key in upper case (``poll_interval`` ->
``FOREWARN_AGENT_POLL_INTERVAL``); policies and hooks are structured and come from the file
only. Flags given on the command line win over both. ``forewarn agent --print-config`` shows
the result, and ``docs/agent.md`` lists every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forewarn.errors import ForewarnError
from forewarn.validation import problems

ENVIRONMENT_PREFIX = "FOREWARN_AGENT_"
MAX_CONFIG_FILE_BYTES = 1024 * 1024

Action = Literal["approve", "prepare-then-approve", "observe"]
LeaderElection = Literal["first-by-name", "first-listed", "every-vm"]
LogLevel = Literal["debug", "info", "warning", "error"]


class AgentConfigError(ForewarnError):
    """The configuration cannot be used; the message names where and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_tuple(value: Any) -> Any:
    """``type: Freeze`` and ``type: [Freeze, Reboot]`` mean the same."""
    if isinstance(value, str):
        return (value,)
    return value


class MatchSpec(_Strict):
    """What a rule looks at; every condition given must hold, none given matches all."""

    type: tuple[str, ...] | None = None
    source: tuple[str, ...] | None = None
    duration_below: int | None = Field(default=None, ge=0)
    duration_at_least: int | None = Field(default=None, ge=0)
    in_resources: bool | None = None

    _tuples = field_validator("type", "source", mode="before")(_as_tuple)


class RuleSpec(_Strict):
    name: str = Field(min_length=1, max_length=100)
    match: MatchSpec = Field(default_factory=MatchSpec)
    action: Action


class HookSpec(_Strict):
    """A command: an argv list run as is, or a string run by ``/bin/sh -c``."""

    command: tuple[str, ...] | str
    timeout: float = Field(default=300.0, gt=0, le=24 * 3600)

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...] | str) -> tuple[str, ...] | str:
        if not value or (isinstance(value, str) and not value.strip()):
            raise ValueError("the command is empty")
        return value


class HooksSpec(_Strict):
    """Commands per moment, run in order; the first failure stops the rest of that moment."""

    prepare: tuple[HookSpec, ...] = ()
    started: tuple[HookSpec, ...] = ()
    recover: tuple[HookSpec, ...] = ()


#: learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": approve all
#: user initiated events, approve Freeze events of 0 to 8 seconds, log everything else.
DOCUMENTED_SAMPLE_POLICY: tuple[RuleSpec, ...] = (
    RuleSpec(name="approve-user-events", match=MatchSpec(source=("User",)), action="approve"),
    RuleSpec(
        name="approve-short-freeze",
        match=MatchSpec(type=("Freeze",), duration_below=9),
        action="approve",
    ),
    RuleSpec(name="log-the-rest", action="observe"),
)


class AgentConfig(_Strict):
    """Every setting of ``forewarn agent``; defaults are the documented sample's behaviour."""

    endpoint: str | None = None
    api_version: str = "2020-07-01"
    vm_name: str | None = None
    state_dir: Path = Path("/var/lib/forewarn-agent")
    poll_interval: float = Field(default=1.0, gt=0, le=3600)
    request_timeout: float = Field(default=5.0, gt=0, le=600)
    approval_attempts: int = Field(default=5, ge=1, le=100)
    hook_workers: int = Field(default=4, ge=1, le=64)
    hook_output_limit: int = Field(default=4096, ge=0, le=1024 * 1024)
    leader_election: LeaderElection = "first-by-name"
    metrics_address: str | None = "127.0.0.1:9464"
    health_stale_after: float = Field(default=30.0, gt=0)
    dry_run: bool = False
    log_level: LogLevel = "info"
    policies: tuple[RuleSpec, ...] = DOCUMENTED_SAMPLE_POLICY
    hooks: HooksSpec = Field(default_factory=HooksSpec)

    @field_validator("metrics_address", "endpoint", "vm_name", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        """``off``, ``none`` or an empty value turns an optional setting off."""
        if isinstance(value, str) and value.strip().lower() in ("", "off", "none"):
            return None
        return value

    def to_yaml(self) -> str:
        """The effective values, in the file's own form (``--print-config``)."""
        data = self.model_dump(mode="json")
        for rule in data["policies"]:
            rule["match"] = {
                key: value for key, value in rule["match"].items() if value is not None
            }
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


#: Keys that an environment variable can set: the scalar ones.
ENVIRONMENT_KEYS: tuple[str, ...] = tuple(
    name for name in AgentConfig.model_fields if name not in ("policies", "hooks")
)


def environment_name(key: str) -> str:
    return ENVIRONMENT_PREFIX + key.upper()


def _describe(error: ValidationError, where: str) -> str:
    """Every refusal, one line each, a typo as ``unknown field 'x' (did you mean 'y'?)``."""
    lines = [f"{where}: invalid agent configuration"]
    for location, message in problems(error, AgentConfig):
        field = ".".join(str(part) for part in location)
        lines.append(f"  {field}: {message}" if field else f"  {message}")
    return "\n".join(lines)


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's mapping, unvalidated; an unreadable or non-mapping file is refused."""
    try:
        if path.stat().st_size > MAX_CONFIG_FILE_BYTES:
            raise AgentConfigError(f"{path}: larger than {MAX_CONFIG_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AgentConfigError(f"{path}: not YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AgentConfigError(f"{path}: the top level must be a mapping of settings")
    return data


def environment_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings the environment gives, by key."""
    return {
        key: environ[environment_name(key)]
        for key in ENVIRONMENT_KEYS
        if environment_name(key) in environ
    }


def load_config(
    path: Path | None,
    *,
    environ: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
) -> AgentConfig:
    """Defaults, then the file, then the environment, then the flags given (None = not given).

    Relative paths in the file (``state_dir``) are taken from the file's directory, so a
    configuration means the same wherever the agent is started from.
    """
    layers: dict[str, Any] = {}
    if path is not None:
        from_file = read_config_file(path)
        state_dir = from_file.get("state_dir")
        if isinstance(state_dir, str) and not Path(state_dir).is_absolute():
            from_file["state_dir"] = str(path.parent / state_dir)
        layers.update(from_file)
    layers.update(environment_values(environ))
    layers.update({key: value for key, value in (flags or {}).items() if value is not None})
    where = str(path) if path is not None else "configuration"
    try:
        return AgentConfig.model_validate(layers)
    except ValidationError as exc:
        raise AgentConfigError(_describe(exc, where)) from None


__all__ = [
    "DOCUMENTED_SAMPLE_POLICY",
    "ENVIRONMENT_KEYS",
    "ENVIRONMENT_PREFIX",
    "MAX_CONFIG_FILE_BYTES",
    "Action",
    "AgentConfig",
    "AgentConfigError",
    "HookSpec",
    "HooksSpec",
    "LeaderElection",
    "LogLevel",
    "MatchSpec",
    "RuleSpec",
    "environment_name",
    "environment_values",
    "load_config",
    "read_config_file",
]
