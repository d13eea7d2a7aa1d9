#!/usr/bin/env python3
"""Outline a Python code base's public API as Markdown: modules, classes, functions, signatures,
first docstring lines, and what has no docstring yet.

    python3 api_outline.py SRC [--out api.md] [--private] [--json]

SRC is a package folder or a .py file. Files are parsed, never imported or run, so broken or
dangerous code is safe to outline. Names starting with `_` are left out unless --private
(`__init__` is kept when it takes arguments). With a module-level `__all__`, only the names it
lists are public. Standard library only; the same code gives the same outline.
Prints a summary: modules, classes, functions, and how many public items lack a docstring.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", "build", "dist", ".tox"}


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    text = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    return f"{prefix}{node.name}({text}){returns}"


def first_line(node: ast.AST) -> str | None:
    doc = ast.get_docstring(node)  # type: ignore[arg-type]
    return doc.strip().splitlines()[0] if doc else None


def public(name: str, exported: set[str] | None, private: bool) -> bool:
    if exported is not None:
        return name in exported
    return private or not name.startswith("_")


def outline_module(path: Path, root: Path, private: bool) -> dict[str, Any]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    exported: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            try:
                exported = set(ast.literal_eval(node.value))
            except ValueError:
                exported = None
    relative = path.relative_to(root) if path != root else Path(path.name)
    parts = list(relative.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    module: dict[str, Any] = {
        "module": ".".join([root.name, *parts] if root.is_dir() else parts) or root.name,
        "path": str(relative),
        "doc": first_line(tree),
        "classes": [],
        "functions": [],
    }
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and public(node.name, exported, private):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            methods = [
                {"signature": signature(m), "doc": first_line(m), "line": m.lineno}
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                and (private or not m.name.startswith("_") or (m.name == "__init__" and len(m.args.args) > 1))
            ]
            module["classes"].append(
                {
                    "name": node.name,
                    "bases": bases,
                    "doc": first_line(node),
                    "line": node.lineno,
                    "methods": methods,
                }
            )
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and public(
            node.name, exported, private
        ):
            module["functions"].append(
                {"signature": signature(node), "doc": first_line(node), "line": node.lineno}
            )
    return module


def files_of(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    return sorted(
        p for p in src.rglob("*.py") if not any(part in SKIP_DIRS for part in p.relative_to(src).parts[:-1])
    )


def markdown(modules: list[dict[str, Any]]) -> tuple[str, int]:
    lines = ["# API reference", ""]
    undocumented = 0

    def doc(text: str | None) -> str:
        nonlocal undocumented
        if text is None:
            undocumented += 1
            return "*(no docstring)*"
        return text

    for m in modules:
        if not (m["classes"] or m["functions"] or m["doc"]):
            continue
        lines += [f"## `{m['module']}`", "", f"`{m['path']}` — {doc(m['doc'])}", ""]
        for c in m["classes"]:
            base = f"({c['bases']})" if c["bases"] else ""
            lines += [f"### class `{c['name']}{base}`", "", doc(c["doc"]), ""]
            for f in c["methods"]:
                lines += [f"- `{f['signature']}` — {doc(f['doc'])}"]
            if c["methods"]:
                lines.append("")
        for f in m["functions"]:
            lines += [f"### `{f['signature']}`", "", doc(f["doc"]), ""]
    return "\n".join(lines).rstrip() + "\n", undocumented


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src")
    parser.add_argument("--out")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the outline as JSON instead")
    args = parser.parse_args()
    src = Path(args.src)
    if not src.exists():
        print(f"error: {src} does not exist", file=sys.stderr)
        return 1
    modules, failed = [], []
    for path in files_of(src):
        try:
            modules.append(outline_module(path, src, args.private))
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            failed.append(f"{path}: {exc}")
    if args.json:
        print(json.dumps(modules, indent=1))
        return 0
    text, undocumented = markdown(modules)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text)
    classes = sum(len(m["classes"]) for m in modules)
    functions = sum(len(m["functions"]) for m in modules)
    print(
        f"{len(modules)} modules, {classes} classes, {functions} functions; "
        f"{undocumented} without a docstring"
    )
    for line in failed:
        print(f"skipped (cannot parse): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
