"""`forewarn verify`: grade a Scheduled Events handler against what Azure does.

A run puts the handler (any process, any language) in front of a fresh forewarn platform per
trial, drives each trial's events and faults on a clock it controls, records every request the
handler sends, and grades each trial pass / fail / warn / n/a with the evidence.

:mod:`forewarn.verify.model` is the result (:class:`RunReport` and what it holds), pure data
with a stable JSON form, so any report renders from a :class:`RunReport` alone.
"""

from __future__ import annotations

from forewarn.verify.model import (
    Evidence,
    ReportFormatError,
    RequestRecord,
    RunReport,
    StateChange,
    TrialInfo,
    TrialResult,
    Verdict,
    VerifyError,
)

__all__ = [
    "Evidence",
    "ReportFormatError",
    "RequestRecord",
    "RunReport",
    "StateChange",
    "TrialInfo",
    "TrialResult",
    "Verdict",
    "VerifyError",
]
