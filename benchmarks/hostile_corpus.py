"""The bad-input corpus: hostile CLI invocations and web requests, counted (issue 16).

    python -m benchmarks.hostile_corpus               # CLI cases and web requests
    python -m benchmarks.hostile_corpus --only cli    # or --only web
    python -m benchmarks.hostile_corpus --json        # the counts as JSON, with each failing case

Every CLI case runs `python -m gpuwise ...` in a subprocess with a time limit (a case that
runs past it is a hang), against files built in a temporary folder: deep nesting, huge
numbers, FIFOs, devices, directories, truncated and non-UTF-8 files, NaN and infinity in
data files, outputs into missing folders, onto existing files and through symlinks. A case
counts as a failure when it prints a traceback, hangs, prints JSON that a strict parser
refuses (NaN, Infinity), or exits 0 where only an error is right (`expect="error"`).

The web cases run against a real `gpuwise serve` on 127.0.0.1: every answer must be below
500, strict JSON, and an error (400-599) must be the bilingual error object with the
security headers. Bounded: each request has a timeout, the whole run a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
CASE_TIMEOUT_S = 20.0  # a case still running after this is a hang (a normal one takes < 3 s)
WEB_TIMEOUT_S = 15.0  # a request still unanswered after this is a hang
Expect = Literal["error", "any"]


@dataclass(frozen=True)
class CliCase:
    name: str
    argv: tuple[str, ...]
    expect: Expect = "error"
    stdin: bytes | None = None
    says: str = ""  # text the output must contain (e.g. "Replaced" when a file is replaced)


@dataclass
class Counts:
    tried: int = 0
    tracebacks: int = 0
    hangs: int = 0
    invalid_json: int = 0
    accepted_wrong: int = 0
    server_errors: int = 0  # web: 5xx
    bad_error_objects: int = 0  # web: an error that is not the bilingual object with the headers
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN, Infinity and -Infinity (RFC 8259 has none of them)."""
    return json.loads(text, parse_constant=_reject_constant)


# ------------------------------------------------------------------ the files


def nested_json(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _safetensors(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def build_files(tmp: Path) -> dict[str, Path]:
    """Every hostile file the CLI cases point at."""
    f: dict[str, Path] = {}

    def put(name: str, content: bytes | str) -> Path:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        f[name] = path
        if "/" in name:  # a model folder is named by its folder
            f[name.split("/")[0]] = tmp / name.split("/")[0]
        return path

    good_cfg = json.dumps({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                           "intermediate_size": 14336, "max_position_embeddings": 8192})
    put("good/config.json", good_cfg)
    put("deep/config.json", nested_json(100_000))
    put("deep_list/config.json", "[" * 200_000 + "]" * 200_000)
    put("bignum/config.json", '{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}")
    put("bigint/config.json", good_cfg[:-1] + ', "num_hidden_layers": ' + "9" * 400 + "}")
    put("nanval/config.json", good_cfg[:-1] + ', "rope_theta": NaN}')
    put("infval/config.json", good_cfg.replace('"hidden_size": 4096', '"hidden_size": Infinity'))
    put("notutf8/config.json", b'{"model_type": "\xff\xfe"}')
    put("empty/config.json", b"")
    put("array/config.json", "[1, 2, 3]")
    put("binary/config.json", os.urandom(4096))
    put("long_key/config.json", json.dumps({"model_type": "llama", "x" * 100_000: 1}))
    # safetensors: deep header, header length past the end, absurd length, non-JSON header
    put("st_deep/config.json", good_cfg)
    put("st_deep/model.safetensors", _safetensors(nested_json(100_000).encode()))
    put("st_trunc/config.json", good_cfg)
    put("st_trunc/model.safetensors", struct.pack("<Q", 1 << 20) + b"{}")
    put("st_huge/config.json", good_cfg)
    put("st_huge/model.safetensors", struct.pack("<Q", (1 << 64) - 1))
    put("st_bad/config.json", good_cfg)
    put("st_bad/model.safetensors", _safetensors(b"\x00\xff not json"))
    put("st_bignum/config.json", good_cfg)
    put("st_bignum/model.safetensors", _safetensors(
        ('{"w": {"dtype": "BF16", "shape": [1' + "0" * 5000 + '], "data_offsets": [0, 2]}}').encode()))
    put("st_index/config.json", good_cfg)
    put("st_index/model.safetensors.index.json", nested_json(100_000))
    put("st_index2/config.json", good_cfg)
    put("st_index2/model.safetensors.index.json", '{"weight_map": {"a": "../../../../etc/passwd"}}')
    put("st_index3/config.json", good_cfg)
    put("st_index3/model.safetensors.index.json", '{"weight_map": {"a": "/dev/zero"}}')
    # GGUF: bad magic, truncated, absurd counts, huge string length
    put("bad.gguf", b"NOPE" + b"\x00" * 40)
    put("short.gguf", b"GGUF")
    put("counts.gguf", b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1 << 62))
    put("strlen.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 60))
    put("kv_array.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 4) + b"abcd"
        + struct.pack("<II", 9, 9) + struct.pack("<Q", 1 << 60))
    put("empty.gguf", b"")
    # TOML data files
    price_row = ('[[price]]\nprovider = "me"\ncard = "h100-sxm"\ncurrency = "CNY"\nbilling = "hourly"\n'
                 'unit = "gpu_hour"\nlow = {low}\nhigh = {high}\nas_of = "2026-01"\nsource = "me"\n')
    put("prices_nan.toml", "schema_version = 1\n" + price_row.format(low="nan", high="nan"))
    put("prices_inf.toml", "schema_version = 1\n" + price_row.format(low="inf", high="inf"))
    put("prices_neg.toml", "schema_version = 1\n" + price_row.format(low="-1", high="2"))
    put("prices_order.toml", "schema_version = 1\n" + price_row.format(low="9", high="2"))
    put("prices_deep.toml", "schema_version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    put("prices_deep_inline.toml", "x = " + "{a=" * 50_000 + "1" + "}" * 50_000 + "\n")
    put("prices_bigint.toml", "schema_version = 1\n" + price_row.format(low="1" + "0" * 5000, high="2"))
    put("prices_binary.toml", os.urandom(2048))
    put("prices_notoml.toml", "this is = = not toml")
    card_row = ('[[card]]\nid = "mine"\nname = "Mine"\nvendor = "nvidia"\nform_factor = "sxm"\n'
                'memory_gb = {mem}\nmem_bw_gbps = {bw}\nbf16_dense_tflops = {tf}\n'
                'interconnect = "none"\ninterconnect_bw_gbps = 0\ninterconnect_max_gpus = 1\n'
                'tdp_w = 700\necc = true\nsoftware = "cuda"\nsources = ["me"]\n')
    put("cards_nan.toml", "schema_version = 1\n" + card_row.format(mem="nan", bw=3350, tf=989))
    put("cards_inf.toml", "schema_version = 1\n" + card_row.format(mem=80, bw="inf", tf=989))
    put("cards_neg.toml", "schema_version = 1\n" + card_row.format(mem=80, bw=3350, tf=-5))
    put("cards_zero.toml", "schema_version = 1\n" + card_row.format(mem=0, bw=0, tf=0))
    put("cards_huge.toml", "schema_version = 1\n" + card_row.format(mem="1e300", bw="1e300", tf="1e300"))
    put("cards_deep.toml", "schema_version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    put("contract_deep.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    put("contract_nan.toml", "[min]\nmem_bw_fraction = nan\n")
    put("raw_deep.json", nested_json(100_000))
    put("raw_bignum.json", '{"schema_version": 1' + "0" * 5000 + "}")
    put("raw_array.json", "[]")
    put("plan_deep.json", nested_json(100_000))
    put("plan_nan.json", '{"schema_version": NaN}')
    # outputs
    (tmp / "existing.json").write_text("keep me\n")
    f["existing.json"] = tmp / "existing.json"
    (tmp / "replace-me.json").write_text("{}\n")
    (tmp / "victim.txt").write_text("keep me\n")
    f["victim.txt"] = tmp / "victim.txt"
    (tmp / "link.json").symlink_to(tmp / "victim.txt")
    f["link.json"] = tmp / "link.json"
    (tmp / "a_dir").mkdir()
    f["a_dir"] = tmp / "a_dir"
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp / "fifo.json")
        f["fifo.json"] = tmp / "fifo.json"
        (tmp / "fifo_dir").mkdir()
        os.mkfifo(tmp / "fifo_dir" / "config.json")
        f["fifo_dir"] = tmp / "fifo_dir"
        os.mkfifo(tmp / "fifo.gguf")
        f["fifo.gguf"] = tmp / "fifo.gguf"
        os.mkfifo(tmp / "fifo.toml")
        f["fifo.toml"] = tmp / "fifo.toml"
        (tmp / "st_fifo").mkdir()
        (tmp / "st_fifo" / "config.json").write_text(good_cfg)
        os.mkfifo(tmp / "st_fifo" / "model.safetensors")
        f["st_fifo"] = tmp / "st_fifo"
    return f


# ------------------------------------------------------------------ the CLI cases

M = ("llama-3.1-8b",)
EST = ("estimate", "llama-3.1-8b", "--card", "H100-SXM")
PLAN = ("plan", "llama-3.1-8b")


def cli_cases(f: dict[str, Path]) -> Iterator[CliCase]:
    def p(name: str) -> str:
        return str(f[name])

    # numbers out of range, not finite, absurd, or inconsistent
    for flag, values in {
        "--gpus": ("0", "-1", "100000", "9" * 400), "--context": ("0", "-5", "9" * 400, "1e9"),
        "--concurrency": ("0", "-1", "99999999999"), "--tp": ("-1", "3", "1000"), "--pp": ("0", "100"),
        "--nodes": ("0", "-1", "100000"), "--inter-node-gbps": ("0", "-1", "nan", "inf"),
        "--tokens": ("nan", "inf", "-1", "1e400"), "--gpu-memory-utilization": ("0", "nan", "2", "-0.5"),
        "--cpu-offload-gb": ("-1", "nan", "inf"), "--micro-batch": ("0",), "--seq-len": ("0", "-1"),
        "--zero": ("4", "-1"), "--lora-rank": ("0",), "--replicas": ("0", "100000"),
        "--output-tokens": ("0", "5000"), "--gpu-layers": ("-1",), "--max-num-batched-tokens": ("0", "-1"),
        "--grad-accum": ("0",),
    }.items():
        for v in values:
            task = ("--task", "full") if flag in ("--nodes", "--zero", "--micro-batch", "--seq-len") else ()
            yield CliCase(f"estimate {flag} {v[:20]}", (*EST, *task, flag, v, "--json"))
    yield CliCase("estimate --tp 2 --pp 2 --gpus 2", (*EST, "--gpus", "2", "--tp", "2", "--pp", "2", "--json"))
    yield CliCase("estimate --pp 100 --gpus 2", (*EST, "--gpus", "2", "--pp", "100", "--json"))
    yield CliCase("estimate --pp 3 --gpus 2 --tp 1", (*EST, "--gpus", "2", "--tp", "1", "--pp", "3", "--json"))
    yield CliCase("estimate training --nodes 0", (*EST, "--task", "full", "--nodes", "0", "--gpus", "8", "--json"))
    yield CliCase("estimate --tokens nan --task full", (*EST, "--task", "lora", "--tokens", "nan", "--json"))
    yield CliCase("estimate --tokens 1e300 --task full", (*EST, "--task", "lora", "--tokens", "1e300", "--json"),
                  "any")
    yield CliCase("estimate --inter-node-gbps 0 nodes 2", (*EST, "--task", "full", "--gpus", "8", "--nodes", "2",
                                                           "--inter-node-gbps", "0", "--json"))
    for flag, values in {"--budget": ("nan", "-1", "inf", "1e400"), "--min-throughput": ("nan", "-5"),
                         "--max-ttft": ("nan", "-1", "0"), "--min-tokens-per-s-per-user": ("nan", "-1"),
                         "--top": ("0", "1000"), "--context": ("0", "9" * 400), "--concurrency": ("0",),
                         "--tokens": ("nan", "-1"), "--inter-node-gbps": ("0", "nan"),
                         "--global-batch": ("0",), "--replicas": ("0",)}.items():
        for v in values:
            yield CliCase(f"plan {flag} {v[:20]}", (*PLAN, flag, v, "--json"))
    yield CliCase("plan nothing meets --budget 0.0001", (*PLAN, "--budget", "0.0001", "--json"))
    yield CliCase("plan nothing meets --cards rtx-3060 70b", ("plan", "llama-3.1-70b", "--cards", "rtx-3060",
                                                              "--json"))
    # choices
    for cmd, flag, v in (("estimate", "--task", "inference"), ("estimate", "--engine", "tgi"),
                         ("estimate", "--weights", "int3"), ("estimate", "--kv-dtype", "fp4"),
                         ("estimate", "--offload", "disk"), ("estimate", "--optimizer", "lion"),
                         ("estimate", "--grad-ckpt", "every-0"), ("estimate", "--billing", "yearly"),
                         ("estimate", "--hub", "github"), ("estimate", "--lora-targets", "qkv"),
                         ("estimate", "--framework", "jax"), ("estimate", "--provider", "nope"),
                         ("estimate", "--lang", "fr")):
        yield CliCase(f"{cmd} {flag} {v}", (*EST, flag, v, "--json"))
    for flag, v in (("--objective", "fastest"), ("--stage", "ship"), ("--require", "magic"),
                    ("--weights", "int3"), ("--emit", "slurm"), ("--grad-ckpt", "sometimes"),
                    ("--task", "infer2"), ("--cards", "h900")):
        yield CliCase(f"plan {flag} {v}", (*PLAN, flag, v, "--json"))
    # names
    for name in ("x" * 5000, "a/" * 3000, "../../../../etc/passwd", "/etc/shadow", "\x1b[2J", "nonexistent/repo",
                 "", " ", "7q", "1e999b", "99999999b", "0b", "-7b", "nan b"):
        yield CliCase(f"estimate model {name[:20]!r}", ("estimate", name, "--card", "H100-SXM", "--json"))
    for card in ("x" * 5000, "", "H100" * 1000, "\x01\x7f", "[link=x]y[/link]"):
        yield CliCase(f"estimate --card {card[:20]!r}", ("estimate", *M, "--card", card, "--json"))
    yield CliCase("model long name", ("model", "x" * 5000, "--json"))
    yield CliCase("model /dev/zero", ("model", "/dev/zero", "--json"))
    yield CliCase("model /dev/null", ("model", "/dev/null", "--json"))
    yield CliCase("model /proc/self/mem", ("model", "/proc/self/mem", "--json"))
    yield CliCase("model directory /", ("model", "/", "--json"))
    yield CliCase("cards unknown", ("cards", "h900", "--json"))
    yield CliCase("cards --min-memory nan", ("cards", "--min-memory", "nan", "--json"))
    yield CliCase("cards --min-memory -1", ("cards", "--min-memory", "-1", "--json"))
    yield CliCase("cards --sort x", ("cards", "--sort", "x", "--json"))
    # files handed in as models
    for name in ("deep", "deep_list", "bignum", "bigint", "nanval", "infval", "notutf8", "empty", "array",
                 "binary", "long_key", "st_deep", "st_trunc", "st_huge", "st_bad", "st_bignum", "st_index",
                 "st_index2", "st_index3", "bad.gguf", "short.gguf", "counts.gguf", "strlen.gguf",
                 "kv_array.gguf", "empty.gguf", "fifo_dir", "fifo.gguf", "fifo.json", "st_fifo", "a_dir"):
        if name in f:
            yield CliCase(f"model file {name}", ("model", p(name), "--json"))
    yield CliCase("estimate deep config", ("estimate", p("deep") + "/config.json", "--card", "H100-SXM", "--json"))
    yield CliCase("plan deep config", ("plan", p("deep") + "/config.json", "--json"))
    # data files
    for name in ("prices_nan.toml", "prices_inf.toml", "prices_neg.toml", "prices_order.toml", "prices_deep.toml",
                 "prices_deep_inline.toml", "prices_bigint.toml", "prices_binary.toml", "prices_notoml.toml",
                 "fifo.toml", "a_dir"):
        if name in f:
            yield CliCase(f"estimate --prices {name}", (*EST, "--prices", p(name), "--json"))
            yield CliCase(f"prices --prices {name}", ("prices", "--prices", p(name), "--json"))
    yield CliCase("prices --prices /dev/zero", ("prices", "--prices", "/dev/zero", "--json"))
    for name in ("cards_nan.toml", "cards_inf.toml", "cards_neg.toml", "cards_zero.toml", "cards_huge.toml",
                 "cards_deep.toml", "fifo.toml", "prices_binary.toml"):
        if name in f:
            yield CliCase(f"cards --cards {name}", ("cards", "--cards", p(name), "--json"))
            yield CliCase(f"estimate --cards {name}", ("estimate", *M, "--card", "mine", "--cards", p(name),
                                                       "--json"))
    yield CliCase("cards --cards /dev/zero", ("cards", "--cards", "/dev/zero", "--json"))
    yield CliCase("cards import fifo", ("cards", "import", p("fifo.json") if "fifo.json" in f else "/dev/null"))
    # verify evidence, contracts and calibration
    raw_ok = str(ROOT / "tests/fixtures/verify/h100x8_raw.json")
    for name in ("raw_deep.json", "raw_bignum.json", "raw_array.json", "fifo.json", "a_dir"):
        if name in f:
            yield CliCase(f"verify --from {name}", ("verify", "--from", p(name), "--json"))
    yield CliCase("verify --from /dev/zero", ("verify", "--from", "/dev/zero", "--json"))
    for name in ("contract_deep.toml", "contract_nan.toml", "fifo.toml", "prices_binary.toml"):
        if name in f:
            yield CliCase(f"verify --contract {name}", ("verify", "--from", raw_ok, "--contract", p(name),
                                                        "--json"))
    for name in ("raw_deep.json", "fifo.json", "raw_array.json"):
        if name in f:
            yield CliCase(f"estimate --calibration {name}", (*EST, "--calibration", p(name), "--json"))
    yield CliCase("estimate --calibration /dev/zero", (*EST, "--calibration", "/dev/zero", "--json"))
    for name in ("plan_deep.json", "plan_nan.json", "fifo.json", "a_dir"):
        if name in f:
            yield CliCase(f"plan --emit vllm --from {name}", ("plan", "--emit", "vllm", "--from", p(name)))
    yield CliCase("plan --emit vllm --from /dev/zero", ("plan", "--emit", "vllm", "--from", "/dev/zero"))
    # the fleet commands' own input files (services, pipeline, job, evidence)
    for cmd in (("mig",), ("place",), ("submit",)):
        for name in ("cards_deep.toml", "contract_nan.toml", "fifo.toml", "a_dir"):
            if name in f:
                yield CliCase(f"{' '.join(cmd)} {name}", (*cmd, p(name)))
        yield CliCase(f"{' '.join(cmd)} /dev/zero", (*cmd, "/dev/zero"))
    for name in ("raw_deep.json", "raw_bignum.json", "fifo.json", "a_dir"):
        if name in f:
            yield CliCase(f"fleet report {name}", ("fleet", "report", p(name)))
    # outputs
    tmp = f["a_dir"].parent
    yield CliCase("plan --save missing folder", (*PLAN, "--save", str(tmp / "missing/x/plan.json"), "--json"))
    yield CliCase("plan --save a directory", (*PLAN, "--save", p("a_dir"), "--json"))
    yield CliCase("plan --save existing file", (*PLAN, "--save", str(tmp / "replace-me.json"), "--json"), "any",
                  says="Replaced")
    yield CliCase("plan --save symlink", (*PLAN, "--save", p("link.json"), "--json"))
    yield CliCase("plan --save /dev/full", (*PLAN, "--save", "/dev/full", "--json"))
    yield CliCase("plan --save /proc/x", (*PLAN, "--save", "/proc/version", "--json"))
    yield CliCase("verify --report missing folder", ("verify", "--from", raw_ok, "--report",
                                                     str(tmp / "missing/r.md"), "--json"))
    yield CliCase("verify --report directory.md", ("verify", "--from", raw_ok, "--report", p("a_dir"), "--json"))
    yield CliCase("verify --report symlink", ("verify", "--from", raw_ok, "--report",
                                              str(_link(tmp, "rlink.md")), "--json"))
    yield CliCase("verify --save symlink", ("verify", "--from", raw_ok, "--save", str(_link(tmp, "slink.json")),
                                            "--json"))
    yield CliCase("verify --save missing folder", ("verify", "--from", raw_ok, "--save",
                                                   str(tmp / "missing/s.json"), "--json"))
    yield CliCase("estimate --plot missing folder", (*EST, "--plot", str(tmp / "missing/p.png"), "--json"))
    yield CliCase("estimate --plot symlink", (*EST, "--plot", str(_link(tmp, "plink.png")), "--json"))
    yield CliCase("estimate --plot bad suffix", (*EST, "--plot", str(tmp / "p.exe"), "--json"))
    yield CliCase("serve --port 0", ("serve", "--port", "0"))
    yield CliCase("serve --workers 0", ("serve", "--workers", "0"))
    yield CliCase("serve --host bad", ("serve", "--host", "no.such.host.invalid", "--port", "1"))


def _link(tmp: Path, name: str) -> Path:
    link = tmp / name
    if not link.is_symlink():
        link.symlink_to(tmp / "victim.txt")
    return link


def _victim_intact(tmp: Path) -> bool:
    return all((tmp / name).read_bytes() == b"keep me\n" for name in ("victim.txt", "existing.json"))


def _log(record: dict[str, Any]) -> None:
    """Each case's outcome as a JSON line to $HOSTILE_LOG (a long run is never lost)."""
    path = os.environ.get("HOSTILE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False)[:2000] + "\n")


def run_cli_case(case: CliCase, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "gpuwise", *case.argv]
    began = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=CASE_TIMEOUT_S, check=False,
                              input=case.stdin or b"")
    except subprocess.TimeoutExpired:
        return {"case": case.name, "hang": True, "seconds": round(time.monotonic() - began, 1)}
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    result: dict[str, Any] = {"case": case.name, "rc": proc.returncode, "hang": False,
                              "traceback": "Traceback (most recent call last)" in out + err}
    if "--json" in case.argv and out.strip():
        try:
            strict_json(out)
            result["invalid_json"] = False
        except ValueError as exc:
            result["invalid_json"] = True
            result["json_error"] = str(exc)[:200]
    result["accepted_wrong"] = (case.expect == "error" and proc.returncode == 0) or (
        bool(case.says) and case.says not in out + err)
    if result["traceback"] or result.get("invalid_json"):
        result["tail"] = (err or out)[-600:]
    return result


def run_cli(jobs: int) -> Counts:
    counts = Counts()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GPUWISE_LANG": "en", "COLUMNS": "120",
           "GPUWISE_CONFIG_DIR": tempfile.mkdtemp(prefix="gpuwise-hostile-cfg-")}
    with tempfile.TemporaryDirectory(prefix="gpuwise-hostile-") as tmp_name:
        tmp = Path(tmp_name)
        files = build_files(tmp)
        cases = list(cli_cases(files))
        with ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(lambda c: run_cli_case(c, env), cases))
        if not _victim_intact(tmp):
            counts.failures.append({"case": "an output flag changed an existing file or a symlink's target"})
            counts.accepted_wrong += 1
    for r in results:
        _log(r)
        counts.tried += 1
        bad = False
        for key, attr in (("hang", "hangs"), ("traceback", "tracebacks"), ("invalid_json", "invalid_json"),
                          ("accepted_wrong", "accepted_wrong")):
            if r.get(key):
                setattr(counts, attr, getattr(counts, attr) + 1)
                bad = True
        if bad:
            counts.failures.append(r)
    return counts


# ------------------------------------------------------------------ the web cases

BIG = "9" * 400


def web_cases() -> Iterator[tuple[str, str, str, Any]]:
    """(name, method, path, query-params or JSON body)."""
    est = {"model": "llama-3.1-8b", "card": "H100-SXM"}
    for key in ("gpus", "context", "concurrency", "tp", "pp", "nodes", "top", "budget", "tokens",
                "inter_node_gbps", "gpu_memory_utilization", "cpu_offload_gb", "output_tokens"):
        for v in (BIG, "-" + BIG, "1e400", "nan", "inf", "-inf", "0x10", "1" + "0" * 5000, "", "[]", "\x00"):
            yield f"estimate {key}={v[:12]}", "GET", "/api/estimate", {**est, key: v}
        yield f"estimate body {key} huge int", "POST", "/api/estimate", {**est, key: int(BIG)}
        yield f"estimate body {key} huge float", "POST", "/api/estimate", {**est, key: 1e308}
        yield f"plan {key}={BIG[:12]}", "GET", "/api/plan", {"model": "llama-3.1-8b", key: BIG}
    for v in ("nan", "-1", "inf"):
        yield f"plan budget={v}", "GET", "/api/plan", {"model": "llama-3.1-8b", "budget": v}
    yield "estimate tp x pp > gpus", "GET", "/api/estimate", {**est, "gpus": "2", "tp": "2", "pp": "2"}
    yield "estimate nodes 0", "GET", "/api/estimate", {**est, "task": "full", "nodes": "0"}
    yield "estimate inter-node 0", "GET", "/api/estimate", {**est, "task": "full", "gpus": "8", "nodes": "2",
                                                           "inter_node_gbps": "0"}
    for name in ("x" * 5000, "a/" * 200, "../etc/passwd", "/etc/passwd", "C:\\x", "x:y", "\x00", "%00",
                 "org/" + "x" * 300):
        yield f"estimate model {name[:12]!r}", "GET", "/api/estimate", {**est, "model": name}
        yield f"model path {name[:12]!r}", "GET", "/api/models/" + name.replace("%", "%25"), None
    yield "estimate card long", "GET", "/api/estimate", {**est, "card": "H" * 5000}
    for depth in (1000, 100_000):
        yield f"config nested {depth}", "POST-RAW", "/api/estimate", (
            '{"card": "H100-SXM", "config": ' + nested_json(depth) + "}")
        yield f"body nested {depth}", "POST-RAW", "/api/plan", nested_json(depth)
        yield f"config text nested {depth}", "GET", "/api/estimate", {"card": "H100-SXM",
                                                                       "config": nested_json(min(depth, 2000))}
        yield f"judge nested {depth}", "POST-RAW", "/api/verify/judge", '{"raw": ' + nested_json(depth) + "}"
    yield "body huge number", "POST-RAW", "/api/estimate", ('{"model": "llama-3.1-8b", "card": "H100-SXM", '
                                                            '"gpus": 1' + "0" * 5000 + "}")
    yield "body NaN", "POST-RAW", "/api/estimate", '{"model": "llama-3.1-8b", "card": "H100-SXM", "gpus": NaN}'
    yield "body Infinity", "POST-RAW", "/api/estimate", ('{"model": "llama-3.1-8b", "card": "H100-SXM", '
                                                         '"budget": Infinity}')
    yield "body array", "POST-RAW", "/api/estimate", "[1,2,3]"
    yield "body not utf8", "POST-RAW", "/api/estimate", b"\xff\xfe\x00"
    yield "body huge", "POST-RAW", "/api/estimate", "x" * 600_000
    yield "config huge number", "POST-RAW", "/api/estimate", (
        '{"card": "H100-SXM", "config": {"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}}")
    yield "config NaN", "POST-RAW", "/api/estimate", (
        '{"card": "H100-SXM", "config": "{\\"model_type\\": \\"llama\\", \\"hidden_size\\": NaN}"}')
    yield "config long key", "POST", "/api/estimate", {"card": "H100-SXM", "config": {"x" * 60_000: 1}}
    for body in ({}, {"raw": 1}, {"raw": []}, {"raw": {}}, {"raw": {"schema_version": 1}},
                 {"raw": {"gpus": "x" * 1000}}, {"raw": {"gpus": [1] * 1000}}, {"raw": {}, "contract": 5},
                 {"raw": {}, "contract": "x = " + "[" * 10_000}, {"raw": {}, "contract": "[[[["},
                 {"raw": {}, "gpus": BIG}, {"raw": {}, "card": ["x"]}, {"raw": {}, "extra": 1},
                 {"raw": {"schema_version": 1, "gpus": [{"index": "x"}]}},
                 {"raw": {"schema_version": 1, "host": None, "gpus": None, "checks": 5}}):
        yield f"judge {json.dumps(body)[:40]}", "POST", "/api/verify/judge", body
    try:
        raw_ok = json.loads((ROOT / "tests/fixtures/verify/h100x8_raw.json").read_text())
        yield "judge good", "POST", "/api/verify/judge", {"raw": raw_ok}
        yield "judge contract nan", "POST", "/api/verify/judge", {"raw": raw_ok,
                                                                  "contract": "[min]\nmem_bw_fraction = nan\n"}
    except OSError:
        pass
    yield "404", "GET", "/no/such/page", None
    yield "404 api", "GET", "/api/nothing", None
    yield "405", "DELETE", "/api/estimate", None
    yield "405 put", "PUT", "/api/plan", None
    yield "unknown param", "GET", "/api/estimate", {**est, "gpuz": "2"}
    yield "repeated param", "GET", "/api/estimate", [("model", "llama-3.1-8b"), ("card", "H100-SXM"),
                                                     ("gpus", "1"), ("gpus", "2")]
    yield "query too long", "GET", "/api/estimate", {**est, "x": "y" * 20_000}
    yield "emit unknown", "GET", "/api/plan", {"model": "llama-3.1-8b", "emit": "slurm"}
    yield "cards nan", "GET", "/api/cards", {"min_memory": "nan"}
    yield "cards sort", "GET", "/api/cards", {"sort": "x" * 300}
    yield "page bad lang", "GET", "/", {"lang": "x" * 5000}
    yield "page bad gpus", "GET", "/", {"model": "llama-3.1-8b", "card": "H100-SXM", "gpus": BIG}


ERROR_KEYS = {"error", "message", "message_zh"}


def _check_web(name: str, r: Any, counts: Counts, page: bool = False) -> None:
    problems = []
    if r.status_code >= 500:
        counts.server_errors += 1
        problems.append(f"HTTP {r.status_code}")
    ctype = r.headers.get("content-type", "")
    if "json" in ctype:
        try:
            body = strict_json(r.text)
        except ValueError as exc:
            counts.invalid_json += 1
            problems.append(f"invalid JSON: {exc}")
            body = None
        if r.status_code >= 400 and not (isinstance(body, dict) and ERROR_KEYS <= set(body)):
            counts.bad_error_objects += 1
            problems.append("not the bilingual error object")
    elif r.status_code >= 400 and not (page and "text/html" in ctype):  # the page shows errors in HTML
        counts.bad_error_objects += 1
        problems.append(f"error answered as {ctype or 'no content type'}")
    if r.status_code >= 400 and (r.headers.get("x-content-type-options") != "nosniff"
                                 or "content-security-policy" not in r.headers):
        counts.bad_error_objects += 1
        problems.append("error without nosniff/CSP")
    if problems:
        counts.failures.append({"case": name, "status": r.status_code, "problems": problems,
                                "body": r.text[:300]})


def _alive(http: Any) -> bool:
    try:
        return bool(http.get("/api/health", timeout=WEB_TIMEOUT_S).status_code == 200)
    except Exception:  # noqa: BLE001 - any failure means not answering
        return False


def run_web(base: str | None) -> Counts:
    import httpx

    counts = Counts()
    with ExitStack() as stack:
        if base is None:
            sys.path.insert(0, str(ROOT))
            from tests.web_server import running_server

            base = stack.enter_context(running_server())
        with httpx.Client(base_url=base, timeout=WEB_TIMEOUT_S) as http:
            for name, method, path, payload in web_cases():
                counts.tried += 1
                try:
                    if method == "GET":
                        r = http.get(path, params=payload)
                    elif method == "POST":
                        r = http.post(path, json=payload)
                    elif method == "POST-RAW":
                        r = http.post(path, content=payload, headers={"content-type": "application/json"})
                    else:
                        r = http.request(method, path)
                except httpx.InvalidURL:  # the client itself refuses to send it: not a server case
                    counts.tried -= 1
                    continue
                except httpx.TimeoutException:
                    counts.hangs += 1
                    counts.failures.append({"case": name, "problems": ["timed out"]})
                    _log({"case": name, "hang": True})
                    if not _alive(http):  # the server stopped answering: the rest would only wait
                        counts.failures.append({"case": "server unresponsive after " + name})
                        break
                    continue
                except httpx.TransportError as exc:
                    counts.server_errors += 1
                    counts.failures.append({"case": name, "problems": [f"connection: {exc!r}"]})
                    continue
                _check_web(name, r, counts, page=path == "/")
                _log({"case": name, "status": r.status_code})
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("cli", "web"))
    ap.add_argument("--url", help="an already running server (default: start one on loopback)")
    ap.add_argument("--jobs", type=int, default=2, help="CLI cases run at once")
    ap.add_argument("--src", help="run this source tree's gpuwise instead (e.g. an older commit's src/)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.src:  # ahead of the installed (editable) package, for the CLI and the server alike
        os.environ["PYTHONPATH"] = os.pathsep.join((str(Path(a.src).resolve()), os.environ.get("PYTHONPATH", "")))
    out: dict[str, Any] = {}
    if a.only in (None, "cli"):
        out["cli"] = run_cli(max(1, min(a.jobs, 16))).to_dict()
    if a.only in (None, "web"):
        out["web"] = run_web(a.url).to_dict()
    if a.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for part, c in out.items():
            print(f"{part}: {c['tried']} cases, {c['tracebacks']} tracebacks, {c['hangs']} hangs, "
                  f"{c['server_errors']} 5xx, {c['invalid_json']} invalid JSON, "
                  f"{c['accepted_wrong']} accepted-and-wrong, {c['bad_error_objects']} bad error objects")
            for fail in c["failures"]:
                print("   ", json.dumps(fail, ensure_ascii=False)[:400])
    bad = sum(c[k] for c in out.values() for k in ("tracebacks", "hangs", "server_errors", "invalid_json",
                                                    "accepted_wrong", "bad_error_objects"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
