"""Role prompts: section order, role texts, budget lines, prefill contract and target-freeness,
on the hand-built fixtures and on every real train row."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.fixtures import five_day_fixture_row, fixture_raw, fixture_row
from travel.data.normalise import normalise_row
from travel.data.text import canonical, literal
from travel.task.prompts import DEFAULT_SYSTEM_PROMPT, RolePrompt, build_role_prompt

PREFILL_0 = '{"agent_id": 0, "assignments": [{"day": 1, "field": "current_city", "value": "'
PREFILL_1 = '{"agent_id": 1, "assignments": [{"day": 1, "field": "breakfast", "value": "'

SECTION_ORDER = (
    "You are Agent",
    "ROLE GUIDANCE:",
    "YOUR OWNED SLOTS:",
    "ROLE DAY-SLOT CHECKLIST",
    "ROLE-SPECIFIC HARD-CONSTRAINT DUTY",
    "DETERMINISTIC TEAM BUDGET CONTRACT",
    "COLLABORATION RULES:",
    "VALID FIELDS:",
    "TRIP REQUEST:",
    "STRUCTURED CONSTRAINTS:",
    "REFERENCE-DERIVED PLANNING CONTEXT:",
    "SHARED REFERENCE-DERIVED ROUTE SCAFFOLD",
    "ROLE-SPECIFIC COMPACT REFERENCE CATALOG",
    "STRICT OUTPUT CONTRACT:",
)


def both(row, **kwargs) -> tuple[RolePrompt, RolePrompt]:
    return build_role_prompt(row, 0, **kwargs), build_role_prompt(row, 1, **kwargs)


def scaffold_block(user: str) -> str:
    return user[user.index("SHARED REFERENCE-DERIVED ROUTE SCAFFOLD") : user.index("ROLE-SPECIFIC COMPACT REFERENCE CATALOG")]


# ---------------------------------------------------------------------------------------------- structure


@pytest.mark.parametrize("agent_id", [0, 1])
def test_sections_appear_once_in_order(agent_id):
    user = build_role_prompt(fixture_row(), agent_id).user
    positions = [user.index(header) for header in SECTION_ORDER]
    assert positions == sorted(positions)
    assert all(user.count(header) == 1 for header in SECTION_ORDER)
    assert user.startswith(f"You are Agent {agent_id} of 2 agents")


def test_role_texts_and_object_counts():
    logistics, experience = both(fixture_row())
    assert "LOGISTICS AND FEASIBILITY" in logistics.user and "DAILY EXPERIENCE" not in logistics.user
    assert "DAILY EXPERIENCE" in experience.user and "LOGISTICS AND FEASIBILITY" not in experience.user
    assert '"assignments" must contain exactly 9 objects' in logistics.user
    assert '"assignments" must contain exactly 12 objects' in experience.user
    long_logistics, long_experience = both(five_day_fixture_row())
    assert "exactly 15 objects" in long_logistics.user and "exactly 20 objects" in long_experience.user


def test_owned_slots_are_listed_in_canonical_order():
    logistics, experience = both(fixture_row())
    assert "YOUR OWNED SLOTS: (day 1, current_city), (day 1, transportation), (day 1, accommodation), (day 2, " in logistics.user
    assert "(day 3, accommodation)\n" in logistics.user
    assert "YOUR OWNED SLOTS: (day 1, breakfast), (day 1, attraction), (day 1, lunch), (day 1, dinner), (day 2, " in experience.user


def test_valid_fields_and_collaboration_totals():
    user = build_role_prompt(fixture_row(), 1).user
    assert "VALID FIELDS: current_city, transportation, breakfast, attraction, lunch, dinner, accommodation" in user
    assert "21 slots (3 days x 7 fields)" in user
    assert "capacity is 12 assignments" in user


def test_structured_constraints_block():
    user = build_role_prompt(fixture_row(local_constraint={"cuisine": ["Indian"]}, people_number=2), 0).user
    block = user[user.index("STRUCTURED CONSTRAINTS:") :].split("\n\n")[0].splitlines()
    assert block[1:] == [
        "origin=Alpha",
        "destination=Beta",
        "days=3",
        "dates=['2022-01-01', '2022-01-02', '2022-01-03']",
        "people=2",
        "budget=1000",
        'local_constraints={"cuisine": ["Indian"], "house rule": null, "room type": null, "transportation": null}',
    ]
    assert "TRIP REQUEST:\nPlease help me plan a trip from Alpha to Beta" in user


# ---------------------------------------------------------------------------------------------- budget contract


def test_budget_contract_golden_lines():
    logistics, experience = both(fixture_row())
    for prompt in (logistics, experience):
        assert "team_budget=1000.00" in prompt.user
        assert "logistics_cap=584.00" in prompt.user
        assert "experience_cap=416.00" in prompt.user
    assert "YOUR_ROLE=LOGISTICS; YOUR_CAP=584.00" in logistics.user
    assert "YOUR_ROLE=EXPERIENCE; YOUR_CAP=416.00" in experience.user


# ---------------------------------------------------------------------------------------------- scaffold and catalogs


@pytest.mark.parametrize("make_row", [fixture_row, five_day_fixture_row])
def test_scaffold_block_is_identical_in_both_prompts(make_row):
    logistics, experience = both(make_row())
    assert scaffold_block(logistics.user) == scaffold_block(experience.user)
    assert scaffold_block(logistics.user).count("- day=") == make_row().days


def test_catalogs_are_role_specific():
    logistics, experience = both(fixture_row())
    assert "TRANSPORTATION OPTIONS" in logistics.user and "RESTAURANT OPTIONS" not in logistics.user
    assert "RESTAURANT OPTIONS" in experience.user and "ACCOMMODATION OPTIONS" not in experience.user
    assert '"Cafe, Beta"' not in logistics.user and '"Hotel, Beta"' not in experience.user


# ---------------------------------------------------------------------------------------------- output contract


def test_prefill_strings_are_exact_and_printed():
    logistics, experience = both(fixture_row())
    assert (logistics.prefill, experience.prefill) == (PREFILL_0, PREFILL_1)
    assert both(five_day_fixture_row())[0].prefill == PREFILL_0  # independent of the trip length
    for prompt in (logistics, experience):
        assert prompt.prefill in prompt.user
        assert "do not repeat it" in prompt.user
        assert "already-open value string" in prompt.user


def test_prompt_without_prefill_asks_for_the_full_object():
    logistics, experience = both(fixture_row(), use_prefill=False)
    assert logistics.prefill == "" and experience.prefill == ""
    assert 'must start with {"agent_id": 0, "assignments": [ and end with ]}' in logistics.user
    assert 'must start with {"agent_id": 1, "assignments": [' in experience.user
    assert "The first character of your response must be {" in logistics.user
    assert "ASSISTANT PREFILL" not in logistics.user and PREFILL_0 not in logistics.user


def test_system_prompt_default_and_overrides():
    prompt = build_role_prompt(fixture_row(), 0)
    assert prompt.system == DEFAULT_SYSTEM_PROMPT
    assert "decentralized" in DEFAULT_SYSTEM_PROMPT and "only the JSON object" in DEFAULT_SYSTEM_PROMPT
    assert "] before the final }" in DEFAULT_SYSTEM_PROMPT
    assert build_role_prompt(fixture_row(), 0, system_prompt="").system == ""
    assert build_role_prompt(fixture_row(), 1, system_prompt="Be brief.").system == "Be brief."


def test_unknown_agent_is_rejected():
    with pytest.raises(ValueError, match="agent_id"):
        build_role_prompt(fixture_row(), 2)


# ---------------------------------------------------------------------------------------------- target-free


def assert_no_plan_words(prompt: RolePrompt) -> None:
    """No instruction mentions human plans; catalog option lines are data (real names like "The Golden Leaf")."""
    instructions = [line for line in prompt.user.splitlines() if not line.startswith('- "')]
    text = "\n".join([prompt.system, *instructions, prompt.prefill]).casefold()
    assert "annotated" not in text and "gold" not in text


def test_no_prompt_mentions_annotated_or_gold_plans():
    for row in (fixture_row(), five_day_fixture_row()):
        for use_prefill in (True, False):
            for prompt in both(row, use_prefill=use_prefill):
                assert "annotated" not in prompt.user.casefold() and "gold" not in prompt.user.casefold()
                assert_no_plan_words(prompt)


def test_human_plans_and_extra_columns_do_not_change_the_prompts():
    plan_a = repr([{"days": 1, "current_city": "from Alpha to Beta", "accommodation": "Hotel, Beta"}])
    plan_b = repr([{"days": 1, "current_city": "from Alpha to Gamma", "accommodation": "Secret Inn, Gamma"}])
    rows = [
        normalise_row(fixture_raw(), 0),
        normalise_row(fixture_raw(annotated_plan=plan_a, gold_plan=plan_a), 0),
        normalise_row(fixture_raw(annotated_plan=plan_b, gold_plan=plan_b, notes="Secret Inn"), 0),
    ]
    for agent_id in (0, 1):
        texts = {build_role_prompt(row, agent_id).user for row in rows}
        assert len(texts) == 1
        assert "Secret Inn" not in texts.pop()


def test_prompt_follows_the_request_fields():
    base = build_role_prompt(fixture_row(), 0).user
    assert build_role_prompt(fixture_row(budget=2000), 0).user != base
    assert build_role_prompt(fixture_row(query="Plan a quiet trip from Alpha to Beta."), 0).user != base


# ---------------------------------------------------------------------------------------------- real rows


def first_per_identity_values(entries) -> list[str]:
    seen, values = set(), []
    for entry in entries:
        key = (canonical(entry.name), canonical(entry.city))
        if key not in seen:
            seen.add(key)
            values.append(f"{entry.name}, {entry.city}")
    return values


def transport_value(entry) -> str:
    route = f"from {entry.origin} to {entry.destination}"
    label = {"flight": f"Flight Number: {entry.name}", "self-driving": "Self-driving", "taxi": "Taxi"}[entry.mode]
    return f"{label}, {route}"


def test_real_rows_expose_every_owned_choice(real_train_rows):
    assert len(real_train_rows) == 45
    for row in real_train_rows:
        logistics, experience = both(row)
        catalog = row.catalog
        for entry in catalog.transportation:
            assert json.dumps(transport_value(entry), ensure_ascii=False) in logistics.user, (row.id, entry)
        for value in first_per_identity_values(catalog.accommodations):
            assert json.dumps(value, ensure_ascii=False) in logistics.user, (row.id, value)
            assert json.dumps(value, ensure_ascii=False) not in experience.user, (row.id, value)
        for value in first_per_identity_values(catalog.restaurants) + first_per_identity_values(catalog.attractions):
            assert json.dumps(value, ensure_ascii=False) in experience.user, (row.id, value)
        # the first restaurant row of an identity sets the printed full-party cost
        first = catalog.restaurants[0]
        cost = f"{first.cost * row.people_number:.2f}"
        assert f"{json.dumps(f'{first.name}, {first.city}', ensure_ascii=False)} | team_cost_per_meal={cost}" in experience.user
        assert scaffold_block(logistics.user) == scaffold_block(experience.user)
        assert f"exactly {3 * row.days} objects" in logistics.user and f"exactly {4 * row.days} objects" in experience.user
        for prompt in (logistics, experience):
            assert_no_plan_words(prompt)


def column_cells(content: str, columns: tuple[str, ...]) -> list[str]:
    """Cells of right-aligned pandas columns, sliced by the header's column end positions."""
    lines = content.splitlines()
    header = lines[0]
    ends = [(m.group(), m.end()) for m in re.finditer(r"\S+", header)]
    cells = []
    for position, (name, end) in enumerate(ends):
        if name in columns:
            start = ends[position - 1][1] if position else 0
            cells += [line[start:end].strip() for line in lines[1:]]
    return cells


def test_real_rows_never_show_addresses_phones_websites_or_coordinates(real_train_rows, shared_data_dir):
    raws = [json.loads(line) for line in (shared_data_dir / "train.jsonl").read_text().splitlines() if line.strip()]
    hidden_columns = ("Latitude", "Longitude", "Address", "Phone", "Website")
    checked = 0
    for row, raw in zip(real_train_rows, raws):
        text = "\n".join(p.user for p in both(row))
        for record in literal(raw["reference_information"]):
            if not record["Description"].startswith("Attractions in"):
                continue
            for cell in column_cells(record["Content"], hidden_columns):
                if len(cell) >= 6 and cell.casefold() not in ("unknown", "nan", "none"):
                    assert cell not in text, (row.id, cell)
                    checked += 1
    assert checked > 1000


def test_prompts_are_cached_per_row(real_train_rows):
    for row in real_train_rows:
        both(row)
    start = time.perf_counter()
    for row in real_train_rows:
        both(row)
    assert time.perf_counter() - start < 0.5
