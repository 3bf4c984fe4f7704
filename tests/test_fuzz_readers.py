"""Fuzzing every file reader with hypothesis: whatever the bytes, the answer is a value or a
GpuwiseError with a bilingual message, never another exception (no traceback for the user).

Fixed seed (derandomize) so CI is reproducible; GPUWISE_FUZZ_SCALE=10 runs ten times as many
examples (the opt-in longer run).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise import safefile
from gpuwise.catalog.gguf_reader import arch_from_gguf
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.safetensors_header import read_header, tensors_from_header
from gpuwise.errors import GpuwiseError

SCALE = max(1, int(os.environ.get("GPUWISE_FUZZ_SCALE", "1") or 1))
TMP = Path(tempfile.mkdtemp(prefix="gpuwise-fuzz-"))


def fuzz(n: int) -> Callable[[Any], Any]:
    return settings(max_examples=n * SCALE, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def only_gpuwise_errors(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except GpuwiseError as err:
        assert err.message.en and err.message.zh
        return None


def write(name: str, data: bytes) -> Path:
    path = TMP / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=10), kids,
                                                                               max_size=5), max_leaves=30)
TEXT_BITS = st.sampled_from(['{', '}', '[', ']', '"', ',', ':', '1', '1e999', 'NaN', '-', '\\', 'true',
                             '"a"', ' ', '\n', '=', '#', "'", '[[x]]', 'x = ', '0x1F', '1_0', '"""'])
SOUP = st.lists(TEXT_BITS, max_size=60).map("".join) | st.text(max_size=200)


@fuzz(400)
@given(SOUP)
def test_json_and_toml_text_gives_a_value_or_a_data_error(text: str) -> None:
    only_gpuwise_errors(lambda: safefile.loads_json(text, "fuzz.json"))
    only_gpuwise_errors(lambda: safefile.loads_toml(text, "fuzz.toml"))


@fuzz(300)
@given(JSON)
def test_any_json_value_round_trips_or_is_refused_for_a_reason(value: Any) -> None:
    text = json.dumps(value)
    got = only_gpuwise_errors(lambda: safefile.loads_json(text, "v.json"))
    if got is not None:  # accepted: exactly the standard parser's value (NaN is never accepted)
        assert got == json.loads(text)


LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 512}
KEYS = st.sampled_from([*LLAMA, "num_local_experts", "num_experts_per_tok", "head_dim", "sliding_window",
                        "max_position_embeddings", "torch_dtype", "quantization_config", "layer_types",
                        "kv_lora_rank", "rope_scaling", "text_config", "tie_word_embeddings"])


@fuzz(400)
@given(st.dictionaries(KEYS, JSON, max_size=8))
def test_config_json_with_hostile_values_gives_a_model_or_a_data_error(changes: dict[str, Any]) -> None:
    only_gpuwise_errors(lambda: arch_from_config({**LLAMA, **changes}, "fuzz"))


@fuzz(300)
@given(JSON)
def test_a_safetensors_header_of_any_shape_gives_tensors_or_a_data_error(header: Any) -> None:
    only_gpuwise_errors(lambda: tensors_from_header(header, "fuzz.safetensors", 1 << 20))


@fuzz(200)
@given(st.binary(max_size=64), st.integers(0, 1 << 64 - 1) | st.integers(0, 200))
def test_safetensors_bytes_give_a_header_or_a_data_error(body: bytes, length: int) -> None:
    path = write("st/model.safetensors", struct.pack("<Q", length % (1 << 64)) + body)
    only_gpuwise_errors(lambda: read_header(path))


GGUF_HEAD = st.builds(lambda v, n, k: b"GGUF" + struct.pack("<IQQ", v, n, k),
                      st.sampled_from([1, 2, 3, 4]), st.integers(0, 3) | st.integers(0, 1 << 63),
                      st.integers(0, 3) | st.integers(0, 1 << 63))


@fuzz(300)
@given(GGUF_HEAD, st.binary(max_size=200))
def test_gguf_bytes_give_a_model_or_a_data_error(head: bytes, rest: bytes) -> None:
    path = write("fuzz.gguf", head + rest)
    only_gpuwise_errors(lambda: arch_from_gguf(path))


NUMBERS = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e308", "1" + "0" * 200, "2.5", '"x"', "[]",
                           "true", "{}", "1_000"])


@fuzz(150)
@given(low=NUMBERS, high=NUMBERS, billing=st.sampled_from(["hourly", "monthly", "yearly", ""]))
def test_a_prices_file_with_any_numbers_loads_finite_prices_or_is_refused(low: str, high: str,
                                                                          billing: str) -> None:
    from gpuwise.catalog.prices import load_prices

    path = write("prices.toml", (
        'schema_version = 1\n[[price]]\nprovider = "me"\ncard = "h100-sxm"\ncurrency = "CNY"\n'
        f'billing = "{billing}"\nunit = "gpu_hour"\nlow = {low}\nhigh = {high}\nas_of = "2026-01"\n'
        'source = "me"\n').encode())
    offers = only_gpuwise_errors(lambda: load_prices([path]))
    for o in offers or ():
        assert 0 <= o.low < float("inf") and 0 <= o.high < float("inf")


@fuzz(150)
@given(mem=NUMBERS, bw=NUMBERS, tf=NUMBERS)
def test_a_cards_file_with_any_numbers_loads_finite_cards_or_is_refused(mem: str, bw: str, tf: str) -> None:
    from gpuwise.catalog.cards import load_cards

    path = write("cards.toml", (
        'schema_version = 1\n[[card]]\nid = "fuzz-card"\nname = "Fuzz"\nvendor = "nvidia"\n'
        f'form_factor = "sxm"\nmemory_gb = {mem}\nmem_bw_gbps = {bw}\nbf16_dense_tflops = {tf}\n'
        'interconnect = "none"\ninterconnect_bw_gbps = 0\ninterconnect_max_gpus = 1\ntdp_w = 700\n'
        'ecc = true\nsoftware = "cuda"\nsources = ["me"]\n').encode())
    catalog = only_gpuwise_errors(lambda: load_cards([path]))
    card = catalog.get("fuzz-card") if catalog is not None else None
    if card is not None:
        assert 0 < card.memory_gb < float("inf") and 0 < card.mem_bw_gbps < float("inf")


VERIFY_KEYS = st.sampled_from(["schema_version", "gpus", "host", "checks", "nvml", "bench", "topology",
                               "driver", "cuda", "card", "collected_at", "links", "content_sha256"])


@fuzz(200)
@given(st.dictionaries(VERIFY_KEYS, JSON, max_size=6))
def test_verify_evidence_of_any_shape_is_read_or_refused(data: dict[str, Any]) -> None:
    from gpuwise.verify.raw import evidence_from_dict

    only_gpuwise_errors(lambda: evidence_from_dict(data, origin="fuzz"))


@fuzz(150)
@given(st.dictionaries(VERIFY_KEYS, JSON, max_size=6))
def test_a_calibration_file_of_any_shape_is_read_or_refused(data: dict[str, Any]) -> None:
    from gpuwise.verify.calibration import load_calibration

    path = write("calibration.json", json.dumps(data).encode())
    only_gpuwise_errors(lambda: load_calibration(path))


CONTRACT_KEYS = st.sampled_from(["min", "max", "card", "gpus", "nvlink", "ecc", "mem_bw_fraction",
                                 "schema_version", "checks", "thresholds"])


@fuzz(200)
@given(st.dictionaries(CONTRACT_KEYS, JSON | st.dictionaries(CONTRACT_KEYS, JSON, max_size=4), max_size=5))
def test_a_contract_of_any_shape_is_read_or_refused(data: dict[str, Any]) -> None:
    from gpuwise.verify.contract import parse_contract

    only_gpuwise_errors(lambda: parse_contract(data, origin="fuzz"))
