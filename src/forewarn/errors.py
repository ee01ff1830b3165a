"""The root of every error forewarn raises on purpose, in a module that depends on nothing.

The domain, the SDK, the agent, storage and the adapters all derive their errors from
:class:`ForewarnError`, so a caller can catch everything forewarn means to raise, or one
branch of it, without importing the domain or the server. No error knows what an HTTP status
is: the control API assigns statuses at its edge by walking an error's MRO
(:data:`forewarn.server.control.STATUS_BY_ERROR`), as starlette's exception handlers do.

::

    ForewarnError                         forewarn.errors
    ├── InvalidInputError                 forewarn.errors: a value no model can check alone
    ├── DomainError                       forewarn.domain.errors: a rule of the platform
    │   ├── UnknownVmError                no VM of that name or address
    │   ├── UnknownGroupError             no scale set or host of that name
    │   ├── UnknownEventError             an event id the calling VM cannot see
    │   ├── InvalidOperationError         not possible in the current state
    │   ├── InvalidEventError             an event that breaks a documented rule
    │   └── TimeOutOfRangeError           past the latest time the platform can print
    ├── MalformedApprovalError            forewarn.wire.approvals: a StartRequests body
    ├── FleetFileError                    forewarn.config.fleet
    ├── ScenarioFileError                 forewarn.scenario.schema
    ├── YamlInputError                    forewarn.yaml_files: YAML past a bound, a key twice
    ├── NestingError                      forewarn.nesting: JSON nested past the shared bound
    ├── TokenFileError                    forewarn.control_token: a link at the token's path
    ├── ControlError                      forewarn.scenario.client: the control API refused
    │   └── ControlUnreachableError       nothing answered at its address
    ├── StorageError                      forewarn.storage.errors (its own tree below it)
    ├── StateMismatchError                forewarn.server.state: a store of another fleet
    ├── ReplayError                       forewarn.journal_replay: a record that cannot apply
    ├── ExposureError                     forewarn.server.runner: control API open, no token
    ├── QueryError                        forewarn.resourcegraph.kql: a query it cannot run
    ├── ReportFormatError                 forewarn.verify.model: a verify report it cannot read
    ├── VerifyError                       forewarn.verify.model: a verify run that could not happen
    ├── VerifyFailed                      forewarn.testing: trials failed (an AssertionError too)
    ├── HandlerGone                       forewarn.verify.stage: the handler exited mid-trial
    ├── ExchangeError                     forewarn.eventgrid._http: a webhook gave no answer
    ├── ImdsError                         forewarn.client (its own tree below it)
    ├── AgentConfigError                  forewarn.agent.config
    └── AgentStateError                   forewarn.agent.store: a state file it cannot use
"""

from __future__ import annotations

import re

#: The number Python puts before a system error's words: "[Errno 111] Connection refused".
_ERRNO = re.compile(r"^\[Errno -?\d+\] ")


class ForewarnError(Exception):
    """Root of every error forewarn raises on purpose."""


class InvalidInputError(ForewarnError):
    """A value a request or call cannot use, found beyond what its schema checks (an unknown
    api-version, a moment past the year 9000...)."""


def reason(exc: BaseException) -> str:
    """Why ``exc`` failed, in the system's words ("Connection refused") without the number
    Python puts before them, which says nothing the words do not; its type's name when it
    says nothing."""
    return _ERRNO.sub("", str(exc)) or type(exc).__name__


__all__ = ["ForewarnError", "InvalidInputError", "reason"]
