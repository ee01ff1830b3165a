"""How each trial grades what it observed: pure functions of an
:class:`~forewarn.verify.grading.Observation`, tested on request sequences written by hand.

Each returns a :class:`~forewarn.verify.grading.Grade` whose reason names the moments it rests
on (``+2.0s``: seconds since the trial began). A handler that exited is named as such.
"""

from __future__ import annotations

from collections.abc import Callable

from forewarn.verify.drives import AFTER_IMPACT
from forewarn.verify.grading import (
    Grade,
    Observation,
    answered_polls,
    approval_ids,
    approvals_of,
    first_seen,
    fmt,
    polls,
    posts,
)
from forewarn.verify.model import Verdict


def _exited(observation: Observation, doing: str) -> Grade | None:
    if observation.exited is None:
        return None
    return Grade(
        Verdict.FAIL,
        f"the handler exited (status {observation.exited}) at {fmt(observation.exited_t)} {doing}",
    )


def _malformed(observation: Observation) -> Grade | None:
    refused = [r for r in posts(observation) if r.status == 400]
    if not refused:
        return None
    body = refused[0].body.decode("utf-8", "replace")[:200]
    return Grade(
        Verdict.FAIL,
        f"an approval was refused with 400 at {fmt(observation.t(refused[0].at))} "
        f"(a malformed body or an event it cannot approve): {body!r}",
    )


def grade_notice(observation: Observation, role: str = "own") -> Grade:
    """Seen before NotBefore; approved, if at all, with a good body and before NotBefore."""
    event_id = observation.events[role]
    not_before = observation.not_before[role]
    seen = first_seen(observation, event_id)
    if seen is None or seen > not_before:
        if (gone := _exited(observation, "before it saw the event")) is not None:
            return gone
        return Grade(
            Verdict.FAIL,
            f"it did not see event {event_id} before its NotBefore ({fmt(not_before)}, "
            f"notice {not_before:.0f} s); first saw it {fmt(seen)}",
        )
    if (bad := _malformed(observation)) is not None:
        return bad
    if (gone := _exited(observation, "after it saw the event")) is not None:
        return gone
    accepted = [r for r in approvals_of(observation, event_id) if r.status == 200]
    said = f"saw it at {fmt(seen)} (NotBefore {fmt(not_before)})"
    if not accepted:
        return Grade(Verdict.PASS, f"{said}; did not approve (allowed: it starts at NotBefore)")
    approved = observation.t(accepted[0].at)
    if approved > not_before + 0.5:
        return Grade(
            Verdict.WARN, f"{said}; approved at {fmt(approved)}, after NotBefore had passed"
        )
    return Grade(Verdict.PASS, f"{said}; approved at {fmt(approved)}")


def grade_survives(observation: Observation, after: str = "ImpactEnd") -> Grade:
    """Alive, and polling again after the mark ``after`` (the last one of that name)."""
    if (gone := _exited(observation, "during the trial")) is not None:
        return gone
    marks = [m.t for m in observation.marks if m.state == after]
    if not marks:
        return Grade(Verdict.FAIL, f"the trial never reached {after}: the handler stalled it")
    since = marks[-1]
    # not the requests held through the impact, answered at its end: a new poll
    again = answered_polls(observation, after=since + AFTER_IMPACT)
    if not again:
        return Grade(
            Verdict.FAIL, f"no poll answered after {after} at {fmt(since)}: it stopped polling"
        )
    return Grade(
        Verdict.PASS,
        f"alive after {after} at {fmt(since)}, polling again at {fmt(observation.t(again[0].at))}",
    )


def grade_fault(kind: str) -> Callable[[Observation], Grade]:
    def grade(observation: Observation) -> Grade:
        if (gone := _exited(observation, f"after {kind}")) is not None:
            return gone
        if observation.faults_hit == 0:
            return Grade(Verdict.WARN, f"no request of the handler met {kind}")
        if "own" not in observation.events:
            return Grade(Verdict.FAIL, f"it did not poll again after {kind}")
        caught = grade_notice(observation)
        if caught.verdict is Verdict.FAIL:
            return Grade(Verdict.FAIL, f"after {kind}: {caught.reason}")
        return Grade(
            Verdict.PASS,
            f"{observation.faults_hit} request(s) met {kind}; it caught the next event: "
            f"{caught.reason}",
        )

    return grade


#: The documented rate limit: requests a second (SPEC 1.3).
RATE_LIMIT = 5


def busiest_second(times: list[float]) -> int:
    """The most of ``times`` (seconds) within any one second."""
    times = sorted(times)
    return max((sum(1 for u in times if t <= u < t + 1.0) for t in times), default=0)


def grade_bad_request(observation: Observation) -> Grade:
    """Alive through a spell of 400s, retrying no faster than the rate limit, and the next
    event caught in time."""
    if (gone := _exited(observation, "after its requests were answered 400")) is not None:
        return gone
    refused = [r for r in observation.faulted if r.fault == "bad-request"]
    if not refused:
        return Grade(Verdict.WARN, "no request of the handler met the 400")
    busiest = busiest_second([observation.t(r.at) for r in refused])
    if busiest > RATE_LIMIT:
        return Grade(
            Verdict.FAIL,
            f"{busiest} requests in one second while it was answered 400: it retries in a "
            f"loop faster than the documented {RATE_LIMIT} a second, which Azure answers 429",
        )
    if "own" not in observation.events:
        return Grade(Verdict.FAIL, "it did not poll again after its requests were answered 400")
    caught = grade_notice(observation)
    if caught.verdict is Verdict.FAIL:
        return Grade(Verdict.FAIL, f"after the 400s: {caught.reason}")
    return Grade(
        Verdict.PASS,
        f"{len(refused)} request(s) answered 400 (at most {busiest} in a second); it caught "
        f"the next event: {caught.reason}",
    )


def grade_own_vm_only(observation: Observation) -> Grade:
    other = observation.events["other"]
    wrong = [r for r in approvals_of(observation, other) if r.status == 200]
    if wrong:
        return Grade(
            Verdict.FAIL,
            f"it approved event {other}, whose Resources name only vm1, at "
            f"{fmt(observation.t(wrong[0].at))}: it let another VM's reboot go ahead",
        )
    if (bad := _malformed(observation)) is not None:
        return bad
    if (gone := _exited(observation, "while another VM's event was shown")) is not None:
        return gone
    own = grade_notice(observation, "own")
    if own.verdict is not Verdict.PASS:
        return own
    return Grade(Verdict.PASS, f"left vm1's event alone; its own: {own.reason}")


def grade_approves_once(observation: Observation) -> Grade:
    event_id = observation.events["own"]
    sent = approvals_of(observation, event_id)
    if not sent:
        return Grade(Verdict.NA, "it never approved (approval is optional)")
    if (bad := _malformed(observation)) is not None:
        return bad
    if len(sent) > 2:
        return Grade(
            Verdict.WARN,
            f"it approved event {event_id} {len(sent)} times (first at "
            f"{fmt(observation.t(sent[0].at))}): it keeps no record of what it approved",
        )
    ids = approval_ids(sent[0])
    return Grade(Verdict.PASS, f"approved once, body naming {', '.join(ids)}")


def grade_held(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after a request got no answer")) is not None:
        return gone
    held = observation.mark_t("Held")
    if held is None or observation.faults_hit == 0:
        return Grade(Verdict.WARN, "no request of the handler met the held answer")
    again = answered_polls(observation, after=held)
    if not again or observation.t(again[0].at) > held + observation.patience:
        return Grade(
            Verdict.FAIL,
            f"one request got no answer at {fmt(held)} and it sent nothing answerable for "
            f"{observation.patience:g} s: it sets no timeout (or one longer than that)",
        )
    came = observation.t(again[0].at)
    if "own" in observation.events:
        caught = grade_notice(observation)
        if caught.verdict is Verdict.FAIL:
            return caught
    return Grade(Verdict.PASS, f"gave up on the held request and polled again at {fmt(came)}")


def grade_first_call(observation: Observation) -> Grade:
    if gone := _exited(observation, "during the first-call delay: it gave up for good"):
        return gone
    answered = answered_polls(observation)
    if not answered:
        return Grade(Verdict.FAIL, "none of its requests was answered: it stopped asking")
    first = observation.t(answered[0].at)
    sent = len(polls(observation))
    tries = len([t for t in observation.sends if t < first])
    return Grade(
        Verdict.PASS,
        f"its first poll was answered at {fmt(first)}, once the delay was over ({tries} "
        f"request(s) sent before); it kept going ({sent} poll(s) answered in all)",
    )


def grade_cancelled(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after the event was cancelled")) is not None:
        return gone
    event_id = observation.events["own"]
    cancelled = observation.mark_t("Canceled", event_id)
    if cancelled is None:
        return Grade(Verdict.FAIL, "it did not see the event before NotBefore")
    late = [
        r
        for r in approvals_of(observation, event_id)
        if observation.t(r.at) > cancelled + observation.interval
    ]
    if late:
        return Grade(
            Verdict.WARN,
            f"it approved event {event_id} at {fmt(observation.t(late[0].at))}, after it was "
            f"cancelled at {fmt(cancelled)}",
        )
    return grade_survives(observation, after="Canceled")


def grade_two_events(observation: Observation) -> Grade:
    freeze = grade_notice(observation, "freeze")
    reboot = grade_notice(observation, "own")
    for grade in (freeze, reboot):
        if grade.verdict is not Verdict.PASS:
            return grade
    return Grade(Verdict.PASS, f"Freeze: {freeze.reason}; Reboot: {reboot.reason}")


def grade_deleted(observation: Observation) -> Grade:
    deleted = observation.mark_t("Deleted")
    if deleted is None:
        if (gone := _exited(observation, "before its VM was deleted")) is not None:
            return gone
        return Grade(Verdict.FAIL, "its VM was never deleted: the trial did not complete")
    if observation.exited is not None:
        return Grade(Verdict.PASS, f"it exited once its VM was gone (at {fmt(deleted)})")
    after = [t for t in observation.sends if t >= deleted]
    if len(after) >= 2:
        return Grade(
            Verdict.PASS,
            f"its requests after the deletion at {fmt(deleted)} got no answer, as on Azure, "
            f"and it gave up on each and tried again ({len(after)} sent)",
        )
    waited = max(0.0, observation.end_t - deleted)
    if not after:
        return Grade(
            Verdict.WARN,
            f"it sent nothing in the {waited:.0f} s after its VM was deleted at "
            f"{fmt(deleted)}: it waited on a request held since before, with no timeout or "
            f"one longer than {observation.patience:g} s (on Azure its process dies with "
            "the VM)",
        )
    return Grade(
        Verdict.WARN,
        f"it sent one request after its VM was deleted at {fmt(deleted)} and waited for it "
        f"until the trial ended {waited:.0f} s later: no timeout, or one longer than "
        f"{observation.patience:g} s (on Azure its process dies with the VM)",
    )


def grade_etag(observation: Observation) -> Grade:
    sent = [r for r in polls(observation) if "if-none-match" in r.headers]
    if sent:
        not_modified = sum(1 for r in sent if r.status == 304)
        return Grade(
            Verdict.PASS,
            f"{len(sent)} poll(s) sent If-None-Match ({not_modified} answered 304)",
        )
    return Grade(Verdict.INFO, "it sends no If-None-Match: every poll downloads the whole document")


def grade_reuse(observation: Observation) -> Grade:
    requests = len(observation.sends)
    opened = len(observation.opens)
    if requests and opened < requests:
        return Grade(Verdict.PASS, f"{requests} request(s) on {opened} connection(s)")
    return Grade(Verdict.INFO, f"a new connection for every request ({opened} for {requests})")


def grade_rate(observation: Observation) -> Grade:
    refused = [r for r in observation.requests if r.status == 429]
    busiest = busiest_second([observation.t(r.at) for r in observation.requests])
    if refused or busiest > RATE_LIMIT:
        return Grade(
            Verdict.WARN,
            f"{busiest} requests in one second ({len(refused)} answered 429): over the "
            "documented 5 a second",
        )
    return Grade(Verdict.PASS, f"at most {busiest} request(s) in any second")


def grade_drained(observation: Observation) -> Grade:
    ok, said = observation.checks.get("drained", (False, "the check did not run"))
    approved = approvals_of(observation, observation.events["own"])
    moment = "when it approved" if approved else "at NotBefore"
    if not ok:
        return Grade(Verdict.FAIL, f"not drained {moment}: {said}")
    return Grade(Verdict.PASS, f"drained {moment}: {said}")


def grade_recovered(observation: Observation) -> Grade:
    if (gone := _exited(observation, "after the impact")) is not None:
        return gone
    ok, said = observation.checks.get("recovered", (False, "the check did not run"))
    if not ok:
        return Grade(Verdict.FAIL, f"not recovered after the event: {said}")
    return Grade(Verdict.PASS, f"recovered after the event: {said}")


def grade_headers(observation: Observation) -> Grade:
    refused = [r for r in observation.requests if r.status == 400]
    if refused:
        first = refused[0]
        said = first.response_body.decode("utf-8", "replace")[:160]
        return Grade(
            Verdict.FAIL,
            f"{len(refused)} request(s) refused with 400, first {first.method} "
            f"{first.path}?{first.query} at {fmt(observation.t(first.at))}: {said}",
        )
    answered = answered_polls(observation)
    if not answered:
        return Grade(Verdict.FAIL, "no poll for events was answered")
    versions = sorted({r.api_version or "" for r in answered})
    return Grade(
        Verdict.PASS,
        f"{len(answered)} poll(s) with Metadata: true, api-version {', '.join(versions)}",
    )


__all__ = [
    "RATE_LIMIT",
    "busiest_second",
    "grade_approves_once",
    "grade_bad_request",
    "grade_cancelled",
    "grade_deleted",
    "grade_drained",
    "grade_etag",
    "grade_fault",
    "grade_first_call",
    "grade_headers",
    "grade_held",
    "grade_notice",
    "grade_own_vm_only",
    "grade_rate",
    "grade_recovered",
    "grade_reuse",
    "grade_survives",
    "grade_two_events",
]
