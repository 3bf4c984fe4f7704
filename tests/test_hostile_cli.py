"""A slice of the bad-input corpus (benchmarks/hostile_corpus.py) in CI: the CLI given FIFOs,
devices, folders, deep nesting, huge numbers, NaN and impossible parallelism answers with a
message and a non-zero exit, never a traceback, a hang or invalid JSON."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.hostile_corpus import CliCase, build_files, cli_cases, run_cli_case

CHOSEN = (
    "estimate --tp 2 --pp 2 --gpus 2", "estimate --nodes 0", "estimate --tokens nan",
    "estimate --inter-node-gbps 0 nodes 2", "plan --budget nan", "plan nothing meets --budget 0.0001",
    "model /dev/zero", "model file deep", "model file bignum", "model file st_deep", "model file st_fifo",
    "model file fifo.gguf", "estimate --prices prices_nan.toml", "prices --prices prices_deep.toml",
    "cards --cards cards_inf.toml", "cards --cards fifo.toml", "plan --emit vllm --from plan_deep.json",
    "plan --save missing folder", "plan --save symlink", "estimate --plot symlink",
    "estimate model 'xxxxxxxxxxxxxxxxxxxx'",
)


@pytest.fixture(scope="module")
def cases() -> Iterator[dict[str, CliCase]]:
    with tempfile.TemporaryDirectory(prefix="gpuwise-hostile-test-") as tmp:
        files = build_files(Path(tmp))
        yield {c.name: c for c in cli_cases(files)}


@pytest.mark.parametrize("name", CHOSEN)
def test_a_hostile_invocation_is_a_message_and_a_non_zero_exit(cases: dict[str, CliCase], name: str) -> None:
    if name not in cases:
        pytest.skip(f"{name}: not available on this platform (no FIFOs)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GPUWISE_LANG": "en", "COLUMNS": "120",
           "GPUWISE_CONFIG_DIR": tempfile.mkdtemp(prefix="gpuwise-hostile-cfg-")}
    r = run_cli_case(cases[name], env)
    assert not r["hang"], r
    assert not r["traceback"], r.get("tail")
    assert not r.get("invalid_json"), r
    assert not r["accepted_wrong"], r
