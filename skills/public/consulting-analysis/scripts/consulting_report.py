#!/usr/bin/env python3
"""Consulting analysis: an analysis framework (phase 1) or a sourced report (phase 2), as Markdown.

    python3 consulting_report.py framework FRAMEWORK.json --out framework.md
    python3 consulting_report.py report REPORT.json --out report.md

The report's charts are drawn with matplotlib into `<report>-charts/` beside it. Every chart and
table must name a `source` the report lists; citations `[@id]` in text become `[n]`. The shapes of
both files are in the skill's SKILL.md. Same input, same files. Errors are `error: ...` lines.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

CITE = re.compile(r"\[@([\w.-]+(?:\s*;\s*@[\w.-]+)*)\]")
FORCES = {
    "rivalry": "Rivalry among competitors",
    "new_entrants": "Threat of new entrants",
    "substitutes": "Threat of substitutes",
    "buyers": "Bargaining power of buyers",
    "suppliers": "Bargaining power of suppliers",
}
PESTEL = ("political", "economic", "social", "technological", "environmental", "legal")
LEVELS = {"high": 0, "medium": 1, "low": 2}


class Invalid(Exception):
    pass


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Invalid(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"{path.name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise Invalid(f"{path.name}: expected a JSON object")
    return data


def cell(value: Any) -> str:
    text = "" if value is None else (f"{value:,}" if isinstance(value, int | float) else str(value))
    return text.replace("|", "\\|").replace("\n", " ")


def table(columns: list[Any], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + " --- |" * len(columns)]
    for row in rows:
        if len(row) != len(columns):
            raise Invalid(f"a table row has {len(row)} cells, the table {len(columns)} columns: {row}")
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return lines


def framework(spec: dict[str, Any]) -> tuple[str, str]:
    subject = spec.get("subject") or ""
    chapters = spec.get("chapters") or []
    if not subject or not chapters:
        raise Invalid("the framework needs a subject and at least one chapter")
    out = [f"# Analysis framework: {subject}", ""]
    if spec.get("decision"):
        out += [f"**Decision to inform:** {spec['decision']}", ""]
    if spec.get("frameworks"):
        out += ["**Frameworks:** " + ", ".join(spec["frameworks"]), ""]
    checklist: list[str] = []
    for n, chapter in enumerate(chapters, 1):
        if not chapter.get("title"):
            raise Invalid(f"chapter {n} has no title")
        out += [f"## {n}. {chapter['title']}", ""]
        for key, label in (("question", "Question"), ("framework", "Framework"), ("logic", "Logic")):
            if chapter.get(key):
                out.append(f"- **{label}:** {chapter[key]}")
        for chart in chapter.get("charts", []):
            out.append(f"- **Chart:** {chart}")
        out.append("")
        checklist += [f"- [ ] {item} (chapter {n})" for item in chapter.get("data", [])]
    out += ["## Data to collect", "", *(checklist or ["- (none listed)"]), ""]
    return "\n".join(out), f"{len(chapters)} chapters, {len(checklist)} data items to collect"


class Report:
    def __init__(self, spec: dict[str, Any], out: Path) -> None:
        self.spec = spec
        self.out = out
        self.sources = {s["id"]: s for s in spec.get("sources", []) if isinstance(s, dict) and s.get("id")}
        if len(self.sources) != len(spec.get("sources", [])):
            raise Invalid("every source needs an id (and ids must differ)")
        self.order: list[str] = []  # source ids by first citation
        self.charts: list[Path] = []

    def cite(self, text: str) -> str:
        def number(match: re.Match[str]) -> str:
            ids = [part.strip().lstrip("@") for part in match.group(1).split(";")]
            for source in ids:
                if source not in self.sources:
                    raise Invalid(f"[@{source}] cites a source the report does not list")
                if source not in self.order:
                    self.order.append(source)
            return "[" + ", ".join(str(self.order.index(s) + 1) for s in ids) + "]"

        return CITE.sub(number, text)

    def sourced(self, block: dict[str, Any], what: str) -> str:
        source = block.get("source")
        if not source:
            raise Invalid(f"{what} names no source: every figure must be traceable")
        return self.cite(f"[@{source}]")

    def chart(self, block: dict[str, Any]) -> list[str]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        title = block.get("title") or f"Chart {len(self.charts) + 1}"
        note = self.sourced(block, f"chart '{title}'")
        labels = [str(label) for label in block.get("labels", [])]
        series = block.get("series") or {}
        if not labels or not series:
            raise Invalid(f"chart '{title}' needs labels and series")
        for name, values in series.items():
            if len(values) != len(labels):
                raise Invalid(
                    f"chart '{title}': series '{name}' has {len(values)} values for {len(labels)} labels"
                )
        kind = block.get("kind", "bar")
        if kind not in ("bar", "line", "hbar", "pie"):
            raise Invalid(f"chart '{title}': kind must be bar, line, hbar or pie, not {kind!r}")
        plt.rcParams["svg.hashsalt"] = "consulting"
        figure, axes = plt.subplots(figsize=(8, 4.5), dpi=120)
        width = 0.8 / len(series)
        for i, (name, values) in enumerate(series.items()):
            if kind == "line":
                axes.plot(labels, values, marker="o", label=name)
            elif kind == "pie":
                axes.pie(values, labels=labels, autopct="%1.0f%%")
                break
            else:
                positions = [x + i * width - 0.4 + width / 2 for x in range(len(labels))]
                (axes.barh if kind == "hbar" else axes.bar)(positions, values, width, label=name)
        if kind in ("bar", "hbar"):
            (axes.set_yticks if kind == "hbar" else axes.set_xticks)(range(len(labels)), labels)
        if len(series) > 1 and kind != "pie":
            axes.legend(frameon=False)
        axes.set_title(title, loc="left", fontweight="bold")
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
        folder = self.out.with_name(self.out.stem + "-charts")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"chart-{len(self.charts) + 1}.png"
        figure.tight_layout()
        figure.savefig(path, metadata={"Software": None})
        plt.close(figure)
        self.charts.append(path)
        lines = [
            f"![{title}]({folder.name}/{path.name})",
            "",
            f"*Figure {len(self.charts)}: {title}. Source: {note}*",
        ]
        if block.get("so_what"):
            lines.append(f"\n**So what:** {self.cite(block['so_what'])}")
        return lines

    def block(self, block: dict[str, Any]) -> list[str]:
        kind = block.get("type")
        if kind == "text":
            return [self.cite(str(block.get("text", "")))]
        if kind == "chart":
            return self.chart(block)
        if kind == "table":
            note = self.sourced(block, f"table '{block.get('title', '')}'".replace(" ''", ""))
            head = [f"**{block['title']}**", ""] if block.get("title") else []
            return head + table(block.get("columns", []), block.get("rows", [])) + ["", f"*Source: {note}*"]
        if kind == "swot":
            quad = {
                k: "<br>".join(self.cite(x) for x in block.get(k, [])) or "—"
                for k in ("strengths", "weaknesses", "opportunities", "threats")
            }
            return [
                "| | Helpful | Harmful |",
                "| --- | --- | --- |",
                f"| **Internal** | **Strengths**<br>{quad['strengths']} "
                f"| **Weaknesses**<br>{quad['weaknesses']} |",
                f"| **External** | **Opportunities**<br>{quad['opportunities']} "
                f"| **Threats**<br>{quad['threats']} |",
            ]
        if kind == "forces":
            rows = []
            for key, (level, why) in (block.get("forces") or {}).items():
                if key not in FORCES or level not in LEVELS:
                    raise Invalid(
                        f"forces: {key!r} must be one of {', '.join(FORCES)} with high, medium or low"
                    )
                rows.append([FORCES[key], level, self.cite(why)])
            return table(["Force", "Strength", "Why"], rows)
        if kind == "pestel":
            factors = block.get("factors") or {}
            unknown = set(factors) - set(PESTEL)
            if unknown:
                raise Invalid(f"pestel: unknown factors {sorted(unknown)}; use {', '.join(PESTEL)}")
            return table(
                ["Factor", "What it means here"],
                [[k.title(), self.cite(factors[k])] for k in PESTEL if k in factors],
            )
        raise Invalid(f"unknown block type {kind!r}: use text, chart, table, swot, forces or pestel")

    def render(self) -> str:
        spec = self.spec
        if not spec.get("title") or not spec.get("chapters"):
            raise Invalid("the report needs a title and at least one chapter")
        out = [f"# {spec['title']}", ""]
        if spec.get("subtitle"):
            out += [f"*{spec['subtitle']}*", ""]
        if spec.get("summary"):
            out += ["## Executive summary", "", *(f"- {self.cite(s)}" for s in spec["summary"]), ""]
        for n, chapter in enumerate(spec["chapters"], 1):
            out += [f"## {n}. {chapter.get('title', '')}", ""]
            if chapter.get("headline"):
                out += [f"> **{self.cite(chapter['headline'])}**", ""]
            for block in chapter.get("blocks", []):
                out += [*self.block(block), ""]
        recommendations = sorted(
            spec.get("recommendations", []),
            key=lambda r: (LEVELS.get(r.get("impact", "low"), 3), -LEVELS.get(r.get("effort", "high"), 3)),
        )
        if recommendations:
            rows = [
                [
                    i,
                    r.get("action", ""),
                    self.cite(r.get("why", "")),
                    r.get("impact", ""),
                    r.get("effort", ""),
                    r.get("horizon", ""),
                ]
                for i, r in enumerate(recommendations, 1)
            ]
            out += [
                "## Recommendations",
                "",
                *table(["#", "Action", "Why", "Impact", "Effort", "Horizon"], rows),
                "",
            ]
        unused = [s for s in self.sources if s not in self.order]
        out += ["## Sources", ""]
        for n, source_id in enumerate(self.order + unused, 1):
            s = self.sources[source_id]
            parts = [s.get("title", source_id), *(s[k] for k in ("publisher", "date") if s.get(k))]
            link = f" <{s['url']}>" if s.get("url") else ""
            out.append(f"{n}. {' — '.join(parts)}.{link}")
        return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=("framework", "report"))
    parser.add_argument("spec", type=Path, help="the framework or report JSON")
    parser.add_argument("--out", type=Path, required=True, help="the Markdown file to write")
    args = parser.parse_args(argv)
    try:
        spec = load(args.spec)
        if args.phase == "framework":
            text, said = framework(spec)
        else:
            report = Report(spec, args.out)
            text = report.render()
            said = (
                f"{len(spec['chapters'])} chapters, {len(report.charts)} charts, "
                f"{len(spec.get('recommendations', []))} recommendations, {len(report.order)} sources cited"
            )
            unused = [s for s in report.sources if s not in report.order]
            if unused:
                said += f"; listed but never cited: {', '.join(unused)}"
    except Invalid as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
