"""The typed generation options (travel/generation/config.py): the YAML is the dataclass's defaults and every
option is checked on construction, naming it."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config
from travel.generation.config import GenerationConfig


def test_the_structured_yaml_is_the_defaults():
    assert GenerationConfig.from_mapping(compose_config().generation) == GenerationConfig()
    assert OmegaConf.load(CONF / "generation" / "structured.yaml")._target_ == "travel.generation.config.GenerationConfig"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"values": "json"}, "generation.values='json': choose one of free, catalog"),
        ({"temperature": 0}, "generation.temperature=0: must be > 0"),
        ({"top_p": 1.5}, "generation.top_p=1.5: must be in (0, 1]"),
        ({"max_new_tokens": 2.5}, "generation.max_new_tokens=2.5"),
        ({"rows_per_call": 0}, "generation.rows_per_call=0"),
        ({"eval_rows_per_call": None}, "generation.eval_rows_per_call=None"),
        ({"greedy_eval": "yes"}, "generation.greedy_eval='yes'"),
        ({"top_k": 5}, "generation.top_k: not a generation option"),
    ],
)
def test_every_option_is_checked_naming_it(options, message):
    with pytest.raises(ValueError) as raised:
        GenerationConfig.from_mapping(options)
    assert message in str(raised.value)
