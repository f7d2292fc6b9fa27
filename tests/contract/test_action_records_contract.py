"""One behaviour suite for the ActionRecords port (core.once), run against the in-memory fake and S3ActionRecords on
the stack's moto server over HTTP: an action is claimed once (the first message holds it), a change names the
version it read (a stale one changes nothing), and what a record says is read back as it was written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fake_actions import FakeActionRecords
from wap_ingest.core.once import ActionRecords, Progress


@pytest.fixture(params=["fake", pytest.param("s3", marks=pytest.mark.stack)])
def records(request: pytest.FixtureRequest) -> Iterator[ActionRecords]:
    if request.param == "fake":
        yield FakeActionRecords()
        return
    from wap_ingest.adapters.aws.action_records import S3ActionRecords

    yield S3ActionRecords(request.getfixturevalue("stack_s3"), request.getfixturevalue("fresh_bucket"))


def action() -> str:
    return f"slack-{uuid.uuid4().hex}"


def test_the_first_claim_records_the_action_as_started_by_its_message(records: ActionRecords) -> None:
    name = action()
    record, made = records.claim(name, "m1", "Slack action redrive on wap-events-dlq")
    assert made
    assert (record.action_id, record.message_id, record.progress, record.what) == (
        name, "m1", Progress.STARTED, "Slack action redrive on wap-events-dlq")
    assert record.at and record.version


def test_a_second_claim_finds_the_first_whoever_makes_it(records: ActionRecords) -> None:
    name = action()
    first, _ = records.claim(name, "m1", "the first")
    for message in ("m2", "m1"):  # another message (a copy), the same one (a redelivery)
        found, made = records.claim(name, message, "the second")
        assert not made
        assert (found.message_id, found.progress, found.what, found.version) == ("m1", Progress.STARTED, "the first",
                                                                                 first.version)


def test_a_change_names_the_version_it_read_and_is_read_back(records: ActionRecords) -> None:
    name = action()
    started, _ = records.claim(name, "m1", "publish request abc")
    failed = records.change(started, Progress.FAILED)
    assert failed is not None and failed.progress is Progress.FAILED and failed.version != started.version
    assert records.change(started, Progress.DONE) is None  # read before the change: refused, nothing changed
    assert records.claim(name, "m2", "x")[0].progress is Progress.FAILED
    retried = records.change(failed, Progress.STARTED)  # the same message's retry takes it over
    assert retried is not None and records.change(failed, Progress.STARTED) is None  # only one retry can
    done = records.change(retried, Progress.DONE)
    assert done is not None
    found, made = records.claim(name, "m1", "x")
    assert not made and (found.progress, found.message_id, found.version) == (Progress.DONE, "m1", done.version)


def test_two_changes_of_the_same_content_still_differ(records: ActionRecords) -> None:
    """A change to the progress a record already has is a change too: the version it names is spent."""
    started, _ = records.claim(action(), "m1", "x")
    again = records.change(started, Progress.STARTED)
    assert again is not None and again.version != started.version
    assert records.change(started, Progress.DONE) is None


def test_actions_are_kept_apart_and_ids_are_plain(records: ActionRecords) -> None:
    one, two = action(), "0f3c9a1b2d4e4f60"  # a Slack action's digest, a publish request's id
    records.claim(one, "m1", "one")
    assert records.claim(two, "m1", "two")[1]
    for bad in ("", "../etc", "a/b", "x" * 101, "ünïcode"):
        with pytest.raises(ValueError, match="action id"):
            records.claim(bad, "m1", "bad")
