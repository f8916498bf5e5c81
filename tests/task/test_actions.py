"""The strict action parser: every error code, every recovery path, and robustness on any text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures import all_dash_action_text, fixture_row, role_action_text, valid_plan_values
from travel.task.actions import PARSER_ERROR_CODES, ParseResult, parse_assignments
from travel.task.fields import PLAN_FIELDS


def action(agent_id: int = 0, items=None, **extra) -> dict:
    items = [{"day": 1, "field": "current_city", "value": "from Alpha to Beta"}] if items is None else items
    return {"agent_id": agent_id, "assignments": items, **extra}


def parse(text, expected_agent_id: int = 0, capacity: int = 9, days: int = 3) -> ParseResult:
    return parse_assignments(text, expected_agent_id, capacity, days, PLAN_FIELDS)


def assert_consistent(result: ParseResult) -> None:
    assert result.error == ",".join(result.error_codes)
    assert set(result.error_codes) <= set(PARSER_ERROR_CODES)
    assert len(set(result.error_codes)) == len(result.error_codes)
    assert result.parse_success == (result.error_codes == ())


def test_known_codes_are_the_eleven_of_the_specification():
    assert set(PARSER_ERROR_CODES) == {
        "not_strict_json", "decode_failed", "top_level_type", "top_level_schema", "invalid_agent_id",
        "agent_id_mismatch", "assignments_type", "assignment_schema", "assignment_value", "self_duplicate",
        "capacity_exceeded",
    }
    assert len(PARSER_ERROR_CODES) == 11


# ---- strict success ---------------------------------------------------------------------------


@pytest.mark.parametrize("agent_id, expected_items", [(0, 9), (1, 12)])
def test_fixture_role_texts_parse_strictly_with_exactly_the_owned_count(agent_id, expected_items):
    row = fixture_row()
    plan = valid_plan_values(row)
    result = parse(role_action_text(agent_id, plan, 3), expected_agent_id=agent_id, capacity=expected_items)
    assert result.parse_success and result.strict_json and result.schema_valid and result.decode_success
    assert result.agent_id == agent_id and result.agent_id_match and result.capacity_valid
    assert result.raw_item_count == len(result.assignments) == expected_items
    assert result.invalid_item_count == 0 and result.error == "" and result.error_codes == ()
    expected = [(day, field, plan[day - 1][field]) for day, field in [(a[0], a[1]) for a in result.assignments]]
    assert result.assignments == expected
    assert_consistent(result)


def test_all_dash_action_is_strict():
    result = parse(all_dash_action_text(1, 3), expected_agent_id=1, capacity=12)
    assert result.parse_success and {value for _, _, value in result.assignments} == {"-"}


def test_surrounding_whitespace_is_still_strict():
    assert parse("\n  " + json.dumps(action()) + "\n\n").strict_json


def test_empty_assignment_list_is_schema_valid():
    result = parse(json.dumps(action(items=[])))
    assert result.parse_success and result.raw_item_count == 0


# ---- recovery paths (decoded, not strict) -------------------------------------------------------


def assert_recovered_only(result: ParseResult, items: int = 1) -> None:
    assert result.decode_success and not result.strict_json and not result.parse_success
    assert result.error_codes == ("not_strict_json",)
    assert result.schema_valid and result.agent_id_match and len(result.assignments) == items
    assert_consistent(result)


@pytest.mark.parametrize("where", ["top", "item"])
def test_a_repeated_key_makes_the_action_not_strict(where):
    """json.loads would keep the last of two equal keys; a strict action repeats none (the object still
    decodes, through recovery)."""
    text = json.dumps(action())
    if where == "top":
        text = text.replace('{"agent_id": 0,', '{"agent_id": 1, "agent_id": 0,', 1)
    else:
        text = text.replace('"value": "from Alpha to Beta"', '"value": "x", "value": "from Alpha to Beta"', 1)
    assert text.count('"agent_id"' if where == "top" else '"value"') == 2
    repeated = parse(text)
    assert not repeated.strict_json and repeated.decode_success
    assert parse(json.dumps(action())).strict_json


@pytest.mark.parametrize("tag", ["json", "JSON", "python", "text", ""])
def test_markdown_fence_is_recovered_but_not_strict(tag):
    assert_recovered_only(parse(f"```{tag}\n{json.dumps(action())}\n```"))


def test_fence_blocks_are_joined_and_other_languages_ignored():
    # Without fence handling the scan would decode the yaml block's [9] first.
    text = "```yaml\n[9]\n```\nThen:\n```json\n" + json.dumps(action()) + "\n```"
    assert_recovered_only(parse(text))
    halves = "```json\n[[1, \"lunch\", \"Cafe, Beta\"],\n```\nand\n```json\n[2, \"dinner\", \"Bistro, Beta\"]]\n```"
    joined = parse(halves)
    assert joined.assignments == [(1, "lunch", "Cafe, Beta"), (2, "dinner", "Bistro, Beta")]


def test_unclosed_fence_from_a_truncated_generation_is_recovered():
    assert_recovered_only(parse("```json\n" + json.dumps(action())))


def test_python_literal_is_recovered_by_literal_eval():
    text = str(action(items=[{"day": 2, "field": "current_city", "value": "Beta"}]))
    assert text.startswith("{'agent_id'")
    result = parse(text)
    assert_recovered_only(result)
    assert result.assignments == [(2, "current_city", "Beta")]


def test_prose_around_the_object_is_scanned_to_the_first_decodable_bracket():
    text = "Note {this is not json} and [neither, is this]. Answer: " + json.dumps(action()) + " -- done {"
    assert_recovered_only(parse(text))


def test_scan_takes_the_first_decodable_bracket_even_if_it_is_a_list():
    result = parse("items [[1, \"lunch\", \"Cafe, Beta\"]] then " + json.dumps(action()))
    assert result.assignments == [(1, "lunch", "Cafe, Beta")] and result.agent_id is None


def test_top_level_list_is_the_assignment_list():
    result = parse(json.dumps([{"day": 1, "field": "lunch", "value": "Cafe, Beta"}]), expected_agent_id=1, capacity=12)
    assert result.strict_json and result.decode_success and not result.parse_success
    assert result.assignments == [(1, "lunch", "Cafe, Beta")]
    assert result.error_codes == ("top_level_schema", "invalid_agent_id")
    assert result.agent_id is None and not result.agent_id_match and not result.schema_valid


def test_slots_key_stands_in_for_assignments():
    payload = {"agent_id": 0, "slots": [{"day": 1, "field": "current_city", "value": "from Alpha to Beta"}]}
    result = parse(json.dumps(payload))
    assert result.assignments == [(1, "current_city", "from Alpha to Beta")]
    assert result.error_codes == ("top_level_schema",) and result.agent_id_match


def test_days_key_in_an_item_is_recovered_as_the_day():
    result = parse(json.dumps(action(items=[{"days": 2, "field": "accommodation", "value": "Hotel, Beta"}])))
    assert result.assignments == [(2, "accommodation", "Hotel, Beta")]
    assert result.error_codes == ("assignment_schema",) and result.invalid_item_count == 0


def test_three_element_list_items_are_recovered_but_not_strict():
    result = parse(json.dumps(action(items=[[1, "transportation", "Flight Number: F100, from Alpha to Beta"]])))
    assert result.assignments == [(1, "transportation", "Flight Number: F100, from Alpha to Beta")]
    assert result.error_codes == ("assignment_schema",) and not result.schema_valid


# ---- error codes ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["not json", "", "   ", "{", "```json\n```", "\x00\x01"])
def test_undecodable_text_fails_to_decode(text):
    result = parse(text)
    assert not result.decode_success and not result.strict_json and not result.parse_success
    assert result.error_codes == ("not_strict_json", "decode_failed")
    assert result.assignments == [] and result.raw_item_count == 0
    assert_consistent(result)


@pytest.mark.parametrize("text", ['"hello"', "42", "null", "true"])
def test_scalar_top_level_is_a_type_error_and_stops(text):
    result = parse(text)
    assert result.strict_json and result.decode_success
    assert result.error_codes == ("top_level_type",) and result.assignments == []


def test_extra_top_level_key_breaks_the_schema():
    result = parse(json.dumps(action(reasoning="because")))
    assert result.error_codes == ("top_level_schema",)
    assert result.strict_json and not result.schema_valid and not result.parse_success
    assert len(result.assignments) == 1


@pytest.mark.parametrize("agent_id", ["0", True, None, 0.0, [0]])
def test_non_integer_agent_id_is_invalid(agent_id):
    result = parse(json.dumps(action(agent_id=agent_id)))
    assert "invalid_agent_id" in result.error_codes and "agent_id_mismatch" not in result.error_codes
    assert result.agent_id is None and not result.agent_id_match and not result.parse_success


def test_missing_agent_id_is_invalid():
    result = parse(json.dumps({"assignments": []}))
    assert result.error_codes == ("top_level_schema", "invalid_agent_id")


def test_wrong_agent_id_is_a_mismatch():
    result = parse(json.dumps(action(agent_id=1)), expected_agent_id=0)
    assert result.error_codes == ("agent_id_mismatch",)
    assert result.agent_id == 1 and not result.agent_id_match and result.schema_valid


def test_without_an_expected_agent_any_integer_id_matches():
    assert parse_assignments(json.dumps(action(agent_id=7)), None, 9, 3).parse_success


@pytest.mark.parametrize("payload", [{"agent_id": 0, "assignments": "x"}, {"agent_id": 0}, {"agent_id": 0, "assignments": {}}])
def test_non_list_assignments_stop_the_parse(payload):
    result = parse(json.dumps(payload))
    assert "assignments_type" in result.error_codes
    assert result.assignments == [] and result.raw_item_count == 0 and not result.parse_success


@pytest.mark.parametrize(
    "item",
    [
        {"day": "1", "field": "lunch", "value": "Cafe, Beta"},
        {"day": True, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 1.0, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 1, "field": "lunch", "value": 12},
        {"day": 1, "field": 3, "value": "Cafe, Beta"},
        {"day": 1, "field": "lunch", "value": "Cafe, Beta", "note": "x"},
        {"field": "lunch", "value": "Cafe, Beta"},
    ],
)
def test_recovered_items_with_wrong_keys_or_types_break_the_item_schema(item):
    result = parse(json.dumps(action(agent_id=1, items=[item])), expected_agent_id=1, capacity=12)
    assert result.error_codes == ("assignment_schema",)
    assert len(result.assignments) == 1 and result.invalid_item_count == 0 and not result.schema_valid


@pytest.mark.parametrize("item", [5, "lunch: Cafe", {"day": 1, "field": "lunch"}, [1, "lunch"], None])
def test_unrecoverable_items_are_counted_invalid(item):
    good = {"day": 1, "field": "lunch", "value": "Cafe, Beta"}
    result = parse(json.dumps(action(agent_id=1, items=[good, item])), expected_agent_id=1, capacity=12)
    assert result.error_codes == ("assignment_schema",)
    assert result.invalid_item_count == 1 and result.raw_item_count == 2
    assert result.assignments == [(1, "lunch", "Cafe, Beta")]


@pytest.mark.parametrize(
    "item",
    [
        {"day": 4, "field": "lunch", "value": "Cafe, Beta"},  # past a 3-day trip
        {"day": 0, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 1, "field": "Lunch", "value": "Cafe, Beta"},  # fields are case-sensitive here
        {"day": 1, "field": "snack", "value": "Cafe, Beta"},
        {"day": 1, "field": "lunch", "value": ""},
        {"day": 1, "field": "lunch", "value": " \n\t"},
    ],
)
def test_out_of_range_days_unknown_fields_and_blank_values_are_value_errors(item):
    result = parse(json.dumps(action(agent_id=1, items=[item])), expected_agent_id=1, capacity=12)
    assert result.error_codes == ("assignment_value",)
    assert result.strict_json and not result.schema_valid and not result.parse_success
    assert len(result.assignments) == 1


def test_valid_fields_are_the_callers_choice():
    text = json.dumps(action(agent_id=1, items=[{"day": 1, "field": "lunch", "value": "Cafe, Beta"}]))
    assert parse_assignments(text, 1, 4, 1, ("breakfast",)).error_codes == ("assignment_value",)


def test_repeated_slot_is_a_self_duplicate_and_both_items_are_returned():
    items = [
        {"day": 2, "field": "lunch", "value": "Cafe, Beta"},
        {"day": 2, "field": "lunch", "value": "Diner, Beta"},
    ]
    result = parse(json.dumps(action(agent_id=1, items=items)), expected_agent_id=1, capacity=12)
    assert result.error_codes == ("self_duplicate",)
    assert result.schema_valid and not result.parse_success and len(result.assignments) == 2


def test_self_duplicate_compares_fields_casefolded():
    items = [{"day": 2, "field": "lunch", "value": "Cafe, Beta"}, {"day": 2, "field": "LUNCH", "value": "Cafe, Beta"}]
    result = parse(json.dumps(action(agent_id=1, items=items)), expected_agent_id=1, capacity=12)
    assert "self_duplicate" in result.error_codes


def test_same_field_on_different_days_is_no_duplicate():
    items = [{"day": 1, "field": "lunch", "value": "-"}, {"day": 2, "field": "lunch", "value": "Cafe, Beta"}]
    assert parse(json.dumps(action(agent_id=1, items=items)), expected_agent_id=1, capacity=12).parse_success


def test_more_items_than_capacity_exceed_it_counting_invalid_items():
    items = [{"day": 1, "field": "lunch", "value": "Cafe, Beta"}, 42]
    result = parse(json.dumps(action(agent_id=1, items=items)), expected_agent_id=1, capacity=1)
    assert result.error_codes == ("assignment_schema", "capacity_exceeded")
    assert result.raw_item_count == 2 and not result.capacity_valid
    exact = parse(json.dumps(action(agent_id=1, items=items[:1])), expected_agent_id=1, capacity=1)
    assert exact.capacity_valid and exact.parse_success


def test_codes_accumulate_in_discovery_order_without_repeats():
    payload = {"agent_id": "x", "assignments": [[1, "lunch", "a"], [1, "lunch", "b"], 7], "extra": 1}
    result = parse("Answer: " + json.dumps(payload), expected_agent_id=1, capacity=2)
    assert result.error_codes == (
        "not_strict_json", "top_level_schema", "invalid_agent_id", "assignment_schema", "self_duplicate",
        "capacity_exceeded",
    )
    assert_consistent(result)


# ---- robustness ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "{" * 100_000,
        '{"a": ' * 30_000,
        "-" * 100_000 + "1",
        "(" * 100_000,
        "1" * 100_000,
        "x{" * 200_000,
        '{"agent_id": 0, "assignments": [{"day": ' + "9" * 5000 + ', "field": "lunch", "value": "x"}]}',
        '{"agent_id": 0, "assignments": [{"day": 1e999, "field": "lunch", "value": "x"}]}',
        "{'agent_id': 0, 'assignments': [{'day': 1, 'field': 'lunch', 'value': b'x'}], 'z': {1, 2}}",
        "{'agent_id': 0, 'assignments': [(1, 'lunch', 1+2j)]}",
        "\ud800",
    ],
)
def test_pathological_text_never_raises(text):
    assert_consistent(parse(text))


@pytest.mark.parametrize("text", [None, b'{"agent_id": 0, "assignments": []}', bytearray(b"\xff\xfe"), 12, ["x"]])
def test_non_string_input_never_raises(text):
    assert_consistent(parse(text))


def test_bytes_are_decoded_as_utf8():
    assert parse(json.dumps(action()).encode()).parse_success


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
item_like = st.fixed_dictionaries(
    {"day": st.integers(-2, 6) | st.text(max_size=2), "field": st.sampled_from(PLAN_FIELDS) | st.text(max_size=6)},
    optional={"value": json_values, "days": st.integers(0, 4)},
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parser_never_raises_on_arbitrary_text(text):
    assert_consistent(parse(text))


@settings(max_examples=200, deadline=None)
@given(json_values | st.lists(item_like, max_size=6).map(lambda items: {"agent_id": 0, "assignments": items}))
def test_parser_never_raises_on_arbitrary_json_and_agrees_with_strictness(value):
    text = json.dumps(value)
    result = parse(text)
    assert_consistent(result)
    assert result.strict_json and result.decode_success
    if result.parse_success:
        assert isinstance(value, dict) and set(value) == {"agent_id", "assignments"}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60), json_values, st.text(max_size=60))
def test_parser_never_raises_on_json_wrapped_in_noise(before, value, after):
    assert_consistent(parse(before + json.dumps(value) + after))
    assert_consistent(parse("```json\n" + before + json.dumps(value) + after + "\n```"))


def test_literal_recovery_does_not_depend_on_warning_filters():
    import warnings

    text = "{'agent_id': 0, 'assignments': [{'day': 1, 'field': 'current_city', 'value': 'Alpha\\i'}]}"
    plain = parse_assignments(text, 0, 3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        strict_filters = parse_assignments(text, 0, 3, 1)
    assert plain.decode_success and strict_filters.decode_success
    assert plain.assignments == strict_filters.assignments
