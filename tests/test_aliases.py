"""Names people type resolve to the card they mean, and a miss suggests the right variants."""

from __future__ import annotations

import pytest

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.errors import UnknownNameError


@pytest.mark.parametrize("typed, card_id", [
    ("4050", "rtx-4050-laptop"), ("RTX 4050", "rtx-4050-laptop"), ("rtx4050", "rtx-4050-laptop"),
    ("4050 laptop", "rtx-4050-laptop"), ("NVIDIA GeForce RTX 4050 Laptop GPU", "rtx-4050-laptop"),
    ("A100-80G", "a100-80gb-sxm"), ("a100 80gb", "a100-80gb-sxm"), ("A100-80G-PCIe", "a100-80gb-pcie"),
    ("4090 48G", "rtx-4090-48gb"), ("RTX4090", "rtx-4090"), ("GeForce RTX 4090", "rtx-4090"),
    ("H100 80GB HBM3", "h100-sxm"), ("Tesla T4", "t4"), ("910B", "ascend-910b"), ("昇腾910B", "ascend-910b"),
])
def test_a_name_people_type_finds_the_card_they_mean(typed: str, card_id: str) -> None:
    assert resolve_card(typed).card.id == card_id


def test_a_bare_model_number_with_one_card_says_which_card_it_took() -> None:
    resolved = resolve_card("4050")
    assert resolved.note is not None and "rtx-4050-laptop" in resolved.note.en
    assert "rtx-4050-laptop" in resolved.note.zh


def test_a_model_number_prefix_never_matches_a_longer_number() -> None:
    with pytest.raises(UnknownNameError):
        resolve_card("409")


def test_an_unknown_memory_variant_suggests_the_nearest_memory_first() -> None:
    with pytest.raises(UnknownNameError) as err:
        resolve_card("A100 96G")
    first_two = err.value.suggestions[:2]
    assert {load_cards().get(i).memory_gb for i in first_two if load_cards().get(i)} == {80.0}
    assert "a100-40gb" in " ".join(err.value.suggestions[2:])


def test_every_alias_in_the_data_resolves_to_its_own_card() -> None:
    catalog = load_cards()
    for card in catalog:
        for alias in card.aliases:
            assert resolve_card(alias, catalog).card.id == card.id, alias
