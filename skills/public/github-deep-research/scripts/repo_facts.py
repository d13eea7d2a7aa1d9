#!/usr/bin/env python3
"""Turn GitHub REST API answers saved as JSON into a fact sheet (Markdown) and an activity chart.

    python3 repo_facts.py FOLDER --out facts.md [--chart activity.png]

FOLDER holds what you fetched from https://api.github.com (any subset; missing files are
skipped, and the fact sheet says what it could not cover):

    repo.json              GET /repos/{owner}/{repo}
    languages.json         GET /repos/{owner}/{repo}/languages
    contributors.json      GET /repos/{owner}/{repo}/contributors?per_page=100
    releases.json          GET /repos/{owner}/{repo}/releases?per_page=100
    commit_activity.json   GET /repos/{owner}/{repo}/stats/commit_activity   (52 weeks)
    issues.json            GET /repos/{owner}/{repo}/issues?state=all&per_page=100

The chart (matplotlib, from the sandbox toolbox) shows commits per week, or releases per month
when there is no commit activity. Every figure in the sheet comes from these files, with the
file it came from, so the report can cite it. Prints the sections it wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def load(folder: Path, name: str) -> Any:
    path = folder / name
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("message") and len(data) <= 3:  # an API error answer
        raise ValueError(f"{name} holds an API error, not data: {data['message']!r}")
    return data


def day(stamp: str | None) -> str:
    return (stamp or "")[:10]


def facts(folder: Path) -> tuple[list[str], list[str], dict[str, Any]]:
    """Markdown lines, the files that were missing, and the series for the chart."""
    lines: list[str] = []
    missing: list[str] = []
    series: dict[str, Any] = {}
    repo = load(folder, "repo.json")
    if repo is None:
        raise ValueError("repo.json is required (GET /repos/{owner}/{repo})")
    name = repo.get("full_name", "?")
    lines += [f"# {name}: facts from the GitHub API", ""]
    if repo.get("description"):
        lines += [f"> {repo['description']}", ""]
    license_name = (repo.get("license") or {}).get("spdx_id") or "none stated"
    rows = [
        ("Stars", f"{repo.get('stargazers_count', 0):,}"),
        ("Forks", f"{repo.get('forks_count', 0):,}"),
        ("Open issues and PRs", f"{repo.get('open_issues_count', 0):,}"),
        ("Created", day(repo.get("created_at"))),
        ("Last push", day(repo.get("pushed_at"))),
        ("Default branch", str(repo.get("default_branch", "?"))),
        ("License", license_name),
        ("Archived", "yes" if repo.get("archived") else "no"),
        ("Homepage", repo.get("homepage") or "—"),
    ]
    lines += ["## At a glance (repo.json)", "", "| | |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if repo.get("topics"):
        lines += ["", "Topics: " + ", ".join(f"`{t}`" for t in repo["topics"])]
    lines.append("")

    languages = load(folder, "languages.json")
    if languages:
        total = sum(languages.values()) or 1
        shares = sorted(languages.items(), key=lambda kv: -kv[1])[:6]
        lines += ["## Languages (languages.json)", ""]
        lines += [f"- {lang}: {100 * n / total:.1f}%" for lang, n in shares] + [""]
    elif languages is None:
        missing.append("languages.json")

    contributors = load(folder, "contributors.json")
    if contributors:
        total = sum(c.get("contributions", 0) for c in contributors) or 1
        top = contributors[:5]
        share = 100 * sum(c.get("contributions", 0) for c in top) / total
        lines += [f"## Contributors (contributors.json: {len(contributors)} listed)", ""]
        lines += [f"- {c.get('login', '?')}: {c.get('contributions', 0):,} commits" for c in top]
        lines += ["", f"The top {len(top)} made {share:.0f}% of the listed commits.", ""]
    elif contributors is None:
        missing.append("contributors.json")

    releases = load(folder, "releases.json")
    if releases:
        published = sorted((r for r in releases if r.get("published_at")), key=lambda r: r["published_at"])
        lines += [f"## Releases (releases.json: {len(releases)} listed)", ""]
        if published:
            first, last = published[0], published[-1]
            lines.append(f"- First listed: {first.get('tag_name')} on {day(first['published_at'])}")
            lines.append(f"- Latest: {last.get('tag_name')} on {day(last['published_at'])}")
            months = Counter(r["published_at"][:7] for r in published)
            series["releases"] = sorted(months.items())
        lines.append("")
    elif releases is None:
        missing.append("releases.json")

    activity = load(folder, "commit_activity.json")
    if activity:
        weeks = [(datetime.fromtimestamp(w["week"], UTC).strftime("%Y-%m-%d"), w["total"]) for w in activity]
        total = sum(n for _, n in weeks)
        recent = sum(n for _, n in weeks[-12:])
        earlier = sum(n for _, n in weeks[-24:-12])
        trend = "n/a" if not earlier else f"{100 * (recent - earlier) / earlier:+.0f}%"
        lines += ["## Commit activity (commit_activity.json, last 52 weeks)", ""]
        lines += [
            f"- Commits: {total:,} ({total / max(1, len(weeks)):.1f} a week)",
            f"- Last 12 weeks: {recent:,}; the 12 before: {earlier:,} ({trend})",
            f"- Busiest week: {max(weeks, key=lambda w: w[1])[0]}",
            "",
        ]
        series["weeks"] = weeks
    elif activity is None:
        missing.append("commit_activity.json")

    issues = load(folder, "issues.json")
    if issues:
        pulls = [i for i in issues if "pull_request" in i]
        plain = [i for i in issues if "pull_request" not in i]
        open_plain = sum(1 for i in plain if i.get("state") == "open")
        lines += [f"## Issues and pull requests (issues.json: the {len(issues)} most recent)", ""]
        lines += [f"- Issues: {len(plain)} ({open_plain} open)", f"- Pull requests: {len(pulls)}", ""]
    elif issues is None:
        missing.append("issues.json")
    if missing:
        lines += ["## Not covered", "", "Not fetched: " + ", ".join(missing) + ".", ""]
    return lines, missing, series


def chart(series: dict[str, Any], out: Path, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "weeks" in series:
        labels, values = zip(*series["weeks"], strict=True)
        what = "commits per week"
    elif "releases" in series:
        labels, values = zip(*series["releases"], strict=True)
        what = "releases per month"
    else:
        raise ValueError("no commit_activity.json or dated releases to chart")
    fig, ax = plt.subplots(figsize=(10, 4), dpi=120)
    ax.bar(range(len(values)), values, color="#2f6fb3")
    step = max(1, len(labels) // 8)
    ax.set_xticks(range(0, len(labels), step), [labels[i] for i in range(0, len(labels), step)], rotation=30)
    ax.set_title(f"{title}: {what}", loc="left", fontweight="bold")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Software": None} if out.suffix.lower() == ".png" else {"Date": None})
    plt.close(fig)
    return what


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--chart", help="a .png or .svg path for the activity chart")
    args = parser.parse_args()
    try:
        folder = Path(args.folder)
        lines, _, series = facts(folder)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines), encoding="utf-8")
        print(
            f"wrote {out}: " + ", ".join(line[3:].split(" (")[0] for line in lines if line.startswith("## "))
        )
        if args.chart:
            title = json.loads((folder / "repo.json").read_text(encoding="utf-8")).get("full_name", "")
            print(f"wrote {args.chart}: {chart(series, Path(args.chart), title)}")
    except ModuleNotFoundError as exc:
        print(f"error: {exc.name} is not installed here; leave out --chart", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
