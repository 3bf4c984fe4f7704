"""GPUs without peer-to-peer: NCCL's SHM host bounce (efficiency.toml [links] no_p2p_*), checked
against the published nccl-tests figures the data file cites."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuwise.catalog.cards import Card, resolve_card
from gpuwise.estimate.links import card_rates, efficiency_table, host_memory_bandwidth, link_path
from gpuwise.units import GB


def _card(name: str, **changes: Any) -> Card:
    card = resolve_card(name).card
    return dataclasses.replace(card, **changes) if changes else card


def _links() -> dict[str, Any]:
    return dict(efficiency_table()["links"])


def test_geforce_cards_take_the_host_bounce() -> None:
    card = _card("rtx-4090")
    assert card.pcie_p2p is False
    assert link_path(card, 4) == "pcie-host-bounce"
    assert "no_p2p_factor" not in _links()  # the assumed factor is gone


def test_eight_rtx_4090_match_the_measured_shm_ring() -> None:
    # nccl#1530: 8x RTX 4090, Gen4 x16, every pair SYS (SHM): ring busbw ~12 GB/s above 16 MB
    busbw = card_rates(_card("rtx-4090"), gpus=8).link_busbw
    assert busbw == pytest.approx(12.0 * GB, rel=0.10)


def test_with_peer_to_peer_the_same_link_is_twice_as_fast() -> None:
    # tinygrad/open-gpu-kernel-modules#36: 4x RTX 4090 with P2P, all_reduce busbw 25.72-25.95 GB/s
    p2p = card_rates(_card("rtx-4090", pcie_p2p=True), gpus=4).link_busbw
    bounce = card_rates(_card("rtx-4090"), gpus=4).link_busbw
    assert p2p == pytest.approx(25.8 * GB, rel=0.05)
    assert 1.8 < p2p / bounce < 2.2


def test_the_link_term_scales_with_generation_and_lanes() -> None:
    links = _links()
    fraction = float(links["no_p2p_busbw_fraction"])
    gen4 = card_rates(_card("rtx-4090"), gpus=4).link_busbw
    x8 = card_rates(_card("rtx-4090", pcie_lanes=8), gpus=4).link_busbw
    gen3 = card_rates(_card("rtx-4090", pcie_gen=3), gpus=4).link_busbw
    assert gen4 == pytest.approx(31.5 * fraction * GB)
    assert x8 == pytest.approx(gen4 / 2)
    assert gen3 == pytest.approx(15.75 * fraction * GB)


def test_host_memory_bounds_two_gen5_cards_on_a_desktop() -> None:
    # two RTX 5090 on the card's usual host: 2 GPUs x 2 crossings share its memory bandwidth
    card = _card("rtx-5090")
    links = _links()
    busbw = card_rates(card, gpus=2).link_busbw
    link = 63.0 * float(links["no_p2p_busbw_fraction"]) * GB
    memory = host_memory_bandwidth(card) / (2 * float(links["no_p2p_host_crossings"]))
    assert memory < link
    assert busbw == pytest.approx(memory)


def test_more_gpus_share_the_server_host() -> None:
    card = _card("rtx-5090")
    four, eight = (card_rates(card, gpus=n).link_busbw for n in (4, 8))
    assert eight < four
    assert four / eight == pytest.approx(2.0, rel=0.3)


def test_latency_follows_the_measured_small_messages() -> None:
    card = _card("rtx-4090")
    two, eight = (card_rates(card, gpus=n).link_latency for n in (2, 8))
    assert two == pytest.approx(12.25e-6, rel=0.05)  # 2x RTX 2080 Ti all_reduce_perf, 8 B
    assert eight == pytest.approx(43.47e-6, rel=0.05)  # nccl#1530, 8x RTX 4090, 8 B
    assert card_rates(card, gpus=4).link_latency < eight


def test_training_on_four_4090s_is_charged_the_bounce() -> None:
    from gpuwise.service import EstimateRequest, estimate_json

    def dp_comm(card: str) -> float:
        r = estimate_json(EstimateRequest(model="llama-3.1-8b", card=card, gpus=4, task="full", zero=3,
                                          micro_batch=1, seq_len=2048, grad_ckpt="full", framework="torchtitan"))
        return float(r["speed"]["communication_s"]["dp_total"])

    # the same FSDP traffic over SHM (12.6 GB/s) takes twice as long as over PCIe P2P (25.2 GB/s)
    assert dp_comm("rtx-4090") / dp_comm("rtx-6000-ada") == pytest.approx(2.0, rel=0.05)
