import pytest

from curate.behaviors import Behavior, UnknownBehaviorError, parse_behavior, parse_behavior_list
from curate.classifiers import UnknownClassifierError, get_classifier, registered_names, resolve_name


def test_names_and_aliases():
    assert parse_behavior("subgoal") is Behavior.SUBGOAL_SETTING
    assert parse_behavior("backchaining") is Behavior.BACKWARD_CHAINING
    assert parse_behavior(" Verification ") is Behavior.VERIFICATION
    assert parse_behavior_list("backtracking,verification,backtracking") == [Behavior.BACKTRACKING, Behavior.VERIFICATION]


def test_unknown_behavior_lists_the_valid_ones():
    with pytest.raises(UnknownBehaviorError) as error:
        parse_behavior("reflection")
    message = str(error.value)
    for name in ("verification", "backtracking", "subgoal_setting", "backward_chaining", "subgoal", "backchaining"):
        assert name in message


def test_none_means_no_behavior_and_stands_alone():
    assert parse_behavior_list("none", allow_none=True) is None
    with pytest.raises(UnknownBehaviorError):
        parse_behavior_list("none,backtracking", allow_none=True)
    with pytest.raises(UnknownBehaviorError):
        parse_behavior_list("none")


def test_classifier_registry_resolves_family_to_its_measured_version():
    """'cues' names the version measured best on the latest blind test set (DEFAULT_VERSION), 'llm' the newest."""
    assert {f"cues_v{n}" for n in range(1, 7)} <= set(registered_names())
    assert resolve_name("cues") == ("cues_ngram_v1", None) and resolve_name("llm") == ("llm_v1", None)
    assert get_classifier("cues_v1").name == "cues_v1" and get_classifier("cues").name == "cues_ngram_v1"
    with pytest.raises(UnknownClassifierError) as error:
        get_classifier("magic")
    assert "cues_v1" in str(error.value)
