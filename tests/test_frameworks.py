"""--framework: the shipped rows, defaults resolved with flags winning, and what the output says."""

from __future__ import annotations

import pytest

from gpuwise.catalog.frameworks import KNOBS, find_framework, frameworks, resolve_knobs
from gpuwise.errors import UnknownNameError
from gpuwise.service import EstimateRequest, estimate_json
from tests.test_cli import run

IDS = {"hf", "hf-liger", "llama-factory", "unsloth", "torchtune", "deepspeed", "torchtitan", "megatron", "ms-swift"}


def test_every_framework_the_issue_names_ships_with_sources() -> None:
    rows = frameworks()
    assert IDS <= set(rows)
    assert all(f.sources and f.version and f.peak_note for f in rows.values())


def test_an_explicit_flag_wins_and_the_rest_are_named_as_defaults() -> None:
    fw = find_framework("torchtune")
    knobs, defaults = resolve_knobs(fw, "lora", multi_gpu=False, explicit={"grad_ckpt": "none"})
    assert knobs["grad_ckpt"] == "none" and knobs["loss"] == fw.loss
    assert "grad_ckpt" not in defaults and "loss" in defaults
    assert set(defaults) <= set(KNOBS)
    full, _ = resolve_knobs(fw, "full", multi_gpu=False, explicit={})
    assert full["optimizer"] == (fw.optimizer_full or fw.optimizer)


def test_the_estimate_names_the_framework_and_every_default_it_applied() -> None:
    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="rtx-4090", task="lora", framework="torchtune",
                                      optimizer="adamw8bit"))
    fw = r["framework"]
    assert fw["id"] == "torchtune" and fw["knobs"]["optimizer"] == "adamw8bit"
    assert "optimizer" not in fw["defaults_applied"] and "loss" in fw["defaults_applied"]
    assert fw["peak_reported"] == "allocated"
    m = r["memory"]
    assert 0 < m["allocated_peak"] < m["reserved_peak"] < m["device_total"] == m["required"]


def test_frameworks_differ_where_their_defaults_do() -> None:
    def need(fw: str) -> float:
        return float(estimate_json(EstimateRequest(model="qwen2.5-7b", card="rtx-4090", task="lora",
                                                   framework=fw))["memory"]["required"])
    assert need("unsloth") < need("llama-factory") < need("hf")  # fused loss + offload < checkpointing < neither
    assert need("hf-liger") < need("hf")  # the fused loss drops the logits


def test_fixes_are_spelled_in_the_framework_own_words() -> None:
    r = estimate_json(EstimateRequest(model="qwen2.5-7b", card="rtx-4090", task="lora", framework="llama-factory",
                                      micro_batch=4, seq_len=2048))
    assert not r["fits"]
    assert any("--loss fused; in LLaMA-Factory: enable_liger_kernel: true" in s for s in r["suggestions"])
    assert any("ds_z3_config.json" in s for s in r["suggestions"])


def test_an_unknown_framework_is_refused_with_close_matches() -> None:
    with pytest.raises(UnknownNameError) as err:
        find_framework("torchtun")
    assert "torchtune" in str(err.value.text.en if hasattr(err.value, "text") else err.value)
    proc = run("estimate", "llama-3.1-8b", "--card", "4090", "--task", "lora", "--framework", "torchtun")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "torchtune" in proc.stderr + proc.stdout


def test_float8_training_is_refused_on_a_card_without_fp8() -> None:
    from gpuwise.errors import InputError

    with pytest.raises(InputError, match="FP8"):
        estimate_json(EstimateRequest(model="llama-3.1-8b", card="a100-80gb-sxm", task="pretrain", float8=True))
    assert estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="pretrain",
                                         float8=True))["framework"]["knobs"]["float8"]


def test_an_escape_sequence_in_a_flag_never_reaches_the_terminal() -> None:
    proc = run("estimate", "llama-3.1-8b", "--card", "4090", "--task", "lora", "--framework", "torch\x1b[31mtune")
    assert proc.returncode == 2 and "\x1b" not in proc.stderr + proc.stdout


def test_hf_full_fine_tuning_gains_an_fp32_master_only_once_it_is_sharded() -> None:
    def opt(zero: int, gpus: int) -> float:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="full", framework="hf",
                                          gpus=gpus, zero=zero, seq_len=1024))
        return float(r["memory"]["optimizer"]) * gpus  # the whole job's optimizer bytes
    params = 8.03e9
    assert opt(0, 1) == pytest.approx(params * 4, rel=0.01)  # pure bf16: m and v at 2 bytes
    assert opt(3, 8) == pytest.approx(params * 12, rel=0.01)  # accelerate's fp32 upcast: master + m + v


def test_optimizer_in_backward_still_holds_the_output_projection_gradient_beside_the_loss() -> None:
    def alloc(oib: bool) -> float:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="rtx-4090", task="full", framework="torchtune",
                                          seq_len=2048, micro_batch=2, optimizer_in_backward=oib,
                                          optimizer="paged-adamw8bit", compile=True))
        return float(r["memory"]["allocated_peak"])
    head_grad = 128256 * 4096 * 2  # vocab x hidden, bf16
    assert alloc(True) >= 16.06e9 + head_grad  # the weights and the head's gradient at least


def test_torchtitan_under_pipeline_parallelism_keeps_each_stage_unsharded() -> None:
    kw: dict[str, object] = {"model": "llama-3.1-70b", "card": "h100-sxm", "task": "pretrain",
                             "framework": "torchtitan", "gpus": 8, "nodes": 4, "tp": 4, "zero": 3, "seq_len": 4096,
                             "grad_accum": 8}
    piped = estimate_json(EstimateRequest(pp=4, **kw))["memory"]  # type: ignore[arg-type]
    flat = estimate_json(EstimateRequest(pp=1, **kw))["memory"]  # type: ignore[arg-type]
    stage = 70.6e9 / (4 * 4)  # parameters per GPU before FSDP: TP 4 x PP 4
    items = {i["name"]: i["bytes"] for i in piped["items"]}
    assert items["zero3_gather"] >= 0.9 * stage * 2  # bf16, the whole stage, not two layers
    assert items["gradients"] >= 0.9 * stage * 4  # fp32, unsharded until the last micro-batch
    assert {i["name"]: i["bytes"] for i in flat["items"]}["zero3_gather"] < items["zero3_gather"] / 5


def test_torchtune_full_fine_tuning_takes_the_distributed_recipe_optimizer_on_several_gpus() -> None:
    fw = find_framework("torchtune")
    one, _ = resolve_knobs(fw, "full", multi_gpu=False, explicit={})
    many, _ = resolve_knobs(fw, "full", multi_gpu=True, explicit={})
    assert (one["optimizer"], one["optimizer_in_backward"]) == ("paged-adamw8bit", True)
    assert (many["optimizer"], many["optimizer_in_backward"]) == ("adamw", False)
    lora, _ = resolve_knobs(fw, "lora", multi_gpu=True, explicit={})
    assert lora["optimizer"] == fw.optimizer


def test_offloaded_gradients_leave_the_gpu_with_the_optimizer_states() -> None:
    def grads(offload: str) -> float:
        r = estimate_json(EstimateRequest(model="llama-3.1-70b", card="a100-80gb-sxm", gpus=8, task="full",
                                          framework="torchtune", zero=3, offload=offload, seq_len=2048))
        return float(r["memory"]["gradients"])
    # the GPU keeps the layer being reduced and FSDP's reduction in flight (one unit's bf16 gradient and the
    # output projection's reduce-scatter input), not the 70B model's sharded gradients
    assert grads("cpu") < grads("none") / 3


def test_hf_qlora_keeps_the_non_4bit_parameters_and_the_residual_stream_in_fp32() -> None:
    def mem(fw: str) -> dict[str, float]:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="a100-80gb-sxm", task="qlora", framework=fw,
                                          grad_ckpt="full", seq_len=4096))
        return {i["name"]: float(i["bytes"]) for i in r["memory"]["items"]}
    hf, lf = mem("hf"), mem("llama-factory")
    embed_and_head = 2 * 128256 * 4096
    assert hf["weights"] - lf["weights"] == pytest.approx(2 * embed_and_head, rel=0.01)  # 2 more bytes each
    ckpt_inputs = 32 * 4096 * 4096 * 2  # bf16 checkpointed layer inputs
    assert hf["activations"] - lf["activations"] >= 0.9 * ckpt_inputs  # fp32 doubles them


def test_a_compiled_full_loss_keeps_its_input_and_gradient_not_twelve_bytes_per_logit() -> None:
    def logits(compile_: bool, framework: str = "torchtitan") -> float:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="pretrain",
                                          framework=framework, gpus=8, zero=3, seq_len=8192, micro_batch=1,
                                          compile=compile_, loss="full"))
        return float({i["name"]: i["bytes"] for i in r["memory"]["items"]}["logits"])
    per_logit = 8192 * 128256
    assert logits(False) == pytest.approx(12 * per_logit)
    assert logits(True) == pytest.approx(4 * per_logit)  # bf16 logits in, .float() inside: bf16 gradient out
    assert logits(True, "torchtune") == pytest.approx(8 * per_logit)  # the model hands it fp32 logits


def test_under_fsdp_the_chunked_loss_holds_the_whole_head_gradient() -> None:
    from gpuwise.estimate.memory_train import _states
    from gpuwise.service import build

    def head(loss: str) -> float:
        model, w, d, _ = build(EstimateRequest(model="llama-3.1-8b", card="a100-80gb-sxm", task="full",
                                               framework="torchtune", gpus=8, zero=3, seq_len=2048, loss=loss))
        return _states(model, find_framework("torchtune"), w, d, 1, 8).head_grad
    whole = 128256 * 4096 * 2  # bf16, not yet reduce-scattered over the 8 ranks
    assert head("chunked") == pytest.approx(whole)
    assert head("full") == pytest.approx(whole / 8)


def test_the_end_of_2024_torchtitan_compiled_the_model_but_not_its_loss() -> None:
    def items(framework: str, compile_: bool) -> dict[str, float]:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="pretrain",
                                          framework=framework, gpus=8, zero=3, seq_len=8192, micro_batch=1,
                                          compile=compile_))
        return {i["name"]: float(i["bytes"]) for i in r["memory"]["items"]}
    per_logit = 8192 * 128256
    assert items("torchtitan-2024-12", True)["logits"] == pytest.approx(12 * per_logit)
    assert items("torchtitan", True)["logits"] == pytest.approx(4 * per_logit)
    # its AdamW ran the foreach path: one more fp32 copy of the second moments, sharded 8 ways
    step = items("torchtitan-2024-12", False)["optimizer"] - items("torchtitan", False)["optimizer"]
    assert step == pytest.approx(4 * 8.03e9 / 8, rel=0.01)


def test_variable_length_batches_keep_an_earlier_batch_loss_segments_in_the_pool() -> None:
    def memory(packing: bool, card: str = "a100-80gb-sxm", seq_len: int = 2048) -> dict[str, float]:
        r = estimate_json(EstimateRequest(model="qwen2.5-7b", card=card, task="lora", framework="ms-swift-1",
                                          seq_len=seq_len, packing=packing))
        m = r["memory"]
        return {"slack": float(m["reserved_peak"] - m["allocated_peak"]), "usable": float(r["usable_bytes"]),
                "device": float(m["device_total"]),
                "logits": float({i["name"]: i["bytes"] for i in m["items"]}["logits"])}
    varied, packed = memory(False), memory(True)
    per_logit = 2048 * 152064
    assert varied["logits"] == pytest.approx(12 * per_logit)  # this batch's loss peak
    assert varied["slack"] == pytest.approx(varied["logits"] + 4 * per_logit)  # + an earlier batch's segments
    assert packed["slack"] < varied["slack"] / 2  # fixed lengths: half the loss peak (6 B a logit), not 16
    tight = memory(False, card="rtx-4090", seq_len=4096)  # cached blocks are released before an OOM
    assert tight["device"] <= tight["usable"] * 1.0001


def test_op_sac_under_float8_keeps_the_linear_outputs_it_keeps_in_bf16() -> None:
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.activations import saved_activations
    from gpuwise.estimate.workload import Workload

    preset = find_preset("llama-3.1-8b")
    assert preset is not None
    model = preset.arch()

    def kept(framework: str, float8: bool) -> float:
        w = Workload(task="pretrain", framework=framework, grad_ckpt="op-sac", seq_len=8192, micro_batch=1,
                     float8=float8, compile=True, flash_attention=True)
        return saved_activations(model, w, full_ft=True, layers=model.num_layers).kept
    sb, h = 8192, model.hidden_size
    mms = 2 * sb * (model.q_dim + model.kv_dim + model.intermediate_size + h)  # wq, wv, w1, w2 outputs
    # the checkpoint's dispatch mode sees Float8Tensor's aten.mm before it becomes torch._scaled_mm
    # (tests/test_train_memory_sac.py): the Float8 linears' outputs are saved like the bf16 ones
    assert kept("torchtitan", True) == pytest.approx(kept("torchtitan", False))
    assert kept("torchtitan", True) > model.num_layers * mms  # wq, wv, w1, w2 outputs among them
    assert kept("torchtitan-2024-12", True) == pytest.approx(kept("torchtitan-2024-12", False))


def test_fsdp_shards_the_lora_adapters_with_their_layers() -> None:
    def adapters(gpus: int, zero: int) -> float:
        mem = estimate_json(EstimateRequest(model="llama-3.1-70b", card="a100-80gb-sxm", task="lora",
                                            framework="torchtune", gpus=gpus, zero=zero))["memory"]
        return float(next(i["bytes"] for i in mem["items"] if i["name"] == "adapters"))
    assert adapters(8, 3) == pytest.approx(adapters(1, 0) / 8, rel=1e-6)  # fully_shard takes every parameter
    assert adapters(8, 2) == pytest.approx(adapters(1, 0), rel=1e-6)  # ZeRO-2 keeps the parameters whole


def test_torchtitan_under_tensor_parallelism_charges_the_vocabulary_parallel_loss() -> None:
    def logits(framework: str, tp: int) -> float:
        mem = estimate_json(EstimateRequest(model="llama-3.1-70b", card="h100-sxm", task="pretrain",
                                            framework=framework, gpus=8, tp=tp, zero=3, seq_len=8192,
                                            micro_batch=1, grad_ckpt="full"))["memory"]
        return float(next(i["bytes"] for i in mem["items"] if i["name"] == "logits"))
    per_rank = 8192 * 128256 / 8
    assert logits("torchtitan", 8) == pytest.approx(16 * per_rank)  # zeros_like, exp and their sum beside x
    assert logits("hf", 8) == pytest.approx(12 * per_rank)  # aten's log_softmax and nll kernels
    assert logits("torchtitan", 1) == pytest.approx(12 * 8192 * 128256)  # no TP: no DTensor loss


def test_fsdp1_keeps_the_root_unit_whole_through_the_step() -> None:
    def gather(framework: str) -> float:
        mem = estimate_json(EstimateRequest(model="llama-3.1-8b", card="a100-80gb-sxm", task="full",
                                            framework=framework, gpus=4, zero=3, seq_len=2048))["memory"]
        return float(next(i["bytes"] for i in mem["items"] if i["name"] == "zero3_gather"))
    root = 2 * 128256 * 4096 * 2  # embedding + output projection, bf16
    assert gather("torchtune-0.2") - gather("torchtune") == pytest.approx(root)  # FSDP1 against FSDP2


def test_without_zero_the_framework_shards_as_it_does_by_default() -> None:
    """torchtitan and torchtune shard with FSDP2 unless told otherwise (frameworks.toml sharding): 8 GPUs
    without --zero are ZeRO-3, named as a default; --zero 0 still means plain replicas."""
    def run8(framework: str, zero: int | None = None) -> dict:
        return estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", gpus=8, task="pretrain",
                                             framework=framework, seq_len=8192, zero=zero))
    titan, titan3, titan0 = run8("torchtitan"), run8("torchtitan", 3), run8("torchtitan", 0)
    assert titan["fits"] and titan["framework"]["knobs"]["zero"] == 3
    assert "zero" in titan["framework"]["defaults_applied"]
    assert titan["memory"]["required"] == titan3["memory"]["required"] < titan0["memory"]["required"]
    assert "zero" not in titan3["framework"]["defaults_applied"]
    hf = run8("hf")  # the HF Trainer is DDP unless given an FSDP or DeepSpeed config
    assert hf["framework"]["knobs"]["zero"] == 0 and hf["memory"]["required"] == run8("hf", 0)["memory"]["required"]
    assert any("--gpus 8 --zero 3" in s for s in hf["suggestions"])  # shard the GPUs it already has
    one = estimate_json(EstimateRequest(model="llama-3.2-1b", card="h100-sxm", task="pretrain", framework="torchtitan"))
    assert one["framework"]["knobs"]["zero"] == 0 and "zero" not in one["framework"]["defaults_applied"]


def test_an_inference_estimate_refuses_training_flags_it_would_drop() -> None:
    from gpuwise.errors import InputError

    with pytest.raises(InputError) as err:
        estimate_json(EstimateRequest(model="qwen2.5-7b", card="rtx-4090", zero=3, optimizer="adamw8bit"))
    assert "--optimizer, --zero" in err.value.message.en and "--task infer" in err.value.message.en
    assert "--optimizer、--zero" in err.value.message.zh
    with pytest.raises(InputError) as dora:
        estimate_json(EstimateRequest(model="qwen2.5-7b", card="rtx-4090", dora=True))
    assert "--dora" in dora.value.message.en
    assert estimate_json(EstimateRequest(model="qwen2.5-7b", card="rtx-4090"))["fits"]  # defaults pass
