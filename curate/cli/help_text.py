"""Examples in `--help` that read, and paste, as written at any terminal width.

click's plain help (used below `RICH_HELP_MIN_COLUMNS`) rewraps every paragraph, example commands included, so an
80-column terminal showed `curate build --behaviors backtracking  # bundled` with "sample corpus" on the next line
and long commands broken wherever a word ended. Here each block of indented example lines is marked as one click
keeps (`\\b`), a trailing comment moves onto its own line above its command, and a command wider than the terminal is
broken between its words into shell continuation lines (` \\`), never inside a quoted word, so the lines still paste
as one command.
"""

from __future__ import annotations

import re
import shlex

# click's help formatter indents a command's help by 2 and the example blocks add their own 4.
HELP_INDENT = 2
EXAMPLE_INDENT = "    "
CONTINUATION_INDENT = "    "
_COMMENT = re.compile(r"\s{2,}(#\s.*)$")


def fit_command(command: str, width: int) -> list[str]:
    """One example command as lines of at most `width` characters where its words allow: continuation lines end in
    ` \\` and are indented further, an option stays with its value where both fit a line, and a word longer than a
    line stands on a line of its own."""
    lines, line = [], ""
    # shlex without POSIX rules splits at spaces outside quotes and keeps the quotes: a break never falls inside a word.
    for word in shlex.split(command, posix=False):
        candidate = f"{line} {word}" if line else word
        # Every line but the last carries " \\"; the continuation lines their indent.
        room = width - 2 - (len(CONTINUATION_INDENT) if lines else 0)
        if line and len(candidate) > room:
            head, _, flag = line.rpartition(" ")
            if (head and flag.startswith("-") and not word.startswith("-")
                    and len(flag) + 1 + len(word) <= width - 2 - len(CONTINUATION_INDENT)):
                lines.append(head + " \\")  # an option goes to the next line with its value
                line = f"{flag} {word}"
            else:
                lines.append(line + " \\")
                line = word
        else:
            line = candidate
    lines.append(line)
    return [lines[0], *(CONTINUATION_INDENT + rest for rest in lines[1:])]


def fit_examples(help_text: str, columns: int) -> str:
    """`help_text` (a command's docstring) with its example blocks fitted to a terminal of `columns` columns."""
    lines = help_text.splitlines()
    # The docstring's own indentation (its first line excepted), as click's cleandoc removes it.
    body = [line for line in lines[1:] if line.strip()]
    margin = min((len(line) - len(line.lstrip()) for line in body), default=0)
    width = max(columns, 40) - HELP_INDENT - len(EXAMPLE_INDENT) - 2  # click wraps 2 short of the terminal
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        indent = line[:margin] if index else ""
        if index and line.strip() and line.startswith(" " * (margin + len(EXAMPLE_INDENT))):
            block = []
            while index < len(lines) and lines[index].strip():
                block.append(lines[index][margin + len(EXAMPLE_INDENT):])
                index += 1
            commands, pending = [], ""
            for example in block:  # an authored continuation is one command
                pending = f"{pending} {example.strip()}" if pending else example.strip()
                if pending.endswith("\\"):
                    pending = pending[:-1].rstrip()
                    continue
                commands.append(pending)
                pending = ""
            if pending:
                commands.append(pending)
            out.append(indent + "\b")
            for command in commands:
                comment = _COMMENT.search(command)
                if comment:
                    out.append(indent + EXAMPLE_INDENT + comment.group(1))
                    command = command[: comment.start()]
                out.extend(indent + EXAMPLE_INDENT + fitted for fitted in fit_command(command, width))
            continue
        out.append(line)
        index += 1
    return "\n".join(out)
