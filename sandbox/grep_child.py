"""The grep tool's search, as a program run inside the sandbox (never in the broker's process).

A user's regular expression can take exponential time (`(a+)+$` on "aaa…!"), and
Python's `re` holds the GIL for the whole match: run in the broker, one such
pattern froze every request the process served. So the broker runs this file's
source with the sandbox's own Python (`python3 -I -S -c <source> <args>`), as a
sandboxed command under the command's limits and a hard deadline; a slow pattern
costs its own process and is killed, nobody else waits.

Standard library only, and no virtual path in this text (the local provider
rewrites those in a command line). Argument: base64 of a JSON object
`{"root", "parts", "pattern", "ignore_case", "glob", "max"}`: the mount's root
as the sandbox sees it and the names below it. Output: one JSON object a line,
`{"p": relative path, "n": line number, "t": text}` for each match, then
`{"truncated": bool}`; a bad pattern exits with code 2 and the reason on stdout.

The walk is `sandbox.fdpath`'s: sorted, hidden names left out, symlinks never
followed or entered (each name opened O_NOFOLLOW relative to its directory),
only regular files read (O_NONBLOCK, so a FIFO cannot hang it), files that are
not UTF-8 text skipped, each line cut at 500 characters.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import stat
import sys

MAX_DEPTH = 64
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


class Search:
    def __init__(self, regex: re.Pattern[str], file_glob: str | None, limit: int) -> None:
        self.regex = regex
        self.file_glob = file_glob
        self.limit = limit
        self.found = 0

    def file(self, fd: int, relative: str) -> bool:
        """Emits the file's matching lines; True once the limit is reached."""
        try:
            with open(fd, encoding="utf-8", errors="strict", closefd=False) as handle:
                for number, line in enumerate(handle, 1):
                    if self.regex.search(line):
                        emit({"p": relative, "n": number, "t": line.rstrip("\n")[:500]})
                        self.found += 1
                        if self.found >= self.limit:
                            return True
        except (UnicodeDecodeError, OSError):
            pass  # binary or unreadable: not what grep is for
        return False

    def walk(self, dir_fd: int, parts: list[str]) -> bool:
        try:
            with os.scandir(dir_fd) as listing:
                found = sorted(
                    (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                    for e in listing
                    if not e.name.startswith(".")
                )
        except OSError:
            return False
        for name, is_dir, is_file in found:
            here = [*parts, name]
            if is_file and (not self.file_glob or fnmatch.fnmatch(name, self.file_glob)):
                try:
                    fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
                except OSError:
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode) and self.file(fd, "/".join(here)):
                        return True
                finally:
                    os.close(fd)
            elif is_dir and len(here) < MAX_DEPTH:
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
                except OSError:
                    continue
                try:
                    if self.walk(child, here):
                        return True
                finally:
                    os.close(child)
        return False


def main() -> int:
    args = json.loads(base64.b64decode(sys.argv[1]).decode("utf-8"))
    try:
        regex = re.compile(args["pattern"], re.IGNORECASE if args["ignore_case"] else 0)
    except (re.error, OverflowError, RecursionError) as exc:
        sys.stdout.write(f"not a valid regular expression: {exc}\n")
        return 2
    search = Search(regex, args["glob"], args["max"])
    fd = os.open(args["root"], DIR_FLAGS)
    try:
        for name in args["parts"]:  # the broker checked them; a swap since then stops here
            try:
                following = os.open(name, FILE_FLAGS, dir_fd=fd)
            except OSError:
                emit({"truncated": False})
                return 0
            os.close(fd)
            fd = following
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            truncated = search.walk(fd, [])
        elif stat.S_ISREG(info.st_mode):
            name = args["parts"][-1] if args["parts"] else ""
            glob_ok = not args["glob"] or fnmatch.fnmatch(name, args["glob"])
            truncated = glob_ok and search.file(fd, "")
        else:
            truncated = False
    finally:
        os.close(fd)
    emit({"truncated": bool(truncated)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
