"""The skills Antler ships (skills/public): they load, their helper scripts work in the real sandbox,
and the agent finds each one in its system prompt and reads it."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import zipfile
from typing import Any
from xml.etree import ElementTree

import pytest

from bus import Bus
from config import AppConfig
from sandbox import SandboxClient
from skills import load_skills
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.skills.conftest import SHIPPED, SKILLS, skills_config, uploads_dir
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

WS = "/mnt/user-data/workspace"
OUT = "/mnt/user-data/outputs"
SCRIPTS = "/mnt/skills/public/{skill}/scripts"

SALES = """date,region,product,units,revenue,returned
2024-01-05,North,Widget,12,"1,200.50",no
2024-01-06,South,Gadget,7,640.00,no
2024-01-06,North,Gadget,,455.25,yes
2024-02-01,East,Widget,20,2100,no
2024-02-03,South,Widget,5,n/a,no
2024-02-03,South,Widget,5,n/a,no
"""


def public_skills() -> dict[str, Any]:
    return {s.name: s for s in load_skills(SKILLS) if s.category == "public"}


# --- (a) they load ----------------------------------------------------------------------------------


def test_every_shipped_skill_loads_named_after_its_folder_with_a_description_and_license() -> None:
    skills = public_skills()
    assert sorted(skills) == sorted(SHIPPED)
    for name, skill in skills.items():
        assert skill.path.name == name
        assert skill.path == SKILLS / "public" / name
        assert 60 <= len(skill.description) <= 400, f"{name}: say what it does and when to use it"
        assert skill.license == "MIT"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_script_a_skill_tells_the_agent_to_run_exists(name: str) -> None:
    text = (SKILLS / "public" / name / "SKILL.md").read_text(encoding="utf-8")
    named = re.findall(r"/mnt/skills/public/([\w-]+/scripts/[\w.-]+\.py)", text)
    # Shell variables holding a scripts folder: S=/mnt/skills/public/x/scripts, then $S/tool.py
    folders = dict(re.findall(r"(\w+)=/mnt/skills/public/([\w-]+/scripts)\b", text))
    named += [f"{folders[var]}/{script}" for var, script in re.findall(r"\$(\w+)/([\w.-]+\.py)", text)]
    assert named or name == "deep-research", f"{name} never tells the agent to run its scripts"
    for script in named:
        assert (SKILLS / "public" / script).is_file(), f"{name} tells the agent to run a missing {script}"
    helpers = {p.name for p in (SKILLS / "public" / name).glob("scripts/*.py")} - {"tabular.py"}
    unmentioned = {h for h in helpers if h not in text}
    assert not unmentioned, f"{name} ships scripts its SKILL.md never mentions: {unmentioned}"


# --- (b) the helper scripts, run through the real sandbox broker --------------------------------------


async def run(client: SandboxClient, command: str) -> str:
    result = await client.exec(command)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.asyncio
async def test_profile_data_describes_each_column_of_a_csv(client: SandboxClient, broker: AppConfig) -> None:
    await client.write_file(f"{WS}/sales.csv", SALES)
    script = SCRIPTS.format(skill="data-analysis") + "/profile_data.py"
    output = await run(client, f"python3 {script} sales.csv --out {OUT}/profile.md")

    assert "6 rows × 6 columns; 1 duplicate rows" in output
    profile, sample = output.split("\nFirst 5 rows:")
    rows = {line.split("|")[1].strip(): line for line in profile.splitlines() if line.startswith("| ")}
    assert "| date | date | 0 (0.0%) | 4 | 2024-01-05 → 2024-02-03 |" in rows["date"]
    assert "| units | integer | 1 (16.7%) |" in rows["units"]
    assert "median 7" in rows["units"]
    assert "sum 49" in rows["units"]
    assert "| revenue | number | 2 (33.3%) |" in rows["revenue"]
    assert "sum 4,395.75" in rows["revenue"], "1,200.50 is read as a number"
    assert "top: South (3), North (2), East (1)" in rows["region"]
    assert "true 1, false 5" in rows["returned"]
    assert "| 2024-01-06 | North | Gadget |  | 455.25 | yes |" in sample
    assert (await client.read_file(f"{OUT}/profile.md")).content == output

    as_json = json.loads(await run(client, f"python3 {script} sales.csv --json"))
    kinds = {c["column"]: c["kind"] for c in as_json["profile"]}
    assert kinds == {
        "date": "date",
        "region": "text",
        "product": "text",
        "units": "integer",
        "revenue": "number",
        "returned": "boolean",
    }
    revenue = next(c for c in as_json["profile"] if c["column"] == "revenue")
    assert revenue["summary"]["max"] == 2100
    assert revenue["summary"]["median"] == pytest.approx(920.25)

    broken = await client.exec(f"echo '{{not json' > bad.json; python3 {script} bad.json")
    assert broken.exit_code == 1
    assert "error: bad.json: not valid JSON" in broken.output


@pytest.mark.asyncio
async def test_query_answers_sql_over_csv_and_json_files_and_saves_the_result(
    client: SandboxClient, broker: AppConfig
) -> None:
    await client.write_file(f"{WS}/sales.csv", SALES)
    regions = [{"region": "North", "manager": "Ana"}, {"region": "East", "manager": "Bo"}]
    await client.write_file(f"{WS}/regions.json", json.dumps(regions))
    script = SCRIPTS.format(skill="data-analysis") + "/query.py"
    sql = (
        "SELECT s.region, m.manager, COUNT(*) AS orders, SUM(s.revenue) AS revenue "
        "FROM sales s LEFT JOIN regions m USING (region) GROUP BY s.region ORDER BY revenue DESC"
    )
    output = await run(client, f'python3 {script} sales.csv regions.json --sql "{sql}" --out {OUT}/r.csv')

    assert "table sales: 6 rows (date TEXT, region TEXT, product TEXT, units INTEGER, revenue REAL" in output
    assert "| East | Bo | 1 | 2100 |" in output
    assert f"wrote 3 rows to {OUT}/r.csv" in output
    saved = list(csv.reader(io.StringIO((await client.read_file(f"{OUT}/r.csv")).content)))
    assert saved == [
        ["region", "manager", "orders", "revenue"],
        ["East", "Bo", "1", "2100.0"],
        ["North", "Ana", "2", "1655.75"],
        ["South", "", "3", "640.0"],
    ]

    by_month = await run(
        client,
        f"""python3 {script} sales.csv --sql "SELECT strftime('%Y-%m', date) AS m, SUM(units) u
        FROM sales GROUP BY m" """,
    )
    assert "| 2024-01 | 19 |" in by_month
    assert "| 2024-02 | 30 |" in by_month
    wrong = await client.exec(f'python3 {script} sales.csv --sql "SELECT nope FROM sales"')
    assert wrong.exit_code == 1
    assert "error: no such column: nope" in wrong.output


def workbook() -> bytes:
    """A small .xlsx as Excel writes one: shared strings, a date style, an inline string, a formula."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>'
        '<sheet name="Sales" sheetId="1" r:id="rId1"/><sheet name="Notes" sheetId="2" r:id="rId2"/>'
        "</sheets></workbook>",
        "xl/_rels/workbook.xml.rels": '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships"><Relationship Id="rId1" Type="ws" Target="worksheets/sheet1.xml"/>'
        '<Relationship Id="rId2" Type="ws" Target="worksheets/sheet2.xml"/></Relationships>',
        "xl/sharedStrings.xml": f'<sst xmlns="{main}"><si><t>day</t></si><si><t>region</t></si>'
        "<si><t>revenue</t></si><si><r><t>No</t></r><r><t>rth</t></r></si></sst>",
        "xl/styles.xml": f'<styleSheet xmlns="{main}"><numFmts><numFmt numFmtId="164" '
        'formatCode="yyyy\\-mm\\-dd"/></numFmts><cellXfs><xf numFmtId="0"/><xf numFmtId="164"/>'
        '<xf numFmtId="14"/></cellXfs></styleSheet>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData>'
        '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c>'
        '<c r="D1" t="inlineStr"><is><t>paid</t></is></c></row>'
        '<row r="2"><c r="A2" s="1"><v>45292</v></c><c r="B2" t="s"><v>3</v></c><c r="C2"><v>1200.5</v></c>'
        '<c r="D2" t="b"><v>1</v></c></row>'
        '<row r="3"><c r="A3" s="2"><v>45293</v></c><c r="C3"><f>C2*2</f><v>2401</v></c></row>'
        "</sheetData></worksheet>",
        "xl/worksheets/sheet2.xml": f'<worksheet xmlns="{main}"><sheetData><row r="1">'
        '<c r="B1" t="inlineStr"><is><t>hi, "there"</t></is></c></row></sheetData></worksheet>',
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.asyncio
async def test_xlsx_to_csv_turns_an_uploaded_workbook_into_csv(
    client: SandboxClient, broker: AppConfig
) -> None:
    uploads = uploads_dir(broker, "ana", "t-skills")
    uploads.mkdir(parents=True)
    (uploads / "book.xlsx").write_bytes(workbook())
    script = SCRIPTS.format(skill="data-analysis") + "/xlsx_to_csv.py"

    listed = await run(client, f"python3 {script} /mnt/user-data/uploads/book.xlsx --list")
    assert listed.splitlines() == ["Sales: 3 rows × 4 columns", "Notes: 1 rows × 2 columns"]
    await run(client, f"python3 {script} /mnt/user-data/uploads/book.xlsx --sheet Sales --out {WS}/sales.csv")
    assert (await client.read_file(f"{WS}/sales.csv")).content.splitlines() == [
        "day,region,revenue,paid",
        "2024-01-01,North,1200.5,TRUE",
        "2024-01-02,,2401,",
    ]
    await run(client, f"python3 {script} /mnt/user-data/uploads/book.xlsx --all --out-dir {WS}/sheets")
    assert (await client.read_file(f"{WS}/sheets/Notes.csv")).content == ',"hi, ""there"""\r\n'
    missing = await client.exec(f"python3 {script} /mnt/user-data/uploads/book.xlsx --sheet Q9")
    assert "error: no sheet 'Q9'; the sheets are 'Sales', 'Notes'" in missing.output


SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.asyncio
async def test_chart_draws_bars_and_lines_as_svg(client: SandboxClient, broker: AppConfig) -> None:
    await client.write_file(
        f"{WS}/by_region.csv", "region,revenue,orders\nNorth,1655.75,2\nEast,2100,1\nSouth,640,3\n"
    )
    script = SCRIPTS.format(skill="chart-report") + "/chart.py"
    output = await run(
        client,
        f"python3 {script} by_region.csv --y revenue --sort desc --title 'East leads' --out {OUT}/bars.svg",
    )
    assert output.strip() == f"wrote {OUT}/bars.svg: bar chart, 3 labels, 1 series (revenue), 3 values"
    svg = ElementTree.fromstring((await client.read_file(f"{OUT}/bars.svg")).content)
    assert svg.tag == f"{SVG}svg"
    bars = [r.findtext(f"{SVG}title") for r in svg.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert bars == ["revenue · East: 2100", "revenue · North: 1655.75", "revenue · South: 640"]
    heights = [float(r.get("height", 0)) for r in svg.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert heights[0] > heights[1] > heights[2] > 0
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "East leads" in texts

    series = {
        "labels": ["Jan", "Feb", "Mar", "Apr"],
        "series": {"visits": [120, 150, None, 170], "signups": [5, 9, 12, 14]},
    }
    await client.write_file(f"{WS}/monthly.json", json.dumps(series))
    output = await run(client, f"python3 {script} monthly.json --kind line --out {OUT}/lines.svg")
    assert "line chart, 4 labels, 2 series (visits, signups), 7 values" in output
    svg = ElementTree.fromstring((await client.read_file(f"{OUT}/lines.svg")).content)
    lines = list(svg.iter(f"{SVG}polyline"))
    assert len(lines) == 3, "visits has a gap (two pieces), signups is one line"
    assert {"visits", "signups"} <= {t.text for t in svg.iter(f"{SVG}text")}, "a legend names the series"

    bad = await client.exec(f"python3 {script} by_region.csv --y profit --out {OUT}/x.svg")
    assert bad.exit_code == 1
    assert "no column 'profit'" in bad.output


@pytest.mark.asyncio
async def test_report_builds_one_html_file_with_the_chart_inlined(
    client: SandboxClient, broker: AppConfig
) -> None:
    await client.write_file(f"{WS}/by_region.csv", "region,revenue\nEast,2100\nNorth,1655.75\n")
    chart = SCRIPTS.format(skill="chart-report") + "/chart.py"
    await run(client, f"python3 {chart} by_region.csv --out {OUT}/revenue.svg")
    spec = {
        "title": "Sales <Q1>",
        "blocks": [
            {"type": "metrics", "items": [{"label": "Revenue", "value": "$3,756"}]},
            {"type": "text", "text": "East leads.\n\nSee **the table** <script>alert(1)</script>"},
            {"type": "chart", "path": "../outputs/revenue.svg", "caption": "Figure 1"},
            {"type": "table", "path": "by_region.csv"},
        ],
    }
    await client.write_file(f"{WS}/report.json", json.dumps(spec))
    script = SCRIPTS.format(skill="chart-report") + "/report.py"
    output = await run(client, f"python3 {script} {WS}/report.json --out {OUT}/report.html")
    assert output.startswith(f"wrote {OUT}/report.html: 4 blocks")

    html = (await client.read_file(f"{OUT}/report.html")).content
    assert "<title>Sales &lt;Q1&gt;</title>" in html
    assert html.count("<svg") == 1, "the chart is part of the page, not a link to another file"
    assert "<strong>the table</strong>" in html
    assert "<script" not in html
    assert '<td>East</td><td class="num">2100</td>' in html
    assert "$3,756" in html


SKILL_DRAFT = """---
name: weekly-report
description: Build the weekly sales report from the CRM export. Use it when the user uploads a CRM export.
license: MIT
---

# Weekly report

1. Run `python3 /mnt/skills/custom/weekly-report/scripts/totals.py FILE` on the upload.
2. Save the result in /mnt/user-data/outputs and present it.
"""


@pytest.mark.asyncio
async def test_package_skill_checks_a_draft_and_packs_it_as_a_skill_archive(
    client: SandboxClient, broker: AppConfig
) -> None:
    draft = f"{WS}/skills/weekly-report"
    await client.write_file(f"{draft}/SKILL.md", SKILL_DRAFT)
    await client.write_file(f"{draft}/scripts/totals.py", "print('totals')\n")
    script = SCRIPTS.format(skill="skill-creator") + "/package_skill.py"

    unplaced = await client.exec(f"python3 {script} {draft}")
    assert unplaced.exit_code == 2
    assert "say where the archive goes: --out-dir" in unplaced.output
    output = await run(client, f"python3 {script} {draft} --out-dir {OUT}")
    assert f"wrote {OUT}/weekly-report.skill" in output
    archive = await client.read_binary(f"{OUT}/weekly-report.skill")
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(archive.content))) as packed:
        assert sorted(packed.namelist()) == ["weekly-report/SKILL.md", "weekly-report/scripts/totals.py"]
        assert packed.read("weekly-report/SKILL.md").decode() == SKILL_DRAFT

    await client.exec(f"ln -s /etc/hostname {draft}/link && printf '\\0\\1' > {draft}/blob.bin")
    await client.write_file(f"{WS}/skills/Other/SKILL.md", "---\nname: Other\n---\nx\n")
    refused = await client.exec(
        f"python3 {script} {draft} --check; python3 {script} {WS}/skills/Other --out-dir {OUT}"
    )
    assert refused.exit_code == 1
    assert "problem: link is a symlink" in refused.output
    assert "problem: blob.bin is a binary file" in refused.output
    assert "problem: name 'Other': use lowercase letters" in refused.output
    assert "problem: the frontmatter needs `description:`" in refused.output
    assert refused.output.count("not packed") == 2


# --- (c) the agent finds each skill in its prompt and reads it -----------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("name", SHIPPED)
async def test_the_agent_sees_the_skill_in_its_prompt_and_reads_its_instructions(
    name: str, bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], nats_url: str
) -> None:
    config = skills_config(config_data)
    skill = public_skills()[name]
    path = f"/mnt/skills/public/{name}/SKILL.md"
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": path})]),
        Reply(text="I have read the skill."),
    )
    async with running_broker(nats_url, config), running_runner(nats_url, config):
        events = await submit_and_collect(bus, ask(f"t-{name}", f"use the {name} skill", user_id="ana"))

    system = fake_model.agent_requests[0]["messages"][0]
    assert system["role"] == "system"
    assert f"- {name}: {skill.description} ({path})" in system["content"]
    results = [e.data[0] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]
    assert [r["name"] for r in results] == ["read_file"]
    assert results[0]["content"] == (SKILLS / "public" / name / "SKILL.md").read_text(encoding="utf-8")
    assert events[-1].event == "end"
