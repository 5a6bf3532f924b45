"""Write the next cue version or compare two:

    python -m curate.classifiers.cue_rules new cues_v13 --from cues_v12   # a copy of v12's file to edit
    python -m curate.classifiers.cue_rules diff cues_v11 cues_v12         # what v12 added, changed and dropped
    python -m curate.classifiers.cue_rules diff cues_v13                  # against the version it is based on
"""

from __future__ import annotations

import argparse
import sys

from curate.classifiers.cue_rules import CueRulesError, CueVersion, diff_text, read_version, write_next


def versions_compared(names: list[str]) -> tuple[CueVersion, CueVersion]:
    """OLD and NEW as named, or one version and the one it was based on."""
    if len(names) > 2:
        raise CueRulesError(f"diff compares two versions, got {len(names)}")
    new = read_version(names[-1])
    if len(names) == 2:
        return read_version(names[0]), new
    if new.based_on is None:
        raise CueRulesError(f"{new.name} is based on no other version: name the one to compare it with")
    return read_version(new.based_on), new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m curate.classifiers.cue_rules", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("new", help="write a new version's file as a copy of an existing one, to edit")
    new.add_argument("name", help="the new version, e.g. cues_v13")
    new.add_argument("--from", dest="based_on", required=True, help="the version to copy, e.g. cues_v12")
    compare = commands.add_parser("diff", help="print the cues a version added, changed and dropped against another")
    compare.add_argument("versions", nargs="+", metavar="VERSION", help="OLD NEW, or one version: against its base")
    args = parser.parse_args(argv)
    try:
        if args.command == "new":
            path = write_next(args.name, args.based_on)
            print(f"wrote {path}: edit its cues and notes, then record its golden labels "
                  f"(python -m tests.golden.record {args.name})")
        else:
            print(diff_text(*versions_compared(args.versions)))
    except CueRulesError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
