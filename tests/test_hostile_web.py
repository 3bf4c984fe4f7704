"""`gpuwise serve` under hostile clients, on loopback: idle-socket floods and slowloris bursts
(bounded in count and time) leave normal requests answered; every error is the bilingual
object with the security headers; oversized numbers, deep nesting and long names are 4xx."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from tests.web_server import running_server

IDLE_SOCKETS = 400  # above the per-client bound (256): eviction, not refusal, is what keeps us up
SLOW_SOCKETS = 100
REQUEST_TIMEOUT_S = 2.0  # the server's deadline for a whole request in these tests


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running_server(extra_args=("--request-timeout", str(REQUEST_TIMEOUT_S), "--workers", "1")) as url:
        yield url


def _addr(base: str) -> tuple[str, int]:
    host, port = base.split("//")[1].rsplit(":", 1)
    return host, int(port)


def _is_error_object(r: Any) -> None:
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert "frame-ancestors 'none'" in r.headers.get("content-security-policy", "")
    body = _strict(r.text)
    assert {"error", "message", "message_zh"} <= set(body), body
    assert body["message"] != body["message_zh"]


def test_an_idle_socket_flood_leaves_requests_answered(base: str) -> None:
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_SOCKETS):
            idle.append(socket.create_connection(_addr(base), timeout=30))
        with httpx.Client(base_url=base, timeout=60) as c:  # generous: CI machines are shared
            answers = [c.get("/api/estimate", params={"model": "llama-3.1-8b", "card": "H100-SXM"}).status_code
                       for _ in range(5)]
        assert answers == [200] * 5
    finally:
        for s in idle:
            s.close()


def test_slowloris_sockets_are_closed_and_requests_still_answered(base: str) -> None:
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW_SOCKETS):
            s = socket.create_connection(_addr(base), timeout=30)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            slow.append(s)
        with httpx.Client(base_url=base, timeout=20) as c:
            assert c.get("/api/health").status_code == 200
        deadline = time.monotonic() + REQUEST_TIMEOUT_S * 5
        closed = 0
        for s in slow:
            try:
                s.sendall(b"a")  # a byte now and then does not extend the deadline
            except OSError:
                closed += 1
                continue
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                closed += s.recv(1024) == b""
            except ConnectionError:  # reset by the server: closed as well
                closed += 1
            except TimeoutError:
                pass
        assert closed == SLOW_SOCKETS
    finally:
        for s in slow:
            s.close()


@pytest.mark.parametrize(("method", "path"), [("GET", "/no/such/page"), ("GET", "/api/nothing"),
                                              ("DELETE", "/api/estimate"), ("PUT", "/api/plan")])
def test_404_and_405_are_the_bilingual_error_object(base: str, method: str, path: str) -> None:
    r = httpx.request(method, base + path, timeout=20)
    assert r.status_code in (404, 405)
    _is_error_object(r)


BIG = "9" * 400
EST = {"model": "llama-3.1-8b", "card": "H100-SXM"}


@pytest.mark.parametrize("params", [
    {**EST, "gpus": BIG}, {**EST, "context": BIG}, {**EST, "budget": "1" + "0" * 5000}, {**EST, "tp": "nan"},
    {**EST, "model": "x" * 5000}, {**EST, "card": "H" * 5000}, {**EST, "gpus": "2", "tp": "2", "pp": "2"},
    {**EST, "task": "full", "nodes": "0"}, {**EST, "inter_node_gbps": "0"},
])
def test_absurd_query_values_are_4xx_error_objects(base: str, params: dict[str, str]) -> None:
    r = httpx.get(base + "/api/estimate", params=params, timeout=30)
    assert 400 <= r.status_code < 500, r.text
    _is_error_object(r)


@pytest.mark.parametrize(("path", "body"), [
    ("/api/estimate", '{"card": "H100-SXM", "config": ' + '{"a":' * 10_000 + "1" + "}" * 10_000 + "}"),
    ("/api/plan", '{"a":' * 100_000 + "1" + "}" * 100_000),
    ("/api/estimate", '{"model": "llama-3.1-8b", "card": "H100-SXM", "gpus": 1' + "0" * 5000 + "}"),
    ("/api/estimate", '{"model": "llama-3.1-8b", "card": "H100-SXM", "budget": NaN}'),
    ("/api/verify/judge", '{"raw": ' + '{"a":' * 10_000 + "1" + "}" * 10_000 + "}"),
    ("/api/verify/judge", '{"raw": {"gpus": "x"}}'), ("/api/verify/judge", '{"raw": []}'),
    ("/api/verify/judge", '{"raw": {}, "contract": "x = ' + "[" * 10_000 + '"}'),
])
def test_hostile_bodies_are_4xx_error_objects(base: str, path: str, body: str) -> None:
    r = httpx.post(base + path, content=body, headers={"content-type": "application/json"}, timeout=30)
    assert 400 <= r.status_code < 500, r.text[:300]
    _is_error_object(r)


def test_a_malformed_http_request_is_answered_with_the_error_object(base: str) -> None:
    with socket.create_connection(_addr(base), timeout=10) as s:
        s.sendall(b"GARBAGE\x00\x01 / HTTP/9.9\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"nosniff" in head
    assert {"error", "message", "message_zh"} <= set(_strict(body.decode()))
