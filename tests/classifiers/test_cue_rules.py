"""Cue versions as data (curate/classifiers/cue_rules): each file reads back as what it holds and is the version the
registry builds, the diff names what a version added, changed and dropped, the authoring helper copies a version without
ever overwriting one, and a wheel carries the files. That each file labels as its version did when it was released is
the golden test's (tests/classifiers/test_golden.py); the files were generated once from the delta modules they
replaced, with the same cues in the same order."""

import glob
import json
import tomllib
from pathlib import Path

import pytest

from curate.classifiers import get_classifier, registered_names
from curate.classifiers.cue_rules import (
    RULES_DIR,
    VERSION_NAME,
    CueRulesError,
    CueVersion,
    diff,
    read_version,
    version_from_text,
    version_names,
    version_path,
    version_to_text,
    write_next,
)
from curate.classifiers.cue_rules.__main__ import main
from curate.classifiers.cues import Cue, CueClassifier, LineCueClassifier

ROOT = Path(__file__).resolve().parents[2]
V, B, S = "verification", "backtracking", "subgoal_setting"
RELEASED = [f"cues_v{n}" for n in range(1, 13)]


def test_every_released_version_has_a_file_and_is_registered_from_it():
    assert version_names()[: len(RELEASED)] == RELEASED
    assert {name for name in registered_names() if VERSION_NAME.match(name)} == set(version_names())
    classifier = get_classifier("cues_v4")
    assert isinstance(classifier, LineCueClassifier) and tuple(classifier.cues.values()) == read_version("cues_v4").cues
    assert [(b, p.pattern) for b, p in classifier.line_cues] == list(read_version("cues_v4").line_cues)
    assert type(get_classifier("cues_v3")) is CueClassifier


def test_line_cues_are_the_files_and_need_the_line_engine(tmp_path):
    """Each version from v4 on carries its line cues in its file, so editing one cannot move another version; a file
    of the sentence engine may not carry any, and a line cue that is not a regular expression is refused."""
    assert not read_version("cues_v3").line_cues
    assert all(read_version(f"cues_v{n}").line_cues for n in range(4, 13))
    data = json.loads(version_path("cues_v3").read_text(encoding="utf-8"))
    data["line_cues"] = [{"behavior": S, "pattern": "^x"}]
    with pytest.raises(CueRulesError, match="line_cues need the sentence_and_line_cues engine"):
        version_from_text(json.dumps(data), "cues_v3.json")
    data = json.loads(version_path("cues_v4").read_text(encoding="utf-8"))
    data["line_cues"] = [{"behavior": S, "pattern": "(unclosed"}]
    with pytest.raises(CueRulesError, match="line cue pattern"):
        version_from_text(json.dumps(data), "cues_v4.json")


@pytest.mark.parametrize("name", RELEASED)
def test_a_file_holds_only_what_the_writer_writes(name):
    """Reading and writing a version loses and adds nothing, and a cue lists only its fields that are not defaults."""
    text = version_path(name).read_text(encoding="utf-8")
    version = read_version(name)
    assert json.loads(version_to_text(version)) == json.loads(text)
    assert version.name == name
    assert version.engine == ("sentence_cues" if int(name.removeprefix("cues_v")) < 4 else "sentence_and_line_cues")
    assert version.based_on == (None if name == "cues_v1" else f"cues_v{int(name.removeprefix('cues_v')) - 1}")


def _version(name: str, *cues: Cue) -> CueVersion:
    return CueVersion(name=name, based_on=None, engine="sentence_cues", notes="", cues=cues)


def test_diff_names_what_was_added_changed_and_dropped():
    old = _version("cues_v1", Cue(V, "let me check"), Cue(B, "wait"), Cue(S, "first"), Cue(S, "first", then="x"))
    new = _version(
        "cues_v2",
        Cue(V, "let me check"),
        Cue(B, "wait", unless_then="but"),
        Cue(S, "first"),
        Cue(S, "first", then="y"),  # the second cue of this pattern, changed
        Cue(S, "first", before="z"),  # a third, added
        Cue(B, "oops"),
    )
    found = diff(old, new)
    assert found.added == (Cue(S, "first", before="z"), Cue(B, "oops"))
    assert found.changed == ((Cue(B, "wait"), Cue(B, "wait", unless_then="but")),
                             (Cue(S, "first", then="x"), Cue(S, "first", then="y")))
    assert found.dropped == ()
    back = diff(new, old)
    assert back.dropped == found.added and back.added == ()


def test_a_changed_pattern_is_one_cue_dropped_and_one_added():
    found = diff(_version("cues_v1", Cue(B, "redo")), _version("cues_v2", Cue(B, "rethink")))
    assert found.added == (Cue(B, "rethink"),) and found.dropped == (Cue(B, "redo"),) and found.changed == ()


def test_writing_the_next_version_copies_it_and_never_overwrites(tmp_path):
    version_path("cues_v12", tmp_path).write_text(version_path("cues_v12").read_text(encoding="utf-8"))
    path = write_next("cues_v13", "cues_v12", tmp_path)
    draft, base = read_version("cues_v13", tmp_path), read_version("cues_v12")
    assert path == tmp_path / "cues_v13.json"
    assert (draft.based_on, draft.engine, draft.cues) == ("cues_v12", base.engine, base.cues)
    assert draft.notes.startswith("`cues_v13`: `cues_v12` revised")
    before = path.read_bytes()
    with pytest.raises(CueRulesError, match="never rewritten"):
        write_next("cues_v13", "cues_v12", tmp_path)
    assert path.read_bytes() == before
    with pytest.raises(CueRulesError, match="named like"):
        write_next("cues-13", "cues_v12", tmp_path)


def test_the_helper_refuses_a_released_version_and_prints_a_diff(capsys):
    before = version_path("cues_v12").read_bytes()
    assert main(["new", "cues_v12", "--from", "cues_v11"]) == 2
    assert "never rewritten" in capsys.readouterr().err
    assert version_path("cues_v12").read_bytes() == before
    assert main(["diff", "cues_v6", "cues_v7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    added = len(read_version("cues_v7").cues) - len(read_version("cues_v6").cues)
    assert lines[0] == f"cues_v6 -> cues_v7: {added} added, 0 changed, 0 dropped"
    assert sum(line.startswith("+ ") for line in lines) == added
    assert main(["diff", "cues_v7"]) == 0  # against the version it is based on
    assert capsys.readouterr().out.splitlines() == lines
    assert main(["diff", "cues_v1"]) == 2
    assert "based on no other version" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda data: data["cues"][0].update(unless_later="x"), "a cue has fields"),
        (lambda data: data["cues"][0].update(behavior="guessing"), "unknown behavior"),
        (lambda data: data.update(engine="regex"), "unknown engine"),
        (lambda data: data.pop("notes"), "a cue version file holds version, based_on, engine, notes, cues"),
    ],
)
def test_a_malformed_file_is_refused(tmp_path, change, message):
    data = json.loads(version_path("cues_v1").read_text(encoding="utf-8"))
    change(data)
    version_path("cues_v1", tmp_path).write_text(json.dumps(data))
    with pytest.raises(CueRulesError, match=message):
        read_version("cues_v1", tmp_path)


def test_a_wheel_carries_the_rule_files():
    """pyproject's package data names the files, so an install that is not editable finds them."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["curate"]
    package = RULES_DIR.parents[1]
    carried = {Path(match) for pattern in patterns for match in glob.glob(pattern, root_dir=package)}
    files = {path.relative_to(package) for path in RULES_DIR.glob("*.json")}
    assert files and files <= carried
