#!/usr/bin/env python3
"""Start a new skill folder from a template: SKILL.md with its frontmatter, and a script stub.

    python3 init_skill.py NAME --dir /mnt/user-data/workspace/skills [--description TEXT] [--script NAME.py]

Creates DIR/NAME/SKILL.md (and DIR/NAME/scripts/NAME.py with --script) for you to fill in;
refuses to overwrite an existing folder. NAME is lowercase words joined by '-'. The paths in
the template are where the files will be once the skill is installed (/mnt/skills/custom/NAME).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

SKILL_MD = """---
name: {name}
description: {description}
license: MIT
---

# {title}

One paragraph: what this skill produces, for whom, and from which inputs.

## Steps

1. Find the input: `ls /mnt/user-data/uploads`.
2. ...{run_step}
3. Save the result in `/mnt/user-data/outputs/` and call `present_files` with it.

## Checks before handing over

- ...
"""

SCRIPT = '''#!/usr/bin/env python3
"""{summary}

    python3 {script} INPUT --out OUTPUT
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("input")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        text = Path(args.input).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"error: {{exc}}", file=sys.stderr)
        return 1
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {{args.out}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name")
    parser.add_argument("--dir", required=True, help="where the skill folder is created")
    parser.add_argument(
        "--description",
        default="TODO: what it does, then 'Use it when the user ...' with the words users say.",
    )
    parser.add_argument("--script", help="also create scripts/<this>.py, a stub to fill in")
    args = parser.parse_args()
    if not NAME.match(args.name) or len(args.name) > 64:
        print(f"error: name {args.name!r}: use lowercase letters, digits and single '-'", file=sys.stderr)
        return 2
    if args.script and not re.fullmatch(r"[a-z0-9_]+\.py", args.script):
        print("error: --script must be a file name like totals.py", file=sys.stderr)
        return 2
    folder = Path(args.dir) / args.name
    if folder.exists():
        print(f"error: {folder} exists; pick another name or edit it", file=sys.stderr)
        return 1
    run_step = ""
    if args.script:
        run_step = (
            f"\n   `python3 /mnt/skills/custom/{args.name}/scripts/{args.script} INPUT --out "
            "/mnt/user-data/workspace/result`"
        )
    title = args.name.replace("-", " ").capitalize()
    (folder / "scripts" if args.script else folder).mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        SKILL_MD.format(name=args.name, description=args.description, title=title, run_step=run_step),
        encoding="utf-8",
    )
    print(f"wrote {folder / 'SKILL.md'}")
    if args.script:
        script = folder / "scripts" / args.script
        script.write_text(
            SCRIPT.format(summary=f"Part of the {args.name} skill.", script=args.script), "utf-8"
        )
        print(f"wrote {script}")
    print("next: fill in the TODOs and steps, try it, then pack it with package_skill.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
