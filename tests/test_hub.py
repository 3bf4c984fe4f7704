"""Hub ids against a real loopback fake of the Hugging Face Hub and of ModelScope (no internet)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gpuwise.catalog.params import count_params
from gpuwise.catalog.sources import load_model
from gpuwise.errors import GpuwiseError, SourceUnavailableError

COMMIT = "0123456789abcdef0123456789abcdef01234567"
H, LAYERS, HEADS, KV, INTER, VOCAB = 64, 2, 4, 2, 128, 100
CONFIG = {"model_type": "llama", "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
          "num_key_value_heads": KV, "intermediate_size": INTER, "vocab_size": VOCAB,
          "max_position_embeddings": 2048, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def tiny_llama_shapes() -> dict[str, list[int]]:
    kv = KV * (H // HEADS)
    shapes = {"model.embed_tokens.weight": [VOCAB, H], "model.norm.weight": [H]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [kv, H],
                   p + "self_attn.v_proj.weight": [kv, H], p + "self_attn.o_proj.weight": [H, H],
                   p + "mlp.gate_proj.weight": [INTER, H], p + "mlp.up_proj.weight": [INTER, H],
                   p + "mlp.down_proj.weight": [H, INTER], p + "input_layernorm.weight": [H],
                   p + "post_attention_layernorm.weight": [H]}
    return shapes


def safetensors_bytes(shapes: dict[str, list[int]]) -> bytes:
    """A real bf16 safetensors file, built with the standard library."""
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in shapes.items():
        size = 2 * (shape[0] * (shape[1] if len(shape) > 1 else 1))
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob + b"\0" * offset


PARAMS = sum(s[0] * (s[1] if len(s) > 1 else 1) for s in tiny_llama_shapes().values())


# --- a fake Hugging Face Hub -------------------------------------------------------------
@dataclass
class FakeRepo:
    files: dict[str, bytes] = field(default_factory=dict)
    status: int = 200  # 401/403 with error_code to play a gated or private repository
    error_code: str = ""


class FakeHub(http.server.ThreadingHTTPServer):
    """The endpoints huggingface_hub uses to resolve files: HEAD and GET (with Range) on
    /{repo}/resolve/{revision}/{file}, with the X-Repo-Commit, ETag and X-Error-Code headers."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HubHandler)
        self.repos: dict[str, FakeRepo] = {}
        self.log: list[tuple[str, str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _HubHandler(http.server.BaseHTTPRequestHandler):
    server: FakeHub
    _RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _reply(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, extra: dict[str, str] | None = None) -> None:
        self._reply(status, {"X-Error-Code": code, "X-Error-Message": code, **(extra or {})},
                    json.dumps({"error": code}).encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self.server.log.append((self.command, self.path, self.headers.get("Range", "")))
        match = self._RESOLVE.match(urllib.parse.urlsplit(self.path).path)
        repo = self.server.repos.get(match.group("repo")) if match else None
        if match is None or repo is None:
            return self._error(404, "RepoNotFound")
        if repo.status != 200:
            return self._error(repo.status, repo.error_code)
        if urllib.parse.unquote(match.group("rev")) not in ("main", COMMIT):
            return self._error(404, "RevisionNotFound")
        body = repo.files.get(urllib.parse.unquote(match.group("file")))
        if body is None:
            return self._error(404, "EntryNotFound", {"X-Repo-Commit": COMMIT})
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(body).hexdigest()}"',
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if wanted and self.command == "GET":
            start, end = int(wanted.group(1)), min(int(wanted.group(2)), len(body) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
            return self._reply(206, headers, body[start:end + 1])
        self._reply(200, headers, body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HF cache, no offline mode, a dummy token: nothing of the user's is used or sent."""
    pytest.importorskip("huggingface_hub")
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_dummy_token_for_the_loopback_fake")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "5")
    return tmp_path


@pytest.fixture
def hub(hf_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    server = FakeHub()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    server.repos["acme/tiny"] = FakeRepo({"config.json": json.dumps(CONFIG).encode(),
                                          "model.safetensors": safetensors_bytes(tiny_llama_shapes())})
    yield server
    server.shutdown()
    server.server_close()


def test_a_hub_id_gives_the_exact_parameter_count_from_safetensors_headers(hub: FakeHub) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    arch = arch_from_hf("acme/tiny")
    assert arch.checkpoint_params == PARAMS == count_params(arch).total
    assert arch.checkpoint_bytes == 2 * PARAMS
    assert arch.source == "hf:acme/tiny" and arch.hidden_size == H
    weight_reads = [r for r in hub.log if r[1].endswith(".safetensors") and r[0] == "GET"]
    assert weight_reads and all(r[2].startswith("bytes=") for r in weight_reads)  # headers only


def test_the_dispatcher_sends_hub_ids_to_the_hugging_face_hub(hub: FakeHub) -> None:
    assert load_model("acme/tiny", hub="hf").checkpoint_params == PARAMS


def test_a_sharded_repository_is_summed_over_its_shards(hub: FakeHub) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    shapes = tiny_llama_shapes()
    names = list(shapes)
    parts = {"model-00001-of-00002.safetensors": names[:5], "model-00002-of-00002.safetensors": names[5:]}
    files = {shard: safetensors_bytes({n: shapes[n] for n in part}) for shard, part in parts.items()}
    index = {"metadata": {"total_size": 2 * PARAMS},
             "weight_map": {n: shard for shard, part in parts.items() for n in part}}
    hub.repos["acme/sharded"] = FakeRepo({"config.json": json.dumps(CONFIG).encode(),
                                          "model.safetensors.index.json": json.dumps(index).encode(), **files})
    arch = arch_from_hf("acme/sharded")
    assert (arch.checkpoint_bytes, arch.checkpoint_params) == (2 * PARAMS, PARAMS)


def test_a_repository_without_safetensors_is_counted_from_its_config(hub: FakeHub) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    hub.repos["acme/bin-only"] = FakeRepo({"config.json": json.dumps(CONFIG).encode()})
    arch = arch_from_hf("acme/bin-only")
    assert arch.checkpoint_bytes == 0 and count_params(arch).total == PARAMS
    assert any("no safetensors" in n.en for n in arch.notes)


def test_an_unknown_repository_is_reported_as_unknown(hub: FakeHub) -> None:
    with pytest.raises(SourceUnavailableError, match="No model 'acme/nope'.*404") as info:
        load_model("acme/nope", hub="hf")
    assert info.value.hint is not None and "spelling" in info.value.hint.en


@pytest.mark.parametrize(("status", "code"), [(401, "GatedRepo"), (401, "RepoNotFound"), (403, "GatedRepo")])
def test_a_gated_or_private_repository_asks_for_hf_token(hub: FakeHub, status: int, code: str) -> None:
    hub.repos["meta/gated"] = FakeRepo(status=status, error_code=code)
    with pytest.raises(SourceUnavailableError, match="gated or private") as info:
        load_model("meta/gated", hub="hf")
    assert info.value.hint is not None and "HF_TOKEN" in info.value.hint.en


def test_an_unknown_revision_is_named(hub: FakeHub) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    with pytest.raises(SourceUnavailableError, match="no revision 'v9'"):
        arch_from_hf("acme/tiny", revision="v9")


def test_a_gguf_only_repository_says_it_has_no_config_json(hub: FakeHub) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    hub.repos["acme/tiny-GGUF"] = FakeRepo({"tiny.Q4_K_M.gguf": b"GGUF"})
    with pytest.raises(SourceUnavailableError, match="no config.json") as info:
        arch_from_hf("acme/tiny-GGUF")
    assert info.value.hint is not None and ".gguf" in info.value.hint.en


def test_a_hub_that_is_down_fails_fast_with_the_mirror_hint(hf_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    started = time.monotonic()
    with pytest.raises(SourceUnavailableError) as info:
        arch_from_hf("acme/tiny")
    assert time.monotonic() - started < 5
    err = info.value
    assert f"Cannot reach the Hugging Face Hub (HF_ENDPOINT={endpoint})" in err.message.en
    assert err.hint is not None and "HF_ENDPOINT=https://hf-mirror.com" in err.hint.en
    assert "--hub modelscope" in err.hint.en and "hf-mirror.com" in err.hint.zh
    assert err.to_dict()["error"] == "SourceUnavailableError"


def test_a_dead_network_falls_back_to_the_cached_config(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    first = arch_from_hf("acme/tiny")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    again = arch_from_hf("acme/tiny")
    assert again.hidden_size == first.hidden_size and again.checkpoint_bytes == 0
    assert any("could not be read" in n.en for n in again.notes)


def test_offline_mode_uses_the_cache_and_says_so(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from gpuwise.catalog.hub import arch_from_hf

    arch_from_hf("acme/tiny")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    arch = arch_from_hf("acme/tiny")
    assert any("HF_HUB_OFFLINE" in n.en for n in arch.notes)
    with pytest.raises(SourceUnavailableError, match="HF_HUB_OFFLINE"):
        arch_from_hf("acme/never-fetched")


def test_a_missing_huggingface_hub_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.catalog.hub import arch_from_hf

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(GpuwiseError) as info:
        arch_from_hf("acme/tiny")
    assert info.value.hint is not None and "pip install 'gpuwise[hub]'" in info.value.hint.en


# --- ModelScope --------------------------------------------------------------------------
class _ModelScopeHandler(http.server.BaseHTTPRequestHandler):
    """ModelScope's file API: GET /api/v1/models/{id}/repo?Revision=..&FilePath=.. and /repo/files."""

    files: ClassVar[dict[str, bytes]] = {}
    status: ClassVar[int] = 200

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if self.status != 200 or not url.path.startswith("/api/v1/models/acme/tiny/"):
            code = self.status if self.status != 200 else 404
            return self._reply(code, json.dumps({"Code": code, "Message": "no", "Success": False}).encode())
        if url.path.endswith("/repo/files"):
            listing = [{"Path": name, "Name": name, "Size": len(body), "Type": "blob"}
                       for name, body in self.files.items()]
            return self._reply(200, json.dumps({"Code": 200, "Success": True, "Data": {"Files": listing}}).encode())
        body = self.files.get(query.get("FilePath", ""))
        if body is None:
            return self._reply(404, json.dumps({"Code": 404, "Message": "no file", "Success": False}).encode())
        self._reply(200, body, "application/octet-stream")


_MS_SCRIPT = """
import json, sys
from gpuwise.catalog.hub import arch_from_modelscope
from gpuwise.errors import GpuwiseError
try:
    a = arch_from_modelscope(sys.argv[1])
    out = {"ok": True, "hidden": a.hidden_size, "bytes": a.checkpoint_bytes, "source": a.source}
except GpuwiseError as e:
    out = {"ok": False, "type": type(e).__name__, "message": e.message.en, "hint": e.hint.en if e.hint else ""}
print("RESULT " + json.dumps(out))
"""


def run_modelscope(tmp_path: Path, endpoint: str, model_id: str = "acme/tiny") -> dict[str, Any]:
    """arch_from_modelscope in a fresh interpreter, so the modelscope client reads a private cache."""
    env = {**os.environ, "MODELSCOPE_ENDPOINT": endpoint, "MODELSCOPE_CACHE": str(tmp_path / "ms"),
           "HOME": str(tmp_path), "HF_HUB_ETAG_TIMEOUT": "5"}
    env.pop("MODELSCOPE_API_TOKEN", None)
    done = subprocess.run([sys.executable, "-c", _MS_SCRIPT, model_id], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


@pytest.fixture
def modelscope(tmp_path: Path) -> Iterator[tuple[type[_ModelScopeHandler], str]]:
    pytest.importorskip("modelscope")
    handler = type("Handler", (_ModelScopeHandler,), {"files": {}, "status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_modelscope_id_reads_config_json_and_the_index_size(
        tmp_path: Path, modelscope: tuple[type[_ModelScopeHandler], str]) -> None:
    handler, endpoint = modelscope
    index = {"metadata": {"total_size": 123_456}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}
    handler.files = {"config.json": json.dumps(CONFIG).encode(),
                     "model.safetensors.index.json": json.dumps(index).encode()}
    result = run_modelscope(tmp_path, endpoint)
    assert result == {"ok": True, "hidden": H, "bytes": 123_456, "source": "modelscope:acme/tiny@master"}


@pytest.mark.parametrize(("status", "expected"), [(404, "No model 'acme/tiny' on ModelScope"),
                                                  (401, "gated or private"), (403, "gated or private")])
def test_modelscope_http_errors_are_mapped_like_the_hugging_face_hub(
        tmp_path: Path, modelscope: tuple[type[_ModelScopeHandler], str], status: int, expected: str) -> None:
    handler, endpoint = modelscope
    handler.status = status
    result = run_modelscope(tmp_path, endpoint)
    assert result["ok"] is False and result["type"] == "SourceUnavailableError"
    assert expected in result["message"]
    if status != 404:
        assert "MODELSCOPE_API_TOKEN" in result["hint"]


def test_modelscope_down_fails_fast_with_the_mirror_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("modelscope")
    from gpuwise.catalog.hub import arch_from_modelscope

    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", endpoint)
    started = time.monotonic()
    with pytest.raises(SourceUnavailableError) as info:
        arch_from_modelscope("Qwen/Qwen3-8B")
    assert time.monotonic() - started < 5
    assert f"Cannot reach ModelScope (MODELSCOPE_ENDPOINT={endpoint})" in info.value.message.en
    assert info.value.hint is not None and "hf-mirror.com" in info.value.hint.en


def test_a_missing_modelscope_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.catalog.hub import arch_from_modelscope

    for name in ("modelscope", "modelscope.hub", "modelscope.hub.file_download"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(GpuwiseError) as info:
        load_model("Qwen/Qwen3-8B", hub="modelscope")
    assert info.value.hint is not None and "pip install 'gpuwise[hub]'" in info.value.hint.en
    with pytest.raises(GpuwiseError):
        arch_from_modelscope("Qwen/Qwen3-8B")
