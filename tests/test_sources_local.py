"""Local model folders: config.json + safetensors headers (single, sharded, GPTQ-packed, hostile)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.local import arch_from_folder
from gpuwise.catalog.params import count_params
from gpuwise.catalog.safetensors_header import read_checkpoint, read_safetensors
from gpuwise.catalog.sources import load_model
from gpuwise.errors import DataError

np = pytest.importorskip("numpy")

H, LAYERS, HEADS, KV, INTER, VOCAB = 64, 2, 4, 2, 128, 100
HEAD_DIM = H // HEADS
CONFIG: dict[str, Any] = {
    "model_type": "llama", "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
    "num_key_value_heads": KV, "intermediate_size": INTER, "vocab_size": VOCAB,
    "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "float16",
}


def llama_shapes() -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of a transformers LlamaForCausalLM with CONFIG."""
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (VOCAB, H), "lm_head.weight": (VOCAB, H), "model.norm.weight": (H,)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": (H, H), p + "self_attn.k_proj.weight": (KV * HEAD_DIM, H),
                   p + "self_attn.v_proj.weight": (KV * HEAD_DIM, H), p + "self_attn.o_proj.weight": (H, H),
                   p + "mlp.gate_proj.weight": (INTER, H), p + "mlp.up_proj.weight": (INTER, H),
                   p + "mlp.down_proj.weight": (H, INTER), p + "input_layernorm.weight": (H,),
                   p + "post_attention_layernorm.weight": (H,)}
    return shapes


def write_safetensors(path: Path, tensors: dict[str, Any]) -> int:
    """Write with the safetensors package when present, else by hand; returns the data bytes."""
    try:
        from safetensors.numpy import save_file
    except ImportError:
        return write_raw(path, {n: ("F16" if a.dtype == np.float16 else "I32", list(a.shape), a.tobytes())
                                for n, a in tensors.items()})
    save_file(tensors, str(path))
    return sum(a.nbytes for a in tensors.values())


def write_raw(path: Path, tensors: dict[str, tuple[str, list[int], bytes]], *,
              header_override: bytes | None = None, length_override: int | None = None,
              extra: bytes = b"") -> int:
    """A safetensors file written by hand (stdlib only), optionally broken on purpose."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    blob = header_override if header_override is not None else json.dumps(header).encode()
    length = len(blob) if length_override is None else length_override
    path.write_bytes(struct.pack("<Q", length) + blob + data + extra)
    return len(data)


def model_folder(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config or CONFIG))
    return folder


def expected_params() -> int:
    return sum(int(np.prod(s)) for s in llama_shapes().values())


# --- plain and sharded checkpoints -------------------------------------------------------
def test_a_folder_with_one_safetensors_file_gives_exact_bytes_and_parameters(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    data = write_safetensors(folder / "model.safetensors",
                             {n: np.zeros(s, np.float16) for n, s in llama_shapes().items()})
    arch = arch_from_folder(folder)
    assert arch.checkpoint_bytes == data == 2 * expected_params()
    assert arch.checkpoint_params == expected_params() == count_params(arch).total
    assert arch.name == "tiny-llama" and arch.hidden_size == H and arch.num_kv_heads == KV


def test_the_dispatcher_reads_a_folder_path_without_touching_the_network(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    write_safetensors(folder / "model.safetensors", {n: np.zeros(s, np.float16) for n, s in llama_shapes().items()})
    assert load_model(str(folder)).checkpoint_params == expected_params()


def test_a_sharded_checkpoint_is_summed_over_the_shards_its_index_names(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    names = list(llama_shapes())
    half = len(names) // 2
    weight_map: dict[str, str] = {}
    total = 0
    for k, part in enumerate((names[:half], names[half:]), start=1):
        shard = f"model-0000{k}-of-00002.safetensors"
        total += write_safetensors(folder / shard, {n: np.zeros(llama_shapes()[n], np.float16) for n in part})
        weight_map |= {n: shard for n in part}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    (folder / "consolidated.safetensors").write_bytes(b"not read: the index decides")
    ckpt = read_checkpoint(folder)
    assert ckpt is not None and len(ckpt.files) == 2
    arch = arch_from_folder(folder)
    assert arch.checkpoint_bytes == total and arch.checkpoint_params == expected_params()


def test_a_shard_missing_from_the_folder_is_named_in_the_error(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}}))
    with pytest.raises(DataError, match="model-00002-of-00002.safetensors"):
        arch_from_folder(folder)


def test_an_index_that_places_a_tensor_in_the_wrong_shard_is_rejected(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    write_raw(folder / "a.safetensors", {"x": ("F16", [2], b"\0" * 4)})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"y": "a.safetensors"}}))
    with pytest.raises(DataError, match="'y'"):
        arch_from_folder(folder)


def test_an_index_cannot_point_outside_its_folder(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    write_raw(tmp_path / "outside.safetensors", {"x": ("F16", [2], b"\0" * 4)})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "../outside.safetensors"}}))
    with pytest.raises(DataError, match="outside its folder"):
        arch_from_folder(folder)


# --- quantized checkpoints ---------------------------------------------------------------
def gptq_tensors(group: int = 32) -> dict[str, Any]:
    """AutoGPTQ layout: qweight I32 [in/8, out], qzeros I32 [in/g, out/8], scales F16, g_idx I32."""
    out: dict[str, Any] = {}
    for name, shape in llama_shapes().items():
        linear = "layers" in name and len(shape) == 2
        if not linear:
            out[name] = np.zeros(shape, np.float16)
            continue
        rows, cols = shape  # torch Linear weight: [out, in]
        base = name.removesuffix(".weight")
        out[base + ".qweight"] = np.zeros((cols // 8, rows), np.int32)
        out[base + ".qzeros"] = np.zeros((cols // group, rows // 8), np.int32)
        out[base + ".scales"] = np.zeros((cols // group, rows), np.float16)
        out[base + ".g_idx"] = np.zeros((cols,), np.int32)
    return out


def test_gptq_packed_int4_tensors_are_not_counted_as_parameters(tmp_path: Path) -> None:
    config = CONFIG | {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32}}
    folder = model_folder(tmp_path, config)
    tensors = gptq_tensors()
    data = write_safetensors(folder / "model.safetensors", tensors)
    arch = arch_from_folder(folder)
    assert arch.checkpoint_bytes == data  # stored bytes, exactly
    assert arch.checkpoint_params == count_params(arch).total == expected_params()
    assert sum(a.size for a in tensors.values()) < expected_params()  # the packed element count is less
    assert arch.quant is not None and arch.quant.method == "gptq"
    assert any("quantized" in n.en for n in arch.notes)


def test_packed_tensors_without_a_quantization_config_still_count_from_the_architecture(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    write_safetensors(folder / "model.safetensors", gptq_tensors())
    assert arch_from_folder(folder).checkpoint_params == expected_params()


def test_a_checkpoint_that_disagrees_with_its_config_says_so(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    tensors = {n: np.zeros(s, np.float16) for n, s in llama_shapes().items()}
    tensors["extra.big"] = np.zeros((VOCAB, H), np.float16)
    write_safetensors(folder / "model.safetensors", tensors)
    arch = arch_from_folder(folder)
    assert arch.checkpoint_params == expected_params() + VOCAB * H
    assert any("architecture counts" in n.en for n in arch.notes)


def test_every_safetensors_dtype_size_is_exact_including_sub_byte_fp4(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_raw(path, {"a": ("F4", [4, 4], b"\0" * 8), "b": ("F8_E4M3", [3], b"\0" * 3),
                     "c": ("BF16", [2, 2], b"\0" * 8), "d": ("F64", [], b"\0" * 8)})
    ckpt = read_safetensors(path)
    assert ckpt.total_bytes == 27
    assert ckpt.total_elements == 16 + 3 + 4 + 1
    assert ckpt.bytes_by_dtype() == {"F4": 8, "F8_E4M3": 3, "BF16": 8, "F64": 8}


# --- hostile and broken files ------------------------------------------------------------
GOOD = {"w": ("F16", [2, 2], b"\0" * 8)}


@pytest.mark.parametrize(("case", "kwargs", "message"), [
    ("absurd header length", {"length_override": 2**62}, "absurd"),
    ("header runs past the end", {"length_override": 10_000}, "past the end"),
    ("not JSON", {"header_override": b"\xff\xfe not json"}, "not UTF-8 JSON"),
    ("a JSON list", {"header_override": b"[1, 2, 3]"}, "not a JSON object"),
    ("negative offsets", {"header_override": b'{"w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [-8, 0]}}'},
     "data_offsets"),
    ("offsets that disagree with the shape",
     {"header_override": b'{"w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 6]}}'}, "needs 8"),
    ("an unknown dtype", {"header_override": b'{"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}'},
     "unknown dtype"),
    ("a bool shape", {"header_override": b'{"w": {"dtype": "F16", "shape": [true], "data_offsets": [0, 2]}}'},
     "bad shape"),
    ("overlapping tensors", {"header_override": b'{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},'
                                                b' "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}'},
     "overlap or gap"),
    ("truncated data", {"header_override": b'{"w": {"dtype": "F16", "shape": [8, 8], "data_offsets": [0, 128]}}'},
     "truncated"),
    ("trailing bytes", {"extra": b"junk"}, "trailing bytes"),
])
def test_a_hostile_safetensors_header_is_a_data_error_naming_the_file(
        tmp_path: Path, case: str, kwargs: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.safetensors"
    write_raw(path, GOOD, **kwargs)
    with pytest.raises(DataError, match=message) as info:
        read_safetensors(path)
    assert "bad.safetensors" in info.value.message.en and info.value.message.zh


def test_a_file_shorter_than_the_length_prefix_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(b"\x01\x02")
    with pytest.raises(DataError, match="tiny.safetensors"):
        read_safetensors(path)


# --- folders that are not model folders --------------------------------------------------
def test_an_empty_folder_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no config.json.*no .gguf") as info:
        arch_from_folder(tmp_path)
    assert info.value.hint is not None


def test_weights_without_a_config_ask_for_the_config(tmp_path: Path) -> None:
    write_raw(tmp_path / "model.safetensors", GOOD)
    with pytest.raises(DataError, match="but no config.json"):
        arch_from_folder(tmp_path)


def test_a_folder_with_only_config_json_is_counted_from_the_config_with_a_note(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    arch = arch_from_folder(folder)
    assert arch.checkpoint_bytes == 0
    assert arch == arch_from_config(CONFIG, "tiny-llama", source=str(folder))
    assert any("No .safetensors" in n.en for n in arch.notes)


def test_a_broken_config_json_in_a_folder_is_a_data_error(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        arch_from_folder(folder)


def test_a_hugging_face_cache_snapshot_is_named_after_its_repository(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--acme--tiny-llama" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    assert arch_from_folder(snapshot).name == "acme/tiny-llama"
