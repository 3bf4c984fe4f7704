"""`--replay FILE`: the prompts of a recorded serving benchmark, to replay on another card or engine.

The file is what vLLM's benchmark writes with `--save-result` (benchmarks/benchmark_serving.py up to
0.9, `vllm bench serve` after): a JSON object whose `input_lens` and `output_lens` hold each
request's prompt tokens and the output tokens it counted, in the order the requests were sent
(vllm/benchmarks/serve.py `result_json["input_lens"] = [output.prompt_len for output in outputs]`,
`"output_lens": actual_output_lens`). A request the benchmark counted 0 output tokens for still took
its prefill and one decode step (the engine returned at least its end-of-sequence token), so it is
kept, scheduled as one token and counted as 0, as the benchmark counts it.

The run gpuwise models sends every prompt at once (`--request-rate inf`); a file recorded at a finite
rate is refused rather than replayed as something it was not. Everything in the file is untrusted:
the size is capped, every length must be a whole number of tokens in range, and the two lists must
pair up. Nothing here estimates anything; estimate/speed.py benchmark_run replays the lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.bounds import MAX_RUN_REQUESTS, MAX_TOKENS
from gpuwise.errors import DataError
from gpuwise.i18n import Text
from gpuwise.safefile import read_json_object

MAX_FILE_BYTES = 256 << 20  # a 10,000-prompt result with every inter-token gap is ~100 MB
MAX_REQUESTS = MAX_RUN_REQUESTS  # the most prompts one simulated run takes (gpuwise.bounds, as --requests)


@dataclass(frozen=True)
class RecordedRun:
    """The requests of one recorded benchmark run, in the order they were sent."""

    prompts: tuple[int, ...]  # prompt tokens of each request (>= 1)
    outputs: tuple[int, ...]  # output tokens the benchmark counted for each request (>= 0)
    source: str  # the file, for the output's wording

    @property
    def mean_prompt(self) -> float:
        return sum(self.prompts) / len(self.prompts)

    @property
    def mean_output(self) -> float:
        return sum(self.outputs) / len(self.outputs)


def _bad(path: Path | str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{path}: {en}", f"{path}：{zh}"),
                     hint=Text("--replay takes the JSON that vLLM's benchmark writes with --save-result "
                               "(its input_lens and output_lens lists).",
                               "--replay 需要 vLLM 压测脚本以 --save-result 保存的 JSON（含 input_lens 与 "
                               "output_lens 两个列表）。"))


def _lengths(doc: dict[str, Any], key: str, path: Path | str, low: int) -> tuple[int, ...]:
    raw = doc.get(key)
    if not isinstance(raw, list) or not raw:
        return _missing(path, key)
    if len(raw) > MAX_REQUESTS:
        raise _bad(path, f"'{key}' lists {len(raw):,} requests; a replay takes at most {MAX_REQUESTS:,}.",
                   f"'{key}' 列出 {len(raw):,} 个请求；回放最多 {MAX_REQUESTS:,} 个。")
    for i, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= MAX_TOKENS:
            shown = repr(v)[:40]
            raise _bad(path, f"'{key}'[{i}] is {shown}; each entry must be a whole number of tokens "
                             f"from {low} to {MAX_TOKENS:,}.",
                       f"'{key}'[{i}] 为 {shown}；每项必须是 {low} 到 {MAX_TOKENS:,} 之间的整数 token 数。")
    return tuple(raw)


def _missing(path: Path | str, key: str) -> tuple[int, ...]:
    raise _bad(path, f"no '{key}' list of token counts (is this a vLLM benchmark result saved with "
                     "--save-result?).",
               f"缺少 '{key}' token 数列表（这是以 --save-result 保存的 vLLM 压测结果吗？）。")


def _check_rate(doc: dict[str, Any], path: Path | str) -> None:
    """The run must have sent its prompts at once: request_rate 'inf' (or absent)."""
    rate = doc.get("request_rate", "inf")
    if isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity"):
        return
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isinf(rate):
        return
    shown = repr(rate)[:40]
    raise _bad(path, f"the run was recorded at request_rate {shown}; gpuwise replays a run whose prompts "
                     "are all sent at once (--request-rate inf).",
               f"该压测以 request_rate {shown} 录制；gpuwise 只回放所有请求同时发出的压测"
               "（--request-rate inf）。")


def load_recorded_run(path: Path | str) -> RecordedRun:
    """Read and check a benchmark result file (bilingual DataError on anything malformed)."""
    doc = read_json_object(path, MAX_FILE_BYTES, Text("benchmark result", "压测结果"))
    _check_rate(doc, path)
    prompts = _lengths(doc, "input_lens", path, 1)
    outputs = _lengths(doc, "output_lens", path, 0)
    if len(prompts) != len(outputs):
        raise _bad(path, f"'input_lens' has {len(prompts):,} entries and 'output_lens' {len(outputs):,}; "
                         "they must pair up, one per request.",
                   f"'input_lens' 有 {len(prompts):,} 项而 'output_lens' 有 {len(outputs):,} 项；"
                   "二者须一一对应。")
    if not any(outputs):
        raise _bad(path, "every request counted 0 output tokens: there is no decode to replay.",
                   "所有请求的输出 token 数都是 0：没有可回放的解码。")
    return RecordedRun(prompts=prompts, outputs=outputs, source=str(path))
