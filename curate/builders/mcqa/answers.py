"""Answers: an option's text as LaTeX that math-verify parses (units, currencies, percentages and digit groups
stripped; Unicode math spelt out), the kind of object it is, or the reason it is not a gradable value.

math-verify is called with its own SIGALRM timeouts off (they fail outside the main thread), through the shared
`curate.rewards.equivalence.parse_latex` / `verify_parsed`; each item's whole check is bounded by the caller instead
(`convert.call_bounded`).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field

from curate.rewards.equivalence import parse_latex

# math-verify warns on every call made with its timeouts off; we bound time ourselves.
logging.getLogger("math_verify").setLevel(logging.ERROR)

NUMBER_WORDS = {w: str(i) for i, w in enumerate([
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
UNITS = sorted({
    "km/hr", "km/h", "kmph", "kmh", "km/hour", "m/s", "m/sec", "mph", "km", "cm", "mm", "m", "kg", "g", "gm", "gms",
    "mg", "l", "ml", "litres", "liters", "litre", "liter", "hours", "hour", "hrs", "hr", "minutes", "minute", "min",
    "mins", "seconds", "second", "sec", "secs", "s", "days", "day", "weeks", "week", "months", "month", "years", "year",
    "yrs", "miles", "mile", "feet", "foot", "ft", "inches", "inch", "in", "yards", "yd", "meters", "metres", "meter",
    "metre", "sq m", "sq cm", "sq km", "sq ft", "sq units", "sq. m", "sq. cm", "sq. units", "m^2", "cm^2", "m^3",
    "cm^3", "cu m", "cu cm", "cubic meters", "cubic cm", "square units", "units", "unit", "h", "rupees", "dollars",
    "cents", "paise", "degrees", "°", "n", "j", "kj", "w", "kw", "v", "ohm", "ohms", "hz", "khz", "pa", "kpa", "atm",
    "mol", "k", "ev", "°c", "°f", "m/s^2", "km^2", "mm^2", "mm^3", "ft^2", "ft^3", "in^2", "km/s", "kg/m^3", "g/cm^3",
    "kg m/s", "n/m", "c", "men", "women", "boys", "girls", "students", "persons", "people", "workers", "children",
    "balls", "marbles", "apples", "books", "pages", "votes", "times", "steps", "revolutions", "rounds", "rs", "rs.",
    "games", "matches", "employees", "members", "players", "trees", "cows", "ways", "seats", "tickets", "items",
}, key=len, reverse=True)
UNIT_RE = re.compile(r"^(?P<value>.*?[\d}\)a-z])\s*(?P<unit>" + "|".join(re.escape(u) for u in UNITS) + r")\.?$",
                     re.IGNORECASE)
# SI units with an optional prefix, matched case-sensitively ("mm" is not "Mm", "ms" not "Ms"): "50 μN", "2.5 ns",
# "42.58 MHz", "2 A", "2.9 T". Only after a space: "3kT" is k times T and "4F" four times F; and "7 pm" is a time.
SI_BASE = r"(?:mol|Hz|Pa|eV|Wb|Ω|[mgsAVWJNCFTLK])"
SI_UNIT_RE = re.compile(
    r"^(?P<value>.*?[\d}\)])\s+(?!pm$|am$)(?P<unit>[pnμmcdkMGT]?" + SI_BASE
    + r"(?:\^?[23])?(?:/[a-zA-Z]+(?:\^?[23])?)*)$")
# Digit groups: a first group of 1-3 digits (not led by 0), then ",ddd" groups; MathQA spaces the first comma
# ("3 , 012,121"), and a group so written counts only when an unspaced one follows ("4 , 2" is a pair).
DIGIT_GROUPS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?: , \d{3}(?=,\d{3}))?(?:,\d{3})+(?![\d]|,\d)")
TRAILING_CURRENCY = re.compile(r"(?<=\d)\s*(?:\\?\$|€|£|¥)$")
# Element symbols, to tell a nuclide or formula ("2H", "14N", "6Li", "C3H6O") from a quantity with a unit.
ELEMENTS = frozenset(re.findall(r"[A-Z][a-z]?", (
    "HHeLiBeBCNOFNeNaMgAlSiPSClArKCaScTiVCrMnFeCoNiCuZnGaGeAsSeBrKrRbSrYZrNbMoTcRuRhPdAgCdInSnSbTeIXeCsBaLaCePrNdPmSm"
    "EuGdTbDyHoErTmYbLuHfTaWReOsIrPtAuHgTlPbBiPoAtRnFrRaAcThPaUNpPuAmCmBkCfEsFmMdNoLr")))
MICRO_SYMBOL = re.compile(r"μ(?!" + SI_BASE + r"(?:/\S+)?\s*$)")
CHEMICAL = re.compile(r"^\s*\d{0,3}((?:[A-Z][a-z]?\d*)+)[+-]?\s*$")
CURRENCY_RE = re.compile(r"^\s*(?:\\?\$|rs\s*\.?|inr|usd|€|£|¥)\s*", re.IGNORECASE)
GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "Δ": "Delta", "θ": "theta", "λ": "lambda", "μ": "mu",
         "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "ω": "omega", "Ω": "Omega"}


CONSTANTS = {"g", "c", "e"}  # gravity, light speed, Euler's number: symbols an answer may use unannounced
MATH_WORDS = {"sqrt", "frac", "dfrac", "tfrac", "pi", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp",
              "lim", "arcsin", "arccos", "arctan", "times", "cdot", "div", "le", "ge", "leq", "geq", "ne", "neq",
              "infty", "cup", "cap", "in", "left", "right", "begin", "end", "pmatrix", "bmatrix", "matrix", "text",
              "mathrm", "circ", "pm", "mp", "approx", *GREEK.values()}


@dataclass
class Answer:
    latex: str
    parsed: list = field(repr=False)
    answer_type: str
    unit: str | None = None


def _unicode_math(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)  # also the micro sign µ to the letter μ
    # "5 ⁄ 3" (the fraction slash NFKC makes of "⅓") and "2^4 • 3" were read by math-verify as "3" and "3"
    for a, b in {"–": "-", "—": "-", "−": "-", "×": r" \times ", "÷": r" \div ", "·": r" \cdot ", "•": r" \cdot ",
                 "∙": r" \cdot ", "⋅": r" \cdot ", "⁄": "/", "∕": "/", "π": r"\pi ", "∞": r"\infty ", "≤": r" \le ",
                 "≥": r" \ge ", "≠": r" \ne ", "∪": r" \cup ", "°": "°"}.items():
        text = text.replace(a, b)
    # μ is the micro prefix of a unit that ends the text ("50 μN", "160 μF"), the symbol mu elsewhere
    text = MICRO_SYMBOL.sub(r"\\mu ", text)
    for a, b in GREEK.items():
        if a != "μ":
            text = text.replace(a, "\\" + b + " ")
    text = re.sub(r"√\s*\(([^()]*)\)", r"\\sqrt{\1}", text)
    text = re.sub(r"√\s*\{([^{}]*)\}", r"\\sqrt{\1}", text)
    text = re.sub(r"√\s*([\d.]+|[a-zA-Z])", r"\\sqrt{\1}", text)
    text = re.sub(r"\^\s*\(?\s*(-\s*\d+(?:\.\d+)?)\s*\)?", lambda m: "^{" + m.group(1).replace(" ", "") + "}", text)
    return text


def normalize_option(text: str, variables: frozenset[str] = frozenset(),
                     subscripts: frozenset[str] = frozenset()) -> tuple[str | None, dict]:
    """LaTeX for an option's value, and what was stripped (`percent`, `unit`, `currency`); None and a
    `reason` in the dict when the option is not a mathematical object. `variables` are the single
    letters the stem uses as symbols, so that "xp" reads as a product rather than a word; `subscripts` the
    letter-digit names it uses ("v0", "x1"), which an option's "v0" then means."""
    info: dict = {}
    s = _unicode_math(text).strip().rstrip(".").strip()
    if s.startswith("$") and s.endswith("$") and s.count("$") == 2:
        s = s[1:-1].strip()
    if (m := CHEMICAL.fullmatch(s)) and set(re.findall(r"[A-Z][a-z]?", m.group(1))) <= ELEMENTS \
            and not set(re.findall(r"[a-zA-Z]", m.group(1))) <= variables:
        # "2H" (deuterium) was read as 2 hours: a nuclide or a formula names a substance, not a quantity
        info["reason"] = f"chemical_symbol: {s[:20]!r} names a nuclide or compound"
        return None, info
    if CURRENCY_RE.match(s) and re.search(r"\d", s):
        s = CURRENCY_RE.sub("", s, count=1)
        info["currency"] = True
    elif TRAILING_CURRENCY.search(s):
        s = TRAILING_CURRENCY.sub("", s)  # "88,000$"
        info["currency"] = True
    # Before the units and the sets: "1 / 40,000", "(3,034, 3,466)", "3 , 012,121" each hold one number per group.
    s = DIGIT_GROUPS.sub(lambda m: m.group(0).replace(" , ", "").replace(",", ""), s)
    if s.lower() in NUMBER_WORDS:
        s = NUMBER_WORDS[s.lower()]
    # "9.8 m/s2", "20 cm3" (also m/s², NFKC-folded to 2): the power of a unit, not a subscript.
    s = re.sub(r"(?<=\s)((?:m/s|cm|mm|km|ft|in|m|kg/m|g/cm))\s*\^?\s*([23])$", r"\1^\2", s)
    if m := re.fullmatch(r"(.*?)\s*(\\?%|percent|per cent)", s, re.IGNORECASE):
        s = m.group(1).strip()
        info["percent"] = True
    elif (m := UNIT_RE.match(s)) and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group("value"))):
        unit = m.group("unit")
        plain_number = re.fullmatch(r"-?[\d.,]+", m.group("value").strip())
        # Glued to the number, a single letter is a unit only in lower case (and litre's L): "2H" is not 2 hours.
        if len(unit) > 1 or re.search(r"\s" + re.escape(unit) + r"\.?$", s) or (plain_number and unit in "mgshlL°"):
            # "130°" kept its sign, and the reward then gave 0 to 130 and to 130^\circ (found in the read sample)
            s, info["unit"] = m.group("value").strip(), "degrees" if unit == "°" else unit
    elif (m := SI_UNIT_RE.match(s)) and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group("value"))) \
            and not (len(m.group("unit")) == 1 and m.group("unit") in variables):
        s, info["unit"] = m.group("value").strip(), m.group("unit")
    s = re.sub(r"\s+", " ", s).strip()
    if re.fullmatch(r"[^a-zA-Z]+( and [^a-zA-Z]+)+", s):
        s = r"\{" + s.replace(" and ", ", ") + r"\}"
    if m := re.fullmatch(r"(-?)(\d+)\s+(\d+)\s*/\s*(\d+)", s):
        whole, num, den = int(m.group(2)), int(m.group(3)), int(m.group(4))
        s = f"{m.group(1)}\\frac{{{whole * den + num}}}{{{den}}}"
    s = re.sub(r"(?<=\d) (?=\d)", "", s) if re.fullmatch(r"-?[\d ]+(\.\d+)?", s) else s
    s = re.sub(r"(?<=\d) \.(?= ?\d)", ".", s).replace(". ", ".") if re.fullmatch(r"-?\s*\d+ ?\. ?\d+", s) else s
    if not s:
        info["reason"] = "gold_not_math: empty after removing units"
        return None, info
    words = [w for w in re.findall(r"(?<!\\)\b[a-zA-Z]{2,}\b", re.sub(r"\\[a-zA-Z]+", " ", s))
             if w.lower() not in MATH_WORDS and not set(w) <= variables]
    if words:
        info["reason"] = f"gold_not_math: words {' '.join(words[:4])!r}"
        return None, info
    bare = re.sub(r"\\[a-zA-Z]+", " ", s)
    if re.search(r"[a-zA-Z]\s+[a-zA-Z]\s+[a-zA-Z]", bare):
        info["reason"] = "gold_not_math: a run of letters"
        return None, info
    if re.search(r"[a-zA-Z][\w_]*\s*:", bare):
        info["reason"] = "gold_not_math: labelled parts"
        return None, info
    if ";" in bare:
        # "μ = 15,300; σ = 6300", "18 = p - 4; 22": several answers, of which math-verify grades one
        info["reason"] = "gold_not_math: several parts"
        return None, info
    if m := re.search(r"\d\s+[a-zA-Z]\s+\d", s):
        # MathQA's "10 v 2" is 10√2, "2 x 3" a times sign: read as a product with a symbol, both are wrong (on the
        # LaTeX, not on `bare`: in "2 \le y \le 8" the y stands between relations)
        info["reason"] = f"gold_not_math: a letter between two numbers {m.group(0)!r}"
        return None, info
    if stray := set(re.findall(r"[a-zA-Z]", bare)) - variables - CONSTANTS:
        # A letter the stem never uses as a symbol is a label or a garbled word ("s : 1300", "C1: (3,3)").
        info["reason"] = f"gold_not_math: symbol {''.join(sorted(stray))!r} not in the question"
        return None, info
    for name in re.findall(r"(?<![\\a-zA-Z])[a-zA-Z]\d(?!\d)", s):
        if name not in subscripts:
            # "3D/(M2-3M)" means M^2 (AQuA writes powers flat); only a name the stem itself uses is a subscript
            info["reason"] = (f"ambiguous_symbol: {name!r} is {name[0]}_{name[1]} or {name[0]}^{name[1]}, "
                              "not named in the question")
            return None, info
    s = re.sub(r"(?<![\\a-zA-Z])([a-zA-Z])(\d)(?!\d)", r"\1_\2", s)  # v0 is v_0, not v times 0
    if (m := re.fullmatch(r"([a-zA-Z])\s*=\s*([^=<>]+)", s)) \
            and not re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", m.group(2))):
        # "e = 121" (e was read as Euler's number, and the equation as False), "t = 32": the value asked for
        s = m.group(2).strip()
    return s, info


def answer_type_of(parsed: object, latex: str, info: dict) -> str:
    import sympy

    if info.get("percent"):
        return "percentage"
    if isinstance(parsed, sympy.MatrixBase):
        return "matrix"
    if isinstance(parsed, sympy.Interval | sympy.Union):
        return "interval"
    if isinstance(parsed, sympy.FiniteSet):
        return "set"
    if isinstance(parsed, sympy.Tuple | tuple):
        return "tuple"
    if isinstance(parsed, sympy.Rel):
        return "equation"
    if isinstance(parsed, sympy.Integer):
        return "integer"
    if isinstance(parsed, sympy.Float) or (isinstance(parsed, sympy.Rational) and "." in latex and "frac" not in latex):
        return "decimal"
    if isinstance(parsed, sympy.Rational):
        return "fraction"
    if isinstance(parsed, sympy.Basic) and not parsed.free_symbols and parsed.has(sympy.sqrt(2).func) and any(
        isinstance(p, sympy.Pow) and p.exp.is_Rational and not p.exp.is_integer
        for p in sympy.preorder_traversal(parsed)
    ):
        return "radical"
    return "expression"


def stem_variables(stem: str) -> frozenset[str]:
    """Single letters the stem uses as symbols (also as v0, x_1, 2x), for telling products from words."""
    return frozenset(re.findall(r"(?<![a-zA-Z'])([b-zB-HJ-Z])(?=[\d_^]|(?![\w']))",
                                _unicode_math(stem).replace("\\", " ")))


def stem_subscripts(stem: str) -> frozenset[str]:
    """Letter-digit names the stem uses ("v0", "x1", "T2"): an option's "v0" is then v_0."""
    return frozenset(re.findall(r"(?<![a-zA-Z\d])[a-zA-Z]\d(?![\w])", _unicode_math(stem)))


def parse_answer(text: str, variables: frozenset[str] = frozenset(),
                 subscripts: frozenset[str] = frozenset()) -> Answer | str:
    """The option as a gradable answer, or the reason it is not one."""
    latex, info = normalize_option(text, variables, subscripts)
    if latex is None:
        return info["reason"]
    if info.get("percent"):
        latex += r"\%"  # parsed with its percent sign, math-verify accepts 25 and 0.25 for a gold of 25 %
    parsed = parse_latex(latex)
    if not parsed:
        return f"gold_not_math: math-verify cannot parse {latex[:40]!r}"
    extracted = str(parsed[-1])
    if len(re.sub(r"\s", "", extracted)) < 0.8 * len(re.sub(r"\s|\\left|\\right", "", latex)):
        return f"gold_not_math: only {extracted[:30]!r} of {latex[:40]!r} parses"
    return Answer(extracted, parsed, answer_type_of(parsed[0], latex, info), info.get("unit"))
