"""GGUF files: real (tiny) files written with gguf.GGUFWriter, and hostile ones written by hand."""

from __future__ import annotations

import struct
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuwise.catalog.gguf_reader import GGUF_BITS_PER_WEIGHT, arch_from_gguf
from gpuwise.catalog.local import arch_from_folder
from gpuwise.catalog.params import count_params
from gpuwise.catalog.sources import load_model
from gpuwise.errors import DataError, GpuwiseError

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

H, LAYERS, HEADS, KV, FF, VOCAB = 64, 2, 4, 2, 128, 96
KV_DIM = KV * (H // HEADS)


def write_model(path: Path, *, arch: str = "llama", tied: bool = False, qtype: Any = None,
                extra: Callable[[Any], None] | None = None, layers: int = LAYERS,
                tensors: bool = True) -> Path:
    """A tiny but complete Llama-style GGUF (all tensors zero)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny-gguf")
    w.add_context_length(4096)
    w.add_block_count(layers)
    w.add_embedding_length(H)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if qtype else gguf.LlamaFileType.MOSTLY_F16)
    w.add_token_list([f"tok{i}" for i in range(VOCAB - 4)])  # shorter than the embedding, as padded vocabs are
    if extra:
        extra(w)

    def add(name: str, shape: tuple[int, ...], norm: bool = False) -> None:
        data = np.zeros(shape, np.float32 if norm else np.float16)
        if qtype is not None and not norm:
            w.add_tensor(name, gguf.quants.quantize(data.astype(np.float32), qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, data)

    if tensors:
        add("token_embd.weight", (VOCAB, H))
        if not tied:
            add("output.weight", (VOCAB, H))
        add("output_norm.weight", (H,), norm=True)
        for i in range(layers):
            for name, shape in (("attn_q", (H, H)), ("attn_k", (KV_DIM, H)), ("attn_v", (KV_DIM, H)),
                                ("attn_output", (H, H)), ("ffn_gate", (FF, H)), ("ffn_up", (FF, H)),
                                ("ffn_down", (H, FF))):
                add(f"blk.{i}.{name}.weight", shape)
            add(f"blk.{i}.attn_norm.weight", (H,), norm=True)
            add(f"blk.{i}.ffn_norm.weight", (H,), norm=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def reference_bytes(path: Path) -> int:
    """What gguf's own reader says (safe on these benign files)."""
    return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)


# --- real files --------------------------------------------------------------------------
def test_a_tiny_llama_gguf_gives_its_architecture_and_exact_sizes(tmp_path: Path) -> None:
    path = write_model(tmp_path / "tiny.gguf")
    arch = arch_from_gguf(path)
    assert (arch.name, arch.model_type, arch.hidden_size, arch.num_layers) == ("tiny-gguf", "llama", H, LAYERS)
    assert (arch.num_heads, arch.num_kv_heads, arch.intermediate_size, arch.max_context) == (HEADS, KV, FF, 4096)
    assert arch.vocab_size == VOCAB  # from token_embd's shape, not the shorter token list
    assert arch.tie_embeddings is False
    assert arch.checkpoint_bytes == reference_bytes(path)
    assert arch.checkpoint_params == count_params(arch).total
    assert arch.quant is not None and arch.quant.method == "gguf"
    assert 16 < arch.quant.bits < 17  # f16 weights with a few f32 norms
    assert arch.dtype == "float16"
    assert any("GGUF file type F16" in n.en for n in arch.notes)


def test_a_q8_0_gguf_averages_about_eight_and_a_half_bits_per_weight(tmp_path: Path) -> None:
    path = write_model(tmp_path / "q8.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)
    arch = arch_from_gguf(path)
    assert arch.checkpoint_bytes == reference_bytes(path)
    assert arch.quant is not None and 8.5 <= arch.quant.bits < 8.8
    assert any("Q8_0" in n.en for n in arch.notes)


def test_a_gguf_without_an_output_tensor_has_a_tied_head(tmp_path: Path) -> None:
    arch = arch_from_gguf(write_model(tmp_path / "tied.gguf", tied=True))
    assert arch.tie_embeddings is True
    assert arch.checkpoint_params == count_params(arch).total


def test_expert_counts_become_a_mixture_of_experts(tmp_path: Path) -> None:
    def moe(w: Any) -> None:
        w.add_expert_count(8)
        w.add_expert_used_count(2)
        w.add_uint32("llama.expert_feed_forward_length", 32)

    arch = arch_from_gguf(write_model(tmp_path / "moe.gguf", extra=moe, tensors=True))
    assert arch.moe is not None
    assert (arch.moe.num_experts, arch.moe.experts_per_token, arch.moe.expert_intermediate_size) == (8, 2, 32)


def test_key_length_sets_the_head_dim(tmp_path: Path) -> None:
    arch = arch_from_gguf(write_model(tmp_path / "hd.gguf", extra=lambda w: w.add_key_length(32)))
    assert arch.head_dim == 32


def test_a_split_gguf_sums_the_tensors_of_every_part(tmp_path: Path) -> None:
    whole = write_model(tmp_path / "whole.gguf")
    w = gguf.GGUFWriter(str(tmp_path / "split.gguf"), "llama", split_max_tensors=10)
    reader = gguf.GGUFReader(str(whole))
    for field in reader.fields.values():
        if field.name.startswith(("llama.", "general.")) and field.types and field.types[0] != gguf.GGUFValueType.ARRAY:
            w.add_key_value(field.name, field.contents(), field.types[0])
    for t in reader.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    parts = sorted(tmp_path.glob("split-*-of-*.gguf"))
    assert len(parts) > 1
    arch = arch_from_gguf(parts[0])
    assert arch.checkpoint_bytes == reference_bytes(whole)
    assert arch_from_gguf(parts[-1]).checkpoint_bytes == arch.checkpoint_bytes  # a later part finds part 1
    parts[-1].unlink()
    with pytest.raises(DataError, match="is missing"):
        arch_from_gguf(parts[0])


def test_the_dispatcher_reads_gguf_files_and_ollama_blobs(tmp_path: Path) -> None:
    path = write_model(tmp_path / "m.gguf")
    blob = tmp_path / ("sha256-" + "ab" * 32)
    blob.write_bytes(path.read_bytes())
    assert load_model(str(path)).checkpoint_bytes == load_model(str(blob)).checkpoint_bytes > 0


def test_a_folder_with_only_a_gguf_uses_it_and_ignores_the_vision_projector(tmp_path: Path) -> None:
    write_model(tmp_path / "model-Q8_0.gguf")
    write_model(tmp_path / "mmproj-model-f16.gguf", layers=1)
    assert arch_from_folder(tmp_path).num_layers == LAYERS


def test_a_folder_with_two_gguf_models_asks_for_one(tmp_path: Path) -> None:
    write_model(tmp_path / "a.gguf")
    write_model(tmp_path / "b.gguf")
    with pytest.raises(DataError, match="pass one file"):
        arch_from_folder(tmp_path)


def test_a_gguf_without_an_architecture_key_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "vocab.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    path.write_bytes(path.read_bytes() + b"\0" * 16)
    with pytest.raises(DataError, match="general.architecture"):
        arch_from_gguf(path)


# --- hostile files -----------------------------------------------------------------------
def gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def header(n_tensors: int, n_kv: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


ARCH_KV = gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
HOSTILE: dict[str, bytes] = {
    "bad magic": b"GGML" + b"\0" * 60,
    "empty file": b"",
    "version 1": header(0, 0, version=1) + b"\0" * 16,
    "absurd tensor count": header(2**60, 0) + b"\0" * 64,
    "absurd metadata count": header(0, 2**60) + b"\0" * 64,
    "array of 2**40 bytes": header(0, 1) + gguf_string("a") + struct.pack("<IIQ", 9, 0, 2**40) + b"\0" * 32,
    "string array of 2**40 items": header(0, 1) + gguf_string("t") + struct.pack("<IIQ", 9, 8, 2**40) + b"\0" * 32,
    "string of 2**50 bytes": header(0, 1) + gguf_string("s") + struct.pack("<IQ", 8, 2**50) + b"\0" * 32,
    "unknown value type": header(0, 1) + gguf_string("x") + struct.pack("<I", 77) + b"\0" * 32,
    "deeply nested arrays": header(0, 1) + gguf_string("n") + struct.pack("<I", 9)
    + struct.pack("<IQ", 9, 1) * 5 + b"\0" * 32,
    "duplicate key": header(0, 2) + ARCH_KV + ARCH_KV + b"\0" * 32,
    "five-dimensional tensor": header(1, 1) + ARCH_KV + gguf_string("w") + struct.pack("<I", 5) + b"\0" * 64,
    "unknown ggml type": header(1, 1) + ARCH_KV + gguf_string("w") + struct.pack("<IQIQ", 1, 32, 999, 0),
    "tensor past the end": header(1, 1) + ARCH_KV + gguf_string("w") + struct.pack("<IQIQ", 1, 2**30, 0, 0),
    "truncated header": header(0, 3) + ARCH_KV,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_gguf_is_a_quick_data_error_naming_the_file(tmp_path: Path, case: str) -> None:
    path = tmp_path / "evil.gguf"
    path.write_bytes(HOSTILE[case])
    started = time.monotonic()
    with pytest.raises(DataError) as info:
        arch_from_gguf(path)
    assert time.monotonic() - started < 2.0
    assert "evil.gguf" in info.value.message.en and info.value.message.zh


def test_a_real_gguf_cut_short_is_reported_as_truncated(tmp_path: Path) -> None:
    path = write_model(tmp_path / "cut.gguf")
    data = path.read_bytes()
    for size in (len(data) - 100, 200):  # inside the tensor data, then inside the metadata
        path.write_bytes(data[:size])
        with pytest.raises(DataError, match="cut.gguf"):
            arch_from_gguf(path)


def test_a_missing_gguf_package_gives_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_model(tmp_path / "m.gguf")
    monkeypatch.setitem(sys.modules, "gguf", None)
    monkeypatch.setitem(sys.modules, "gguf.constants", None)
    with pytest.raises(GpuwiseError) as info:
        arch_from_gguf(path)
    assert info.value.hint is not None and "pip install 'gpuwise[gguf]'" in info.value.hint.en


# --- bits per weight table ---------------------------------------------------------------
def test_gguf_bits_per_weight_match_llama_cpp() -> None:
    assert GGUF_BITS_PER_WEIGHT["Q4_0"] == 4.5
    assert GGUF_BITS_PER_WEIGHT["Q8_0"] == 8.5
    assert GGUF_BITS_PER_WEIGHT["F16"] == GGUF_BITS_PER_WEIGHT["BF16"] == 16.0
    assert GGUF_BITS_PER_WEIGHT["Q4_K_M"] == pytest.approx(4.85, abs=0.02)
    assert GGUF_BITS_PER_WEIGHT["Q5_K_M"] == pytest.approx(5.69, abs=0.02)
    assert GGUF_BITS_PER_WEIGHT["Q6_K"] == pytest.approx(6.5625, abs=0.01)
    assert GGUF_BITS_PER_WEIGHT["Q4_K"] == GGUF_BITS_PER_WEIGHT["Q4_K_M"]  # llama-quantize alias
    assert {"Q2_K", "Q3_K_M", "IQ4_XS", "IQ2_XXS"} <= set(GGUF_BITS_PER_WEIGHT)


def test_every_gguf_type_row_cites_a_source_and_block_types_match_ggml() -> None:
    table = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "data" / "gguf_types.toml"
    rows = tomllib.loads(table.read_text(encoding="utf-8"))["type"]
    sizes = {t.name: 8 * s / b for t, (b, s) in gguf.constants.GGML_QUANT_SIZES.items()}
    for row in rows:
        assert row["sources"], row["name"]
        if row["kind"] == "block" and row["name"] in sizes:
            assert row["bits_per_weight"] == pytest.approx(sizes[row["name"]], abs=0.01), row["name"]


def test_deepseek2_metadata_becomes_mla_and_shared_experts(tmp_path: Path) -> None:
    def deepseek(w: Any) -> None:
        for key, value in (("attention.key_length", 24), ("attention.value_length", 16),
                           ("rope.dimension_count", 8), ("attention.kv_lora_rank", 32),
                           ("attention.q_lora_rank", 48), ("expert_count", 8), ("expert_used_count", 2),
                           ("expert_feed_forward_length", 32), ("expert_shared_count", 1),
                           ("leading_dense_block_count", 1)):
            w.add_uint32(f"deepseek2.{key}", value)

    arch = arch_from_gguf(write_model(tmp_path / "ds.gguf", arch="deepseek2", extra=deepseek))
    assert arch.model_type == "deepseek_v3"
    assert arch.mla is not None and (arch.mla.kv_lora_rank, arch.mla.q_lora_rank) == (32, 48)
    assert (arch.mla.qk_nope_head_dim, arch.mla.qk_rope_head_dim, arch.mla.v_head_dim) == (16, 8, 16)
    assert arch.moe is not None and arch.moe.num_shared_experts == 1 and arch.moe.dense_layers == (0,)
