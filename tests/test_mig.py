"""`gpuwise mig`: MIG profile tables, slice estimates, packing, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.errors import GpuwiseError, InputError
from gpuwise.fleet.mig import MigPlan, plan_mig
from gpuwise.fleet.mig_data import MigGpu, load_mig_tables, mig_table_for
from gpuwise.fleet.mig_fit import ServiceSpec, fit_on_slice
from gpuwise.fleet.mig_input import parse_services
from tests.fixtures.fleet.helpers import cli

HERE = Path(__file__).parent / "fixtures" / "fleet" / "mig"
TABLES = load_mig_tables()


def card(name: str) -> object:
    return resolve_card(name).card


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_every_mig_table_is_consistent_and_sourced(table: MigGpu) -> None:
    assert table.sources and any("mig-user-guide" in s for s in table.sources)
    assert max(p.compute for p in table.profiles) == table.compute_slices
    assert max(p.memory for p in table.profiles) == table.memory_slices
    for p in table.profiles:
        assert p.max_instances <= len(p.placements) or p.media
        assert all(0 <= s and s + p.memory <= table.memory_slices for s in p.placements)


def test_the_mig_tables_name_the_same_profiles_as_the_card_catalog() -> None:
    catalog = {c.id: c for c in load_cards(())}
    for t in TABLES:
        for card_id in t.cards:
            assert set(catalog[card_id].mig_profiles) == {p.name for p in t.profiles}, card_id
    listed = {c for t in TABLES for c in t.cards}
    assert {c.id for c in catalog.values() if c.mig_profiles} <= listed


def _check_layout(plan: MigPlan) -> None:
    t = plan.table
    for gpu in plan.gpus:
        slices = [s for x in gpu for s in range(x.start, x.start + x.profile.memory)]
        assert len(slices) == len(set(slices)), "instances overlap"
        assert all(x.start in x.profile.placements for x in gpu)
        assert sum(x.profile.compute for x in gpu) <= t.compute_slices


def test_four_small_services_share_one_a100_80gb() -> None:
    out = cli("mig", str(HERE / "a100_4_services.toml"), "--json")
    data = out.json()
    assert out.code == 0 and data["card"] == "a100-80gb-sxm" and data["gpus_total"] == 1
    chosen = {s["name"]: s["chosen"]["profile"] for s in data["services"]}
    assert chosen == {"chat": "3g.40gb", "assistant": "1g.20gb", "small": "1g.10gb", "tiny": "1g.10gb"}
    assert data["k8s_resources"]["chat"] == {"nvidia.com/mig-3g.40gb": 1}
    assert "sudo nvidia-smi mig -i 0 -cgi 3g.40gb,1g.20gb,1g.10gb,1g.10gb -C" in data["nvidia_smi"]
    parted = yaml.safe_load(data["mig_parted"])
    assert parted["mig-configs"]["gpuwise"][0]["mig-devices"] == {"3g.40gb": 1, "1g.20gb": 1, "1g.10gb": 2}
    for s in data["services"]:  # the smallest slice that fits: every smaller one was tried and failed
        assert all(not t["fits"] for t in s["tried"][:-1]) and s["tried"][-1]["fits"]


def test_three_services_on_an_h100_and_the_plan_in_words() -> None:
    out = cli("mig", str(HERE / "h100_3_services.toml"), "--lang", "en")
    assert out.code == 0
    assert "h100-sxm: 1 GPU(s)" in out.stdout and "nvidia.com/mig-3g.40gb" in out.stdout
    assert "MPS" in out.stdout and "Time-slicing" in out.stdout
    zh = cli("mig", str(HERE / "h100_3_services.toml"), "--lang", "zh")
    assert "服务" in zh.stdout and "gpuwise 不会执行" in zh.stdout


def test_a_slice_is_the_card_cut_down_so_a_bigger_slice_is_never_slower() -> None:
    a100, table = card("a100-80gb-sxm"), mig_table_for(card("a100-80gb-sxm"))
    s = ServiceSpec("x", "qwen3-0.6b", context=2048, concurrency=4)
    speeds = [fit_on_slice(s, a100, table, table.profile(n)).decode_tokens_per_s
              for n in ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")]
    assert all(v is not None for v in speeds)
    assert speeds == sorted(speeds)  # type: ignore[type-var]
    assert speeds[0] < speeds[-1]  # type: ignore[operator]


def test_a_speed_target_moves_a_service_to_a_bigger_slice() -> None:
    a100 = card("a100-80gb-sxm")
    loose = plan_mig([ServiceSpec("x", "qwen3-0.6b", context=2048, concurrency=4)], a100)
    fast = loose.chosen[0].fit.decode_tokens_per_s
    assert fast is not None
    strict = plan_mig([ServiceSpec("x", "qwen3-0.6b", context=2048, concurrency=4,
                                   min_tokens_per_s=fast * 1.3)], a100)
    assert strict.chosen[0].fit.profile.memory > loose.chosen[0].fit.profile.memory
    assert "under the" in strict.chosen[0].tried[0].why.en


def test_seven_tiny_services_fill_one_gpu_and_the_eighth_opens_another() -> None:
    a100 = card("a100-80gb-sxm")
    tiny = [ServiceSpec(f"t{i}", "qwen3-0.6b", context=2048) for i in range(8)]
    assert len(plan_mig(tiny[:7], a100).gpus) == 1
    plan = plan_mig(tiny, a100)
    assert [len(g) for g in plan.gpus] == [7, 1]
    _check_layout(plan)


def test_two_half_gpu_slices_leave_no_room_for_a_third_instance() -> None:
    a100 = card("a100-80gb-sxm")
    pinned = [ServiceSpec("a", "qwen3-0.6b", profile="3g.40gb"), ServiceSpec("b", "qwen3-0.6b", profile="3g.40gb"),
              ServiceSpec("c", "qwen3-0.6b", profile="1g.10gb")]
    plan = plan_mig(pinned, a100)
    assert [sorted(x.start for x in g) for g in plan.gpus] == [[0, 4], [0]]
    _check_layout(plan)


def test_training_is_refused_with_the_reason_and_whole_gpus_offered() -> None:
    with pytest.raises(InputError) as err:
        plan_mig([ServiceSpec("ft", "qwen3-0.6b", task="lora")], card("h100-sxm"))
    assert "overrun a slice" in err.value.message.en and "whole GPUs" in err.value.message.en
    assert "整卡" in err.value.message.zh


def test_a_card_without_mig_names_the_cards_with_it() -> None:
    out = cli("mig", str(HERE / "a100_4_services.toml"), "--card", "rtx-4090")
    assert out.code == 2 and "has no MIG" in out.stderr and "h100-sxm" in out.stderr


def test_an_unknown_profile_suggests_the_close_one() -> None:
    with pytest.raises(GpuwiseError, match="Did you mean '3g.40gb'"):
        plan_mig([ServiceSpec("x", "qwen3-0.6b", profile="3g.40g")], card("a100-80gb-sxm"))


def test_a_service_that_fits_no_slice_says_how_much_it_needs() -> None:
    with pytest.raises(InputError, match="fits no MIG slice") as err:
        plan_mig([ServiceSpec("big", "llama-3.1-70b", context=8192)], card("a100-40gb-sxm"))
    assert "7g.40gb" in err.value.message.en and err.value.hint is not None


@pytest.mark.parametrize(("doc", "words"), [
    ({"service": [{"model": "qwen3-0.6b", "concurency": 2}]}, "Did you mean 'concurrency'"),
    ({"service": [{"context": 10}]}, "has no model"),
    ({"service": [{"model": "qwen3-0.6b", "context": 0}]}, "context must be a whole number"),
    ({"service": [{"model": "x", "name": "a"}, {"model": "y", "name": "a"}]}, "used twice"),
    ({"cards": "h100"}, "unknown top-level"),
])
def test_bad_services_files_say_what_is_wrong(doc: dict[str, object], words: str) -> None:
    with pytest.raises(GpuwiseError, match=words):
        parse_services(doc, "services.toml")


def test_the_profile_list_and_a_missing_card() -> None:
    out = cli("mig", "--card", "h200", "--list", "--json")
    names = [p["profile"] for p in out.json()["profiles"]]
    assert out.code == 0 and names[0] == "1g.18gb" and "7g.141gb" in names
    assert cli("mig").code == 2
