"""Bounded readers: size by reading, only regular files, bounded nesting and numbers, a message
naming the file for every failure (gpuwise.safefile), and the readers that use them."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from gpuwise import safefile
from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.prices import load_prices
from gpuwise.catalog.sources import load_model
from gpuwise.errors import DataError

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _fails(fn: object, *args: object, match: str) -> DataError:
    with pytest.raises(DataError, match=match) as info:
        fn(*args)  # type: ignore[operator]
    assert info.value.message.zh and info.value.message.zh != info.value.message.en
    return info.value


def test_a_device_that_never_ends_is_refused_without_reading_it() -> None:
    _fails(safefile.read_bytes, "/dev/zero", 1 << 20, match="character device")


def test_a_folder_is_refused_with_a_message(tmp_path: Path) -> None:
    _fails(safefile.read_bytes, tmp_path, 100, match="directory")


@needs_fifo
def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    _fails(safefile.read_bytes, tmp_path / "pipe", 100, match="FIFO")


def test_the_size_cap_counts_what_is_read_not_what_stat_says(tmp_path: Path) -> None:
    status = Path("/proc/self/status")
    if status.exists():  # /proc files say st_size 0 and hold more
        assert status.stat().st_size == 0
        _fails(safefile.read_bytes, status, 10, match="larger than 10 bytes")
    (tmp_path / "big.json").write_text("[" + "1," * 1000 + "1]")
    _fails(safefile.read_json, tmp_path / "big.json", 100, match="big.json: is larger than 100 bytes")


@pytest.mark.parametrize(("text", "match"), [
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "nests deeper than 64"),
    ("[" * 200_000 + "]" * 200_000, "nests deeper than 64"),
    ('{"n": 1' + "0" * 5000 + "}", "number longer than 100"),
    ('{"n": NaN}', "NaN"), ('{"n": -Infinity}', "Infinity"), ('{"n": 1e400}', "does not fit"),
    ('{"a": 1', "not valid JSON"), ('"\\"' * 20_000, "not valid JSON"),
])
def test_hostile_json_is_a_data_error_naming_the_file(text: str, match: str) -> None:
    err = _fails(safefile.loads_json, text, "cfg.json", match=match)
    assert err.message.en.startswith("cfg.json")


def test_brackets_and_long_digits_inside_strings_are_only_text() -> None:
    doc = {"a": "[" * 500, "b": "9" * 500, "c": 'say "{{{{"', "d": [1.5, 2]}
    assert safefile.loads_json(json.dumps(doc), "x") == doc


@pytest.mark.parametrize(("text", "match"), [
    ("x = " + "[" * 100_000 + "]" * 100_000, "nests deeper"),
    ("x = " + "{a=" * 5_000 + "1" + "}" * 5_000, "nests deeper"),
    ("x = nan", "does not fit"), ("x = -inf", "does not fit"), ("x = 1" + "0" * 5000, "number longer"),
    ("x = = 1", "not valid TOML"), ("x = '''", "not valid TOML"),
])
def test_hostile_toml_is_a_data_error_naming_the_file(text: str, match: str) -> None:
    _fails(safefile.loads_toml, text, "prices.toml", match=match)


def test_not_utf8_names_the_byte(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b'{"a": "\xff"}')
    _fails(safefile.read_json, tmp_path / "config.json", 100, match="not UTF-8 text")


# ------------------------------------------------------------------ the readers that use them

CFG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 512}


@pytest.mark.parametrize("content", ['{"a":' * 10_000 + "1" + "}" * 10_000,
                                     json.dumps(CFG)[:-1] + ', "rope_theta": NaN}',
                                     json.dumps(CFG)[:-1] + ', "hidden_size": 1' + "0" * 500 + "}"])
def test_a_hostile_config_json_is_a_data_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(content)
    _fails(load_model, str(tmp_path / "m"), match="config.json")


@needs_fifo
def test_fifo_weights_or_config_never_hang_the_model_reader(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CFG))
    os.mkfifo(folder / "model.safetensors")
    _fails(load_model, str(folder), match="FIFO")
    os.mkfifo(tmp_path / "w.gguf")
    _fails(load_model, str(tmp_path / "w.gguf"), match="FIFO")
    os.mkfifo(tmp_path / "config.json")
    _fails(load_model, str(tmp_path / "config.json"), match="FIFO")


@needs_fifo
def test_a_fifo_or_folder_named_model_index_json_is_named_as_such(tmp_path: Path) -> None:
    """A diffusers folder whose model_index.json is not a file is refused for what it is, never
    read (a FIFO would block) and never taken for a language-model folder without config.json."""
    from gpuwise.service import EstimateRequest, estimate_json

    fifo, folder = tmp_path / "fifo", tmp_path / "dir"
    fifo.mkdir()
    os.mkfifo(fifo / "model_index.json")
    (folder / "model_index.json").mkdir(parents=True)
    _fails(lambda src: estimate_json(EstimateRequest(model=src, card="4090")), str(fifo), match="FIFO")
    _fails(lambda src: estimate_json(EstimateRequest(model=src, card="4090")), str(folder), match="folder|directory")


def test_a_deep_safetensors_header_is_a_data_error(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CFG))
    header = ('{"a":' * 10_000 + "1" + "}" * 10_000).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    _fails(load_model, str(folder), match="nests deeper")


def test_a_deep_safetensors_index_is_a_data_error(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CFG))
    (folder / "model.safetensors.index.json").write_text('{"a":' * 10_000 + "1" + "}" * 10_000)
    _fails(load_model, str(folder), match="nests deeper")


PRICE = ('schema_version = 1\n[[price]]\nprovider = "me"\ncard = "h100-sxm"\ncurrency = "CNY"\n'
         'billing = "hourly"\nunit = "gpu_hour"\nlow = {v}\nhigh = {v}\nas_of = "2026-01"\nsource = "me"\n')


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_price_that_is_not_a_price_is_refused(tmp_path: Path, value: str) -> None:
    (tmp_path / "p.toml").write_text(PRICE.format(v=value))
    _fails(load_prices, [tmp_path / "p.toml"], match="p.toml")


CARD = ('schema_version = 1\n[[card]]\nid = "mine"\nname = "Mine"\nvendor = "nvidia"\nform_factor = "sxm"\n'
        'memory_gb = {mem}\nmem_bw_gbps = 3350\nbf16_dense_tflops = 989\ninterconnect = "none"\n'
        'interconnect_bw_gbps = 0\ninterconnect_max_gpus = 1\ntdp_w = 700\necc = true\nsoftware = "cuda"\n'
        'sources = ["me"]\n')


@pytest.mark.parametrize("mem", ["nan", "inf", "-80"])
def test_a_card_with_a_non_number_is_refused(tmp_path: Path, mem: str) -> None:
    (tmp_path / "c.toml").write_text(CARD.format(mem=mem))
    _fails(load_cards, [tmp_path / "c.toml"], match="c.toml")


def test_a_deep_cards_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("schema_version = 1\nx = " + "[" * 50_000 + "]" * 50_000)
    _fails(load_cards, [tmp_path / "c.toml"], match="nests deeper")


def test_cards_from_dev_zero_are_refused() -> None:
    _fails(load_cards, [Path("/dev/zero")], match="character device")
