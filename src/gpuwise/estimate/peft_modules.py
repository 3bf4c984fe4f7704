"""What LoRA keeps beyond its adapters: modules trained in full beside them, and DoRA's tensors.

--modules-to-save: PEFT wraps each named module in a ModulesToSaveWrapper that keeps the frozen original
and trains a deep copy of it (peft 0.13.2 and 0.17.1 peft/utils/other.py ModulesToSaveWrapper.update:
copy.deepcopy(self.original_module)), so a tied embedding and output projection become two trained
copies. The copy keeps the model's dtype: PEFT's autocast_adapter_dtype upcasts only the parameters of
BaseTunerLayer modules (peft/tuners/tuners_utils.py _cast_adapter_dtype: 'if not isinstance(module,
BaseTunerLayer): continue'), which the wrapper is not. torch AdamW makes its states zeros_like the
parameter, in its dtype; DeepSpeed's bf16 engine instead keeps an fp32 master and fp32 states for every
trainable parameter (deepspeed/runtime/zero/stage_1_and_2.py@v0.16.5 line 401:
single_partition_of_fp32_groups = ....clone().float(); engine.py line 1234 module.bfloat16()).

--dora: PEFT 0.13.2 (ms-swift 3.0's pin, peft>=0.11.0,<0.14.0) runs each targeted linear as
peft/tuners/lora/layer.py Linear.forward line 581, x = x.to(lora_A.weight.dtype), then
peft/tuners/lora/dora.py DoraLinearLayer.forward: x_eye = torch.eye(d_in, dtype=x.dtype); lora_weight =
lora_B(lora_A(x_eye)).T; weight = weight.to(x.dtype); get_weight_norm: weight + scaling * lora_weight and
its row norm, detached; result = (mag_norm_scale - 1) * F.linear(x, weight) + mag_norm_scale *
lora_result * scaling. torchtune 0.6.1 torchtune/modules/peft/dora.py DoRALinear.forward does the same
in the adapters' dtype with the base output computed once from the parameter itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import ckpt_every, find_framework
from gpuwise.estimate.workload import Workload


def saved_module_params(model: ModelArch, w: Workload) -> int:
    """Parameters of the --modules-to-save copies: vocabulary x hidden for the embedding and for the
    output projection, each its own copy even where the checkpoint ties them."""
    if w.task not in ("lora", "qlora"):
        return 0
    return len(w.modules_to_save) * model.vocab_size * model.hidden_size


def _targets(model: ModelArch, index: int, targets: tuple[str, ...]) -> list[tuple[int, int]]:
    """(d_in, d_out) of each targeted linear of layer `index` (MoE layers: the shared experts'
    gate/up/down, as memory_train.lora_params)."""
    h, q, kv = model.hidden_size, model.q_dim, model.kv_dim
    inter = model.intermediate_size
    if model.is_moe_layer(index) and model.moe is not None:
        inter = model.moe.shared_intermediate_size * model.moe.num_shared_experts
    shapes = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h)}
    if inter:
        shapes.update(gate=(h, inter), up=(h, inter), down=(inter, h))
    return [shapes[t] for t in targets if t in shapes]


def dora_magnitude_params(model: ModelArch, w: Workload) -> int:
    """DoRA's magnitude: one trained value per output row of each targeted linear (lora_magnitude_vector,
    the weight norm of shape d_out), cast to the adapters' dtype with them."""
    if not w.dora:
        return 0
    return sum(d_out for i in range(model.num_layers) for _, d_out in _targets(model, i, w.lora_targets))


@dataclass(frozen=True)
class DoraActivations:
    """DoRA's tensors beside LoRA's, for one layer of one micro-batch (bytes, before TP)."""

    saved: float  # kept for backward by every layer whose activations are kept (or the recomputed one)
    transient: float  # at the weight norm of the widest targeted linear, freed when it returns


def dora_activations(model: ModelArch, w: Workload, adapter_bytes: float) -> DoraActivations:
    """Per layer: (1) where the adapters are wider than the 16-bit weight, the weight's cast copy
    (weight.to(x.dtype)), which F.linear(x, weight) saves for x's gradient; (2) base_result and
    lora_result, d_out each per token, saved by the two products with mag_norm_scale (the magnitude is
    trained). At the norm: x_eye (d_in x d_in), lora_weight, scaling * lora_weight and the sum (d_in x d_out
    each), all in the adapters' dtype. peft 0.14 and later reuse the base output when lora_dropout is 0
    (no F.linear, so no saved copy); ms-swift's lora_dropout is 0.05 (swift/llm/argument/tuner_args.py):
    the framework field dora_reruns_base, which the speed side reads too."""
    if not w.dora or w.task not in ("lora", "qlora"):
        return DoraActivations(0.0, 0.0)
    tokens = w.seq_len * w.micro_batch
    copy = adapter_bytes > 2.0 and find_framework(w.framework).dora_reruns_base
    worst_saved, worst_transient = 0.0, 0.0
    for index in range(model.num_layers):
        shapes = _targets(model, index, w.lora_targets)
        saved = sum((d_in * d_out if copy else 0) + 2.0 * tokens * d_out for d_in, d_out in shapes)
        transient = max((d_in * d_in + 3.0 * d_in * d_out for d_in, d_out in shapes), default=0.0)
        worst_saved, worst_transient = max(worst_saved, saved), max(worst_transient, transient)
    return DoraActivations(saved=worst_saved * adapter_bytes, transient=worst_transient * adapter_bytes)


def dora_layers_kept(w: Workload, layers: float) -> float:
    """Layers whose DoRA tensors stay saved through the forward: all without checkpointing (or with
    Megatron's selective recompute), the layers between checkpoints under every-N, none under full."""
    if w.grad_ckpt in ("none", "selective"):
        return layers
    every = ckpt_every(w.grad_ckpt)
    if every <= 1:
        return 0.0
    n = max(1, round(layers))
    return float(n - n // every)
