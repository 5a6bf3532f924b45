"""verl's custom reward file: `reward.custom_reward_function.path` (name: `compute_score`).

It defines nothing and only imports the installed registry, so it loads however verl loads it: verl 0.9.1 executes a
file by path under a generated module name that it keeps out of `sys.modules` (a module that defines dataclasses
under postponed annotations, as the registry does, then fails), older verl registers it as `custom_module`, and
`pkg://curate.rewards.verl_reward` imports it as a package module. curate must be installed in the trainer's Python.
"""

import importlib.util
import sys

for _needed, _why in (("curate", "the reward registry"), ("math_verify", "the math-answer check")):
    if importlib.util.find_spec(_needed) is None:
        raise ImportError(f"{_why} ({_needed}) is not installed in the trainer's Python ({sys.executable}); "
                          "install curate there: pip install -e PATH/TO/curate")

from curate.rewards.registry import compute_score  # noqa: E402  (after the check that says how to install it)

__all__ = ["compute_score"]
