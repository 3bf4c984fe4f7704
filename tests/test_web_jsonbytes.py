"""The web's JSON bytes (gpuwise.web.jsonbytes) hold the same value as the CLI's --json encoder
(gpuwise.jsonable.dumps) for real answers, and for what only the standard encoder can write."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from gpuwise.i18n import Text
from gpuwise.jsonable import dumps
from gpuwise.web import calls
from gpuwise.web.jsonbytes import encoded


def _answers() -> list[Any]:
    return [calls.plan([("model", "qwen3-30b-a3b"), ("top", "5")]),
            calls.plan([("model", "qwen3-8b"), ("task", "lora"), ("tokens", "1e8"), ("top", "3")]),
            calls.estimate([("model", "llama-3.1-8b"), ("card", "H100-SXM")]),
            calls.cards(()), calls.model("deepseek-v3", ())]


def test_every_web_answer_encodes_to_the_same_json_value_as_the_cli() -> None:
    for answer in _answers():
        assert json.loads(encoded(answer)) == json.loads(dumps(answer))


@pytest.mark.parametrize("value, expected", [
    ({"x": math.nan, "y": [math.inf, -math.inf, 1.5]}, {"x": None, "y": [None, None, 1.5]}),
    ({"big": 2 ** 70}, {"big": 2 ** 70}),  # past 64 bits: the standard encoder writes it
    ({1: "a", None: "b"}, {"1": "a", "null": "b"}),  # keys that are not text, as json.dumps writes them
    ({"t": Text("hello", "你好")}, {"t": "hello"}),  # Text as its English, as on the CLI
], ids=["non-finite-as-null", "huge-integer", "non-text-keys", "text"])
def test_what_json_cannot_hold_is_written_as_the_cli_writes_it(value: Any, expected: Any) -> None:
    out = encoded(value)
    assert json.loads(out) == expected == json.loads(dumps(value))
    assert b"NaN" not in out and b"Infinity" not in out


def test_an_object_neither_encoder_knows_is_refused_not_written_as_something_else() -> None:
    with pytest.raises(TypeError):
        encoded({"s": {1, 2}})
