"""NotBefore as RFC 1123 in GMT with the right weekday (SPEC 2), checked against a calendar
computed here from first principles rather than by the library the code uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from forewarn.domain.events import EventType
from forewarn.wire.dates import format_not_before, parse_not_before

if TYPE_CHECKING:
    from endpoint.conftest import Imds

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def rfc1123(moment: datetime) -> str:
    """The expected text, built field by field; 1970-01-01 was a Thursday."""
    utc = moment.astimezone(UTC)
    weekday = WEEKDAYS[(days_from_civil(utc.year, utc.month, utc.day) + 3) % 7]
    return (
        f"{weekday}, {utc.day:02d} {MONTHS[utc.month - 1]} {utc.year:04d} "
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d} GMT"
    )


def test_the_independent_calendar_agrees_with_the_documented_examples() -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties": "Mon,
    19 Sep 2016 18:29:47 GMT"; learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
    "Example responses": "Mon, 11 Apr 2022 22:26:58 GMT"."""
    assert rfc1123(datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)) == (
        "Mon, 19 Sep 2016 18:29:47 GMT"
    )
    assert rfc1123(datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)) == (
        "Mon, 11 Apr 2022 22:26:58 GMT"
    )
    assert format_not_before(datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)) == (
        "Mon, 19 Sep 2016 18:29:47 GMT"
    )


moments = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(9998, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=8))]),
)


@settings(max_examples=500)
@given(moments)
def test_not_before_has_the_right_weekday_on_any_date(moment: datetime) -> None:
    """SPEC 2 [doc] [seen]: RFC 1123 time in GMT, correct weekday, whatever zone the platform
    time was given in; whole seconds, as every documented example shows."""
    assert format_not_before(moment) == rfc1123(moment)


@settings(max_examples=200)
@given(moments)
def test_not_before_text_reads_back_to_the_same_second(moment: datetime) -> None:
    """Clients parse NotBefore back
    (docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "C#
    Sample": ``DateTime? NotBefore``); the text must name the same instant, to the second."""
    parsed = parse_not_before(format_not_before(moment))
    assert parsed == moment.astimezone(UTC).replace(microsecond=0)


def test_started_events_have_no_not_before() -> None:
    """learn.microsoft.com/fr-fr/azure/virtual-machines/windows/scheduled-events, "Propriétés
    d'événement", NotBefore: "Est vide si l'événement a déjà démarré"."""
    assert format_not_before(None) == ""
    assert parse_not_before("") is None


@settings(max_examples=60, deadline=None)
@given(
    st.datetimes(min_value=datetime(1999, 12, 25), max_value=datetime(2100, 3, 1)),
    st.integers(min_value=0, max_value=7 * 24 * 3600),
)
def test_not_before_through_the_endpoint(
    make_imds: type[Imds], start: datetime, extra_seconds: int
) -> None:
    """The same rule on the wire: start + the 15 minute Reboot minimum notice
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling") + any
    further notice."""
    imds = make_imds(start=start.replace(tzinfo=UTC))
    imds.add_vm("vm0")
    notice = timedelta(minutes=15, seconds=extra_seconds)
    imds.schedule(EventType.REBOOT, "vm0", notice=notice)
    shown = imds.document("vm0")["Events"][0]["NotBefore"]
    assert shown == rfc1123(start.replace(tzinfo=UTC) + notice)
