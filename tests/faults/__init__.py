"""Fault injection against real processes (issue #10): `antler up` under chat load while parts die.

Each scenario publishes chat messages, collects the replies from the CHAT_OUT
stream and counts per message: accepted, answered (exactly once), duplicated,
wrong (not its own answer), lost. The counts are printed and listed in pytest's
terminal summary under "fault injection counts".

    .venv/bin/pytest tests/faults -q                          # 40 messages over 10 chats each
    ANTLER_FAULTS_LONG=1 .venv/bin/pytest tests/faults -q     # 500 over 50
"""
