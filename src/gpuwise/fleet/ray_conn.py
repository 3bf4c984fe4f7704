"""Connecting to a Ray cluster within a bounded time, and reading its nodes.

`ray.init(address=...)` against an address where nothing answers retries for minutes
(rpc_client.h "Failed to connect to GCS ... within 5 seconds", again and again), so the
address is first probed with a plain TCP connect, and `ray.init` itself runs under a deadline.
ray is imported here, inside functions, never by `import gpuwise`.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import GpuwiseError, InputError
from gpuwise.i18n import Text

__all__ = ["RayNode", "alive_nodes", "connect", "ray_module"]

GPU_MEMORY = "gpu_memory_gib"  # the custom resource `gpuwise inventory` advertises


@dataclass(frozen=True)
class RayNode:
    node_id: str
    ip: str
    resources: dict[str, float]

    @property
    def gpus(self) -> int:
        return int(self.resources.get("GPU", 0))

    @property
    def gpu_memory_gib(self) -> float:
        return float(self.resources.get(GPU_MEMORY, 0.0))


def ray_module() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise InputError(Text("This needs Ray: pip install 'gpuwise[fleet]'.",
                              "需要 Ray：pip install 'gpuwise[fleet]'。")) from exc
    return ray


def _unreachable(address: str, why: str, seconds: float) -> InputError:
    return InputError(Text(f"The Ray cluster at {address} does not answer ({why}, waited {seconds:g} s).",
                           f"{address} 上的 Ray 集群没有响应（{why}，等待 {seconds:g} 秒）。"),
                      hint=Text("Check the address (ray start --head prints it; the default port is 6379), "
                                "that the head node is up, and that this machine can reach it.",
                                "请核对地址（ray start --head 会打印，默认端口 6379）、"
                                "头节点是否在运行、本机能否访问。"))


def _probe(address: str, seconds: float) -> None:
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(Text(f"--ray-address must be HOST:PORT (or ray://HOST:PORT, or auto), got '{address}'.",
                              f"--ray-address 应为 HOST:PORT（或 ray://HOST:PORT、auto），实际为“{address}”。"))
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds):
            pass
    except OSError as exc:
        raise _unreachable(address, exc.strerror or type(exc).__name__, seconds) from exc


def connect(address: str | None, seconds: float = 30.0) -> Any:
    """ray, connected: to `address`, or the session already open in this process."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    if address and address != "auto":
        _probe(address, min(seconds, 10.0))
    failure: list[BaseException] = []

    def init() -> None:
        import logging

        # ray.init off the main thread warns that it cannot set its SIGTERM handler; the
        # deadline is the point of the thread, so that warning is noise here
        worker_log = logging.getLogger("ray._private.worker")
        level = worker_log.level
        worker_log.setLevel(logging.ERROR)
        try:
            ray.init(address=address or "auto", log_to_driver=False, configure_logging=False)
        except Exception as exc:  # noqa: BLE001 - any failure is reported as one clear message
            failure.append(exc)
        finally:
            worker_log.setLevel(level)

    worker = threading.Thread(target=init, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise _unreachable(address or "auto", "no Ray handshake", seconds)
    if failure:
        if isinstance(failure[0], GpuwiseError):
            raise failure[0]
        raise _unreachable(address or "auto", str(failure[0]).splitlines()[0][:200], seconds) from failure[0]
    return ray


def alive_nodes(ray: Any) -> list[RayNode]:
    nodes = [RayNode(str(n["NodeID"]), str(n.get("NodeManagerAddress", "?")),
                     {str(k): float(v) for k, v in n.get("Resources", {}).items()})
             for n in ray.nodes() if n.get("Alive")]
    return sorted(nodes, key=lambda n: (n.ip, n.node_id))
