"""The symbolic trace writer's words: the priming variants and their behaviors, each voice's sentence forms, and
what the teacher prompt asks for or forbids under each behavior (curate.builders.trace_templates writes with them)."""

from __future__ import annotations

from curate.behaviors import Behavior

V, B, S, C = Behavior.VERIFICATION, Behavior.BACKTRACKING, Behavior.SUBGOAL_SETTING, Behavior.BACKWARD_CHAINING

VARIANTS: dict[str, frozenset[Behavior]] = {
    "all_strategies": frozenset({V, B, S, C}),
    "only_backtracking": frozenset({B}),
    "backtracking_verification": frozenset({B, V}),
    "backtracking_subgoal": frozenset({B, S}),
    "backtracking_backward": frozenset({B, C}),
    "negative_control": frozenset(),
}
VOICES = ("terse", "explanatory", "conversational")
STRATEGIES = ("dfs", "best_first")
FAILURES = ("near_miss", "carry", "borrow", "swapped_digits", "number_used_twice", "number_left_out")
ANSWERS = ("correct", "incorrect", "any")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six")

# ------------------------------------------------------------------------------------------------ voices
# Each voice has its own banks; a move is said in one of several forms. Placeholders are filled only with
# given or derived values.
BANKS: dict[str, dict[str, list[str]]] = {
    "terse": {
        "open": ["{nums} -> {T}.", "nums {nums}, want {T}.", "Have {nums}. Make {T}."],
        "step": ["{eq}. left {rest}.", "{eq} ({rest})", "{eq}; {rest} remain."],
        "finals": ["{x}, {y}: {options}.", "{options}."],
        "conclude": ["answer: {expr}", "so {expr}.", "-> {expr}"],
        "compare_fail": ["none is {goal}. nearest {c}: {diff}.", "no {goal}. best {c} ({diff})."],
        "confirm": ["{goal}. yes.", "{goal}, matches.", "that's {goal}. ok."],
        "check_step": ["check {inv}. ok.", "({inv}, ok)"],
        "final_check": ["verify: {chain}. ok.", "recheck {chain}. fine."],
        "give_up": ["out of tries. {c} is nearest ({diff}). going with it.",
                    "stop here with {c}; {diff}."],
        "recompute": ["recompute: {chain}.", "redo: {chain}."],
        "back_abandon": ["back to {need} from {pool}.", "again: {pool} -> {need}."],
        "abandon": ["back to {state}.", "try again from {state}.", "scrap that. {state} again."],
        "plan_forward": ["plan: pair two, then fold in the rest one at a time.",
                         "plan: merge two numbers, repeat until one is left."],
        "plan_backward": ["plan: pick the last operation, derive what the rest must make, repeat down to a pair.",
                          "plan: peel operations off the end until a pair is left."],
        "subgoal_pair": ["sub-goal: {a} and {b} into one number.", "sub-goal now: merge {a}, {b}."],
        "stage": ["[{num}] ", "{num}: "],
        "backward_intro": ["from {T} backwards.", "work back from {T}."],
        "back_need": ["{n} last ({form}): {eq}. need {need} from {pool}.",
                      "say {form}: {eq}, so {pool} -> {need}."],
        "back_split": ["{side_eq}; {form} last: {eq}. need {need} from {pool}.",
                       "pair off {c}, {d}: {side_eq}. say {form}: {eq}, so {pool} -> {need}."],
        "back_subgoal": ["sub-goal: {need} from {pool}.", "goal: {pool} -> {need}."],
    },
    "explanatory": {
        "open": ["We are given the numbers {nums} and must combine all of them to make {T}.",
                 "The task is to reach {T} using each of {nums} exactly once.",
                 "I have {nums}, and every one of them has to be used once to get {T}."],
        "step": ["Combining {a} and {b}: {eq}, which leaves {rest}.",
                 "I take {eq}; the numbers still available are {rest}.",
                 "With {eq}, what remains is {rest}.",
                 "Let me compute {eq}. That leaves {rest}."],
        "finals": ["From {x} and {y} I can get {options}.",
                   "The remaining two, {x} and {y}, give {options}.",
                   "Now only {x} and {y} are left: {options}."],
        "conclude": ["So the expression is {expr}.", "The final expression is {expr}.",
                     "Putting it together: {expr}."],
        "compare_fail": ["None of these equals {goal}; the nearest is {c}, since {diff}.",
                         "No result here is {goal}. The closest is {c}: {diff}, so it misses by {d}.",
                         "That does not produce {goal}: the best is {c}, and {diff}."],
        "confirm": ["That is exactly {goal}, as required.", "This equals {goal}, which is what I wanted.",
                    "{goal} is precisely the value asked for."],
        "check_step": ["To confirm that result, {inv}.", "Checking it with the inverse operation: {inv}, as it should be.",
                       "A quick check of that result: {inv}."],
        "final_check": ["Let me verify the whole expression: {chain}.",
                        "To double-check, I recompute it: {chain}.",
                        "Verifying from the beginning: {chain}. Everything is consistent."],
        "give_up": [("I have not found an exact solution, and {c} is the closest I reached ({diff}), so I will stop "
                    "there and give that expression."),
                    "Since no attempt has hit it exactly, I will settle for {c}; {diff}, so it is off by {d}."],
        "recompute": ["Recomputing that expression: {chain}.", "Working it through once more: {chain}."],
        "back_abandon": ["Let me return to the problem of making {need} from {pool} and try another option.",
                         "Going back to making {need} from {pool}.",
                         "I will try a different last operation for {need} from {pool}."],
        "abandon": ["Let me go back to {state} and try a different combination.",
                    "I will return to {state} and choose another pair this time.",
                    "Starting again from {state} with a different choice.",
                    "Let me abandon this line and go back to {state}."],
        "plan_forward": [("My plan is to combine two numbers into one, then bring in the remaining numbers one at a "
                         "time until a single value is left."),
                         ("I will break this into stages: merge a pair first, and then fold in each of the other "
                         "numbers in turn.")],
        "plan_backward": [("My plan is to decide which operation comes last, work out what the others must then "
                          "make, and repeat that until only a pair is left."),
                          ("I will split the problem from the end: choose the final operation, derive the value the "
                          "rest must produce, and solve that smaller problem the same way.")],
        "subgoal_pair": ["The sub-goal now is to turn {a} and {b} into a single number.",
                         "Sub-goal for this stage: merge {a} with {b}."],
        "stage": ["Stage {num}: ", "{Ord} stage: "],
        "backward_intro": ["I will reason backward, starting at {T}.",
                           "Let me work backwards, starting from {T}."],
        "back_need": ["If {n} is used last, as in {form}, then {eq}, so {pool} would have to make {need}.",
                      ("Suppose the last operation is {form}. Then {eq}, and the remaining {pool} must produce "
                      "{need}."),
                      "Taking {form} as the final operation means {eq}; so {pool} need to give {need}."],
        "back_split": [("Another possible ending pairs {c} with {d}: {side_eq}. If the last operation is {form}, "
                       "then {eq}, so {pool} would have to make {need}."),
                       ("Suppose {c} and {d} are combined on their own, {side_eq}, and the final operation is "
                       "{form}. Then {eq}, and {pool} must produce {need}.")],
        "back_subgoal": ["That gives a smaller sub-goal: make {need} from {pool}.",
                         "New sub-goal: obtain {need} using {pool}."],
    },
    "conversational": {
        "open": ["Okay, so I've got {nums} and I need {T}.", "Hmm, {nums}, and the goal is {T}. Let's see.",
                 "Alright: numbers {nums}, target {T}."],
        "step": ["Let me try {eq}. Then I've got {rest}.", "What about {eq}? That leaves {rest}.",
                 "How about {eq}, so now {rest}.", "Maybe {eq}. Now I have {rest}."],
        "finals": ["With {x} and {y} I can do {options}.", "So {x} and {y}: {options}.",
                   "Hmm, {x} and {y}: {options}."],
        "conclude": ["So my answer is {expr}.", "That gives the expression {expr}.", "So it's {expr}."],
        "compare_fail": ["Hmm, none of those is {goal}. The closest is {c}, but {diff}.",
                         "Nope, no {goal} there. {c} is the nearest, and {diff}.",
                         "That doesn't hit {goal}; {c} is nearest, and {diff}, so it's off by {d}."],
        "confirm": ["Oh nice, that's {goal}!", "Yes, that's exactly {goal}.", "That works, {goal}."],
        "check_step": ["Let me double-check: {inv}. Right.", "Sanity check, {inv}. Good."],
        "final_check": ["Let me check the whole thing again: {chain}. Yep.",
                        "Just to be sure: {chain}. Looks right."],
        "give_up": ["I'm not finding it exactly. {c} is the best I've got ({diff}), so I'll go with that.",
                    "Okay, I'll stop here with {c}, even though {diff}."],
        "recompute": ["Let me work it out again: {chain}.", "Redoing it: {chain}."],
        "back_abandon": ["Let me go back to making {need} from {pool}.", "Hmm, back to getting {need} out of {pool}.",
                         "Okay, {need} from {pool} again, some other way."],
        "abandon": ["Let me go back to {state} and try something else.", "Hmm, back to {state}.",
                    "Okay, let me start over from {state}.", "Let me try a different pair from {state}."],
        "plan_forward": ["Let me plan this: first squash two numbers together, then add in the others one by one.",
                         "Plan: combine a pair first, then deal with the rest one number at a time."],
        "plan_backward": [("Here's my plan: pick what goes last, figure out what the rest has to make, and keep "
                          "going down until there's a pair."),
                          "Plan: work out the last step first, then the one before it, down to two numbers."],
        "subgoal_pair": ["Mini-goal: get {a} and {b} into one number.", "Sub-goal: combine {a} and {b}."],
        "stage": ["Part {num}: ", "{Ord} part: "],
        "backward_intro": ["Let me work backwards from {T}.", "Maybe go backwards from {T}."],
        "back_need": ["What if {n} goes last, like {form}? Then {eq}, so {pool} has to make {need}.",
                      "If it ends with {form}, then {eq}. So I'd need {need} out of {pool}."],
        "back_split": [("What if {c} and {d} go together, {side_eq}, and it ends with {form}? Then {eq}, so {pool} "
                        "has to make {need}."),
                       ("Or pair up {c} and {d}: {side_eq}, and finish with {form}. Then {eq}, so I'd need {need} "
                        "out of {pool}.")],
        "back_subgoal": ["So the sub-goal is {need} from {pool}.", "Mini-goal: {pool} to {need}."],
    },
}

# ------------------------------------------------------------------------------------------ the teacher prompt
DESCRIPTIONS = {
    V: "verification: compare intermediate results with the target and recompute the final expression",
    B: "backtracking: when a path fails, return to an earlier state and try another combination",
    S: "subgoal setting: state a plan and the intermediate stages, then follow them",
    C: "backward chaining: start from the target and derive what the last operation needs from the others",
}
OMIT = {
    V: "Omit every evaluation: never compare a result with the target, never say a result is close, right, wrong "
       "or not the target; state each result and, at the end, the answer.",
    B: "Make a single attempt: never abandon a path or go back to an earlier state.",
    S: "Do not announce a plan, stages or intermediate targets.",
    C: "Reason forward from the numbers only; never work back from the target.",
}
