"""The chat commands every surface offers (the chat platforms through the router, the web UI in
the page): what `/help` lists, and how the ones that take words are used.

One table, so that what `/help` says in a chat is what works in the web UI too (the gateway serves it
at `GET /api/commands`).
"""

from __future__ import annotations

HELP_INTRO = "I am an AI agent. Send me a message and I will work on it."

# (name, what it does): the commands, in the order /help lists them.
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "start a fresh conversation"),
    ("status", "this conversation, its model and whether I am busy"),
    ("models", "list models; /models <name> - use one in this chat"),
    ("memory", "what I remember about you"),
    ("goal", "set a goal I keep working on by myself; /goal shows it, /goal clear stops it"),
    ("compact", "summarise this conversation so far, to free room"),
    ("schedule", "do something on a schedule: /schedule every weekday 08:00 Europe/Berlin <what>"),
    ("schedules", "your scheduled tasks in this chat"),
    ("unschedule", "remove a scheduled task: /unschedule <number>"),
    ("connect", "a code to enter in the web UI: this chat becomes your account (memory, role, threads)"),
    ("bootstrap", "create a custom agent here: /bootstrap <name> [what it should do]"),
    ("usage", "the tokens (and cost) you used today and this month, and your budget"),
    ("approve", "let a tool call that waits for your yes run: /approve <id> [always]"),
    ("deny", "refuse a tool call that waits for your yes: /deny <id> [reason]"),
    ("help", "this help"),
)

SCHEDULE_USAGE = (
    "Usage: /schedule <when> <what to do>, for example\n"
    "/schedule every weekday 08:00 Europe/Berlin summarize the news\n"
    "/schedule every 2h check the build\n"
    "/schedule at 2026-12-01 09:00 UTC remind me of the review\n"
    "/schedule in 20m stretch\n"
    '/schedule cron "0 8 * * 1-5" Europe/Berlin good morning\n'
    "When: every <N>s|m|h|d, every day|weekday|<days> <HH:MM>, at [<date>] <HH:MM>, in <N>m, "
    'or cron "<fields>"; a time zone (IANA name) may follow the time.'
)

# How the commands that need words are used (shown, as usage, when they come without them).
USAGE: dict[str, str] = {
    "schedule": SCHEDULE_USAGE,
    "unschedule": "Usage: /unschedule <number>, a number from /schedules.",
}
