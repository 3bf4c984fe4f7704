"""A Chinese-speaking user at 80 columns: the main commands in Chinese (by --lang zh and by a zh
locale alone) keep every line within 80 terminal cells (a CJK character is two), say their words
in Chinese, and lay tables out without cutting or squeezing them."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from gpuwise.cli.app import run
from gpuwise.cli.helpfmt import cells

VERIFY_FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "verify" / "h100x8_raw.json")
EST = ("estimate", "qwen2.5-7b", "--card", "rtx-4090")
COMMANDS: dict[str, tuple[str, ...]] = {
    "serving": EST,
    "serving llama.cpp": (*EST, "--engine", "llamacpp", "--weights", "gguf:Q4_K_M"),
    "serving sglang": (*EST, "--engine", "sglang"),
    "lora": (*EST, "--task", "lora"),
    "qlora": (*EST, "--task", "qlora"),
    "full": (*EST, "--task", "full"),
    "pretrain": ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--task", "pretrain", "--gpus", "8",
                 "--framework", "torchtitan"),
    "image": ("estimate", "flux.1-dev", "--card", "rtx-4090"),
    "verify": ("verify", "--from", VERIFY_FIXTURE),
    "doctor": ("doctor",),
    "cards h100": ("cards", "h100"),
    "plan": ("plan", "qwen2.5-7b", "--top", "3"),
}
_HEAVY_BOX = re.compile(r"[┏┳┓┡╇┩]")


def render(args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, *, by_locale: bool) -> str:
    for var in ("GPUWISE_LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8" if by_locale else "C.UTF-8")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "50")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit):
        run([*args, *([] if by_locale else ["--lang", "zh"])])
    return out.getvalue()


@pytest.mark.parametrize("by_locale", [False, True], ids=["--lang zh", "LANG=zh_CN"])
@pytest.mark.parametrize("name", COMMANDS)
def test_every_line_fits_80_cells_in_chinese(name: str, by_locale: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS[name], monkeypatch, by_locale=by_locale)
    too_wide = [line for line in out.splitlines() if cells(line.rstrip()) > 80]
    assert not too_wide, too_wide[:3]
    assert re.search(r"[\u4e00-\u9fff]", out), out[:400]


def test_an_estimate_title_wider_than_its_table_stays_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["serving llama.cpp"], monkeypatch, by_locale=False)
    assert any(line.strip() == "qwen2.5-7b · rtx-4090 × 1 · 推理 · llamacpp（每卡）" for line in out.splitlines()), out


def test_an_image_estimate_table_is_neither_cut_nor_boxed(monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["image"], monkeypatch, by_locale=False)
    assert "…" not in out and not _HEAVY_BOX.search(out), out
    assert "最后一个上采样块" in out and "的全分辨率张量" in out  # the explanation whole, wrapped
    assert "（china-ref-2026，2026）" in out and "VAE 解码阶段 PyTorch" in out


def test_verify_at_80_columns_puts_each_explanation_under_its_check_in_chinese_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["verify"], monkeypatch, by_locale=False)
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("inventory.count"))
    assert "8 块 GPU" in lines[i] and lines[i + 1].startswith("    发现 8 块 GPU")
    assert not re.search(r"\d (GPUs|errors|processes|links|Xids)\b", out), out
    assert "开（期望：开）" in out and "通过：" in out and "内核日志：已读取" in out


def test_doctor_marks_and_fix_labels_are_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["doctor"], monkeypatch, by_locale=True)
    marks = {line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")}
    assert not marks & {"ok", "info", "warn", "error"}, out
    assert "fix:" not in out and "修复:" not in out


def test_a_word_wider_than_the_line_folds_whole_instead_of_losing_its_end() -> None:
    from rich.console import Console

    from gpuwise.cli.common import say

    url = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html"
    out = io.StringIO()
    say(Console(file=out, width=40, highlight=False), f"  - {url}", indent=4)
    assert url in out.getvalue().replace("\n", "").replace(" ", "")
    assert all(cells(line) <= 40 for line in out.getvalue().splitlines())


def test_a_card_s_price_row_and_its_namesakes_are_in_chinese_words(monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["cards h100"], monkeypatch, by_locale=False)
    assert "元" in out and "按量" in out and "hourly" not in out and " CNY" not in out
    assert "h100-pcie、h100-nvl" in out


def test_the_plan_s_unpriced_cards_never_break_between_a_card_and_its_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(COMMANDS["plan"], monkeypatch, by_locale=False)
    assert "×1、" in out and not re.search(r"(^|\s)x\d+[、,]", out, re.MULTILINE), out
    assert "排序依据：每小时最便宜（元/时）" in out


PLACE_FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "place" / "flux_comfyui_3x4090.toml")


def test_place_and_fleet_say_their_keys_and_statuses_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    place = render(("place", PLACE_FIXTURE), monkeypatch, by_locale=False)
    assert "瓶颈在 ComfyUI 工作流" in place and "comfyui workflow" not in place and "B/request" not in place
    fleet = render(("fleet", "report", VERIFY_FIXTURE), monkeypatch, by_locale=True)
    assert "h100-node-01 通过" in fleet and "（GB/s）；中位数" in fleet and fleet.rstrip().endswith("。")
    assert all(cells(line.rstrip()) <= 80 for line in (place + fleet).splitlines())


def test_the_default_framework_line_gives_the_same_reason_in_both_languages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.catalog.frameworks import frameworks
    from gpuwise.cli.estimate_view import _REASONS_ZH

    reasons = {fw.default_reason for fw in frameworks().values() if fw.default_reason}
    assert reasons <= set(_REASONS_ZH), reasons - set(_REASONS_ZH)
    out = render(COMMANDS["lora"], monkeypatch, by_locale=False)
    assert "按本任务的默认框架计算（即各教程所教的微调做法" in out.replace("\n", "")


def test_model_parts_card_verification_and_verify_source_are_chinese_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = render(("model", "deepseek-v3"), monkeypatch, by_locale=False)
    assert "词嵌入" in model and "共享专家" in model and "shared_experts" not in model
    card = render(COMMANDS["cards h100"], monkeypatch, by_locale=False)
    assert "官方数据" in card
    verify = render(COMMANDS["verify"], monkeypatch, by_locale=False)
    assert "HBM3（样例数据，快速）" in verify


@pytest.mark.parametrize("args", [("verify", "--contract", "/nonexistent/contract.toml"),
                                  ("prices", "import", "/nonexistent/prices.csv"),
                                  ("model", "/nonexistent/model.gguf")], ids=" ".join)
def test_a_missing_file_is_said_in_chinese_not_in_the_system_s_english(
        args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(args, monkeypatch, by_locale=True)
    assert out.startswith("错误：") and "No such file" not in out, out


def test_a_file_that_is_not_json_is_said_in_chinese(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "raw.json"
    bad.write_text("root:x:0:0\n")
    out = render(("verify", "--from", str(bad)), monkeypatch, by_locale=True)
    # the 80-column wrap may break at any space (where it falls depends on tmp_path's length)
    assert "第1行第1列处不是有效的JSON" in "".join(out.split()) and "Expecting value" not in out, out


def test_an_unknown_choice_named_by_its_flag_keeps_a_space_before_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(("plan", "qwen2.5-7b", "--objective", "cheap"), monkeypatch, by_locale=False)
    assert "未知的 --objective 取值“cheap”" in out, out


MIG_FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "fleet" / "mig" / "a100_4_services.toml")


def test_mig_in_chinese_counts_gpus_in_words_and_never_starts_a_line_with_punctuation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(("mig", MIG_FIXTURE), monkeypatch, by_locale=True)
    assert "1 张 GPU" in out and "GPU(s)" not in out
    assert not [line for line in out.splitlines() if line.lstrip()[:1] in ("、", "，", "。", "；")], out
    assert all(cells(line.rstrip()) <= 80 for line in out.splitlines())


def test_every_recorded_verify_fault_reads_within_80_cells_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/fixtures/verify/faults.toml: each scenario's verdict rendered in Chinese at 80 columns."""
    from benchmarks.verify_faults import _claim, apply, load_scenarios

    from gpuwise.cli import verify_view
    from gpuwise.verify.judge import judge
    from gpuwise.verify.raw import evidence_from_dict

    monkeypatch.setenv("COLUMNS", "80")
    wide: list[str] = []
    for scenario in load_scenarios():
        verdict = judge(evidence_from_dict(apply(scenario)), _claim(scenario))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            verify_view.render(verdict, "zh")
        text = out.getvalue()
        wide += [f"{scenario.get('id')}: {line}" for line in text.splitlines() if cells(line.rstrip()) > 80]
        assert not re.search(r"\d (GPUs|errors|links)\b", text) and "for every pair" not in text, scenario.get("id")
    assert not wide, wide[:3]


def test_serve_on_a_taken_port_is_refused_in_chinese() -> None:
    """uvicorn itself only logs 'error while attempting to bind' in English and exits."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "LANG": "zh_CN.UTF-8", "COLUMNS": "80"}
        env.pop("GPUWISE_LANG", None)
        proc = subprocess.run([sys.executable, "-m", "gpuwise", "serve", "--host", "127.0.0.1", "--port", str(port)],
                              capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 2 and f"无法监听 127.0.0.1:{port}：地址已被占用。" in proc.stderr, proc.stderr


def test_exporter_on_a_taken_port_and_a_plot_into_a_missing_folder_say_why_in_chinese(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        out = render(("exporter", VERIFY_FIXTURE, "--host", "127.0.0.1", "--port", port), monkeypatch, by_locale=True)
    assert "地址已被占用" in out and "Address already in use" not in out, out
    plot = render((*EST, "--plot", "/nonexistent-folder/x.png"), monkeypatch, by_locale=True)
    assert plot.startswith("错误：") and "No such file" not in plot, plot


def test_an_unreachable_hub_is_said_in_chinese() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "LANG": "zh_CN.UTF-8", "COLUMNS": "80", "HF_HUB_OFFLINE": "0",
           "HF_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("GPUWISE_LANG", None)
    proc = subprocess.run([sys.executable, "-m", "gpuwise", "estimate", "someorg/some-model-7b", "--card", "4090"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode != 0 and "连接被拒绝" in proc.stderr and "Connection refused" not in proc.stderr, proc.stderr
