"""Acting on alerts where they arrive, as a person does: two files with nulls dropped into the source bucket, their
alerts in the stack's local Slack channel page, opened in headless Chromium (Debian's chromium, as the dashboard's
test). Alice clicks "Discard" on one alert, types her reason in the form that opens and sends it; bob (an operator
through the on-call user group) clicks "Publish after review" on the other and does the same. Each click goes from
the page to the interactivity endpoint as Slack posts it (signed), then through the ingest queue to the function,
which runs `wap discard` / `wap publish`'s use cases and updates the message in place. The test then checks the
branches are gone, the published file's rows are on main, `wap history` names each person, and the messages say who
did what. The page is screenshotted with bob's form open (test-artifacts/slack-form.png) and once both alerts are
answered (test-artifacts/slack-channel.png); docs/images/ holds the README's copies (run this test alone, then copy).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.browser import ChromiumMissingError, Page, chromium
from tests.conftest import Lake, parquet_bytes
from tests.slack_channel import ALICE, BOB, Channel
from tests.waiting import wait_for
from wap_ingest.entrypoints.cli import main
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def message_with(branch: str) -> str:
    """The JavaScript that finds the alert about `branch` in the page."""
    return f"[...document.querySelectorAll('.message')].find(m => m.innerText.includes({json.dumps(branch)}))"


def decide(page: Page, branch: str, button: str, reason: str, shot: Path | None = None) -> None:
    """Click the alert's button, wait for its form, type the reason, (take a picture,) send it."""
    page.click(f"[...{message_with(branch)}.querySelectorAll('button')].find(b => b.innerText === "
               f"{json.dumps(button)})")
    page.wait_for("Reason (recorded)", timeout=60)
    page.click("document.querySelector('form.modal textarea')")
    page.type(reason)
    if shot is not None:
        page.screenshot(shot)
    page.click("document.querySelector('form.modal #submit')")


def test_discard_and_publish_after_review_from_the_channel_page(lake: Lake, local_stack: StackState,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    channel = Channel.of(local_stack)
    name = f"chan_{uuid.uuid4().hex[:8]}"
    lake.drop(f"{name}/monday.parquet", parquet_bytes(30, nulls=3))
    lake.drop(f"{name}/tuesday.parquet", parquet_bytes(12, nulls=1))
    alerts = wait_for(lambda: (found := [m for m in channel.messages() if f"wap.{name}" in m["text"]])
                      and len(found) == 2 and found, "both alerts")
    branches = {("monday" if "monday" in m["text"] else "tuesday"): b for m in alerts
                for b in lake.wap_branches() if b in m["text"]}
    dropped, kept = branches["monday"], branches["tuesday"]
    shot = ARTIFACTS / "slack-channel.png"
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with chromium(width=1200, height=1750) as page:
            page.goto(f"{channel.url}/?user={ALICE}")
            page.wait_for(dropped, kept)
            decide(page, dropped, "Discard", "monday's export is cut short; the producer sends it again")
            page.wait_for("Discarded by @alice: monday's export is cut short; the producer sends it again",
                          timeout=240)
            page.goto(f"{channel.url}/?user={BOB}")
            page.wait_for(kept, "Discarded by @alice")
            decide(page, kept, "Publish after review", "one null in my_col_1 is expected on tuesdays",
                   ARTIFACTS / "slack-form.png")
            text = page.wait_for("@bob published it after review: one null in my_col_1 is expected on tuesdays",
                                 timeout=240)
            page.session.evaluate(f"{message_with(dropped)}.scrollIntoView({{block: 'start'}}); "
                                  "window.scrollBy(0, -80)")  # the two alerts, answered (the channel's bar too)
            page.screenshot(shot)
    except ChromiumMissingError as exc:
        pytest.fail(str(exc))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "Discarded by @alice" in text
    # the branches are gone, tuesday's rows are on main, monday's are not
    assert dropped not in lake.wap_branches() and kept not in lake.wap_branches()
    assert lake.count(f"wap.{name}") == 12
    # `wap history` names each person and says why
    capsys.readouterr()
    assert main(["history", name]) == 0
    history = capsys.readouterr().out
    print(history)
    assert f"discarded branch {dropped} (by hand) by alice (Slack U0ALICE01): monday's export is cut short" in history
    assert f"reviewed publish of branch {kept} by bob (Slack U0BOB0001) (published without re-audit): one null" \
        in history
    # the messages were updated in place: who did what, and no buttons left on them
    for branch, line in ((dropped, "Discarded by <@U0ALICE01>: monday"), (kept, "<@U0BOB0001> published it after")):
        message = channel.message_about(branch)
        assert message is not None and message.get("edited") and line in message["text"]
        assert not [b for b in message["blocks"] if b.get("type") == "actions"]
