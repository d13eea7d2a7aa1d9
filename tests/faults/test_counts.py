"""The fault scenarios' judge (`tests/faults/load.py`): an answer that comes after the budget is late,
one that never comes is lost, and only the second (or lateness past the bound) fails a scenario."""

from __future__ import annotations

from typing import cast

from bus import Bus, encode
from bus.messages import OutboundMessage
from tests.faults.load import ChatLoad


def answered(load: ChatLoad, message_id: str, at: float, seq: int) -> None:
    """The collector read `message_id`'s final reply (CHAT_OUT `seq`) at time `at`."""
    message = next(m for m in load.messages if m.message_id == message_id)
    reply = OutboundMessage(
        channel="script",
        chat_id=message.chat_id,
        reply_to=message_id,
        kind="final",
        text=message.expected_reply,
    )
    load._take(seq, encode(reply))
    load.answered_at[message_id] = at


def test_an_answer_after_the_budget_is_late_by_its_figure_and_one_never_given_is_lost() -> None:
    load = ChatLoad(cast(Bus, None), chats=1, per_chat=3, grace=40.0, late_bound=20.0)
    load.accepted = {m.message_id for m in load.messages}
    load.budget_end = 100.0
    answered(load, "m-0-0", at=90.0, seq=1)  # in time
    answered(load, "m-0-1", at=112.5, seq=2)  # 12.5 s late

    counts = load.counts()
    assert (counts.answered, counts.late, counts.late_by, counts.lost) == (2, 1, 12.5, 1)
    assert "lost=1 late=1 late_by=12.5s" in counts.line("s", 1.0)
    assert not counts.acceptable(load.late_bound), "a lost answer fails"
    assert "lost: m-0-2" in load.problems()

    answered(load, "m-0-2", at=135.0, seq=3)  # 35 s late: more than the bound
    counts = load.counts()
    assert (counts.lost, counts.late, counts.late_by) == (0, 2, 35.0)
    assert not counts.acceptable(load.late_bound)
    assert "late: m-0-2 answered 35.0s past the budget (more than the 20s allowed)" in load.problems()
    assert counts.acceptable(40.0), "late within the bound passes"
    assert not counts.perfect
