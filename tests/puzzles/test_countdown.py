import random
from fractions import Fraction

import pytest

from curate.puzzles.countdown import (
    check_expression,
    expression_of,
    generate_problem,
    score_countdown,
    search_leaves,
    solve,
    wrong_expression,
)


@pytest.mark.parametrize(
    "n_numbers, number_range, target_range, integer_division",
    [(3, (1, 99), (10, 100), True), (4, (1, 99), (10, 100), True), (5, (1, 20), (1, 500), True),
     (4, (1, 12), (1, 50), False)],
)
def test_generated_problems_are_solvable(n_numbers, number_range, target_range, integer_division):
    rng = random.Random(7)
    for _ in range(40):
        problem = generate_problem(rng, n_numbers, number_range, target_range, integer_division)
        assert len(problem.numbers) == n_numbers
        assert all(number_range[0] <= n <= number_range[1] for n in problem.numbers)
        assert target_range[0] <= problem.target <= target_range[1]
        assert check_expression(problem.solution, problem.numbers, problem.target).status == "correct"
        assert solve(problem.numbers, problem.target, integer_division) is not None


def test_generator_is_seeded():
    assert generate_problem(random.Random(3)) == generate_problem(random.Random(3))


def test_solver_reports_unsolvable_and_respects_integer_division():
    assert solve((1, 1), 5) is None
    assert solve((2, 3), 6) in {"2 * 3", "3 * 2"}
    found = solve((1, 3, 4, 6), 24, integer_division=False)
    assert found is not None and check_expression(found, (1, 3, 4, 6), 24).status == "correct"
    assert solve((1, 3, 4, 6), 24, integer_division=True) is None  # only 6 / (1 - 3 / 4) reaches 24


def test_generator_rejects_bad_ranges():
    with pytest.raises(ValueError):
        generate_problem(random.Random(0), n_numbers=1)
    with pytest.raises(ValueError):
        generate_problem(random.Random(0), number_range=(5, 1))
    with pytest.raises(ValueError, match="widen"):
        generate_problem(random.Random(0), n_numbers=2, number_range=(1, 2), target_range=(1000, 2000), max_tries=50)


NUMBERS, TARGET = (25, 3, 7, 2), 53


@pytest.mark.parametrize("expression, status", [
    ("25 * 2 + 3 + 7 - 7", "invalid"),  # 7 used twice
    ("25 * 2 + 3", "invalid"),  # 7 missing
    ("25 * 2 + 3 + 7", "wrong"),
    ("25 * 2 + (7 - 3) - 1", "invalid"),  # 1 is not given
    ("(25 - 7 + 3) * 2", "wrong"),
    ("25 * 2 + 7 - 3 - 2 + 2", "invalid"),
    ("(25 + 7 - 3) * 2 - 5", "invalid"),
    ("25 × 2 + 3 ÷ 3 * 7 - 7", "invalid"),
    ("2 * 25 + 3 * (7 - 7)", "invalid"),
    ("25 * 2 + 3 * (7 / 7)", "invalid"),
    ("(25 + 3 - 2) * 7 / 7", "invalid"),
    ("2 × 25 + 3 × 7 ÷ 7", "invalid"),
])
def test_verifier_checks_multiset(expression, status):
    assert check_expression(expression, NUMBERS, TARGET).status == status


def test_verifier_accepts_correct_forms():
    for expression in ["25 * 2 + 3", "(25 * 2) + 3"]:
        assert check_expression(expression, (25, 2, 3), 53).status == "correct"
    assert check_expression("25 × 2 + 3", (25, 2, 3), 53).status == "correct"
    assert check_expression("(25 − 2) ÷ 23 + 52", (25, 2, 23, 52), 53).status == "correct"
    assert check_expression("25 * 2 + 3 = 53", (25, 2, 3), 53).status == "correct"
    assert check_expression("8 / 3 * 3", (8, 3, 3), 8).status == "correct"  # exact, no float error
    assert check_expression("1 / 3 + 1 / 3 + 1 / 3", (1, 3, 1, 3, 1, 3), 1).value == Fraction(1)


ADVERSARIAL = [
    "9**9**9**9**9",
    "2 ** 10000000",
    "__import__('os').system('echo pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "open('/etc/passwd').read()",
    "lambda: 1",
    "(" * 200 + "1" + ")" * 200,
    "(" * 30 + "25 * 2 + 3" + ")" * 30,
    "(" * 100_000 + "1" + ")" * 100_000,
    "1" + " + 1" * 100_000,
    "٢٥ * 2 + 3",  # Arabic-Indic digits
    "25 * ２ + 3",  # full-width digit
    "25 * 2 + ³",
    "25 * 2 + 3.0",
    "25 * 2 + 3e0",
    "25 * 2 + 0x3",
    "25 * 2 + True",
    "-25 * -2 + 3",
    "25 * 2 + 3 / 0",
    "25 // 2 + 3",
    "25 % 2 + 3",
    "[25, 2, 3]",
    "25 2 3",
    "",
    "   ",
    "25 * 2 + 3\n__import__('os')",
    None,
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("expression", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_verifier_rejects_adversarial_input(expression):
    check = check_expression(expression, (25, 2, 3), 53)
    assert check.status == "invalid"
    assert check.reason


def test_reward_edge_cases():
    truth = {"numbers": [25, 2, 3], "target": 53}
    prompt = "for example <answer> (1 + 2) / 3 </answer>.\nAssistant: <think>...</think>"
    assert score_countdown(prompt + "<answer> 25 * 2 + 3 </answer>", truth) == 1.0
    assert score_countdown("<answer>25*2+3</answer>", truth) == 1.0
    assert score_countdown("<answer> 25 * 2 - 3 </answer>", truth) == 0.0
    assert score_countdown("<answer> 25 * 2 - 3 </answer>", truth, format_score=0.1) == 0.1
    assert score_countdown("<answer> 25 * 2 </answer>", truth, format_score=0.1) == 0.0  # not well-formed
    assert score_countdown("<answer> __import__('os') </answer>", truth, format_score=0.1) == 0.0
    assert score_countdown("25 * 2 + 3", truth) == 0.0  # no tags
    assert score_countdown("", truth) == 0.0
    assert score_countdown(None, truth) == 0.0
    assert score_countdown("<answer>1</answer><answer> 25 * 2 + 3 </answer>", truth) == 1.0  # last one counts
    assert score_countdown("<answer> 25 * 2 + 3 </answer>", {"numbers": [25, 2, 3]}) is None
    assert score_countdown("<answer> 25 * 2 + 3 </answer>", {"numbers": "x", "target": 53}) is None
    assert score_countdown("<answer> 25 * 2 + 3 </answer>", {"numbers": ["25", "2", "3"], "target": "53"}) == 1.0


def test_wrong_expression_is_well_formed_and_wrong():
    rng = random.Random(1)
    for _ in range(30):
        problem = generate_problem(rng)
        assert check_expression(wrong_expression(problem, rng), problem.numbers, problem.target).status == "wrong"


@pytest.mark.parametrize("strategy", ["dfs", "best_first", "bfs"])
def test_search_reaches_a_solution_the_verifier_accepts(strategy):
    rng = random.Random(2)
    for _ in range(20):
        problem = generate_problem(rng)
        leaves = search_leaves(problem.numbers, problem.target, strategy, random.Random(0))
        leaf = next(leaf for leaf in leaves if leaf.solution is not None)
        assert len(leaf.values) == 2 and len(leaf.path) == len(problem.numbers) - 2
        expression = expression_of(problem.numbers, leaf.path + (leaf.solution,))
        assert check_expression(expression, problem.numbers, problem.target).status == "correct"
    with pytest.raises(ValueError):
        next(search_leaves((1, 2), 3, "random_walk"))


def test_breadth_first_levels_keep_a_small_beam_and_reach_the_target():
    from curate.puzzles.countdown import search_levels

    rng = random.Random(3)
    for _ in range(20):
        problem = generate_problem(rng)
        levels, finals = search_levels(problem.numbers, problem.target, random.Random(1), beam=3)
        assert [level.depth for level in levels] == list(range(1, len(problem.numbers) - 1))
        for level in levels:
            assert 1 <= len(level.kept) <= 3 and set(level.kept) <= set(level.candidates)
            assert all(len(path) == level.depth for path in level.candidates)
        assert len(levels[0].candidates) >= 2
        leaf = next(leaf for leaf in finals if leaf.solution is not None)
        expression = expression_of(problem.numbers, leaf.path + (leaf.solution,))
        assert check_expression(expression, problem.numbers, problem.target).status == "correct"


def test_problem_statement_is_the_line_the_labeled_sets_show_above_each_trace():
    from curate.puzzles.countdown import problem_statement
    from evals.blindset.resolve import countdown_text

    trace = {"numbers": [48, 12, 9], "target": 45, "text": "12 - 9 = 3. 48 - 3 = 45."}
    assert problem_statement({"numbers": [48, 12, 9], "target": 45}) == "Numbers: [48, 12, 9], target: 45"
    assert countdown_text(trace) == problem_statement(trace) + "\n\n" + trace["text"]
    assert problem_statement('{"numbers": [3, 5], "target": 15}') == "Numbers: [3, 5], target: 15"
    for not_countdown in (None, "42", "not json", {"answer": 3}, {"numbers": [], "target": 3},
                          {"numbers": [1.5, 2], "target": 3}, {"numbers": [1, 2], "target": "3"}, [1, 2]):
        assert problem_statement(not_countdown) is None
