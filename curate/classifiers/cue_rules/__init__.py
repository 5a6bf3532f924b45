"""Released cue versions as data: one file per version (`cues_vN.json` beside this module), each holding that version's
whole, resolved rule list, the engine that runs it and the notes that say why its rules are what they are. Importing
this module registers every version that has a file (the registry's BUILTIN points each `cues_vN` here).

A version is read from its file alone, so an edit to another version or to a shared constant cannot move it; the
engine (curate.classifiers.cues) is shared, and the golden labels (tests/golden) pin what it does with each file.
A file lists each cue with only the fields that differ from `Cue`'s defaults; `unless_next` is a sorted list.

`python -m curate.classifiers.cue_rules new cues_v13 --from cues_v12` writes the next version's file as a copy to
edit (it never overwrites a file); `python -m curate.classifiers.cue_rules diff cues_v11 cues_v12` prints what a
version added, changed and dropped.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import register
from curate.classifiers.cues import ENGINES, Cue, CueClassifier, shared_classifier
from curate.errors import CurateError

RULES_DIR = Path(__file__).resolve().parent
VERSION_NAME = re.compile(r"^cues_v(?P<number>\d+)$")
# The fields of a file, in the order they are written; `line_cues` only in a version whose engine reads them.
FILE_FIELDS = ("version", "based_on", "engine", "notes", "cues", "line_cues")
LINE_ENGINE = "sentence_and_line_cues"
DEFAULTS = {f.name: f.default for f in fields(Cue) if f.name not in ("behavior", "pattern")}


class CueRulesError(CurateError):
    """A cue version's file is missing, malformed, or would overwrite a released one."""


@dataclass(frozen=True)
class CueVersion:
    """One version's rules: its name, the version it revised (None for the first), the engine that runs it (a key of
    `ENGINES`), why its rules are what they are, its cues in order, and the (behavior, regular expression) line cues
    its engine reads on the raw text (LineCueClassifier)."""

    name: str
    based_on: str | None
    engine: str
    notes: str
    cues: tuple[Cue, ...]
    line_cues: tuple[tuple[str, str], ...] = ()


def version_path(name: str, directory: Path = RULES_DIR) -> Path:
    if not VERSION_NAME.match(name):
        raise CueRulesError(f"cue versions are named like 'cues_v13', got {name!r}")
    return directory / f"{name}.json"


def version_names(directory: Path = RULES_DIR) -> list[str]:
    """The versions that have a file, oldest first."""
    names = [path.stem for path in directory.glob("cues_v*.json") if VERSION_NAME.match(path.stem)]
    return sorted(names, key=lambda name: int(VERSION_NAME.match(name)["number"]))


def cue_to_dict(cue: Cue) -> dict:
    """A cue as its file writes it: behavior, pattern, then each field that differs from its default."""
    out: dict = {"behavior": cue.behavior, "pattern": cue.pattern}
    for name, default in DEFAULTS.items():
        value = getattr(cue, name)
        if value != default:
            out[name] = sorted(value) if isinstance(value, frozenset) else value
    return out


def cue_from_dict(item: dict, where: str) -> Cue:
    unknown = set(item) - {"behavior", "pattern", *DEFAULTS}
    if unknown or not {"behavior", "pattern"} <= set(item):
        raise CueRulesError(f"{where}: a cue has fields behavior, pattern and {', '.join(DEFAULTS)}; got {sorted(item)}")
    if item["behavior"] not in BEHAVIOR_NAMES:
        raise CueRulesError(f"{where}: unknown behavior {item['behavior']!r}")
    if "unless_next" in item:
        item = {**item, "unless_next": frozenset(item["unless_next"])}
    return Cue(**item)


def version_to_text(version: CueVersion) -> str:
    """A version's file text. Notes are a list of lines, so that the file reads as the text it holds."""
    data = {
        "version": version.name,
        "based_on": version.based_on,
        "engine": version.engine,
        "notes": version.notes.split("\n"),
        "cues": [cue_to_dict(cue) for cue in version.cues],
    }
    if version.line_cues:
        data["line_cues"] = [{"behavior": behavior, "pattern": pattern} for behavior, pattern in version.line_cues]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def version_from_text(text: str, where: str) -> CueVersion:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CueRulesError(f"{where} is not JSON: {error}") from error
    if not isinstance(data, dict) or not set(FILE_FIELDS[:-1]) <= set(data) <= set(FILE_FIELDS):
        raise CueRulesError(f"{where}: a cue version file holds {', '.join(FILE_FIELDS[:-1])} and, with the "
                            f"{LINE_ENGINE} engine, line_cues")
    if data["engine"] not in ENGINES:
        raise CueRulesError(f"{where}: unknown engine {data['engine']!r} (known: {', '.join(ENGINES)})")
    return CueVersion(
        name=data["version"],
        based_on=data["based_on"],
        engine=data["engine"],
        notes="\n".join(data["notes"]),
        cues=tuple(cue_from_dict(item, where) for item in data["cues"]),
        line_cues=line_cues_from(data, where),
    )


def line_cues_from(data: dict, where: str) -> tuple[tuple[str, str], ...]:
    items = data.get("line_cues", [])
    if items and data["engine"] != LINE_ENGINE:
        raise CueRulesError(f"{where}: line_cues need the {LINE_ENGINE} engine, not {data['engine']!r}")
    out = []
    for item in items:
        if not isinstance(item, dict) or set(item) != {"behavior", "pattern"} or item["behavior"] not in BEHAVIOR_NAMES:
            raise CueRulesError(f"{where}: a line cue is {{\"behavior\": one of {', '.join(BEHAVIOR_NAMES)}, "
                                f"\"pattern\": a regular expression}}; got {item!r}")
        try:
            re.compile(item["pattern"], re.MULTILINE)
        except re.error as error:
            raise CueRulesError(f"{where}: line cue pattern {item['pattern']!r}: {error}") from error
        out.append((item["behavior"], item["pattern"]))
    return tuple(out)


def read_version(name: str, directory: Path = RULES_DIR) -> CueVersion:
    """The version `name` as its file holds it."""
    path = version_path(name, directory)
    if not path.is_file():
        known = ", ".join(version_names(directory)) or "none"
        raise CueRulesError(f"no cue version {name!r} in {directory} (known: {known})")
    version = version_from_text(path.read_text(encoding="utf-8"), str(path))
    if version.name != name:
        raise CueRulesError(f"{path} names itself {version.name!r}")
    return version


def write_next(name: str, based_on: str, directory: Path = RULES_DIR) -> Path:
    """Write version `name` as a copy of `based_on`, to be edited; a file that exists is never overwritten (a released
    version is frozen: a change is a new version)."""
    path = version_path(name, directory)
    if path.exists():
        raise CueRulesError(f"{path} exists: a released version is never rewritten; name the next version instead")
    base = read_version(based_on, directory)
    notes = f"`{name}`: `{based_on}` revised. Say what each change reads and why, and the figures it was tuned on."
    draft = CueVersion(name=name, based_on=based_on, engine=base.engine, notes=notes, cues=base.cues,
                       line_cues=base.line_cues)
    with path.open("x", encoding="utf-8") as handle:  # "x": fails rather than overwrite a file made meanwhile
        handle.write(version_to_text(draft))
    return path


@dataclass(frozen=True)
class CueDiff:
    """What a version added, changed and dropped against another. A cue is known by its behavior and pattern (and,
    where a version has several cues with both the same, by their order), so a cue whose pattern or behavior changed
    is one dropped and one added; `changed` pairs the old and new cue where only the context fields differ."""

    added: tuple[Cue, ...]
    changed: tuple[tuple[Cue, Cue], ...]
    dropped: tuple[Cue, ...]


def _keyed(cues: tuple[Cue, ...]) -> dict[tuple[str, str, int], Cue]:
    seen: dict[tuple[str, str], int] = defaultdict(int)
    keyed = {}
    for cue in cues:
        occurrence = seen[cue.behavior, cue.pattern]
        seen[cue.behavior, cue.pattern] += 1
        keyed[cue.behavior, cue.pattern, occurrence] = cue
    return keyed


def diff(old: CueVersion, new: CueVersion) -> CueDiff:
    before, after = _keyed(old.cues), _keyed(new.cues)
    return CueDiff(
        added=tuple(cue for key, cue in after.items() if key not in before),
        changed=tuple((before[key], cue) for key, cue in after.items() if key in before and before[key] != cue),
        dropped=tuple(cue for key, cue in before.items() if key not in after),
    )


def changed_fields(old: Cue, new: Cue) -> set[str]:
    return {f.name for f in fields(Cue) if getattr(old, f.name) != getattr(new, f.name)}


def _shown(value) -> str:
    """A field's value as a reader wants it: a rule as written (no doubled backslashes), a set sorted."""
    if isinstance(value, frozenset):
        return ", ".join(sorted(value)) or "(none)"
    return value if isinstance(value, str) else str(value)


def diff_text(old: CueVersion, new: CueVersion) -> str:
    """The diff for a reader: a count line, then `+` added, `~` changed (each changed field, old -> new), `-` dropped."""
    found = diff(old, new)
    counts = f"{len(found.added)} added, {len(found.changed)} changed, {len(found.dropped)} dropped"
    lines = [f"{old.name} -> {new.name}: {counts}"]
    if old.engine != new.engine:
        lines.append(f"engine: {old.engine} -> {new.engine}")
    lines.extend(f"+ line cue {behavior}: {pattern}" for behavior, pattern in new.line_cues
                 if (behavior, pattern) not in old.line_cues)
    lines.extend(f"- line cue {behavior}: {pattern}" for behavior, pattern in old.line_cues
                 if (behavior, pattern) not in new.line_cues)
    for cue in found.added:
        lines.append(f"+ {cue.behavior}: {cue.pattern}")
        lines.extend(f"    {name}: {_shown(value)}" for name, value in cue_to_dict(cue).items() if name in DEFAULTS)
    for before, after in found.changed:
        lines.append(f"~ {after.behavior}: {after.pattern}")
        for name in sorted(changed_fields(before, after)):
            lines.append(f"    {name}: {_shown(getattr(before, name))}")
            lines.append(f"    {' ' * len(name)}  -> {_shown(getattr(after, name))}")
    lines.extend(f"- {cue.behavior}: {cue.pattern}" for cue in found.dropped)
    return "\n".join(lines)


def _factory(name: str):
    def make(batch_size: int = 64) -> CueClassifier:
        version = read_version(name)
        return shared_classifier(name, version.cues, batch_size, ENGINES[version.engine], version.line_cues)

    return make


for _name in version_names():
    register(_name)(_factory(_name))
