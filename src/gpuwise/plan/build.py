"""Build the one `Plan` value from a ranked candidate: counts, checkpoint, card facts, notes."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.estimate.ranges import Ranged, estimate_values, ranges_for
from gpuwise.estimate.serving_rules import tensor_parallel
from gpuwise.estimate.weights import checkpoint_format, pending_format
from gpuwise.i18n import Text
from gpuwise.plan.search import Candidate
from gpuwise.plan.value import CardFacts, Plan
from gpuwise.units import GiB

__all__ = ["DeployChoices", "card_facts", "plan_from_candidate", "plan_notes", "quality_of"]

# Names other tools use for a card (ecosystem.md s.2.4): SkyPilot accelerators, Ray constants.
_SKYPILOT = {"h100-sxm": "H100", "h100-pcie": "H100", "h200-sxm": "H200", "a100-80gb-sxm": "A100-80GB",
             "a100-80gb-pcie": "A100-80GB", "a100-40gb-sxm": "A100", "a100-40gb-pcie": "A100",
             "l40s": "L40S", "l4": "L4", "rtx-4090": "RTX4090", "rtx-6000-ada": "RTX6000-Ada",
             "rtx-a6000": "RTXA6000", "t4": "T4", "a10g": "A10G", "mi300x": "MI300X", "b200": "B200"}
_RAY = {"h100-sxm": "H100", "h100-pcie": "H100", "h200-sxm": "H200", "a100-80gb-sxm": "A100-80G",
        "a100-80gb-pcie": "A100-80G", "a100-40gb-sxm": "A100-40G", "a100-40gb-pcie": "A100-40G",
        "l40s": "L40S", "l4": "L4", "h20": "H20", "t4": "T4", "a10g": "A10G", "b200": "B200"}


@dataclass(frozen=True)
class DeployChoices:
    """What the user chose for the export beyond the search: the checkpoint, the code, the image."""

    source: str
    deploy_model: str | None = None  # --deploy-model: e.g. an AWQ checkpoint of the planned model
    script: str | None = None
    workdir: str | None = None
    image: str | None = None


def card_facts(card: Card, gpus_per_node: int) -> CardFacts:
    smi = [a for a in card.aliases if a.startswith("NVIDIA ")]
    return CardFacts(
        id=card.id, name=card.name, vendor=card.vendor, software=card.software,
        memory_gb=card.memory_gb, bf16=card.dense_tflops("bf16") is not None,
        compute_capability=card.compute_capability, skypilot_name=_SKYPILOT.get(card.id),
        ray_accelerator_type=_RAY.get(card.id),
        k8s_product=smi[0].replace(" ", "-") if smi else None,  # GPU Feature Discovery's label
        mig_profiles=tuple(card.mig_profiles), interconnect=card.interconnect,
        linked=card.linked(gpus_per_node))


def _hub_id(src: str) -> str:
    from gpuwise.catalog.presets import find_preset

    preset = find_preset(src)
    return preset.hf_id if preset and preset.hf_id else src


def _checkpoint(model: ModelArch, c: Candidate, choice: DeployChoices) -> tuple[str, str | None, list[Text]]:
    """The checkpoint to deploy and the engine's online quantisation of it, with what to say."""
    native = checkpoint_format(model)
    fmt = c.workload.weights
    base = _hub_id(choice.source)
    if choice.deploy_model:
        return choice.deploy_model, None, [Text(
            f"Deploys {choice.deploy_model} (--deploy-model), sized as {fmt} weights.",
            f"部署 {choice.deploy_model}（--deploy-model），按 {fmt} 权重估算。")]
    if c.workload.is_training or pending_format(native, fmt) is None:
        return base, None, []
    if fmt == "fp8" and native in ("bf16", "fp16", "fp32") and c.deployment.engine == "trtllm":
        return base, "fp8", [Text(
            f"TensorRT-LLM serves FP8 from a pre-quantised checkpoint (NVIDIA ModelOpt): pass an FP8 "
            f"version of {base} with --deploy-model.",
            f"TensorRT-LLM 需要预先量化的 FP8 检查点（NVIDIA ModelOpt）：请用 --deploy-model 指定 {base} 的该版本。")]
    if fmt == "fp8" and native in ("bf16", "fp16", "fp32"):
        name = "SGLang" if c.deployment.engine == "sglang" else "vLLM"
        return base, "fp8", [Text(
            f"{name} quantises the 16-bit checkpoint to FP8 as it loads it (--quantization fp8).",
            f"{name} 在加载时把 16 位检查点在线量化为 FP8（--quantization fp8）。")]
    # `quantization` is the format the checkpoint still needs (plan/value.py): the exporters refuse
    # it where their engine cannot quantise to it as it loads, instead of deploying {native} weights.
    kind = "an AWQ/GPTQ " if fmt in ("int4", "int8") else "a "
    return base, fmt, [Text(
        f"The plan assumes {fmt} weights but {base} is {native}: pass {kind}{fmt} checkpoint of it "
        f"with --deploy-model (e.g. search the hub for '{model.name} {fmt}'); until then the exports "
        f"refuse, since {base} needs the memory of {native} weights.",
        f"方案按 {fmt} 权重估算，但 {base} 是 {native}：请用 --deploy-model 指定其 {fmt} "
        f"检查点（如在模型库搜索“{model.name} {fmt}”）；在此之前导出会被拒绝，因为 {base} 需要 {native} 权重的显存。")]


def plan_from_candidate(c: Candidate, model: ModelArch, choice: DeployChoices, objective: str,
                        reasons: tuple[Text, ...], notes: tuple[Text, ...] = (),
                        quality: tuple[Text | None, tuple[str, ...]] = (None, ())) -> Plan:
    d, w = c.deployment, c.workload
    infer = not w.is_training
    tp = tensor_parallel(model, d) if infer else (d.tp or 1)
    replicas = c.replicas if infer else 1
    nodes = d.nodes if not infer else max(1, c.nodes)
    per_node = (d.gpus * replicas) // nodes if infer else d.gpus
    deploy, quant, ck_notes = _checkpoint(model, c, choice)
    offloaded = c.memory.host.cpu_ram / max(d.gpus, 1) if infer else 0.0
    ranged = candidate_ranges(c, model)
    top = ranged.get("memory.required")
    return Plan(
        card_facts=card_facts(d.card, per_node), gpus_total=per_node * nodes, gpus_per_node=per_node,
        nodes=nodes, task=w.task, model=model.name, deploy_model=deploy, weights=w.weights,
        replicas=replicas, tp=tp, pp=d.pp,
        dp=replicas if infer else d.gpus * d.nodes // (tp * d.pp), zero=d.zero, fsdp=d.zero == 3,
        offload=d.offload, cpu_offload_gb=offloaded / GiB, engine=d.engine if infer else None,
        quantization=quant, source=choice.source, context=w.context if infer else None,
        concurrency=c.users if infer else None, kv_dtype=w.kv_dtype,
        gpu_memory_utilization=d.gpu_memory_utilization,
        max_num_batched_tokens=w.max_num_batched_tokens, seq_len=None if infer else w.seq_len,
        micro_batch=w.micro_batch, grad_accum=w.grad_accum, grad_ckpt=w.grad_ckpt,
        optimizer=w.optimizer, lora_rank=w.lora_rank if w.task in ("lora", "qlora") else None,
        framework=w.framework, loss=w.loss, activation_offload=w.activation_offload,
        optimizer_in_backward=w.optimizer_in_backward, packing=w.packing, compile=w.compile, float8=w.float8,
        dora=w.dora, modules_to_save=w.modules_to_save, padding_free=w.padding_free,
        image=choice.image, script=choice.script, workdir=choice.workdir, objective=objective,
        breakdown=c.memory.breakdown, usable_bytes=c.memory.usable, required_high=top.high if top else None,
        ranges=ranged.bands(), speed=c.speed, cost=c.cost,
        reasons=reasons, notes=(*ck_notes, *notes), quality=quality[0], quality_sources=quality[1])


def quality_of(fmt: str) -> tuple[Text | None, tuple[str, ...]]:
    """The quality cost of a quantised format, with its sources; (None, ()) for 16-bit."""
    from gpuwise.catalog.quality import is_quantised, quality_cost

    if fmt == "auto" or not is_quantised(fmt):  # auto: as the checkpoint stores it, its publisher's choice
        return None, ()
    q = quality_cost(fmt)
    return q.summary, q.sources


def candidate_ranges(c: Candidate, model: ModelArch | None = None) -> Ranged:
    """The candidate's 80 % bands, as `gpuwise estimate` gives them (estimate/ranges.py)."""
    d = c.deployment
    return ranges_for(estimate_values(c.memory, c.speed, c.cost), training=c.workload.is_training,
                      engine=d.engine, family=d.card.family, task=c.workload.task,
                      framework=c.workload.framework,
                      caps={"capacity.max_context": model.max_context} if model else None)


def plan_notes(c: Candidate, near_limit: float) -> tuple[Text, ...]:
    """What the person signing the plan should know: memory headroom, the machine it needs
    (power, PCIe lanes, link reach) and the software stack of a non-CUDA card."""
    from gpuwise.catalog.hardware import node_notes

    out: list[Text] = []
    share = c.memory.breakdown.required / c.memory.usable if c.memory.usable else 0.0
    top = c.required_high
    if top is not None and top > c.memory.usable >= c.memory.breakdown.required:
        out.append(Text(f"Tight: fits at the estimate, not at the top of its 80 % range ({top / GiB:,.1f} GiB of "
                        f"{c.memory.usable / GiB:,.1f} GiB usable per GPU).",
                        f"偏紧：按估算放得下，按 80% 区间上限（{top / GiB:,.1f} GiB，每卡可用 "
                        f"{c.memory.usable / GiB:,.1f} GiB）放不下。"))
    elif share > near_limit:
        out.append(Text(f"Uses {share:.0%} of the usable memory per GPU: little headroom for longer "
                        "prompts, fragmentation or an engine upgrade.",
                        f"占每卡可用显存的 {share:.0%}：更长的提示、碎片或引擎升级都可能放不下。"))
    out += node_notes(c.deployment.card, c.gpus_per_node)
    if c.deployment.card.software != "cuda":
        from gpuwise.catalog.stacks import software_stack

        stack = software_stack(c.deployment.card)
        engines = ", ".join(stack.serving_engines)
        out.append(Text(f"Runs on the {stack.name} stack, not CUDA: serve with {engines} "
                        f"(image {stack.vllm_image}).",
                        f"运行在 {stack.name} 软件栈上而非 CUDA：推理可用 {engines}（镜像 {stack.vllm_image}）。"))
    return tuple(out)
