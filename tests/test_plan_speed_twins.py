"""The plan search shares one memory estimate between cards that are memory twins (plan/fast.py
`_Request.twin`): the same usable memory and, for serving, the same large-GPU verdict of the
engine's rules and the same answer to whether a TP group of more than 2 GPUs sits on an NVLink
fabric (serving_rules.card_fabric: the engines' NCCL buffers grow there). That is exact only while
a memory estimate reads nothing else of the card. These tests hold the estimator to it: a card
given another card's memory and name but every other field of a different card (family,
bandwidth, FP8, interconnect, form factor...) gets the very same memory estimate, for serving on
every engine and for training; at TP 4 and 8 the same holds once the twins agree on the fabric,
and where they do not the estimates may differ (the search keys them apart).
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.catalog.cards import Card, load_cards
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.api import estimate_memory
from gpuwise.estimate.workload import Deployment, Workload

PAIRS = [("h100-sxm", "rtx-4090"), ("rtx-4090", "a100-80gb-sxm"), ("l40s", "t4"), ("a10", "b200")]

SERVING = [(Workload(context=4096, concurrency=8), {"engine": "vllm", "gpus": 1}),
           (Workload(context=32768, concurrency=2, weights="fp8"), {"engine": "vllm", "gpus": 2}),
           (Workload(context=8192, concurrency=4), {"engine": "sglang", "gpus": 2}),
           (Workload(context=8192, concurrency=4), {"engine": "trtllm", "gpus": 1}),
           (Workload(context=2048, concurrency=2), {"engine": "transformers", "gpus": 1}),
           (Workload(context=4096, concurrency=1, weights="gguf:Q4_K_M"), {"engine": "llamacpp", "gpus": 1}),
           (Workload(context=4096, concurrency=8), {"engine": "vllm", "gpus": 1, "offload": "cpu"})]
TRAINING = [(Workload(task="lora", seq_len=2048), {"gpus": 1}),
            (Workload(task="lora", seq_len=4096, grad_ckpt="full"), {"gpus": 4, "zero": 2}),
            (Workload(task="full", seq_len=2048), {"gpus": 8, "zero": 3}),
            (Workload(task="full", seq_len=2048), {"gpus": 8, "nodes": 2, "zero": 3, "offload": "cpu"}),
            (Workload(task="qlora", weights="nf4", seq_len=2048), {"gpus": 1})]


def hybrid(memory_of: Card, rest_of: Card) -> Card:
    """`rest_of` in every field but the two a memory estimate may read: `memory_of`'s."""
    return dataclasses.replace(rest_of, memory_cuda_gib=memory_of.memory_cuda_gib, name=memory_of.name)


@pytest.mark.parametrize(("own", "other"), PAIRS)
@pytest.mark.parametrize(("model", "cases"), [("llama-3.1-8b", SERVING), ("qwen3-30b-a3b", SERVING[:3]),
                                              ("qwen2.5-7b", TRAINING)], ids=["dense", "moe", "training"])
def test_a_memory_estimate_reads_only_the_cards_memory_and_name(
        own: str, other: str, model: str, cases: list[tuple[Workload, dict[str, object]]]) -> None:
    catalog = load_cards()
    card, rest = catalog.get(own), catalog.get(other)
    assert card is not None and rest is not None
    twin = hybrid(card, rest)
    assert twin != card
    arch = load_model(model)
    for w, given in cases:
        a = estimate_memory(arch, w, Deployment(card=card, **given))  # type: ignore[arg-type]
        b = estimate_memory(arch, w, Deployment(card=twin, **given))  # type: ignore[arg-type]
        assert a == b, (w, given)


WIDE = [(Workload(context=8192, concurrency=8), {"engine": "vllm", "gpus": 4}),
        (Workload(context=8192, concurrency=8, weights="fp8"), {"engine": "sglang", "gpus": 8}),
        (Workload(context=8192, concurrency=8), {"engine": "trtllm", "gpus": 4})]


@pytest.mark.parametrize(("own", "other"), [("h100-sxm", "h100-pcie"), ("a100-80gb-sxm", "rtx-4090"),
                                            ("l40s", "b200")])
def test_at_tp_over_2_the_estimate_reads_the_fabric_too(own: str, other: str) -> None:
    from gpuwise.estimate.serving_rules import card_fabric

    catalog = load_cards()
    card, rest = catalog.get(own), catalog.get(other)
    assert card is not None and rest is not None
    arch = load_model("llama-3.1-70b")
    twin = dataclasses.replace(hybrid(card, rest), interconnect=card.interconnect,
                               interconnect_max_gpus=card.interconnect_max_gpus)
    for w, given in WIDE:
        d, t = Deployment(card=card, **given), Deployment(card=twin, **given)  # type: ignore[arg-type]
        assert card_fabric(d) == card_fabric(t)
        assert estimate_memory(arch, w, d) == estimate_memory(arch, w, t), (own, other, given)
