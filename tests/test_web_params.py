"""Query/body parameters of the web API, read generically from the service's request classes."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest
from gpuwise.web.labels import LABELS, pick_page_lang
from gpuwise.web.params import UnknownParameterError, check_model_source, parse, spec_from_dataclass


@dataclasses.dataclass(frozen=True)
class Req:
    model: str
    context: int = 4096
    budget: float | None = None
    margin: bool = False
    note: str = ""
    weights_file: str | None = None
    secret: str | None = dataclasses.field(default=None, metadata={"path": True})


SPEC = spec_from_dataclass(Req, {"src": "model"})


def test_every_field_becomes_a_parameter_except_server_paths() -> None:
    assert SPEC.names == ["model", "context", "budget", "margin", "note"]
    assert set(spec_from_dataclass(EstimateRequest).names).isdisjoint({"cards_file", "calibration", "replay"})


def test_dashes_underscores_and_aliases_name_the_same_parameter() -> None:
    got = parse([("src", "7b"), ("CONTEXT", "8192"), ("margin", "on"), ("budget", "")], SPEC)
    assert got == {"model": "7b", "context": 8192, "margin": True, "budget": None}


def test_values_are_typed_and_bounded() -> None:
    with pytest.raises(InputError, match="from 1 to 134,217,728"):
        parse([("model", "7b"), ("context", "0")], SPEC)
    with pytest.raises(InputError, match="whole number"):
        parse([("model", "7b"), ("context", "2.5")], SPEC)
    with pytest.raises(InputError, match="true or false"):
        parse([("model", "7b"), ("margin", "perhaps")], SPEC)
    with pytest.raises(InputError, match="256 characters"):
        parse([("model", "x" * 300)], SPEC)
    with pytest.raises(InputError, match="Missing required"):
        parse([("context", "1")], SPEC)


def test_unknown_names_are_listed_with_the_valid_ones() -> None:
    with pytest.raises(UnknownParameterError) as err:
        parse([("model", "7b"), ("contxt", "1"), ("weights_file", "/etc/passwd")], SPEC)
    assert err.value.to_dict()["valid"] == ["budget", "context", "margin", "model", "note", "src"]
    assert "context" in err.value.suggestions


def test_repeated_text_values_join_with_commas_and_repeated_numbers_are_refused() -> None:
    assert parse([("model", "7b"), ("note", "ecc"), ("note", "nvlink")], SPEC)["note"] == "ecc,nvlink"
    assert parse([("model", "7b"), ("note", ["ecc", "nvlink"])], SPEC)["note"] == "ecc,nvlink"
    with pytest.raises(InputError, match="given twice"):
        parse([("model", "7b"), ("context", "1"), ("context", "2")], SPEC)


@pytest.mark.parametrize("src", ["/etc/passwd", "~/.ssh/id_rsa", "../x", "a/../../b", "C:\\x", "./model"])
def test_local_paths_are_not_model_sources_over_http(src: str) -> None:
    with pytest.raises(InputError, match="local path"):
        check_model_source(src)


@pytest.mark.parametrize("src", ["llama-3.1-8b", "7b", "Qwen/Qwen3-8B"])
def test_presets_sizes_and_hub_ids_are_model_sources(src: str) -> None:
    check_model_source(src)


def test_every_page_label_has_both_languages() -> None:
    assert all(en and zh for en, zh in LABELS.values())


@pytest.mark.parametrize(("flag", "header", "want"), [
    (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh"), (None, "en-US,en;q=0.9,zh;q=0.8", "en"),
    (None, "fr-FR,zh;q=0.5,en;q=0.4", "zh"), (None, None, "en"), ("zh", "en", "zh"), ("en", "zh-CN", "en"),
])
def test_the_page_language_comes_from_the_flag_then_accept_language(flag: str | None, header: str | None,
                                                                      want: str) -> None:
    assert pick_page_lang(flag, header) == want
