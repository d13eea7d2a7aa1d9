"""End-to-end cases of the skills that work on the agent itself or on a page rather than on data
(web-design-guidelines, find-skills, surprise-me, bootstrap) and of chart-visualization: run by
test_skill_library.py on its shared stack."""

from __future__ import annotations

import re
import uuid
from xml.etree import ElementTree

from bus.agent_store import AgentStore
from tests.fakes.openai_server import ToolCall
from tests.skills.conftest import SHIPPED
from tests.skills.scripted import OUT, UP, USER, WS, Stack, bash, present, ran_cleanly, use_skill, write

SCRIPTS = "/mnt/skills/public"
SVG = "{http://www.w3.org/2000/svg}"

SHOP = """<html>
<head><meta name="viewport" content="width=device-width, user-scalable=no">
<style>button:focus { outline: none; }</style></head>
<body>
<h1>Shop</h1>
<h3>Deals</h3>
<img src="hero.png">
<form><input type="email" name="email" autocomplete="email">
<button><svg></svg></button></form>
<a href="#">Buy</a> <a href="/terms">click here</a>
<div onclick="go()">Go</div>
</body></html>
"""
FIXED = """<!doctype html>
<html lang="en">
<head><title>Shop</title><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<h1>Shop</h1>
<h2>Deals</h2>
<img src="hero.png" alt="Bikes on a quay" width="800" height="400">
<form><label for="email">Email</label><input id="email" type="email" name="email" autocomplete="email">
<button aria-label="Subscribe"><svg></svg></button></form>
<a href="/terms">Terms of sale</a>
</body></html>
"""


async def web_design_guidelines(stack: Stack) -> None:
    thread = f"t-ui-{uuid.uuid4().hex[:6]}"
    stack.uploads(thread).mkdir(parents=True, exist_ok=True)
    (stack.uploads(thread) / "shop.html").write_text(SHOP, encoding="utf-8")
    audit = f"python3 {SCRIPTS}/web-design-guidelines/scripts/audit_page.py"
    used = await use_skill(
        stack,
        "web-design-guidelines",
        "review my shop page",
        bash(f"{audit} {UP}/shop.html --out {OUT}/ui-review.md"),
        write(f"{WS}/fixed.html", FIXED),
        bash(f"{audit} {WS}/fixed.html"),
        present(f"{OUT}/ui-review.md"),
        thread=thread,
    )
    review, fixed = ran_cleanly(used).split("wrote ")
    for line in (
        f"{UP}/shop.html:1 [error] html-lang: <html> has no lang",
        f"{UP}/shop.html:2 [error] zoom-disabled",
        f"{UP}/shop.html:3 [warning] focus-hidden: outline: none with no :focus-visible style",
        f"{UP}/shop.html:6 [warning] heading-order: <h3> follows <h1>",
        f'{UP}/shop.html:7 [error] img-alt: <img src="hero.png"> has no alt',
        f'{UP}/shop.html:8 [error] field-label: <input name="email"> has no label',
        f"{UP}/shop.html:9 [error] control-name: <button> with no text or aria-label",
        f'{UP}/shop.html:10 [warning] link-as-button: <a href="#">',
        f'{UP}/shop.html:10 [warning] vague-link: link text "click here"',
        f"{UP}/shop.html:11 [error] click-without-role: <div onclick>",
    ):
        assert line in review, line
    assert "1 files checked: 7 errors, 4 warnings, 1 notes" in review
    assert "1 files checked: 0 errors, 0 warnings, 0 notes" in fixed, "the fixed page passes"
    report = (used.outputs / "ui-review.md").read_text(encoding="utf-8")
    assert "## Errors (7)" in report
    assert f"- `{UP}/shop.html:7` **img-alt**" in report


async def find_skills(stack: Stack) -> None:
    find = f"python3 {SCRIPTS}/find-skills/scripts/find_skills.py"
    used = await use_skill(
        stack,
        "find-skills",
        "is there a skill to check my web page for accessibility?",
        bash(f"{find} review web page accessibility"),
        bash(f"{find} turn my notes into a slide deck --limit 2"),
        bash(f"{find} quantum teleportation; echo status=$?"),
        bash(f"{find} --list"),
    )
    accessibility, slides, nothing, listed = used.results["bash"]
    assert accessibility.splitlines()[1].startswith("1. /web-design-guidelines [public]")
    assert f"read: {SCRIPTS}/web-design-guidelines/SKILL.md" in accessibility
    assert slides.splitlines()[1].startswith("1. /ppt-generation [public]")
    assert slides.startswith("2 of ")
    assert f"no skill matches 'quantum teleportation' among {len(SHIPPED)} skills" in nothing
    assert "/skill-creator" in nothing
    assert "status=1" in nothing
    assert listed.startswith(f"{len(SHIPPED)} skills:")
    assert re.findall(r"^\d+\. /([\w-]+) \[public\]", listed, re.MULTILINE) == sorted(SHIPPED)


async def surprise_me(stack: Stack) -> None:
    plan = f"python3 {SCRIPTS}/surprise-me/scripts/plan_surprise.py"
    used = await use_skill(
        stack,
        "surprise-me",
        "I'm bored",
        bash(f'{plan} --seed "I\'m bored" --count 2'),
        bash(f'{plan} --seed "I\'m bored" --count 2'),
        bash(f"{plan} --seed 'rainy sunday' --count 3 --exclude music-generation,video-generation"),
        bash(f"{plan} --root {WS}/none"),
        write(
            f"{OUT}/surprise.html", "<!doctype html><title>For you</title><p>A tiny museum of one idea</p>"
        ),
        present(f"{OUT}/surprise.html"),
    )
    first, again, other, nothing = used.results["bash"]
    assert first == again, "the same seed gives the same plan"
    meta = {"surprise-me", "find-skills", "skill-creator", "skill-reviewer", "bootstrap"}
    for output, count in ((first, 2), (other, 3)):
        picked = re.findall(r"^- ([\w-]+): ", output, re.MULTILINE)
        assert len(picked) == count
        assert set(picked) <= set(SHIPPED) - meta, "only real skills, never the ones about skills"
        for name in picked:
            assert f"read: {SCRIPTS}/{name}/SKILL.md" in output
        assert output.startswith("theme: ")
    assert not {"music-generation", "video-generation"} & set(re.findall(r"^- ([\w-]+): ", other, re.M))
    assert "plan: no other skill is installed" in nothing
    assert (used.outputs / "surprise.html").is_file()


ANSWERS = {
    "agent_name": "Sprout",
    "user_name": "Ana",
    "user_role": "a market gardener in Utrecht",
    "purpose": "plan the beds and the sowing calendar.",
    "traits": ["Ask about the weather first.", "Prefer organic fixes.", "Keep lists short."],
    "style": "Short answers, friendly, no jargon.",
    "pushback": "say plainly when a plan will not work.",
    "autonomy": "Draft plans alone; ask before deleting anything.",
    "failure": "say what went wrong and fix it.",
    "boundaries": ["Never recommend pesticides banned in the EU."],
}


async def bootstrap(stack: Stack) -> None:
    name = f"sprout-{uuid.uuid4().hex[:6]}"
    soul_py = f"python3 {SCRIPTS}/bootstrap/scripts/soul.py"
    soul = (
        "# Sprout\n\nYou are Sprout, Ana's AI partner. Ana is a market gardener in Utrecht.\n"
        "Your purpose: plan the beds and the sowing calendar.\n\n## How you behave\n\n"
        "- Ask about the weather first.\n- Prefer organic fixes.\n- Keep lists short.\n\n"
        "## How you talk\n\n- Short answers, friendly, no jargon.\n- Honesty: say plainly when a plan will "
        "not work.\n\n## Working alone\n\n- Draft plans alone; ask before deleting anything.\n"
        "- When you get it wrong: say what went wrong and fix it.\n\n## Never\n\n"
        "- Never recommend pesticides banned in the EU.\n"
    )
    partial = {k: ANSWERS[k] for k in ("agent_name", "user_name", "purpose")}
    used = await use_skill(
        stack,
        "bootstrap",
        "make me a gardening partner",
        write(f"{WS}/answers.json", partial),
        bash(f"{soul_py} {WS}/answers.json --out {WS}/SOUL.md; echo status=$?"),
        write(f"{WS}/answers.json", ANSWERS),
        bash(f"{soul_py} {WS}/answers.json --out {WS}/SOUL.md"),
        ToolCall("setup_agent", {"soul": soul, "description": "Plans Ana's market garden"}),
        context={"agent_name": name, "is_bootstrap": True},
    )
    asked, written = used.results["bash"]
    assert "error: 6 answers missing; ask the user:" in asked
    assert "- pushback: should it push back and say when the user is wrong" in asked
    assert "status=1" in asked
    assert f"wrote {WS}/SOUL.md: Sprout, 3 traits" in written
    assert (used.outputs.parent / "workspace" / "SOUL.md").read_text(encoding="utf-8") == soul
    assert used.results["setup_agent"] == [f"Agent '{name}' is ready: start a chat with it to use it."]
    agent = await (await AgentStore.open(stack.bus)).get(USER, name)
    assert agent is not None, "the custom agent exists"
    assert agent.soul == soul
    assert agent.description == "Plans Ana's market garden"


async def chart_visualization(stack: Stack) -> None:
    draw = f"python3 {SCRIPTS}/chart-visualization/scripts/diagram.py"
    funnel = {
        "kind": "funnel",
        "title": "Signups in May",
        "stages": [
            {"label": "Visits", "value": 1000},
            {"label": "Trials", "value": 250},
            {"label": "Paid", "value": 40},
        ],
    }
    radar = {
        "kind": "radar",
        "axes": ["Speed", "Price", "Range", "Comfort"],
        "series": {"Cargo A": [4, 3, 5, 4], "Cargo B": [3, 5, 2]},
        "max": 5,
    }
    mindmap = {
        "kind": "mindmap",
        "root": "Launch",
        "children": [{"label": "Market", "children": [{"label": "NL"}, {"label": "DE"}]}, {"label": "Price"}],
    }
    used = await use_skill(
        stack,
        "chart-visualization",
        "show our signup funnel, compare the two cargo bikes, and map the launch",
        write(f"{WS}/funnel.json", funnel),
        bash(f"{draw} {WS}/funnel.json --out {OUT}/funnel.svg"),
        write(f"{WS}/radar.json", radar),
        bash(f"{draw} {WS}/radar.json --out {OUT}/radar.svg; echo status=$?"),
        write(f"{WS}/radar.json", {**radar, "series": {**radar["series"], "Cargo B": [3, 5, 2, 3]}}),
        bash(f"{draw} {WS}/radar.json --out {OUT}/radar.svg"),
        write(f"{WS}/map.json", mindmap),
        bash(f"{draw} {WS}/map.json --out {OUT}/launch.svg"),
        present(f"{OUT}/funnel.svg", f"{OUT}/radar.svg", f"{OUT}/launch.svg"),
    )
    drawn, refused, radar_drawn, mapped = used.results["bash"]
    assert f"wrote {OUT}/funnel.svg: funnel, 3 stages" in drawn
    assert "error: series 'Cargo B' needs 4 values, one per axis" in refused
    assert "status=1" in refused
    assert f"wrote {OUT}/radar.svg: radar, 4 axes, 2 series" in radar_drawn
    assert f"wrote {OUT}/launch.svg: mind map, 4 nodes, 2 levels" in mapped
    page = ElementTree.parse(used.outputs / "funnel.svg").getroot()
    labels = [t.text for t in page.iter(f"{SVG}text")]
    assert labels[0] == "Signups in May"
    assert {"Visits: 1000", "Trials: 250", "Paid: 40", "25%", "4%"} <= set(labels)
    widths = [float(r.get("width", 0)) for r in page.iter(f"{SVG}rect")][1:]
    assert widths == sorted(widths, reverse=True), "each stage narrower than the one before"
    shapes = ElementTree.parse(used.outputs / "radar.svg").getroot().iter(f"{SVG}polygon")
    assert sum(1 for p in shapes if p.get("fill-opacity")) == 2, "one filled shape a series"
    tree = [t.text for t in ElementTree.parse(used.outputs / "launch.svg").getroot().iter(f"{SVG}text")]
    assert tree == ["Launch", "Market", "NL", "DE", "Price"], "the topic, then its ideas in reading order"


AGENT_SKILL_TESTS = {
    "web-design-guidelines": web_design_guidelines,
    "find-skills": find_skills,
    "surprise-me": surprise_me,
    "bootstrap": bootstrap,
    "chart-visualization": chart_visualization,
}
