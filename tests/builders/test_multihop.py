import json
import math
from collections import Counter
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from curate.builders.arith import (
    ExpressionError,
    UnexecutableSolution,
    evaluate,
    format_number,
    parse_expression,
    parse_number,
    parse_solution,
    question_numbers,
)
from curate.builders.jobs import MultihopJob
from curate.builders.multihop import (
    ChainMismatch,
    SourceProblem,
    check_link,
    load_sources,
    parse_hop_range,
    reexecute,
    run_multihop,
)
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.readers import InputSpec
from tests.support.gsm8k_reexec import Unchecked, check_row, reexecute_hop
from tests.support.shared import NATALIA_A, NATALIA_Q


def calc(text: str) -> Fraction:
    tree, literals = parse_expression(text)
    return evaluate(tree, [literal.value for literal in literals])


def problem(question: str, solution: str, id: str = "p") -> SourceProblem:
    parsed = parse_solution(question, solution)
    return SourceProblem(id, question, format_number(parsed.answer), parsed, parsed.substitutable_givens())


def test_evaluator_is_exact_and_follows_precedence():
    assert calc("48/2") == 24
    assert calc("2+3*4") == 14
    assert calc("(2+3)*4") == 20
    assert calc("10-4-3") == 3
    assert calc("12/60") == Fraction(1, 5)
    assert calc("-3+5") == 2
    assert calc("1.5*4") == 6
    assert calc("0.1+0.2") == Fraction(3, 10)


@pytest.mark.parametrize("text", ["__import__('os')", "2**3", "3 ^ 2", "(1+2", "1+", "abs(-1)", "1e3", ""])
def test_evaluator_refuses_anything_but_arithmetic(text):
    with pytest.raises(ExpressionError):
        calc(text)


def test_division_by_zero_is_an_expression_error():
    with pytest.raises(ExpressionError, match="division by zero"):
        calc("5/(2-2)")


def test_numbers_are_parsed_and_formatted_as_decimals():
    assert parse_number("1,200") == 1200
    assert parse_number("$2.50") == Fraction(5, 2)
    assert format_number(Fraction(5, 2)) == "2.5"
    assert format_number(Fraction(-1, 4)) == "-0.25"
    assert format_number(Fraction(7)) == "7"
    assert format_number(Fraction(1, 3)) is None
    with pytest.raises(ExpressionError):
        parse_number("12 apples")


def test_question_numbers_mark_fractions_times_and_ordinals_as_not_substitutable():
    numbers = question_numbers("On the 5th day at 3 pm, 1/2 of the 1,200 birds left at 4:30 after 12 hours.")
    found = {g.text: g.substitutable for g in numbers}
    assert found == {"5": False, "3": False, "1": False, "2": False, "1,200": True, "4": False, "30": False, "12": True}
    assert [g.value for g in numbers if g.text == "1,200"] == [1200]
    ages = question_numbers("A 5-year-old reads 10-12 pages a day.")
    assert {g.text: g.substitutable for g in ages} == {"5": True, "10": False, "12": False}


def test_solution_graph_links_givens_and_earlier_results():
    solution = parse_solution(NATALIA_Q, NATALIA_A)
    assert [g.text for g in solution.givens] == ["48"]
    assert solution.values == [24, 72]
    assert solution.answer_step == 1
    assert [(lit.kind, lit.ref) for lit in solution.steps[1].literals] == [("given", 0), ("step", 0)]
    assert solution.substitutable_givens() == [0]
    assert solution.execute({0: Fraction(10)}) == [5, 15]


@pytest.mark.parametrize(
    "solution, reason",
    [
        ("He has 5+3 = 8 apples.\n#### 8", "no_annotations"),
        ("He has <<5+3=8>>8 apples.", "no_final_answer"),
        ("He has <<5+3=9>>9 apples.\n#### 9", "annotation_mismatch"),
        ("He has <<5+3=8>>8 apples, so 16 in all.\n#### 16", "answer_not_reproduced"),
        ("He has <<5^3=8>>8.\n#### 8", "annotation_not_arithmetic"),
        ("He has <<5+3=8>>8 apples.\n#### eight", "final_answer_not_a_number"),
    ],
)
def test_unexecutable_solutions_are_set_aside_with_their_reason(solution, reason):
    with pytest.raises(UnexecutableSolution) as caught:
        parse_solution("Tom has 5 apples and buys 3 more. How many does he have?", solution)
    assert caught.value.reason == reason


def test_numbers_written_twice_or_equal_to_a_result_cannot_be_replaced():
    twice = parse_solution("Ann has 5 red and 5 blue pens and 2 boxes. How many pens per box?",
                           "<<5+5=10>>10 pens.\n<<10/2=5>>5 per box.\n#### 5")
    assert [twice.givens[i].text for i in twice.substitutable_givens()] == ["2"]
    # 6 is given and is also 2*3: which one a later literal 6 means cannot be told apart.
    collides = parse_solution("A box holds 2 rows of 3 cups. Tom has 6 boxes. How many cups?",
                              "<<2*3=6>>6 per box.\n<<6*6=36>>36 cups.\n#### 36")
    assert [collides.givens[i].text for i in collides.substitutable_givens()] == ["2", "3"]


def test_a_given_that_does_not_feed_the_answer_is_not_a_slot():
    solution = parse_solution("Sam is 30 years old and has 4 bags of 7 apples. How many apples?",
                              "<<4*7=28>>28 apples.\n#### 28")
    assert [solution.givens[i].text for i in solution.substitutable_givens()] == ["4", "7"]


def test_link_checks_give_a_reason_for_each_invalid_substitution():
    left = problem("Tom has 10 apples and gives away 4. How many are left?", "<<10-4=6>>6\n#### 6")
    ten, four = (i for i, g in enumerate(left.solution.givens) if g.text in ("10", "4"))
    assert check_link(left, ten, Fraction(3), 10.0) == ("intermediate_sign_changed", None)
    assert check_link(left, four, Fraction(5, 2), 10.0) == ("substitute_not_whole", None)
    assert check_link(left, four, Fraction(100), 10.0) == ("substitute_out_of_range", None)
    assert check_link(left, four, Fraction(0), 10.0) == ("substitute_not_positive", None)
    assert check_link(left, ten, Fraction(15), 10.0) == (None, Fraction(11))
    many = problem("Tom has 50 apples and gives away 20. How many are left?", "<<50-20=30>>30\n#### 30")
    twenty = next(i for i, g in enumerate(many.solution.givens) if g.text == "20")
    assert check_link(many, twenty, Fraction(48), 10.0) == ("intermediate_out_of_range", None)
    shared = problem("12 cookies are shared among 4 friends. How many each?", "<<12/4=3>>3\n#### 3")
    assert check_link(shared, 0, Fraction(10), 10.0) == ("intermediate_not_whole", None)
    assert check_link(shared, 0, Fraction(20), 10.0) == (None, Fraction(5))
    price = problem("A pack of 3 pens costs $1.50. What does one pen cost?", "<<1.5/3=0.5>>0.5\n#### 0.5")
    dollars = next(i for i, g in enumerate(price.solution.givens) if g.text == "1.50")
    assert check_link(price, dollars, Fraction(5, 2), 10.0) == ("answer_not_terminating_decimal", None)
    assert check_link(price, dollars, Fraction(3), 10.0) == (None, Fraction(1))


def test_hop_range():
    assert parse_hop_range("2-4") == (2, 4)
    assert parse_hop_range("3") == (3, 3)
    for bad in ("1-3", "4-2", "two", "2-99"):
        with pytest.raises(ValueError):
            parse_hop_range(bad)


def test_bad_records_are_kept_with_their_reason(tmp_path):
    source = tmp_path / "problems.jsonl"
    good = [
        {"id": "nat", "question": NATALIA_Q, "answer": NATALIA_A},
        {"id": "bags", "question": "Sam has 4 bags of 7 apples. How many apples?", "answer": "<<4*7=28>>28\n#### 28"},
        {"id": "cook", "question": "Bake 36 cookies and eat 8. How many are left?", "answer": "<<36-8=28>>28\n#### 28"},
    ]
    lines = [json.dumps(r) for r in good] + [
        "{not json",
        json.dumps({"id": "noanswer", "question": "What is 2+2?"}),
        json.dumps({"id": "nocalc", "question": "What is 2+2?", "answer": "Four.\n#### 4"}),
        json.dumps({"id": "nat", "question": NATALIA_Q, "answer": NATALIA_A}),
        json.dumps({"id": "names", "question": "Let X1 be 4. What is X1 + 4?", "answer": "<<4+4=8>>8\n#### 8"}),
    ]
    source.write_text("\n".join(lines) + "\n")
    result = run_multihop(MultihopJob(input=str(source), output=tmp_path / "out", n=20, hops="2-2", seed=1,
                                      cleaning=Cleaning()), progress=False)
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects" / "sources.jsonl").read_text().splitlines()]
    assert sorted(r["reason"] for r in rejects) == sorted(
        ["malformed_json", "missing_solution", "no_annotations", "duplicate_id", "uses_reference_names"]
    )
    assert {r["id"] for r in rejects if r["reason"] != "malformed_json"} == {"noanswer", "nocalc", "nat", "names"}
    assert result.stats.sources_executable == 3
    full = pq.read_table(tmp_path / "out" / "data" / "full-00000.parquet").to_pylist()
    assert full, "the three good problems chain: 72 -> cookies 36, 28 -> bags 4 or 7"
    assert {h["source_id"] for row in full for h in row["hops"]} <= {"nat", "bags", "cook"}


@pytest.fixture
def built(shared_data, tmp_path):
    source = shared_data / "gsm8k" / "test.jsonl"
    output = tmp_path / "multihop"
    result = run_multihop(MultihopJob(input=str(source), output=output, n=150, hops="2-5", seed=3, cleaning=Cleaning()),
                          progress=False)
    raw = {}
    for position, line in enumerate(source.read_text().splitlines()):
        raw[f"test.jsonl/{position}"] = json.loads(line)
    sets = {name: pq.read_table(output / "data" / f"{name}-00000.parquet").to_pylist() for name in ("full", "half", "single")}
    return result, output, raw, sets


def test_every_row_reexecutes_from_its_stored_hops(built):
    result, _, raw, sets = built
    assert len(sets["full"]) == 150
    for rows in sets.values():
        for row in rows:
            previous = None
            for position, hop in enumerate(row["hops"]):
                record = raw[hop["source_id"]]
                # Parsed afresh from the raw file: nothing of the builder's own state is reused.
                solution = parse_solution(record["question"], record["answer"])
                if hop["replaced"] is None:
                    assert hop["question"] == record["question"]
                    values = solution.values
                else:
                    (index,) = [i for i, g in enumerate(solution.givens) if g.text == hop["replaced"]]
                    given = solution.givens[index]
                    stand_in = hop["substituted_value"] if position == 0 else f"X{position}"
                    assert hop["question"] == record["question"][:given.start] + stand_in + record["question"][given.end:]
                    if position > 0:
                        assert hop["substituted_value"] == previous
                    values = solution.execute({index: parse_number(hop["substituted_value"])})
                previous = format_number(values[solution.answer_step])
                assert previous == hop["answer"]
                assert hop["question"].strip() in row["question"]
            assert previous == row["answer"]
            assert row["n_hops"] == len(row["hops"])
            assert row["data_source"] == "curate/multihop" and row["ability"] == "math"


def test_ablation_sets_share_their_sources_and_answers(built):
    _, _, raw, sets = built
    halves = {}
    for row in sets["half"]:
        halves.setdefault(row["chain_id"], []).append(row)
    singles = {}
    for row in sets["single"]:
        singles.setdefault(row["chain_id"], []).append(row)
    for chain in sets["full"]:
        ids = [h["source_id"] for h in chain["hops"]]
        assert len(set(ids)) == len(ids), "a chain uses a source twice"
        assert 2 <= chain["n_hops"] <= 5
        first, second = sorted(halves[chain["id"]], key=lambda r: r["id"])
        assert first["n_hops"] == math.ceil(chain["n_hops"] / 2)
        assert [h["source_id"] for h in first["hops"] + second["hops"]] == ids
        assert first["answer"] == chain["hops"][first["n_hops"] - 1]["answer"]
        assert second["answer"] == chain["answer"]
        single_rows = sorted(singles[chain["id"]], key=lambda r: r["id"])
        assert [r["hops"][0]["source_id"] for r in single_rows] == ids
        for row in single_rows:
            record = raw[row["hops"][0]["source_id"]]
            assert row["question"] == record["question"]
            assert row["answer"] == format_number(parse_number(record["answer"].rsplit("####", 1)[1]))


def test_rejection_reasons_are_counted_and_written(built):
    result, output, _, _ = built
    stats = result.stats
    links = [json.loads(line) for line in (output / "rejects" / "links.jsonl").read_text().splitlines()]
    assert Counter(r["reason"] for r in links) == stats.link_rejects
    assert stats.link_proposals == stats.links_accepted + len(links)
    abandoned = [json.loads(line) for line in (output / "rejects" / "chains.jsonl").read_text().splitlines()]
    assert Counter(r["reason"] for r in abandoned) == stats.chain_rejects
    # Accepted links: k - 1 per finished chain, plus those reached by chain attempts abandoned later.
    finished = sum((k - 1) * count for k, count in stats.hop_counts.items())
    assert stats.links_accepted == finished + sum(len(c["source_ids"]) - 1 for c in abandoned)
    sources = [json.loads(line) for line in (output / "rejects" / "sources.jsonl").read_text().splitlines()]
    assert Counter(r["reason"] for r in sources) == stats.source_rejects
    assert stats.sources_read == stats.sources_executable + len(sources) == 1319
    card = (output / "README.md").read_text()
    assert f"{100 * stats.acceptance_rate:.1f} %" in card
    for reason in stats.link_rejects:
        assert reason in card
    stored = json.loads((output / ".curate" / "stats.json").read_text())
    assert stored["hop_counts"] == {str(k): v for k, v in sorted(stats.hop_counts.items())}


def test_same_seed_same_chains_and_a_tampered_row_is_caught(shared_data, tmp_path):
    source = str(shared_data / "gsm8k" / "test.jsonl")
    spec = InputSpec(path=source, text_key="question")
    for name in ("a", "b"):
        run_multihop(MultihopJob(input=source, output=tmp_path / name, n=30, hops="3-3", seed=7, cleaning=Cleaning()),
                     progress=False)
    a = pq.read_table(tmp_path / "a" / "data" / "full-00000.parquet").to_pylist()
    b = pq.read_table(tmp_path / "b" / "data" / "full-00000.parquet").to_pylist()
    assert a == b
    problems, _ = load_sources(spec, progress=False)
    sources = {p.id: p for p in problems}
    row = a[0]
    assert reexecute(row, sources) == row["answer"]
    tampered = {**row, "hops": [dict(h) for h in row["hops"]]}
    tampered["hops"][1]["substituted_value"] = format_number(parse_number(tampered["hops"][1]["substituted_value"]) + 1)
    with pytest.raises(ChainMismatch):
        reexecute(tampered, sources)


def test_a_value_that_reaches_plain_text_arithmetic_is_not_linked():
    # The depreciation is computed in plain text: re-executing the annotations alone keeps the old 300.
    boat = problem("A boat costs $1000. It loses 30% of its value. What is it worth?",
                   "It loses 1000(.30)=300\n1000-300=<<1000-300=700>>700\n#### 700")
    cost = next(i for i, g in enumerate(boat.solution.givens) if g.text == "1000")
    assert check_link(boat, cost, Fraction(2000), 10.0) == ("value_in_unannotated_arithmetic", None)
    # A computed value restated in a plain equation ("$250-$50=$200") is the same failure one step later.
    seats = problem("A cab costs $750. Seats cost a third of the cab and boards $50 less than the seats. "
                    "What do the seats and boards cost together?",
                    "Seats: $750/3=$<<750/3=250>>250.\nBoards: $250-$50=$200\nTogether: <<250+200=450>>450\n#### 450")
    cab = next(i for i, g in enumerate(seats.solution.givens) if g.text == "750")
    assert check_link(seats, cab, Fraction(900), 10.0) == ("value_in_unannotated_arithmetic", None)
    # "half of it" in words, with no annotation on that line to restate.
    half = problem("Ann has 40 stickers. She gives half of them away and buys 5. How many has she?",
                   "She gives away half of 40, which is 20.\n<<40-20+5=25>>25\n#### 25")
    forty = next(i for i, g in enumerate(half.solution.givens) if g.text == "40")
    assert check_link(half, forty, Fraction(60), 10.0) == ("value_in_unannotated_arithmetic", None)
    five = problem("Ann has 40 stickers and buys 5 more: five new ones. How many has she?", "<<40+5=45>>45\n#### 45")
    index = next(i for i, g in enumerate(five.solution.givens) if g.text == "5")
    assert check_link(five, index, Fraction(7), 10.0) == ("replaced_value_also_in_words", None)


def test_a_restated_annotation_is_not_plain_text_arithmetic():
    speeds = problem("Tom drives at 70 mph and Bob at 55 mph. How much faster is Tom?",
                     "Tom is faster by 70 mph - 55 mph = <<70-55=15>>15 mph.\n#### 15")
    seventy = next(i for i, g in enumerate(speeds.solution.givens) if g.text == "70")
    assert check_link(speeds, seventy, Fraction(80), 10.0) == (None, Fraction(25))
    third = problem("A boy has 12 oranges and gives a third of them away. How many does he give?",
                    "He gives a third of 12 oranges, 12*(1/3) = <<12*(1/3)=4>>4 oranges\n#### 4")
    assert check_link(third, 0, Fraction(15), 10.0) == (None, Fraction(5))


def test_a_link_whose_answer_ignores_the_value_is_rejected():
    # Both players' free space shrinks by the same capacity: the difference is 40 whatever it is.
    songs = problem("Each player stores 100 songs. Gabe has 20 songs and Lu has 3 times as many. "
                    "How many fewer songs can Lu add than Gabe?",
                    "<<100-20=80>>80\n<<20*3=60>>60\n<<100-60=40>>40\n<<80-40=40>>40\n#### 40")
    capacity = next(i for i, g in enumerate(songs.solution.givens) if g.text == "100")
    reason, _ = check_link(songs, capacity, Fraction(150), 10.0)
    assert reason in ("answer_ignores_substitute", "changed_value_has_another_meaning")
    ratio = problem("Sue saves 25% of a $1000 salary and needs 40% of it for 10 years. How many years must she work?",
                    "<<40*.01*1000=400>>400\n<<10*400=4000>>4000\n<<1000*25*.01=250>>250\n<<4000/250=16>>16\n#### 16")
    salary = next(i for i, g in enumerate(ratio.solution.givens) if g.text == "1000")
    assert check_link(ratio, salary, Fraction(1500), 10.0) == ("answer_ignores_substitute", None)


def shared_record(shared_data, line: int) -> dict:
    return json.loads((shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[line])


@pytest.mark.parametrize("line, replaced, value, reason", [
    (1270, "9000", 31800, "value_in_unannotated_arithmetic"),  # Gary's boat: "9000(.30)=2700"
    (640, "7,500", 7200, "value_in_unannotated_arithmetic"),  # Bill's truck: "$2500-$500=$2000"
    (1105, "100,000", 150000, "answer_ignores_substitute"),  # Lauren: 40 years whatever the salary
])
def test_the_known_wrong_links_are_rejected(shared_data, line, replaced, value, reason):
    record = shared_record(shared_data, line)
    source = problem(record["question"], record["answer"])
    index = next(i for i, g in enumerate(source.solution.givens) if g.text == replaced)
    assert check_link(source, index, Fraction(value), 10.0) == (reason, None)


def test_the_independent_evaluator_follows_plain_text_arithmetic(shared_data):
    gary = shared_record(shared_data, 1270)
    # 31800 * 0.7 * 0.7 * 0.8, through three equations written outside the annotations.
    assert reexecute_hop(gary["question"], gary["answer"], "9000", Fraction(31800)) == Fraction("12465.6")
    bill = shared_record(shared_data, 640)
    assert reexecute_hop(bill["question"], bill["answer"], "7,500", Fraction(7200)) == 43000
    # What annotation-only re-execution stored before this check existed is caught as a mismatch.
    shown = bill["question"].replace("$7,500", "$X1")
    row = {"answer": "43100", "hops": [
        {"source_id": "nat", "question": NATALIA_Q, "answer": "72"},
        {"source_id": "bill", "question": shown, "answer": "43100"},
    ]}
    raw = {"nat": {"question": NATALIA_Q, "answer": NATALIA_A}, "bill": bill}
    row["hops"][1]["question"] = bill["question"].replace("$7,500", "$X1")
    assert check_row(row, raw).status == "mismatch"
    lauren = shared_record(shared_data, 1105)
    row = {"answer": "40", "hops": [row["hops"][0], {"source_id": "lauren", "answer": "40",
                                                     "question": lauren["question"].replace("100,000", "X1")}]}
    verdict = check_row(row, {**raw, "lauren": lauren})
    assert verdict.status == "mismatch" and "does not depend" in verdict.reason


def test_the_independent_evaluator_refuses_to_guess():
    with pytest.raises(Unchecked, match="changed_value_equals_another_given"):
        # 6 children * $20 = $120, and a pass also costs $120: which 120 a later step means is unknown.
        reexecute_hop("A pass costs $120. Tickets cost $20 and $35; they are 1 adult and 6 children. What is the total?",
                      "6 * $20 = $<<6*20=120>>120\n$120 + $35 = $<<120+35=155>>155\n#### 155", "6", Fraction(7))
    with pytest.raises(Unchecked, match="changed_value_in_word_arithmetic"):
        reexecute_hop("Ann has 40 stickers and buys 5. How many has she?",
                      "She keeps half of 40, so 20.\n<<20+5=25>>25\n#### 25", "40", Fraction(60))


def test_a_thousand_chains_from_gsm8k_train_and_test_reexecute_independently(shared_data, tmp_path):
    """The second evaluator (tests/support/gsm8k_reexec.py) re-does every computation written in each raw
    source solution, annotated or not, and must agree with every chain it can check."""
    source = shared_data / "gsm8k" / "t*[nt].jsonl"  # train.jsonl and test.jsonl, not test_socratic
    output = tmp_path / "multihop"
    result = run_multihop(MultihopJob(input=str(source), output=output, n=1000, hops="2-4", seed=0, cleaning=Cleaning()),
                          progress=False)
    raw = {}
    for name in ("train.jsonl", "test.jsonl"):
        for position, line in enumerate((shared_data / "gsm8k" / name).read_text().splitlines()):
            raw[f"{name}/{position}"] = json.loads(line)
    full = pq.read_table(output / "data" / "full-00000.parquet").to_pylist()
    assert len(full) == 1000
    verdicts = Counter()
    mismatches = []
    for row in full:
        verdict = check_row(row, raw)
        verdicts[verdict.status] += 1
        if verdict.status == "mismatch":
            mismatches.append((row["id"], verdict.reason))
    assert not mismatches, mismatches[:5]
    unchecked = verdicts["unchecked"] / len(full)
    print(f"independently checked {verdicts['match']} of {len(full)} chains; unchecked share {unchecked:.1%}")
    assert unchecked < 0.02
    assert {"train.jsonl", "test.jsonl"} <= {h["source_id"].split("/")[0] for row in full for h in row["hops"]}
    card = (output / "README.md").read_text()
    for reason in ("value_in_unannotated_arithmetic", "answer_ignores_substitute"):
        assert reason in result.stats.link_rejects and reason in card
