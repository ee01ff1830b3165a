"""The scenario file (YAML): a timeline of operations, clock steps and expectations.

Each step is a mapping with exactly one action key (and an optional ``title``); its value is
validated with pydantic, so a mistake is reported with the file, the step number and the
field before anything runs. Each step is held to the bounds of the control API request it
becomes (:mod:`forewarn.limits`, :class:`~forewarn.faults.FaultRule`, the domain's time
bounds), so no step of a file that validates is refused for its body once earlier steps ran;
``forewarn scenario validate`` and ``POST /api/v1/scenarios`` both check a file here. The YAML
is read bounded (:mod:`forewarn.yaml_files`). The schema is documented in
``docs/control.md``::

    name: live migration            # optional
    fleet: fleet-live-migration.yaml   # optional: the fleet it needs, relative to this file
    profile: fast                   # optional: refuse to run under another timing profile
    steps:
      - host: {live-migrate: h1}
      - expect: {vm: WestNO_0, incarnation: 2, events: [{EventType: Freeze}]}
      - approve: {vm: WestNO_1, events: all}
      - advance: 10m
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from forewarn.config.policy import PolicyIn
from forewarn.domain.api_versions import CURRENT_VERSION, find_version
from forewarn.domain.clock import check_time, seconds_to_duration
from forewarn.domain.fleet import INSTANCE_ID_PATTERN
from forewarn.domain.operations import MaintenanceKind
from forewarn.domain.timing import PROFILES
from forewarn.errors import ForewarnError
from forewarn.faults import FaultKind, FaultRule
from forewarn.limits import MAX_DESCRIPTION, MAX_NAME_LENGTH, MAX_NAMES, MAX_SECONDS
from forewarn.registry import (
    AVAILABILITY_SET,
    HOST,
    SCALE_SET,
    VM,
    Operation,
    Param,
    find,
    for_target,
)
from forewarn.scenario.durations import parse_duration
from forewarn.validation import first_problem
from forewarn.yaml_files import YamlInputError, dotted, load_yaml

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
MAX_STEPS = 10_000
HOST_ACTIONS = tuple(operation.name for operation in for_target(HOST))


class ScenarioFileError(ForewarnError):
    """The scenario cannot be used; the message names the file, the step and the field."""


def _duration(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like 15m")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        try:  # .inf, 1.0e+308: refused here, before timedelta overflows
            return seconds_to_duration(value)
        except ForewarnError as exc:
            raise ValueError(str(exc)) from None
    if isinstance(value, str):
        return parse_duration(value)
    return value


def _printable(moment: datetime) -> datetime:
    """The clock may be set only where the platform can still print every date."""
    try:
        return check_time(moment, "the clock cannot be set to")
    except ForewarnError as exc:
        raise ValueError(str(exc)) from None


def _instance_id(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Duration = Annotated[timedelta, BeforeValidator(_duration)]
VmName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)]
VmNames = Annotated[list[VmName], Field(min_length=1, max_length=MAX_NAMES)]
InstanceId = Annotated[str, BeforeValidator(_instance_id), Field(pattern=INSTANCE_ID_PATTERN)]
InstanceIds = Annotated[list[InstanceId], Field(max_length=MAX_NAMES)]
Moment = Annotated[AwareDatetime, AfterValidator(_printable)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventMatch(_Strict):
    """Fields an event must have, named as in the document; unnamed fields are not checked.

    ``NotBefore`` may be ``"+15m"``: the platform time when the step runs, plus 15 minutes.
    """

    event_id: str | None = Field(default=None, alias="EventId")
    event_status: Literal["Scheduled", "Started"] | None = Field(default=None, alias="EventStatus")
    event_type: Literal["Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"] | None = Field(
        default=None, alias="EventType"
    )
    resource_type: str | None = Field(default=None, alias="ResourceType")
    resources: list[str] | None = Field(default=None, alias="Resources")
    not_before: str | None = Field(default=None, alias="NotBefore")
    description: str | None = Field(default=None, alias="Description")
    event_source: Literal["Platform", "User"] | None = Field(default=None, alias="EventSource")
    duration_in_seconds: StrictInt | None = Field(default=None, alias="DurationInSeconds")

    @field_validator("not_before")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("+"):
            parse_duration(value[1:])
        return value

    def fields(self) -> dict[str, Any]:
        """The checked fields, by their document names, in document order."""
        return self.model_dump(by_alias=True, exclude_none=True)


class ScaleSetInstances(_Strict):
    scale_set: VmName = Field(alias="scaleSet")
    instance_ids: InstanceIds = Field(alias="instanceIds", min_length=1)


def _scale_set_step(operation: Operation) -> type[ScaleSetInstances]:
    """``{scaleSet: web, instanceIds: [0, 1]}`` plus the operation's flags (``autoscale``)."""
    flags: dict[str, Any] = {
        param.name: (StrictBool, Field(default=False, alias=param.wire))
        for param in operation.params
        if param.kind == "flag"
    }
    if not flags:
        return ScaleSetInstances
    name = "".join(part.title() for part in operation.name.split("-")) + "Step"
    return create_model(name, __base__=ScaleSetInstances, **flags)


class PolicyStep(_Strict):
    """``{vm: NAME, scheduledEventsPolicy: {...}}`` (or ``scaleSet:``, ``availabilitySet:``):
    exactly one target and the policy, as ARM JSON."""

    vm: VmName | None = None
    scale_set: VmName | None = Field(default=None, alias="scaleSet")
    availability_set: VmName | None = Field(default=None, alias="availabilitySet")
    scheduled_events_policy: PolicyIn = Field(alias="scheduledEventsPolicy")

    @model_validator(mode="after")
    def _one_target(self) -> PolicyStep:
        if sum(name is not None for name in (self.vm, self.scale_set, self.availability_set)) != 1:
            raise ValueError("name exactly one of vm, scaleSet, availabilitySet")
        return self

    @property
    def target(self) -> tuple[Operation, str]:
        """The operation on the named target, and its name."""
        for target, name in (
            (VM, self.vm),
            (SCALE_SET, self.scale_set),
            (AVAILABILITY_SET, self.availability_set),
        ):
            if name is not None:
                return find(target, "set-scheduled-events-policy"), name
        raise AssertionError("validated to name one target")


#: The parameters host actions take (``as`` of ``fail``), by their wire name.
_HOST_PARAMS: dict[str, Param] = {
    param.wire: param for operation in for_target(HOST) for param in operation.params
}


class _OneHostAction(_Strict):
    @model_validator(mode="after")
    def _one_action(self) -> _OneHostAction:
        given = self.model_dump(by_alias=True, exclude_none=True)
        actions = [name for name in given if name in HOST_ACTIONS]
        if len(actions) != 1:
            raise ValueError(f"name exactly one of {', '.join(HOST_ACTIONS)}")
        taken = {param.wire for param in find(HOST, actions[0]).params}
        for name in given:
            if name not in HOST_ACTIONS and name not in taken:
                raise ValueError(f"{actions[0]} takes no {name!r}")
        return self

    @property
    def action(self) -> tuple[str, str]:
        """The host action named and its host."""
        given = self.model_dump(by_alias=True, exclude_none=True)
        ((action, host),) = ((k, v) for k, v in given.items() if k in HOST_ACTIONS)
        return action, host

    @property
    def arguments(self) -> dict[str, Any]:
        """The action's parameters given, by :attr:`~forewarn.registry.Param.name`."""
        given = self.model_dump(by_alias=True, exclude_none=True)
        return {_HOST_PARAMS[k].name: v for k, v in given.items() if k in _HOST_PARAMS}


_HOST_FIELDS: dict[str, Any] = {
    name.replace("-", "_"): (str | None, Field(default=None, alias=name)) for name in HOST_ACTIONS
}
_HOST_FIELDS.update(
    {
        param.name: (Literal[param.choices] | None, Field(default=None, alias=param.wire))
        for param in _HOST_PARAMS.values()
        if param.kind == "choice"
    }
)
#: ``{live-migrate: h1}``: exactly one host action, naming the host, and what it takes
#: (``{fail: h1, as: redeploy}``).
HostStep = create_model("HostStep", __base__=_OneHostAction, **_HOST_FIELDS)


class MaintenanceStep(_Strict):
    vms: VmNames | None = None
    event_type: Literal["Reboot", "Freeze"] = Field(default="Reboot", alias="eventType")
    #: Each fault domain's maintenance in turn (``[update]``, ``[update, maintain]``).
    kinds: list[MaintenanceKind] | None = Field(default=None, min_length=1, max_length=MAX_NAMES)


class EventStep(_Strict):
    """An arbitrary event, as ``POST /api/v1/events`` creates it."""

    type: Literal["Freeze", "Reboot", "Redeploy", "Preempt", "Terminate"]
    resources: VmNames
    source: Literal["Platform", "User"] = "Platform"
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    duration_in_seconds: StrictInt = Field(
        default=-1, alias="durationInSeconds", ge=-1, le=MAX_SECONDS
    )
    notice: Duration | None = None
    started: StrictBool = False
    #: How long it stays Started, instead of its kind's period in the timing profile.
    started_for: Duration | None = Field(default=None, alias="startedFor")


class FaultStep(_Strict):
    """A fault clients must survive, as ``POST /api/v1/faults`` sets it (docs/faults.md)."""

    kind: FaultKind
    vm: VmName | None = None
    count: StrictInt | None = Field(default=None, ge=1)
    for_: Duration | None = Field(default=None, alias="for")
    probability: float = Field(default=1.0, gt=0, le=1, allow_inf_nan=False)
    delay: Duration | None = None
    seed: StrictInt | None = Field(default=None, ge=0, lt=2**63)

    @model_validator(mode="after")
    def _a_rule(self) -> FaultStep:
        """The rule ``POST /api/v1/faults`` would make of it: the same checks (a latency
        needs a delay, a count or duration within the faults' bounds...)."""
        try:
            self.rule()
        except ForewarnError as exc:
            raise ValueError(str(exc)) from None
        return self

    def rule(self) -> FaultRule:
        return FaultRule(
            self.kind,
            self.vm,
            self.count,
            None if self.for_ is None else self.for_.total_seconds(),
            self.probability,
            None if self.delay is None else self.delay.total_seconds(),
            self.seed,
        )


class ClearFaults(_Strict):
    """Clear the faults of one VM (``clear-faults: {vm: NAME}``); ``all`` clears every one."""

    vm: VmName


class SelectEvents(_Strict):
    """The events of ``vm``'s document to approve or cancel: ``all``, or those matching."""

    vm: VmName
    events: Literal["all"] | Annotated[list[EventMatch], Field(min_length=1)]


class Expectation(_Strict):
    """What must hold now for one VM; only the named checks are made."""

    vm: VmName
    api_version: str = Field(default=CURRENT_VERSION.name, alias="apiVersion")
    incarnation: StrictInt | None = Field(default=None, ge=1)
    events: list[EventMatch] | None = None
    exists: StrictBool | None = None
    reachable: StrictBool | None = None
    receiving: StrictBool | None = None
    host: str | None = None

    @field_validator("api_version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if find_version(value) is None:
            raise ValueError(f"{value!r} is not a Scheduled Events api-version")
        return value

    @model_validator(mode="after")
    def _something_to_check(self) -> Expectation:
        checks = self.model_dump(exclude_none=True, exclude={"vm", "api_version"})
        if not checks:
            raise ValueError("name at least one of incarnation, events, exists, reachable, ...")
        if self.exists is False and len(checks) > 1:
            raise ValueError("exists: false cannot be combined with other checks")
        return self

    def needs_document(self) -> bool:
        return self.incarnation is not None or self.events is not None

    def needs_vm(self) -> bool:
        return any(v is not None for v in (self.exists, self.reachable, self.receiving, self.host))


def _operation_steps() -> dict[str, Any]:
    """A key per VM or scale-set operation (a VM's name, or the set and its instances), then
    ``host`` holding one host action; a name used for both (simulate-eviction) takes either."""
    types: dict[str, list[Any]] = {}
    for operation in (*for_target(VM), *for_target(SCALE_SET)):
        if any(param.kind == "policy" for param in operation.params):
            types[operation.name] = [PolicyStep]  # one step, naming any kind of target
            continue
        step = VmName if operation.target is VM else _scale_set_step(operation)
        types.setdefault(operation.name, []).append(step)
    steps: dict[str, Any] = {key: Union[tuple(kinds)] for key, kinds in types.items()}  # noqa: UP007
    steps["host"] = HostStep
    return steps


_OPERATION_STEP_TYPES = _operation_steps()
#: The keys whose step is a :mod:`forewarn.registry` operation.
OPERATION_STEPS = frozenset(_OPERATION_STEP_TYPES)
#: Each action key and the type its value is validated as.
STEP_TYPES: dict[str, Any] = {
    **_OPERATION_STEP_TYPES,
    "maintenance": MaintenanceStep,
    "event": EventStep,
    "fault": FaultStep,
    "clear-faults": Literal["all"] | ClearFaults,
    "approve": SelectEvents,
    "cancel": SelectEvents,
    "advance": Duration,
    "wait": Duration,
    "set-clock": Moment,
    "expect": Expectation,
}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {kind: TypeAdapter(t) for kind, t in STEP_TYPES.items()}


@dataclass(frozen=True)
class Step:
    """One validated step: ``number`` counts from 1, as people read the file."""

    number: int
    kind: str
    value: Any
    label: str


@dataclass(frozen=True)
class Scenario:
    source: str
    name: str
    steps: tuple[Step, ...]
    profile: str | None = None
    fleet: Path | None = None


class _Header(_Strict):
    name: str | None = Field(default=None, max_length=200)
    description: str | None = None
    fleet: str | None = None
    profile: str | None = None
    steps: list[Any] = Field(min_length=1, max_length=MAX_STEPS)

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str | None) -> str | None:
        if value is not None and value not in PROFILES:
            raise ValueError(f"unknown timing profile; known: {', '.join(sorted(PROFILES))}")
        return value


def _brief(value: Any, limit: int = 60) -> str:
    if isinstance(value, Mapping):
        text = ", ".join(f"{key}: {_brief(item, limit)}" for key, item in value.items())
    elif isinstance(value, list):
        text = "[" + ", ".join(_brief(item, limit) for item in value) + "]"
    elif isinstance(value, datetime):
        text = value.isoformat()
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _problem(error: ValidationError, model: Any) -> str:
    location, message = first_problem(error, model)
    where = ".".join(str(part) for part in location)
    return f"{where}: {message}" if where else message


def _step(number: int, raw: Any, source: str) -> Step:
    where = f"{source}: step {number}"
    if not isinstance(raw, Mapping):
        raise ScenarioFileError(f"{where}: a step is a mapping such as {{advance: 10m}}")
    title = raw.get("title")
    if title is not None and not isinstance(title, str):
        raise ScenarioFileError(f"{where}: title must be text")
    keys = [key for key in raw if key != "title"]
    unknown = [str(key) for key in keys if key not in STEP_TYPES]
    if unknown:
        raise ScenarioFileError(
            f"{where}: unknown step {unknown[0]!r}; known: {', '.join(STEP_TYPES)}"
        )
    if len(keys) != 1:
        found = ", ".join(str(key) for key in keys) or "none"
        raise ScenarioFileError(f"{where}: a step has exactly one action (found: {found})")
    kind = keys[0]
    try:
        value = _ADAPTERS[kind].validate_python(raw[kind])
    except ValidationError as exc:
        raise ScenarioFileError(f"{where} ({kind}): {_problem(exc, STEP_TYPES[kind])}") from None
    except (ArithmeticError, ValueError, ForewarnError) as exc:  # a value no bound foresaw
        raise ScenarioFileError(f"{where} ({kind}): {exc}") from None
    return Step(number, kind, value, title or f"{kind} {_brief(raw[kind])}")


def _yaml_problem(source: str, error: YamlInputError) -> ScenarioFileError:
    """The refusal of the YAML itself, naming the step (and its action) it is in."""
    path = error.path
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        where = f"{source}: step {path[1] + 1}"
        if len(path) >= 3:
            where += f" ({path[2]})"
        rest = dotted(path[3:])
        return ScenarioFileError(f"{where}: {rest + ': ' if rest else ''}{error.reason}")
    return ScenarioFileError(f"{source}: {error}")


def parse_scenario(text: str, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """The scenario ``text`` describes; ``base`` is where a relative ``fleet`` path starts.
    Every step is checked before this returns; CPU-bound, so a server calls it off its loop."""
    try:
        raw = load_yaml(text)
    except YamlInputError as exc:
        raise _yaml_problem(source, exc) from None
    try:
        header = _Header.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioFileError(f"{source}: {_problem(exc, _Header)}") from None
    steps = tuple(_step(number, item, source) for number, item in enumerate(header.steps, 1))
    fleet = None
    if header.fleet is not None:
        fleet = (base or Path.cwd()) / header.fleet
    return Scenario(
        source=source,
        name=header.name or Path(source).stem,
        steps=steps,
        profile=header.profile,
        fleet=fleet,
    )


def load_scenario(path: Path) -> Scenario:
    try:
        if path.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioFileError(f"{path}: larger than {MAX_SCENARIO_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioFileError(f"{path}: cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioFileError(f"{path}: not UTF-8 text") from None
    return parse_scenario(text, str(path), path.parent)


__all__ = [
    "HOST_ACTIONS",
    "MAX_SCENARIO_BYTES",
    "MAX_STEPS",
    "OPERATION_STEPS",
    "STEP_TYPES",
    "ClearFaults",
    "Duration",
    "EventMatch",
    "EventStep",
    "Expectation",
    "FaultStep",
    "HostStep",
    "InstanceId",
    "InstanceIds",
    "MaintenanceStep",
    "PolicyStep",
    "ScaleSetInstances",
    "Scenario",
    "ScenarioFileError",
    "SelectEvents",
    "Step",
    "VmName",
    "load_scenario",
    "parse_scenario",
]
