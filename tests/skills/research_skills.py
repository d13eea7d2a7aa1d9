"""End-to-end cases of the skills that research and report (deep-research, github-deep-research,
academic-paper-review, systematic-literature-review, consulting-analysis): run by
test_skill_library.py on its shared stack."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.skills.artifacts import png_size
from tests.skills.conftest import SKILLS
from tests.skills.scripted import OUT, UP, WS, Stack, bash, present, ran_cleanly, use_skill, write

SCRIPTS = "/mnt/skills/public"


async def deep_research(stack: Stack) -> None:
    sources = [
        {
            "id": "ehpa",
            "title": "Heat pump market report",
            "url": "https://ehpa.example/report",
            "date": "2025-04",
        },
        {"id": "iea", "title": "Heating outlook", "url": "https://iea.example/heat", "publisher": "IEA"},
    ]
    draft = (
        "# Heat pumps\n\n## Bottom line\nSales fell 12% in 2024 [@ehpa; @iea].\n\nPrices drove it [@iea].\n"
    )
    used = await use_skill(
        stack,
        "deep-research",
        "what happened to heat pump sales?",
        write(f"{WS}/sources.json", sources),
        write(f"{WS}/draft.md", draft),
        bash(
            f"python3 /mnt/skills/public/deep-research/scripts/cite_check.py {WS}/draft.md "
            f"--sources {WS}/sources.json --out {OUT}/heat-pumps-research.md"
        ),
        present(f"{OUT}/heat-pumps-research.md"),
    )
    assert "2 sources cited, 0 warning(s)" in ran_cleanly(used)
    report = (used.outputs / "heat-pumps-research.md").read_text(encoding="utf-8")
    assert "Sales fell 12% in 2024 [1, 2]." in report
    assert "Prices drove it [2]." in report
    assert report.endswith(
        "## Sources\n\n1. Heat pump market report — 2025-04. <https://ehpa.example/report>\n"
        "2. Heating outlook — IEA. <https://iea.example/heat>\n"
    )


async def github_deep_research(stack: Stack) -> None:
    repo = {
        "full_name": "acme/rocket",
        "description": "Fast rockets",
        "stargazers_count": 12345,
        "forks_count": 321,
        "open_issues_count": 12,
        "created_at": "2020-01-02T00:00:00Z",
        "pushed_at": "2025-03-01T00:00:00Z",
        "default_branch": "main",
        "license": {"spdx_id": "MIT"},
    }
    weeks = [{"week": 1704067200 + 604800 * i, "total": i % 5, "days": [0] * 7} for i in range(52)]
    contributors = [{"login": "ada", "contributions": 80}, {"login": "bo", "contributions": 20}]
    used = await use_skill(
        stack,
        "github-deep-research",
        "how healthy is acme/rocket?",
        # As fetched from api.github.com with web_fetch and saved as returned.
        write(f"{WS}/gh/repo.json", repo),
        write(f"{WS}/gh/commit_activity.json", weeks),
        write(f"{WS}/gh/contributors.json", contributors),
        bash(
            f"python3 /mnt/skills/public/github-deep-research/scripts/repo_facts.py {WS}/gh "
            f"--out {OUT}/rocket-facts.md --chart {OUT}/rocket-activity.png"
        ),
        present(f"{OUT}/rocket-facts.md", f"{OUT}/rocket-activity.png"),
    )
    output = ran_cleanly(used)
    assert "At a glance, Contributors, Commit activity, Not covered" in output
    facts = (used.outputs / "rocket-facts.md").read_text(encoding="utf-8")
    assert "| Stars | 12,345 |" in facts
    assert "- Commits: 101 (1.9 a week)" in facts
    assert "The top 2 made 100% of the listed commits." in facts
    assert "Not fetched: languages.json, releases.json, issues.json." in facts
    assert png_size((used.outputs / "rocket-activity.png").read_bytes()) == (1200, 480)


async def academic_paper_review(stack: Stack) -> None:
    thread = f"t-paper-{uuid.uuid4().hex[:6]}"
    paper = {
        "title": "Sparse Routing for Small Models",
        "blocks": [
            {"type": "heading", "text": "Abstract"},
            {"type": "text", "text": "We show that sparse routing halves inference cost. We test it twice."},
            {"type": "heading", "text": "1 Introduction"},
            {"type": "text", "text": "Figure 1 shows the idea and Table 1 the results."},
            {"type": "heading", "text": "2 Method"},
            {"type": "heading", "text": "References"},
            {"type": "list", "items": ["Smith, J. Scaling laws. 2020.", "Doe, K. Experts. 2021."]},
        ],
    }
    # The user's upload: a PDF made by the document-report skill's script on the host.
    uploads = stack.uploads(thread)
    uploads.mkdir(parents=True, exist_ok=True)
    (uploads / "paper.json").write_text(json.dumps(paper), encoding="utf-8")
    import asyncio

    make = SKILLS / "public" / "document-report" / "scripts" / "make_document.py"
    proc = await asyncio.create_subprocess_exec(
        str(stack.toolbox.python_dir / "bin" / "python"), str(make), str(uploads / "paper.json"),
        "--out", str(uploads / "paper.pdf"), env={"MPLBACKEND": "Agg", "MPLCONFIGDIR": str(uploads / ".mpl")},
    )  # fmt: skip
    assert await proc.wait() == 0
    used = await use_skill(
        stack,
        "academic-paper-review",
        "review the paper I uploaded",
        bash(
            f"python3 /mnt/skills/public/academic-paper-review/scripts/paper_text.py {UP}/paper.pdf "
            f"--out {WS}/paper.md && cp {WS}/paper.md {OUT}/paper.md"
        ),
        present(f"{OUT}/paper.md"),
        thread=thread,
    )
    output = ran_cleanly(used)
    assert "title: Sparse Routing for Small Models" in output
    assert "abstract: We show that sparse routing halves inference cost." in output
    assert "sections: Abstract (p. 1); 1 Introduction (p. 1); 2 Method (p. 1); References (p. 1)" in output
    assert "figures: 1, tables: 1" in output
    text = (used.outputs / "paper.md").read_text(encoding="utf-8")
    assert text.startswith("# Sparse Routing for Small Models\n\n<!-- page 1 -->")


async def systematic_literature_review(stack: Stack) -> None:
    def paper(title: str, year: int, decision: str, **extra: Any) -> dict[str, Any]:
        return {"title": title, "year": year, "decision": decision, "source": "arXiv", **extra}

    review = {
        "question": "Does retrieval reduce hallucination in LLMs?",
        "criteria": ["empirical study", "reports a hallucination metric"],
        "records": [
            paper(
                "Retrieval cuts errors",
                2023,
                "include",
                authors=["Ada Lovelace", "Alan Turing"],
                doi="10.1/rag",
                venue="ACL",
                finding="-40% errors",
            ),
            paper("Retrieval Cuts Errors!", 2023, "include", source="PubMed"),  # same title and year
            paper("A position paper", 2022, "exclude", reason="not empirical"),
            paper(
                "Another take",
                2021,
                "exclude",
                doi="10.1/other",
                reason="no hallucination metric",
                stage="full-text",
            ),
            paper("Other DOI copy", 2021, "exclude", doi="https://doi.org/10.1/OTHER", reason="duplicate"),
        ],
    }
    report = "python3 /mnt/skills/public/systematic-literature-review/scripts/prisma_report.py"
    used = await use_skill(
        stack,
        "systematic-literature-review",
        "review retrieval and hallucination",
        write(f"{WS}/review.json", review),
        bash(f"{report} {WS}/review.json --out {OUT}/review.md --style apa"),
        present(f"{OUT}/review.md"),
    )
    assert "5 identified, 2 duplicates, 3 screened, 2 excluded, 1 included" in ran_cleanly(used)
    text = (used.outputs / "review.md").read_text(encoding="utf-8")
    assert "| duplicates removed | 2 |" in text
    assert "| excluded on full text | 1 |" in text
    assert "- not empirical: 1" in text
    assert "Lovelace, A., & Turing, A. (2023). Retrieval cuts errors. *ACL*. https://doi.org/10.1/rag" in text


async def consulting_analysis(stack: Stack) -> None:
    script = "python3 /mnt/skills/public/consulting-analysis/scripts/consulting_report.py"
    plan = {
        "subject": "E-bikes in the Netherlands",
        "decision": "Launch a cargo model?",
        "chapters": [
            {"title": "Market size", "framework": "TAM-SAM-SOM", "data": ["unit sales 2022-2024 (RAI)"]},
            {"title": "Competition", "framework": "Porter's five forces", "data": ["brand shares (BOVAG)"]},
        ],
    }
    report = {
        "title": "Cargo e-bikes in the Netherlands",
        "summary": ["Sales grew 30% in two years [@rai]."],
        "chapters": [
            {
                "title": "Market size",
                "headline": "A growing market [@rai]",
                "blocks": [
                    {
                        "type": "chart",
                        "kind": "bar",
                        "title": "Units sold (k)",
                        "labels": ["2022", "2024"],
                        "series": {"units": [100, 130]},
                        "source": "rai",
                    },
                    {
                        "type": "table",
                        "columns": ["Brand", "Share"],
                        "rows": [["Urban Arrow", "31%"]],
                        "source": "bovag",
                    },
                    {"type": "swot", "strengths": ["dealer network"], "threats": ["price war [@bovag]"]},
                    {"type": "forces", "forces": {"rivalry": ["high", "12 brands"]}},
                ],
            }
        ],
        "recommendations": [
            {"action": "Sell through dealers", "impact": "medium", "effort": "low"},
            {"action": "Lease to families", "impact": "high", "effort": "medium"},
        ],
        "sources": [
            {
                "id": "rai",
                "title": "Fietsverkopen 2024",
                "publisher": "RAI",
                "url": "https://rai.example/2024",
            },
            {"id": "bovag", "title": "Marktaandelen", "publisher": "BOVAG"},
        ],
    }
    unsourced = {**report, "chapters": [{"title": "X", "blocks": [{"type": "chart", "labels": ["a"],
                                                                    "series": {"n": [1]}}]}]}  # fmt: skip
    used = await use_skill(
        stack,
        "consulting-analysis",
        "should we launch a cargo e-bike in the Netherlands?",
        write(f"{WS}/framework.json", plan),
        bash(f"{script} framework {WS}/framework.json --out {OUT}/framework.md"),
        write(f"{WS}/bad.json", unsourced),
        bash(f"{script} report {WS}/bad.json --out {OUT}/bad.md; echo status=$?"),
        write(f"{WS}/report.json", report),
        bash(f"{script} report {WS}/report.json --out {OUT}/cargo.md"),
        present(f"{OUT}/cargo.md"),
    )
    first, refused, written = used.results["bash"]
    assert f"wrote {OUT}/framework.md: 2 chapters, 2 data items to collect" in first
    assert "error: chart 'Chart 1' names no source: every figure must be traceable" in refused
    assert "status=1" in refused
    assert not (used.outputs / "bad.md").exists(), "nothing written from an unsourced report"
    assert "1 chapters, 1 charts, 2 recommendations, 2 sources cited" in written
    framework_md = (used.outputs / "framework.md").read_text(encoding="utf-8")
    assert "- [ ] unit sales 2022-2024 (RAI) (chapter 1)" in framework_md
    text = (used.outputs / "cargo.md").read_text(encoding="utf-8")
    assert "- Sales grew 30% in two years [1]." in text
    assert "![Units sold (k)](cargo-charts/chart-1.png)" in text
    assert "*Source: [2]*" in text, "the table's source is numbered"
    assert "| **External** | **Opportunities**<br>— | **Threats**<br>price war [2] |" in text
    assert "| Rivalry among competitors | high | 12 brands |" in text
    assert text.index("Lease to families") < text.index("Sell through dealers"), "by impact"
    assert text.endswith(
        "1. Fietsverkopen 2024 — RAI. <https://rai.example/2024>\n2. Marktaandelen — BOVAG.\n"
    )
    assert png_size((used.outputs / "cargo-charts" / "chart-1.png").read_bytes()) == (960, 540)


RESEARCH_SKILL_TESTS = {
    "deep-research": deep_research,
    "github-deep-research": github_deep_research,
    "academic-paper-review": academic_paper_review,
    "systematic-literature-review": systematic_literature_review,
    "consulting-analysis": consulting_analysis,
}
