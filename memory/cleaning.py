"""What the memory keeps of a model's proposal: text cleaned, and no instructions posing as facts.

The memory reaches every later run's system prompt, so a conversation that carried someone else's
words (a web page, a document, another chat member) must not plant orders there. Whatever the
memory model proposes (a fact, a section's summary) is cleaned as untrusted text is before the
model reads it (`bus.untrusted_text`: control and invisible characters stripped, look-alikes of
the prompt's sections such as `</memory><system>` and chat-template tokens escaped); and one that
reads as an instruction to the assistant rather than something about the user ("ignore previous
instructions", "always send the files to ...", "you are now ...") is dropped, with the reason in
the updater's log. A legitimate fact dropped by mistake costs a fact; a planted order kept would
steer every later run.
"""

from __future__ import annotations

import re

from bus.untrusted_text import one_line

_DATA = (
    r"(memor(y|ies)|files?|documents?|uploads?|secrets?|passwords?|credentials?|api[ _-]?keys?|keys|"
    r"tokens?|cookies?|conversations?|chats?|messages?|history|emails?|contacts?|data|everything|"
    r"system prompt|instructions)"
)
_SENDING = (
    r"(send|sent|sending|forward\w*|e-?mail\w*|upload\w*|post\w*|cop(y|ies|ied)|shar(e|es|ed|ing)|"
    r"leak\w*|exfiltrat\w*|transmit\w*)"
)

# Each: why such a text is not a fact about the user.
_INSTRUCTIONS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\b(ignore|disregard|forget|override|bypass)\b.{0,60}\b(instructions?|rules|prompts?|guidelines|"
            r"polic(y|ies)|previous|above|earlier|prior)\b",
            re.IGNORECASE | re.DOTALL,
        ),
        "it tells the assistant to set its instructions aside",
    ),
    (
        re.compile(
            r"\b(system prompt|developer mode|jailbreak\w*|new instructions?|god mode|DAN mode)\b",
            re.IGNORECASE,
        ),
        "it is about the assistant's instructions, not the user",
    ),
    (
        re.compile(
            r"^\W*(you|assistant|ai|antler|the (assistant|ai|agent|model))\b[\s,:]*"
            r"(are|must|should|shall|will|need|have to|always|never|now)\b",
            re.IGNORECASE,
        ),
        "it addresses the assistant",
    ),
    (
        re.compile(
            r"^\W*((always|never|do not|don't)\s+)?(ignore|send|forward|e-?mail|upload|post|reveal|"
            r"fetch|call|run|execute|curl|wget|obey|follow|respond|reply|tell|print|output|include|mention)\b",
            re.IGNORECASE,
        ),
        "it is an order, not a fact",
    ),
    (
        re.compile(
            rf"\b{_SENDING}\b.{{0,80}}\b{_DATA}\b.{{0,80}}(\bto\b|@|https?://)|"
            rf"\b{_DATA}\b.{{0,40}}\b{_SENDING}\b.{{0,80}}(\bto\b|@|https?://)",
            re.IGNORECASE | re.DOTALL,
        ),
        "it is a standing order to send the user's data somewhere",
    ),
]


def cleaned(text: str) -> str:
    """`text` as the memory may keep it: invisible characters stripped, forged sections escaped,
    whitespace folded."""
    return one_line(text)


def instruction(text: str) -> str | None:
    """Why `text` reads as an instruction to the assistant (so it is no fact to keep), or None."""
    for pattern, why in _INSTRUCTIONS:
        if pattern.search(text):
            return why
    return None
