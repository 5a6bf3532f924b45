"""The pieces the LLM judges share (is_solution, the priming judge, the on-policy judge): a document-first prompt
filled by plain replacement, the last flat JSON object of a reply, and a yes/no field."""

from __future__ import annotations

from curate.classifiers.llm import DocumentPrompt, flat_json_objects_last_first, read_flag


def test_fields_fill_the_prompt_before_the_document_goes_in():
    prompt = DocumentPrompt("sys", "Target: {target}\n<doc>\n{document}\n</doc>", "Is {target} reached? {gold}", "v1")
    document = "I wrote {target} and {gold} and {document} on purpose."
    system, user = prompt.render(document, target="24", gold="4")
    assert system == {"role": "system", "content": "sys"}
    # Written out by hand: the placeholders of the prompt are filled, those inside the document stay as written.
    assert user["content"] == (
        "Target: 24\n<doc>\nI wrote {target} and {gold} and {document} on purpose.\n</doc>\n\nIs 24 reached? 4"
    )
    without_question = DocumentPrompt("sys", "<doc>{document}</doc>", None, "v1")
    assert without_question.render("x {y}")[1]["content"] == "<doc>x {y}</doc>"


def test_the_last_readable_flat_object_comes_first():
    reply = 'Example: {"correct": true}. <b>{not json}</b> {"outer": {"correct": false}} {"correct": "no"} [1]'
    objects = list(flat_json_objects_last_first(reply))
    # Nested objects are not flat: only their inner {...} is a candidate; unreadable braces are passed over.
    assert objects == [{"correct": "no"}, {"correct": False}, {"correct": True}]
    assert list(flat_json_objects_last_first("{'correct': true}")) == []  # nothing is repaired


def test_a_flag_is_a_boolean_or_one_of_its_words():
    values = (True, False, "Yes", " no ", 1, 0, "1")
    assert [read_flag(v) for v in values] == [True, False, True, False, True, False, True]
    assert [read_flag(v) for v in (None, 2, "maybe", 1.0, [True])] == [None] * 5
    assert read_flag("Correct", {"correct"}, {"incorrect"}) is True and read_flag("yes", {"correct"}, {"no"}) is None
