"""Contract files: the example loads; mistakes get a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.errors import DataError
from gpuwise.verify.contract import load_contract, parse_contract
from gpuwise.verify.judge import Claim, judge
from gpuwise.verify.raw import load_evidence
from tests.verify_fakes import FIXTURES

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "contract.toml"


def test_the_example_contract_loads_with_every_term() -> None:
    c = load_contract(EXAMPLE)
    assert (c.card, c.count, c.pcie_gen, c.nvlink, c.ecc, c.mig) == ("H100-SXM", 8, 5, True, True, False)
    assert c.min_mem_bw_gbps == 2700.0 and c.source == str(EXAMPLE)


def test_the_healthy_fixture_meets_the_example_contract() -> None:
    verdict = judge(load_evidence(FIXTURES / "h100x8_raw.json"), Claim(contract=load_contract(EXAMPLE)))
    assert verdict.status == "pass", [(c.name, c.detail.en) for c in verdict.checks if c.status != "pass"]


def test_an_unknown_key_suggests_the_right_one() -> None:
    with pytest.raises(DataError) as err:
        parse_contract({"pcie_gne": 5})
    assert "Did you mean 'pcie_gen'?" in err.value.message.en


def test_a_value_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(DataError):
        parse_contract({"count": "eight"})
    with pytest.raises(DataError):
        parse_contract({"min_mem_bw_gbps": True})
    with pytest.raises(DataError):
        parse_contract({"count": -1})


def test_a_file_that_is_not_toml_is_a_data_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text("card = [")
    with pytest.raises(DataError):
        load_contract(bad)


def test_an_older_driver_than_the_contract_floor_fails() -> None:
    claim = Claim(contract=parse_contract({"driver_min": "575.51.03"}))
    verdict = judge(load_evidence(FIXTURES / "h100x8_raw.json"), claim)
    driver = next(c for c in verdict.checks if c.name == "inventory.driver")
    assert driver.status == "fail" and "older than the contract" in driver.detail.en
