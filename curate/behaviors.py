"""The four cognitive behaviors, and parsing of the names users type."""

from __future__ import annotations

from enum import Enum

from curate.errors import CurateError


class Behavior(str, Enum):
    VERIFICATION = "verification"
    BACKTRACKING = "backtracking"
    SUBGOAL_SETTING = "subgoal_setting"
    BACKWARD_CHAINING = "backward_chaining"

    def __str__(self) -> str:
        return self.value


BEHAVIORS: tuple[Behavior, ...] = tuple(Behavior)
BEHAVIOR_NAMES: tuple[str, ...] = tuple(b.value for b in Behavior)

ALIASES: dict[str, Behavior] = {
    "subgoal": Behavior.SUBGOAL_SETTING,
    "subgoals": Behavior.SUBGOAL_SETTING,
    "backchaining": Behavior.BACKWARD_CHAINING,
    "backward-chaining": Behavior.BACKWARD_CHAINING,
    "subgoal-setting": Behavior.SUBGOAL_SETTING,
}

NONE = "none"


class UnknownBehaviorError(CurateError, ValueError):
    pass


def parse_behavior(name: str) -> Behavior:
    key = name.strip().lower()
    try:
        return Behavior(key)
    except ValueError:
        pass
    if key in ALIASES:
        return ALIASES[key]
    valid = ", ".join(BEHAVIOR_NAMES)
    aliases = ", ".join(f"{a} (= {b.value})" for a, b in ALIASES.items())
    raise UnknownBehaviorError(
        f"unknown behavior {name!r}. Valid names: {valid}; aliases: {aliases}; or 'none' for documents with none of them."
    )


def parse_behavior_list(spec: str | None, allow_none: bool = False) -> list[Behavior] | None:
    """Parse 'backtracking,verification'. Returns None for 'none' (no behavior present) when allowed."""
    if spec is None or not spec.strip():
        return []
    parts = [p for p in (s.strip() for s in spec.split(",")) if p]
    if any(p.lower() == NONE for p in parts):
        if not allow_none:
            raise UnknownBehaviorError("'none' is only valid for --behaviors")
        if len(parts) > 1:
            raise UnknownBehaviorError("'none' cannot be combined with behavior names")
        return None
    seen: list[Behavior] = []
    for p in parts:
        b = parse_behavior(p)
        if b not in seen:
            seen.append(b)
    return seen
