"""Changing a memory document: what the model decided, applied with DeerFlow's rules.

Facts are deduplicated by their whitespace-normalized text, kept only at or
above the confidence threshold, and capped (the least confident go first).
Everything here is a pure function of the document, so the updater can apply
the same change again to a newer document when a compare-and-set loses.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, get_args

from bus.messages import ChatTurn, FactCategory, MemoryDocument, MemoryFact, MemorySection
from memory.cleaning import cleaned, instruction

log = logging.getLogger(__name__)

CATEGORIES: tuple[str, ...] = get_args(FactCategory)
# DeerFlow's section names and where each lives in the document.
SECTIONS = {
    "workContext": ("user", "work_context"),
    "personalContext": ("user", "personal_context"),
    "topOfMind": ("user", "top_of_mind"),
    "recentMonths": ("history", "recent_months"),
    "earlierContext": ("history", "earlier_context"),
    "longTermBackground": ("history", "long_term_background"),
}
# Blocks a message carries for the agent's sake, not the user's words: files sent along.
_FILE_BLOCKS = (
    re.compile(r"<uploaded_files>.*?</uploaded_files>", re.DOTALL),
    re.compile(r"\[Files sent with this message[^\]]*\]", re.DOTALL),
)
MAX_TURN_CHARS = 4000


def normalized(content: str) -> str:
    """How two facts are compared: same words, same order, whitespace and case aside."""
    return " ".join(content.split()).casefold()


def conversation(turns: list[ChatTurn], limit: int = 40) -> list[ChatTurn]:
    """The turns worth learning from: user messages and answers, file blocks cut, long ones shortened."""
    kept = []
    for turn in turns[-limit:]:
        text = turn.content
        for block in _FILE_BLOCKS:
            text = block.sub("", text)
        text = text.strip()
        if text:
            kept.append(ChatTurn(role=turn.role, content=text[:MAX_TURN_CHARS]))
    return kept


@dataclass
class MemoryChange:
    """What one memory-model reply asks for (the usable part of it)."""

    sections: dict[str, str] = field(default_factory=dict)  # DeerFlow section name -> new summary
    new_facts: list[dict[str, Any]] = field(default_factory=list)  # content, category, confidence
    remove: set[str] = field(default_factory=set)  # fact ids
    dropped: list[str] = field(default_factory=list)  # what was not usable, for the log

    @property
    def empty(self) -> bool:
        return not (self.sections or self.new_facts or self.remove)


def apply(
    doc: MemoryDocument,
    change: MemoryChange,
    *,
    source: str | None,
    threshold: float,
    max_facts: int,
    now: datetime,
) -> MemoryDocument:
    """A new document: `doc` with `change` applied."""
    doc = doc.model_copy(deep=True)
    for name, summary in change.sections.items():
        part, attr = SECTIONS[name]
        setattr(getattr(doc, part), attr, MemorySection(summary=summary, updated_at=now))
    facts = [f for f in doc.facts if f.id not in change.remove]
    seen = {normalized(f.content) for f in facts}
    for new in change.new_facts:
        key = normalized(new["content"])
        if new["confidence"] < threshold or key in seen:
            continue
        seen.add(key)
        facts.append(
            MemoryFact(
                content=" ".join(new["content"].split()),
                category=new["category"],
                confidence=new["confidence"],
                created_at=now,
                source=source,
            )
        )
    doc.facts = capped(facts, max_facts)
    doc.last_updated = now
    return doc


def capped(facts: list[MemoryFact], max_facts: int) -> list[MemoryFact]:
    """At most `max_facts`, the least confident (then the oldest) dropped first; order kept."""
    if len(facts) <= max_facts:
        return facts
    ranked = sorted(range(len(facts)), key=lambda i: (facts[i].confidence, i), reverse=True)
    keep = set(ranked[:max_facts])
    return [f for i, f in enumerate(facts) if i in keep]


def fact_fields(raw: Any, dropped: list[str]) -> dict[str, Any] | None:
    """A proposed fact, checked: text, a known category (else `context`), confidence in 0..1."""
    if not isinstance(raw, dict):
        dropped.append(f"a fact that is not an object: {str(raw)[:80]}")
        return None
    content = raw.get("content")
    if isinstance(content, str):
        content = cleaned(content)  # what untrusted text may carry is gone before it is kept
    if not isinstance(content, str) or not content:
        dropped.append(f"a fact without text: {str(raw)[:80]}")
        return None
    why = instruction(content)
    if why is not None:
        dropped.append(f"a fact that reads as an instruction ({why}): {content[:120]!r}")
        return None
    category = raw.get("category")
    if category not in CATEGORIES:
        category = "context"
    try:
        confidence = float(raw.get("confidence", 0.8))
    except (TypeError, ValueError):
        confidence = math.nan
    if not math.isfinite(confidence):
        dropped.append(f"a fact with an unreadable confidence: {str(raw)[:80]}")
        return None
    return {
        "content": content.strip()[:1000],
        "category": category,
        "confidence": min(max(confidence, 0.0), 1.0),
    }
