"""What Resource Graph's route hands to the runner of its queries, and how it answers.

Source: docs/azure-side.md, "Resource Graph": ``options`` ``$top``, ``$skip``,
``$skipToken``, ``resultFormat``, "100 rows a page unless ``$top`` says otherwise"; the
``maintenanceresources`` table "one row per published event with its latest state"; the
``resources`` table the fleet's VMs and scale sets; "Under ``forewarn serve`` queries run in a
process of their own [...] In process (the pytest plugin) they run in a worker thread." The
route reads the tables at one instant and hands them, with the request, to whichever runner
``forewarn serve`` gives (its query process); the runner's answer is the route's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from azure_support import FLEET, START

from forewarn.resourcegraph.answer import QueryJob, bad_request
from forewarn.scenario import in_process_client
from forewarn.server.azure import resourcegraph
from forewarn.server.control import create_control_app
from forewarn.testing import ForewarnPlatform
from forewarn.wire.maintenance import arg_row
from forewarn.wire.resources import resource_rows

URL = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
ANSWER = b'{"as": "the runner said"}'


@pytest.fixture(scope="module")
def platform() -> Iterator[ForewarnPlatform]:
    platform = ForewarnPlatform(fleet=FLEET, start=START, seed=5)
    try:
        platform.restart("solo")  # auto-approved: Started, then Completed
        platform.advance(timedelta(minutes=11))
        platform.restart("db0")  # Scheduled
        yield platform
    finally:
        platform.close()


class Runner:
    """Keeps each job it is given and answers 207 with :data:`ANSWER`."""

    def __init__(self) -> None:
        self.jobs: list[QueryJob] = []

    async def __call__(self, job: QueryJob) -> tuple[int, bytes]:
        self.jobs.append(job)
        return 207, ANSWER


def asked(platform: ForewarnPlatform, body: dict[str, Any]) -> tuple[httpx.Response, QueryJob]:
    runner = Runner()
    with in_process_client(create_control_app(platform.service, queries=runner)) as http:
        answer = http.post(URL, json=body)
    (job,) = runner.jobs
    return answer, job


def table(platform: ForewarnPlatform) -> list[dict[str, Any]]:
    return [arg_row(change) for change in platform.service.published().latest()]


def test_the_runner_given_runs_the_query_and_its_answer_is_the_routes(
    platform: ForewarnPlatform,
) -> None:
    """The request's query with the defaults: 100 rows a page, from the first, objects; the
    events' table as JSON, row for row; the ``resources`` table only for a query naming it."""
    answer, job = asked(platform, {"query": "maintenanceresources | count"})
    assert (answer.status_code, answer.content) == (207, ANSWER)
    assert answer.headers["content-type"] == "application/json"
    events = table(platform)
    assert len(events) == 2
    assert job == QueryJob(
        query="maintenanceresources | count",
        subscriptions=None,
        top=100,
        skip=0,
        skip_token=None,
        result_format="objectArray",
        events=job.events,
        resources=b"[]",
    )
    assert json.loads(job.events) == events


@pytest.mark.parametrize(
    ("query", "names_resources"),
    [
        ("resources | count", True),
        ("maintenanceresources | join (Resources) on id", True),
        ("maintenanceresources | count", False),
        ("maintenanceresources | project resources_x = 1", False),
        ("maintenanceresources | project x_resources = 1", False),
        ("maintenanceresources | project resources2 = 1", False),
    ],
)
def test_the_fleets_table_is_read_only_for_a_query_naming_it(
    platform: ForewarnPlatform, query: str, names_resources: bool
) -> None:
    """``resources`` as a word of its own, in any case (table names are read without regard
    to case, docs/azure-side.md's table of the supported parts)."""
    _, job = asked(platform, {"query": query})
    fleet = resource_rows(platform.service.vms())
    assert json.loads(job.resources) == (fleet if names_resources else [])
    assert fleet  # what tells the two apart


def test_the_options_and_subscriptions_asked_reach_the_runner(platform: ForewarnPlatform) -> None:
    _, job = asked(
        platform,
        {
            "query": "maintenanceresources",
            "subscriptions": ["a", "b"],
            "options": {"$top": 7, "$skip": 3, "$skipToken": "tok", "resultFormat": "table"},
        },
    )
    assert (job.subscriptions, job.top, job.skip, job.skip_token, job.result_format) == (
        ("a", "b"),
        7,
        3,
        "tok",
        "table",
    )
    _, empty = asked(platform, {"query": "maintenanceresources", "subscriptions": []})
    assert empty.subscriptions is None  # an empty list scopes nothing: the whole fleet


def test_in_process_a_query_runs_in_a_worker_thread(platform: ForewarnPlatform) -> None:
    """The default runner: ``in_thread`` answers as the query itself does."""
    with platform.control_client() as http:
        answer = http.post(URL, json={"query": "maintenanceresources | count"})
    assert answer.status_code == 200
    assert answer.json()["data"] == [{"Count": 2}]


def test_each_row_is_encoded_once_while_its_change_is_the_latest(
    platform: ForewarnPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resourcegraph.py, ``_EventRows``: "a change is immutable, so its row is kept while the
    change is the event's latest, and a query costs the loop a lookup per row rather than
    building and encoding the table again"."""
    made: list[object] = []

    def counted(change: Any) -> dict[str, Any]:
        made.append(change)
        return arg_row(change)

    monkeypatch.setattr(resourcegraph, "arg_row", counted)
    rows = resourcegraph._EventRows()
    changes = list(platform.service.published().latest())
    assert json.loads(rows.blob(changes)) == table(platform)
    assert made == changes
    assert json.loads(rows.blob(changes)) == table(platform)
    assert len(made) == 2  # nothing encoded again
    assert json.loads(rows.blob(changes[1:])) == table(platform)[1:]
    assert json.loads(rows.blob(changes)) == table(platform)
    assert made == [*changes, changes[0]]  # forgotten once no longer listed
    assert rows.blob([]) == b"[]"


def test_a_row_kept_for_another_change_at_the_same_address_is_not_reused(
    platform: ForewarnPlatform,
) -> None:
    """Rows are kept by ``id()`` of the change, which CPython gives again to a new object once
    the old one is freed: a kept row is used only for the very change it was made of."""
    changes = list(platform.service.published().latest())
    rows = resourcegraph._EventRows()
    rows._encoded = {id(changes[0]): (changes[1], b'"a freed change\'s row"')}
    assert json.loads(rows.blob([changes[0]])) == [arg_row(changes[0])]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"query": "x", "options": {"$top": 0}}', "options.$top: Input should be greater than"),
        (b'{"query": "x", "options": {"top": 5}}', "options.top: Extra inputs are not permitted"),
        (b"[]", "body: Input should be an object"),
        (b"not json", "body: Invalid JSON: "),
    ],
)
def test_a_request_refused_names_the_part_refused(
    platform: ForewarnPlatform, body: bytes, where: str
) -> None:
    """docs/azure-side.md, "Resource Graph": an unknown key of ``options`` (and any request
    Resource Graph's ``QueryRequest`` does not allow) "is a 400 in ARM's error envelope
    naming the part": a key by its path, dots between, and the request as a whole as
    ``body``; no query is run."""
    runner = Runner()
    with in_process_client(create_control_app(platform.service, queries=runner)) as http:
        answer = http.post(URL, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert message.startswith(f"The request is invalid: {where}"), message
    assert answer.json() == bad_request(message)
    assert runner.jobs == []
