"""The shells: real `gpuwise` processes, their languages, JSON and exit codes on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run(
    *args: str, lang_env: str = "C.UTF-8", extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "GPUWISE_")) and k != "LANG"}
    env.update({"LANG": lang_env, "COLUMNS": "200", "HF_HUB_OFFLINE": "1", **(extra_env or {})})
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def test_a_zh_locale_gives_chinese_output_by_default_and_lang_en_overrides_it() -> None:
    zh = run("estimate", "llama-3.1-8b", "--card", "4090", lang_env="zh_CN.UTF-8")
    assert zh.returncode == 0 and "权重" in zh.stdout
    en = run("estimate", "llama-3.1-8b", "--card", "4090", "--lang", "en", lang_env="zh_CN.UTF-8")
    assert "weights" in en.stdout and "权重" not in en.stdout


@pytest.mark.parametrize("args, needle", [
    (("estimate", "llama-3.1-8b", "--card", "H10O"), "Did you mean"),
    (("estimate", "lama-3.1-8b", "--card", "H100"), "Did you mean"),
    (("estimate", "llama-3.1-8b", "--card", "H100", "--context", "-5"), "--context"),
    (("estimate", "llama-3.1-8b", "--card", "H100", "--gpus", "3"), "does not divide"),
    (("estimate", "llama-3.1-8b", "--card", "A100", "--weights", "fp8", "--engine", "transformers"), "FP8"),
    (("estimate", "llama-3.1-8b", "--card", "H100", "--context", "500000"), "--allow-long-context"),
    (("plan", "llama-3.1-8b", "--objective", "fastest"), "cost-per-token"),
    (("model", "no/such-model-anywhere", "--hub", "hf"), ""),
])
def test_bad_input_is_a_clear_message_and_exit_2_never_a_traceback(args: tuple[str, ...], needle: str) -> None:
    proc = run(*args, "--lang", "en", extra_env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert needle in proc.stderr
    as_json_proc = run(*args, "--json", extra_env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert as_json_proc.returncode == 2 and as_json(as_json_proc)["message"]


@pytest.mark.parametrize("content", ['{"model_type": "llama", "hidden_size": "big"}', "not json at all",
                                     '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 1e30}',
                                     "[]"])
def test_a_hostile_config_json_is_refused_cleanly(tmp_path: Path, content: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(content)
    proc = run("model", str(cfg), "--lang", "en")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "config.json" in proc.stderr or "JSON" in proc.stderr


def test_the_json_contract_of_estimate_and_plan() -> None:
    est = as_json(run("estimate", "llama-3.1-8b", "--card", "H100", "--context", "8192", "--json"))
    assert est["schema_version"] == 1 and "card_note" in est  # "H100" resolved to a documented default
    assert {"weights", "kv_cache", "activations", "gradients", "optimizer", "overhead", "total"} <= set(est["memory"])
    assert {"kv_tokens", "max_concurrency", "max_context"} <= set(est["capacity"])
    assert {"decode_tokens_per_s", "throughput_tokens_per_s", "prefill_tokens_per_s", "ttft_s"} <= set(est["speed"])
    assert {"currency", "per_hour", "per_million_tokens"} <= set(est["cost"])
    plan = as_json(run("plan", "llama-3.1-8b", "--task", "lora", "--json"))
    assert plan["plans"] and plan["rejected"]
    emitted = as_json(run("plan", "llama-3.1-8b", "--emit", "vllm", "--json"))
    assert emitted["config"].splitlines()[-1].startswith("vllm serve ")


def test_model_reports_the_done_when_figures() -> None:
    m = as_json(run("model", "llama-3.1-8b", "--json"))
    assert (m["params_total"], m["kv_bytes_per_token"]) == (8_030_261_248, 131_072)
    ds = as_json(run("model", "deepseek-v3", "--json"))
    assert ds["attention"] == "mla" and ds["kv_bytes_per_token"] == 61 * (512 + 64) * 2
    moe = as_json(run("model", "qwen3-30b-a3b", "--json"))
    assert moe["params_active"] < moe["params_total"] / 5


MARKUP_NAME = "[link=https://evil.example]click[/link] [bold red]x[/]"


@pytest.mark.parametrize("command", [("model",), ("estimate", "--card", "4090"), ("plan", "--top", "1")])
def test_rich_markup_and_escapes_in_a_model_name_print_literally(tmp_path: Path, command: tuple[str, ...]) -> None:
    from tests.test_gguf import write_model

    path = write_model(tmp_path / "named.gguf",
                       extra=lambda w: w.add_name(MARKUP_NAME + "\x1b]52;c;cHduZWQ=\x07\x1b[2J"))
    proc = run(command[0], str(path), *command[1:], "--lang", "en", extra_env={"FORCE_COLOR": "1", "TERM": "xterm"})
    assert proc.returncode == 0, proc.stderr
    assert "[link=https://evil.example]click[/link]" in proc.stdout
    assert "\x1b]8;" not in proc.stdout and "\x1b]52" not in proc.stdout and "\x1b[2J" not in proc.stdout


def test_the_fast_json_path_knows_exactly_the_estimate_commands_flags() -> None:
    from gpuwise.cli.app import command
    from gpuwise.cli.fast import flags

    estimate = command().commands["estimate"]
    typer_flags = {opt: param.name for param in estimate.params for opt in param.opts if opt.startswith("--")}
    shown_only = {"--json", "--lang", "--explain", "--plot", "--help"}  # human output, or not an estimate input
    assert set(flags()) == set(typer_flags) - shown_only
    assert all(flags()[flag][0] == typer_flags[flag].removesuffix("_") for flag in flags()
               if typer_flags[flag] not in ("prices", "cards_file", "tokens", "os_name"))
    negatable = {opt for param in estimate.params for opt in param.opts if param.secondary_opts}
    assert {f for f, (_, kind) in flags().items() if kind == "bool"} == negatable


@pytest.mark.parametrize("args", [
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--json"),
    ("estimate", "--json", "qwen2.5-7b", "--card=4090", "--context", "8192", "--concurrency", "4", "--lang", "zh"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--task", "lora", "--no-packing", "--tokens", "1e8", "--json"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--context", "-5", "--json"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--context", "many", "--json"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--no-such-flag", "--json"),
])
def test_estimate_json_is_the_same_with_and_without_the_fast_path(args: tuple[str, ...]) -> None:
    fast = run(*args)
    full = run(*args, extra_env={"GPUWISE_FULL_CLI": "1"})
    assert (fast.returncode, fast.stdout) == (full.returncode, full.stdout)
    assert "Traceback" not in fast.stderr


def test_no_name_is_both_a_language_model_preset_and_a_diffusion_preset() -> None:
    """The estimate and plan skip gpuwise.diffusion for a language-model preset name (a cold-start
    saving): that is only right while no name, alias or short hub id answers to both."""
    from gpuwise.catalog import presets
    from gpuwise.diffusion.loader import _preset_index

    llm = set(presets._index())
    diffusion = set(_preset_index())
    assert llm and diffusion
    assert llm & diffusion == set()
