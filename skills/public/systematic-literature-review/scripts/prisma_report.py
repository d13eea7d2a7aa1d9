"""A systematic review's records -> a PRISMA flow, a synthesis table and references (Markdown).

Usage: prisma_report.py review.json --out review.md [--style apa|ieee|bibtex]

Duplicates are records with the same DOI, or the same normalised title and year; the first one
found is kept. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path


def norm_title(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


def dedupe(records: list[dict]) -> tuple[list[dict], int]:
    seen: set[str] = set()
    kept = []
    for record in records:
        keys = {f"t:{norm_title(record.get('title', ''))}:{record.get('year', '')}"}
        if record.get("doi"):
            keys.add("d:" + str(record["doi"]).lower().removeprefix("https://doi.org/"))
        if keys & seen:
            continue
        seen |= keys
        kept.append(record)
    return kept, len(records) - len(kept)


def surname(author: str) -> str:
    return author.split(",")[0].strip() if "," in author else author.split()[-1]


def initials(author: str) -> str:
    given = author.split(",", 1)[1] if "," in author else " ".join(author.split()[:-1])
    return " ".join(f"{part[0]}." for part in given.split() if part)


def apa(r: dict) -> str:
    names = [f"{surname(a)}, {initials(a)}".strip(", ") for a in r.get("authors", [])]
    who = (
        names[0] if len(names) == 1 else ", ".join(names[:-1]) + ", & " + names[-1] if names else "Anonymous"
    )
    where = f" *{r['venue']}*." if r.get("venue") else ""
    link = f" https://doi.org/{r['doi']}" if r.get("doi") else (f" {r['url']}" if r.get("url") else "")
    return f"{who} ({r.get('year', 'n.d.')}). {r.get('title', '').rstrip('.')}.{where}{link}"


def ieee(r: dict, n: int) -> str:
    names = [f"{initials(a)} {surname(a)}".strip() for a in r.get("authors", [])]
    where = f", *{r['venue']}*" if r.get("venue") else ""
    doi = f", doi: {r['doi']}" if r.get("doi") else ""
    who = ", ".join(names) or "Anonymous"
    return f'[{n}] {who}, "{r.get("title", "")},"{where}, {r.get("year", "n.d.")}{doi}.'


def bibtex(r: dict) -> str:
    key = re.sub(r"\W", "", surname((r.get("authors") or ["anon"])[0]).lower()) + str(r.get("year", ""))
    fields = {
        "title": r.get("title", ""),
        "author": " and ".join(r.get("authors", [])),
        "year": r.get("year", ""),
        "journal": r.get("venue", ""),
        "doi": r.get("doi", ""),
    }
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items() if v)
    return f"@article{{{key},\n{body}\n}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("review")
    parser.add_argument("--out", required=True)
    parser.add_argument("--style", choices=("apa", "ieee", "bibtex"), default="apa")
    args = parser.parse_args()
    try:
        review = json.loads(Path(args.review).read_text(encoding="utf-8"))
        records = review["records"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read {args.review}: {exc} (it needs a 'records' list)", file=sys.stderr)
        return 2
    undecided = [r.get("title", "?") for r in records if r.get("decision") not in ("include", "exclude")]
    if undecided:
        print(f"screen every record first; no include/exclude decision for: {undecided[:5]}", file=sys.stderr)
        return 2
    unique, duplicates = dedupe(records)
    excluded = [r for r in unique if r["decision"] == "exclude"]
    included = [r for r in unique if r["decision"] == "include"]
    by_source = Counter(r.get("source", "unknown") for r in records)
    reasons = Counter(r.get("reason") or "no reason given" for r in excluded)
    full_text_excluded = sum(1 for r in excluded if r.get("stage") == "full-text")

    lines = [f"# Systematic review: {review.get('question', '')}".rstrip(), ""]
    if review.get("criteria"):
        lines += ["## Criteria", "", *[f"- {c}" for c in review["criteria"]], ""]
    lines += ["## PRISMA flow", "", "| stage | records |", "| --- | --- |"]
    lines += [f"| identified: {source} | {count} |" for source, count in sorted(by_source.items())]
    lines += [
        f"| duplicates removed | {duplicates} |",
        f"| screened | {len(unique)} |",
        f"| excluded on title/abstract | {len(excluded) - full_text_excluded} |",
        f"| excluded on full text | {full_text_excluded} |",
        f"| included | {len(included)} |",
        "",
        "### Reasons for exclusion",
        "",
        *[f"- {reason}: {count}" for reason, count in reasons.most_common()],
        "",
        "## Included studies",
        "",
        "| # | study | year | finding |",
        "| --- | --- | --- | --- |",
    ]
    for n, r in enumerate(included, 1):
        first = surname((r.get("authors") or ["Anonymous"])[0])
        lines.append(
            f"| {n} | {first} et al.: {r.get('title', '')} | {r.get('year', '')} | {r.get('finding', '')} |"
        )
    lines += ["", "## References", ""]
    if args.style == "apa":
        lines += [apa(r) for r in sorted(included, key=lambda r: surname((r.get("authors") or ["~"])[0]))]
    elif args.style == "ieee":
        lines += [ieee(r, n) for n, r in enumerate(included, 1)]
    else:
        bib = Path(args.out).with_suffix(".bib")
        bib.write_text("\n\n".join(bibtex(r) for r in included) + "\n", encoding="utf-8")
        lines.append(f"BibTeX: {bib.name}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(
        f"wrote {args.out}: {len(records)} identified, {duplicates} duplicates, {len(unique)} screened, "
        f"{len(excluded)} excluded, {len(included)} included"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
