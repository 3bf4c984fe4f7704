"""The JSON API of `gpuwise serve`, tested against the real server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from tests.web_server import ROOT, running_server

RAW = ROOT / "tests" / "fixtures" / "verify" / "h100x8_raw.json"
CONTRACT = ROOT / "examples" / "contract.toml"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running_server() as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[Any]:
    with httpx.Client(base_url=base, timeout=30.0) as c:
        yield c


def cli_json(*args: str, ok_codes: tuple[int, ...] = (0,)) -> Any:
    out = subprocess.run([sys.executable, "-m", "gpuwise", *args, "--json"], cwd=ROOT, check=False,
                         capture_output=True, text=True,
                         env={**os.environ, "GPUWISE_LANG": "en", "HF_HUB_OFFLINE": "1"})
    assert out.returncode in ok_codes, out.stderr
    return json.loads(out.stdout)


# ------------------------------------------------------------------ same JSON as the CLI

def test_estimate_returns_the_same_object_as_the_cli(client: Any) -> None:
    r = client.get("/api/estimate", params={"model": "llama-3.1-8b", "card": "H100-SXM",
                                            "context": 8192, "concurrency": 8})
    assert r.status_code == 200
    assert r.json() == cli_json("estimate", "llama-3.1-8b", "--card", "H100-SXM", "--context", "8192",
                                "--concurrency", "8")


def test_estimate_takes_dashed_names_and_a_json_body_alike(client: Any) -> None:
    dashed = client.get("/api/estimate?model=qwen3-8b&card=4090&task=lora&seq-len=4096&micro-batch=2")
    body = client.post("/api/estimate", json={"model": "qwen3-8b", "card": "4090", "task": "lora",
                                              "seq_len": 4096, "micro_batch": 2})
    assert dashed.status_code == body.status_code == 200
    assert dashed.json() == body.json() == cli_json(
        "estimate", "qwen3-8b", "--card", "4090", "--task", "lora", "--seq-len", "4096", "--micro-batch", "2")


def test_plan_returns_the_same_object_as_the_cli(client: Any) -> None:
    r = client.post("/api/plan", json={"model": "llama-3.1-8b", "context": 8192, "concurrency": 8,
                                       "require": ["ecc"], "top": 3})
    assert r.status_code == 200
    cli = cli_json("plan", "llama-3.1-8b", "--context", "8192", "--concurrency", "8",
                   "--require", "ecc", "--top", "3")
    assert r.json() == cli
    assert client.get("/api/plan?model=llama-3.1-8b&context=8192&concurrency=8&require=ecc&top=3").json() == cli


def test_plan_takes_the_cli_flag_name_tokens_and_emits_like_the_cli(client: Any) -> None:
    r = client.get("/api/plan", params={"model": "qwen3-8b", "task": "lora", "tokens": "1e8",
                                        "emit": "deepspeed"})
    assert r.status_code == 200
    assert r.json() == cli_json("plan", "qwen3-8b", "--task", "lora", "--tokens", "1e8", "--emit", "deepspeed")


def test_cards_and_models_return_the_same_objects_as_the_cli(client: Any) -> None:
    assert client.get("/api/cards?min-memory=80&sort=memory").json() == cli_json(
        "cards", "--min-memory", "80", "--sort", "memory")
    assert client.get("/api/cards?name=4090").json() == cli_json("cards", "4090")
    assert client.get("/api/models/qwen3-30b-a3b").json() == cli_json("model", "qwen3-30b-a3b")
    assert client.get("/api/models").json() == cli_json("model", "--list")


def test_a_pasted_config_json_gives_the_same_estimate_as_the_file(client: Any, tmp_path: Path) -> None:
    config = {"_name_or_path": "acme/tiny-llama", "model_type": "llama", "hidden_size": 2048,
              "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
              "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048,
              "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    r = client.post("/api/estimate", json={"config": json.dumps(config), "card": "4090", "context": 2048})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["provenance"]["inputs"]["model"].pop("source") == "pasted config.json"
    want = cli_json("estimate", str(folder / "config.json"), "--card", "4090", "--context", "2048")
    want["provenance"]["inputs"]["model"].pop("source")
    assert got == want


def test_verify_judge_returns_what_verify_from_a_saved_file_prints(client: Any) -> None:
    raw = json.loads(RAW.read_text(encoding="utf-8"))
    r = client.post("/api/verify/judge", json={"raw": raw})
    assert r.status_code == 200
    assert r.json() == cli_json("verify", "--from", str(RAW), ok_codes=(0, 1))
    contract = CONTRACT.read_text(encoding="utf-8")
    r = client.post("/api/verify/judge", json={"raw": raw, "contract": contract})
    assert r.json() == cli_json("verify", "--from", str(RAW), "--contract", str(CONTRACT), ok_codes=(0, 1))


# ------------------------------------------------------------------ bad input

def test_an_unknown_card_is_a_400_with_suggestions_in_both_languages(client: Any) -> None:
    r = client.get("/api/estimate?model=llama-3.1-8b&card=H100-SMX")
    assert r.status_code == 400
    err = r.json()
    assert err["error"] == "UnknownNameError"
    assert "h100-sxm" in [s.lower() for s in err["suggestions"]]
    assert "Did you mean" in err["message"] and "您是否想输入" in err["message_zh"]


def test_a_negative_context_is_refused_with_the_bounds(client: Any) -> None:
    r = client.get("/api/estimate?model=llama-3.1-8b&card=4090&context=-1")
    assert 400 <= r.status_code < 500
    assert "context" in r.json()["message"] and "134,217,728" in r.json()["message"]


@pytest.mark.parametrize("query", ["context=abc", "concurrency=1e9", "gpus=0", "context=1.5",
                                   "gpu_memory_utilization=nan", "margin=maybe"])
def test_malformed_or_out_of_range_values_are_400(client: Any, query: str) -> None:
    r = client.get(f"/api/estimate?model=llama-3.1-8b&card=4090&{query}")
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "InputError" and r.json()["message_zh"]


def test_an_unknown_parameter_is_a_422_listing_the_valid_names(client: Any) -> None:
    r = client.get("/api/plan?model=llama-3.1-8b&contxt=4096")
    assert r.status_code == 422
    body = r.json()
    assert "context" in body["suggestions"] and "context" in body["valid"] and "max_ttft" in body["valid"]


def test_server_files_cannot_be_named_over_http(client: Any) -> None:
    for query in ("cards_file=/etc/passwd", "calibration=/etc/passwd", "replay=/etc/passwd"):
        assert client.get(f"/api/estimate?model=llama-3.1-8b&card=4090&{query}").status_code == 422
    for model in ("/etc/passwd", "../secrets", "~/x", "src/gpuwise"):
        r = client.get("/api/estimate", params={"model": model, "card": "4090"})
        assert r.status_code == 400 and "local path" in r.json()["message"]


def test_an_oversize_body_is_413_with_or_without_a_length(client: Any) -> None:
    big = b'{"model": "' + b"x" * (300 * 1024) + b'"}'
    assert client.post("/api/plan", content=big).status_code == 413
    chunked = client.post("/api/plan", content=iter([big[:200_000], big[200_000:]]))
    assert chunked.status_code == 413


def test_a_body_that_is_not_a_json_object_is_400(client: Any) -> None:
    assert client.post("/api/plan", content=b"{not json").status_code == 400
    assert client.post("/api/plan", json=[1, 2]).status_code == 400
    assert client.post("/api/verify/judge", json={"raw": {"kind": "other"}}).status_code == 400


def test_an_unknown_model_name_is_404(client: Any) -> None:
    r = client.get("/api/models/no-such-model-at-all")
    assert r.status_code == 404 and r.json()["error"] == "UnknownNameError"


def test_the_openapi_schema_lists_every_endpoint_and_parameter(client: Any) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/api/estimate", "/api/plan", "/api/cards", "/api/models/{name}", "/api/verify/judge"} <= set(
        schema["paths"])
    names = {p["name"] for p in schema["paths"]["/api/plan"]["get"]["parameters"]}
    assert {"model", "context", "budget", "max_ttft", "top"} <= names and "cards_file" not in names


# ------------------------------------------------------------------ the page

def test_the_page_renders_a_verdict_and_loads_nothing_from_other_hosts(client: Any) -> None:
    r = client.get("/?model=llama-3.1-8b&context=8192&card=h100&lang=zh")
    assert r.status_code == 200
    html = r.text
    assert "放得下" in html and 'id="memory-chart"' in html and 'id="plans"' in html
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for attr in ('src="http', "src='http", 'href="http', "@import", "fonts.googleapis"):
        assert attr not in html
    for asset in ("/static/htmx-2.0.11.min.js", "/static/chart-4.6.1.umd.min.js", "/static/app.js",
                  "/static/app.css"):
        assert client.get(asset).status_code == 200


def test_the_page_language_follows_accept_language_and_the_switch(client: Any) -> None:
    zh = client.get("/", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}).text
    en = client.get("/", headers={"Accept-Language": "en-US,en;q=0.9"}).text
    assert 'lang="zh-CN"' in zh and "开始选型" in zh
    assert 'lang="en"' in en and "开始选型" not in en
    assert 'lang="en"' in client.get("/?lang=en", headers={"Accept-Language": "zh-CN"}).text


def test_a_bad_page_input_shows_the_error_in_the_page(client: Any) -> None:
    r = client.get("/?model=llama-3.1-8b&card=H100-SMX&lang=en")
    assert r.status_code == 400 and "Did you mean" in r.text and 'id="error"' in r.text
    fragment = client.get("/?model=llama-3.1-8b&lang=en", headers={"HX-Request": "true"}).text
    assert "<html" not in fragment and 'id="verdict"' in fragment
