"""Slurm text: the error type, hostlists, and ``Key=Value`` lines."""

from __future__ import annotations

import re

from gangplace.errors import GangplaceError


class SlurmError(GangplaceError, ValueError):
    """A Slurm file is malformed or inconsistent (the message names file and line)."""


def _split_top_level(expression: str) -> list[str]:
    """Splits at commas outside brackets and parentheses (hostlists, GRES index lists)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in expression:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _expand_one(pattern: str) -> list[str]:
    match = re.search(r"\[([^\[\]]*)\]", pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"unbalanced brackets in {pattern!r}")
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names: list[str] = []
    for item in match.group(1).split(","):
        item = item.strip()
        low, _, high = item.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"bad range {item!r} in {pattern!r}")
        width = len(low) if low.startswith("0") else 0
        for number in range(int(low), int(high or low) + 1):
            names.extend(f"{head}{number:0{width}d}{rest}" for rest in _expand_one(tail))
    return names


def expand_hostlist(expression: str) -> list[str]:
    """The node names of a Slurm hostlist expression, in order.

    Raises:
        ValueError: Unbalanced brackets or a malformed range.

    """
    return [name for part in _split_top_level(expression) for name in _expand_one(part)]


def compress_hostlist(names: list[str]) -> str:
    """A hostlist expression for ``names`` (runs of numbered names become ranges)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match is None:
            order.append(name)
            continue
        key = (match.group(1), len(match.group(2)) if match.group(2).startswith("0") else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    parts: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        key = entry
        prefix, width = key
        numbers = sorted(set(groups[key]))
        ranges, start = [], numbers[0]
        for previous, current in zip(numbers, [*numbers[1:], None], strict=True):
            if current != previous + 1:
                low, high = f"{start:0{width}d}", f"{previous:0{width}d}"
                ranges.append(low if start == previous else f"{low}-{high}")
                if current is not None:
                    start = current
        parts.append(f"{prefix}[{','.join(ranges)}]" if len(numbers) > 1 else prefix + ranges[0])
    return ",".join(parts)


def logical_lines(text: str, filename: str) -> list[tuple[str, str]]:
    """A Slurm file's lines as Slurm reads them, each with ``file:line`` of its first line.

    ``#`` starts a comment anywhere on a line; a line ending in a backslash continues on
    the next (the backslash and the line break are dropped); blank lines are skipped.
    """
    lines: list[tuple[str, str]] = []
    pending: tuple[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if pending is not None:
            where, line = pending[0], pending[1] + " " + line.strip()
        else:
            where = f"{filename}:{number}"
        if line.endswith("\\"):
            pending = (where, line[:-1].rstrip())
            continue
        pending = None
        if line.strip():
            lines.append((where, line.strip()))
    if pending is not None and pending[1].strip():
        lines.append((pending[0], pending[1].strip()))
    return lines


def _fields(line: str, where: str) -> dict[str, str]:
    """``Key=Value`` tokens, keys lower-cased; an empty value (``Gres=``) is allowed."""
    fields = {}
    for token in line.split():
        key, equals, value = token.partition("=")
        if not equals or not key:
            raise SlurmError(f"{where}: expected Key=Value, got {token!r}")
        fields[key.lower()] = value
    return fields


def _lines(text: str, filename: str) -> list[tuple[str, dict[str, str]]]:
    return [(where, _fields(line, where)) for where, line in logical_lines(text, filename)]


def _hosts(expression: str, where: str) -> list[str]:
    try:
        return expand_hostlist(expression)
    except ValueError as error:
        raise SlurmError(f"{where}: {error}") from None
