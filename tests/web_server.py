"""A real `gpuwise serve` on a free loopback port, for the web tests and the load test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(timeout_s: float = 30.0, extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """Start `python -m gpuwise serve` in a subprocess; yield its base URL; stop it afterwards."""
    import httpx

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GPUWISE_LANG": "en"}
    cmd = [sys.executable, "-m", "gpuwise", "serve", "--host", "127.0.0.1", "--port", str(port),
           *extra_args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"gpuwise serve exited with {proc.returncode}:\n{out}")
            try:
                if httpx.get(base + "/api/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gpuwise serve did not answer on {base} within {timeout_s} s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
