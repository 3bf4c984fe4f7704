"""NeMo 24.07's optimizer, Apex DistributedFusedAdam, against Megatron-Core's as gpuwise counts them.

NeMo keeps one whole bf16 gradient buffer (apex init_grad_buffer: torch.zeros([buffer_size],
dtype=grad_sync_dtype), the FP8 scripts' grad_sync_dtype=bf16), the fp32 master as a 16-bit remainder
beside each bf16 weight (megatron_base_model.setup_optimization: store_params False,
store_param_remainders True) and fp32 Adam shards over data x context parallel: 2 + 2 + (2 + 8) / DP
bytes a parameter, where the megatron row keeps 2 + 4 (fp32 main_grad) + (4 + 8) / DP. The NeMo
performance summary's Llama 3 8B run (validation/points/training.toml, nemo-2407-llama3-8b-pretrain-fp8-8xh100-tps)
ran on 80 GB H100s; the megatron row calls it 'does not fit'.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog.frameworks import find_framework
from gpuwise.catalog.params import count_params
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, build, estimate_json

RUN = {"model": "llama-3.1-8b", "card": "h100-sxm", "gpus": 8, "task": "pretrain", "seq_len": 8192, "grad_accum": 32,
       "zero": 1, "grad_ckpt": "none", "float8": True, "cp": 2, "cp_kind": "ring"}


def _items(framework: str) -> tuple[dict[str, float], dict]:  # type: ignore[type-arg]
    out = estimate_json(EstimateRequest(framework=framework, **RUN))  # type: ignore[arg-type]
    return {i["name"]: i["bytes"] for i in out["memory"]["items"]}, out


def test_gradients_are_bf16_and_the_master_is_a_sharded_16_bit_remainder() -> None:
    model, _, _, _ = build(EstimateRequest(model="llama-3.1-8b", card="h100-sxm"))
    params = count_params(model).total
    dp = 8  # the optimizer's group: 4 data-parallel ranks x cp 2 (MegatronDistributedFusedAdam)
    nemo, _ = _items("nemo-24.07")
    megatron, _ = _items("megatron")
    assert nemo["gradients"] == pytest.approx(2.0 * params, rel=1e-6)
    assert megatron["gradients"] == pytest.approx(4.0 * params, rel=1e-6)
    assert nemo["optimizer"] == pytest.approx((2.0 + 8.0) * params / dp, rel=1e-6)
    assert megatron["optimizer"] == pytest.approx((4.0 + 8.0) * params / dp, rel=1e-6)
    assert nemo["weights"] == megatron["weights"]


def test_the_run_that_ran_fits_on_the_nemo_row_and_not_on_the_megatron_row() -> None:
    _, nemo = _items("nemo-24.07")
    _, megatron = _items("megatron")
    assert nemo["fits"] and not megatron["fits"]


def test_its_distributed_optimizer_is_the_multi_gpu_default_and_is_not_deepspeed() -> None:
    fw = find_framework("nemo-24.07")
    assert fw.sharding == "dist-optim" and not fw.zero_is_deepspeed
    out = estimate_json(EstimateRequest(**{**RUN, "zero": None}, framework="nemo-24.07"))  # type: ignore[arg-type]
    assert "zero" in out["framework"]["defaults_applied"] and out["framework"]["knobs"]["zero"] == 1


def test_no_export_pretends_to_be_nemo() -> None:
    from gpuwise.service_plan import PlanRequest, emit_json

    with pytest.raises(InputError, match="no export for framework 'nemo-24.07'"):
        emit_json(PlanRequest(model="llama-3.1-8b", task="pretrain", framework="nemo-24.07", cards="h100-sxm",
                              seq_len=4096), "framework")
