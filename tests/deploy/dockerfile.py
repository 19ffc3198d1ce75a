"""A small reader for deploy/Dockerfile and .dockerignore, enough to replay the build.

Only what our Dockerfile uses is understood (FROM, ARG, ENV, WORKDIR, COPY, RUN, USER, EXPOSE,
CMD); anything else fails loudly so the replay cannot silently drift from the real build.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
KNOWN = {"FROM", "ARG", "ENV", "WORKDIR", "COPY", "RUN", "USER", "EXPOSE", "CMD"}


@dataclass
class Instruction:
    keyword: str
    flags: dict[str, str]
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


def logical_lines(text: str) -> list[str]:
    """Lines with comments dropped and backslash continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, in order."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword not in KNOWN:
            raise ValueError(f"the replay does not understand {keyword}: {line}")
        flags: dict[str, str] = {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.lstrip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
            continue
        if keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=base, name=name))
            continue
        stages[-1].instructions.append(Instruction(keyword, flags, rest))
    return args, stages


def env_pairs(args: str) -> list[tuple[str, str]]:
    return [tuple(word.split("=", 1)) for word in shlex.split(args)]  # type: ignore[misc]


def cmd_argv(args: str) -> list[str]:
    return list(json.loads(args))


def ignore_patterns() -> list[str]:
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise ValueError("the replay does not support ! exceptions in .dockerignore")
        patterns.append(os.path.normpath(line.lstrip("/")))
    return patterns


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def is_ignored(relative: str, patterns: list[str]) -> bool:
    """Docker excludes a path when a pattern matches it or any of its parent directories."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    regexes = [_pattern_regex(p) for p in patterns]
    return any(regex.match(prefix) for regex in regexes for prefix in prefixes)


def context_files() -> list[str]:
    """The build context as the Docker client sends it: every file not excluded."""
    patterns = ignore_patterns()
    found: list[str] = []
    for directory, dirnames, filenames in os.walk(ROOT):
        base = Path(directory).relative_to(ROOT).as_posix()
        base = "" if base == "." else base + "/"
        dirnames[:] = sorted(d for d in dirnames if not is_ignored(base + d, patterns))
        found.extend(base + f for f in sorted(filenames) if not is_ignored(base + f, patterns))
    return found
