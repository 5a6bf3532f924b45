"""Independent check of `curate mcqa` rows: does the trainer's reward accept the gold option's own content?

    .venv/bin/python bench/mcqa_independent.py [--data ../shared/data]

For every kept row, the gold option's text (`original_options` at `gold_letter`, as written in the row) is read
by a small parser written here, apart from the builder (none of curate.builders.mcqa's normalization is used):
currency, units, percent signs, a repeated option label and thousands separators are taken off, mixed numbers,
ratios and unicode roots are written as LaTeX. The result, boxed, is scored by the registered `curate/mcqa_open`
reward against the row's `answer` - the trainer's view of the row.

    agree       the reward gives 1 to the gold option's content
    wrong       the reward gives 0 to it: a solver who answers the gold option's value is punished
    unchecked   the option is not something this parser reads as a value (words, an equation with a solution)
    distractor  the gold agrees, but the reward also gives 1 to another option's content: a wrong choice rewarded

Error rate = (wrong + distractor) / checked, checked = kept - unchecked.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.rewards import score  # noqa: E402

WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
NUMBER = r"[-+]?\d+(?:\.\d+)?"
UNIT_TAIL = re.compile(r"^(?P<value>.*?\d[)}]?)\s*(?P<unit>[A-Za-z°][A-Za-z°/^23 .]*|°)$")
SI_LETTERS = set("msgNVJWKcAhL°")
PREFIX = re.compile(r"^(?:\\?\$|rs\.?|inr|₹|usd|€|£)\s*", re.I)


def option_value(text: str) -> str | None:
    """The option's value as a solver would box it, or None when this parser does not read it as one."""
    s = unicodedata.normalize("NFKC", str(text)).strip().replace("⁄", "/")  # NFKC writes ½ as 1⁄2
    s = s.replace("−", "-").replace("–", "-").replace("—", "-").replace("½", " 1/2").replace("¼", " 1/4").replace("¾", " 3/4")
    s = re.sub(r"^[a-eA-E]\s\)\s*", "", s)  # MathQA repeats the label inside the option: "e ) 18"
    s = s.strip().rstrip(".").strip()
    if s.startswith("$") and s.endswith("$") and len(s) > 2:
        s = s[1:-1].strip()
    if ";" in s or re.search(r"\b(and|or|none|all|both|not|cannot)\b|\b[ap]\.m\b", s, re.I):
        return None  # words, an equation and its solution, a time of day
    if s.lower() in WORDS:
        return WORDS[s.lower()]
    s = PREFIX.sub("", s)
    s = re.sub(r"^[a-zA-Z]\s*=\s*", "", s)  # "z = 2.40": the value asked for
    percent = bool(re.search(r"(%|\\%|percent|per cent)$", s))
    s = re.sub(r"\s*(\\?%|percent|per cent)$", "", s)
    if m := UNIT_TAIL.match(s):
        unit = m.group("unit").strip()
        value = m.group("value").strip()
        # one letter after a number is a unit only when it is an SI symbol (m, s, g, N, V, c for light speed ...):
        # "2500p" is 2500 times the question's p
        powered = "^" in unit and not re.fullmatch(r"(m|cm|mm|km|ft|in|m/s)\^[23]", unit)  # "4mc^2" is 4 m c^2
        if not powered and (len(unit) > 1 or (unit in SI_LETTERS and re.fullmatch(r"[-+\d.,/ ]+", value))):
            s = value
    s = re.sub(r"(?<=\d) , (?=\d{3},\d{3}\b)", ",", s)  # MathQA spaces the first separator: "3 , 012,121"
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    s = re.sub(r"(?<=\d)\s+(?=\d{3}\b)", "", s) if re.fullmatch(r"\d{1,3}(\s\d{3})+", s) else s
    s = re.sub(r"\s+", " ", s).strip()
    if m := re.fullmatch(r"(-?)(\d+) (\d+) ?/ ?(\d+)", s):  # "5 5 / 8", "4 1/3"
        sign, whole, num, den = m.groups()
        s = f"{sign}\\frac{{{int(whole) * int(den) + int(num)}}}{{{den}}}"
    elif re.fullmatch(r"\d{1,2} ?: ?00", s):
        return None  # a time of day ("14 : 00"), not a ratio
    elif m := re.fullmatch(r"(-?\d+(?:\.\d+)?) ?[:/] ?(\d+(?:\.\d+)?)", s):  # "55 / 71", "1 : 88", "8:03"
        s = f"\\frac{{{m.group(1)}}}{{{m.group(2)}}}"
    s = re.sub(r"√\s*\(([^()]*)\)", r"\\sqrt{\1}", s)
    s = re.sub(r"√\s*(\d+|[a-z])", r"\\sqrt{\1}", s)
    s = s.replace("π", "\\pi ").replace("°", "")
    s = re.sub(r"\^(-?\d+)", r"^{\1}", s)  # "e^-4" is e^{-4}
    if not s or not re.search(r"\d|\\pi|[a-z]", s):
        return None
    if re.search(r"[A-Za-z]{3,}", re.sub(r"\\[a-zA-Z]+", "", s)):
        return None  # a word left over: not a value this parser reads
    return s + ("\\%" if percent else "")


def _reward(answer: str, gold: str) -> float | None:
    return score("curate/mcqa_open", "The answer is \\boxed{" + answer + "}.", gold)


def check_row(row: dict) -> str:
    """agree / wrong / distractor / unchecked for one written row (see the module docstring)."""
    options = {o["letter"]: o["text"] for o in row["original_options"]}
    value = option_value(options[row["gold_letter"]])
    if value is None:
        return "unchecked"
    verdict = _reward(value, row["answer"])
    if verdict is None:
        return "unchecked"
    if verdict < 1:
        return "wrong"
    for letter, text in options.items():
        other = option_value(text)
        if letter == row["gold_letter"] or other is None or other == value:
            continue
        if _reward(other, row["answer"]) == 1:
            return "distractor"
    return "agree"


def summarize(verdicts: Counter) -> dict:
    kept = sum(verdicts.values())
    checked = kept - verdicts["unchecked"]
    errors = verdicts["wrong"] + verdicts["distractor"]
    return {"kept": kept, "checked": checked, "checked_share": checked / kept if kept else float("nan"),
            "errors": errors, "error_rate": errors / checked if checked else float("nan"),
            **{k: verdicts[k] for k in ("agree", "wrong", "distractor", "unchecked")}}


def main() -> None:
    from bench.mcqa_read_sample import SOURCES, kept_items

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--show", type=int, default=0, help="print up to N rows per source that are not 'agree'")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{'source':16s} {'kept':>5s} {'checked':>8s} {'share':>6s} {'wrong':>5s} {'distr':>5s} {'error rate':>10s}")
    for name in SOURCES:
        _, kept = kept_items(args.data, name)
        verdicts, shown = Counter(), 0
        for converted, _item in kept:
            verdict = check_row(converted.row())
            verdicts[verdict] += 1
            if verdict != "agree" and shown < args.show:
                shown += 1
                print(f"    {verdict:10s} {converted.id}  answer {converted.answer!r}")
        s = summarize(verdicts)
        print(f"{name:16s} {s['kept']:5d} {s['checked']:8d} {s['checked_share']:6.1%} {s['wrong']:5d} "
              f"{s['distractor']:5d} {s['error_rate']:10.2%}")
    print(f"seconds {time.perf_counter() - started:.0f}")


if __name__ == "__main__":
    main()
