"""FSDP's gradient reduction during backward (estimate/memory_train.py _reducing): one unit's unsharded
gradient in bf16 beside the previous unit's reduce-scatter input in the reduce dtype."""

from __future__ import annotations

import pytest

from gpuwise.catalog.frameworks import find_framework
from gpuwise.catalog.params import count_params
from gpuwise.estimate.memory_train import _reducing
from gpuwise.estimate.workload import Workload
from gpuwise.service import EstimateRequest, build, estimate_json


def _model():  # type: ignore[no-untyped-def]
    model, _, _, _ = build(EstimateRequest(model="llama-3.1-8b", card="h100-sxm"))
    return model


def test_the_backward_holds_a_unit_gradient_and_the_last_units_reduce_scatter_input() -> None:
    model = _model()
    c = count_params(model)
    layer = (c.total - c.embedding - c.lm_head) / model.num_layers
    full = Workload(task="full", framework="torchtune")
    head = model.vocab_size * model.hidden_size
    # torchtune: no MixedPrecisionPolicy, so both in bf16; under the chunked loss the output projection
    # is its own unit, the first that backward reduces
    assert _reducing(model, find_framework("torchtune"), full, 1, head) == pytest.approx(2 * layer + 2 * head)
    assert _reducing(model, find_framework("torchtune"), full, 1, 0.0) == pytest.approx(4 * layer)
    # torchtitan: bf16 compute gradient, fp32 reduce-scatter input (mixed_precision_reduce float32), TP split
    titan = Workload(task="pretrain", framework="torchtitan")
    assert _reducing(model, find_framework("torchtitan"), titan, 2, 0.0) == pytest.approx(6 * layer / 2)
    # LoRA reduces the adapters' gradients only; DeepSpeed ZeRO-3 reduces in buckets, not units
    assert _reducing(model, find_framework("torchtune"), Workload(task="lora", framework="torchtune"), 1, head) == 0
    assert _reducing(model, find_framework("deepspeed"), Workload(task="full", framework="deepspeed"), 1, 0.0) == 0


def test_a_70b_full_fine_tune_with_cpu_offload_peaks_in_backward_with_the_reduction_in_flight() -> None:
    # torchtune README (30b8519): Llama 3.1 70B full, 8 x A100, CPU offload, batch 2, packed 2048, compile: 13.9 GiB
    req = EstimateRequest(model="llama-3.1-70b", card="a100-80gb-sxm", framework="torchtune", gpus=8, task="full",
                          seq_len=2048, micro_batch=2, zero=3, offload="cpu", grad_ckpt="full", packing=True,
                          compile=True)
    mem = estimate_json(req)["memory"]
    items = {i["name"]: float(i["bytes"]) for i in mem["items"]}
    assert mem["allocated_peak"] / 2**30 == pytest.approx(13.9, rel=0.10)
    model, _, _, _ = build(req)
    c = count_params(model)
    layer = (c.total - c.embedding - c.lm_head) / model.num_layers
    head = model.vocab_size * model.hidden_size
    # the peak is the backward's start: params gathered, activations, the recomputed layer, the last layer's
    # bf16 gradient and the output projection's reduce-scatter input (its own unit under the chunked loss)
    assert mem["allocated_peak"] >= items["zero3_gather"] + items["activations"] + 2 * layer + 2 * head
