"""`gpuwise fleet verify --ray-address`: verify on every GPU node of a Ray cluster, then judge the fleet.

One task per node, pinned with Ray's NodeAffinitySchedulingStrategy(soft=False) and asking
for all of that node's GPUs (so Ray sets CUDA_VISIBLE_DEVICES to them and no other task
benchmarks beside it). Each task runs gpuwise's own verify there and sends back the raw
evidence; the driver judges each node and the fleet exactly as `gpuwise fleet report` does.
`replay` gives recorded evidence files to the nodes instead of measuring (tests, dry runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.judge import FleetReport, judge_fleet
from gpuwise.fleet.nodes import node_from_dict
from gpuwise.fleet.ray_conn import RayNode, alive_nodes, connect
from gpuwise.i18n import Text

__all__ = ["fleet_verify", "verify_here"]


def verify_here(mode: str, replay: str | None) -> dict[str, Any]:
    """Runs on the node: its evidence as a dict, and the Ray node it really ran on."""

    import ray

    from gpuwise.verify.raw import evidence_to_dict

    if replay is not None:
        from gpuwise.safefile import read_json_object
        from gpuwise.verify.raw_schema import MAX_FILE_BYTES

        evidence = read_json_object(Path(replay), MAX_FILE_BYTES, "verify file")
    else:
        from gpuwise.verify.collect import collect

        evidence = evidence_to_dict(collect(mode))
    return {"node_id": ray.get_runtime_context().get_node_id(), "evidence": evidence}


def _targets(ray: Any, resource: str) -> list[RayNode]:
    nodes = [n for n in alive_nodes(ray) if n.resources.get(resource, 0) > 0]
    if not nodes:
        raise InputError(Text(f"No alive Ray node has the resource '{resource}'.",
                              f"没有存活的 Ray 节点拥有资源“{resource}”。"),
                         hint=Text("GPU nodes advertise 'GPU' when Ray sees their cards; see `ray status`.",
                                   "Ray 识别到显卡的节点会有 'GPU' 资源；请查看 `ray status`。"))
    return nodes


def fleet_verify(address: str | None, *, mode: str = "quick", resource: str = "GPU",
                 replay: Sequence[Path] = (), claim: object | None = None, timeout_s: float = 1800.0,
                 connect_s: float = 30.0) -> FleetReport:
    ray = connect(address, connect_s)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = _targets(ray, resource)
    if replay and len(replay) != len(nodes):
        raise InputError(Text(f"{len(replay)} evidence files for {len(nodes)} nodes: give one per node.",
                              f"{len(replay)} 个证据文件对应 {len(nodes)} 个节点：每个节点一个。"))
    task = ray.remote(verify_here)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False),
                         num_cpus=0, num_gpus=n.gpus, max_retries=0)
            .remote(mode, str(replay[i].resolve()) if replay else None) for i, n in enumerate(nodes)]
    _done, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    if pending:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise InputError(Text(f"{len(pending)} of {len(refs)} nodes did not finish verify within {timeout_s:g} s.",
                              f"{len(refs)} 个节点中有 {len(pending)} 个未在 {timeout_s:g} 秒内完成验收。"))
    results = [ray.get(r) for r in refs]
    report_nodes = []
    for n, out in zip(nodes, results, strict=True):
        if out["node_id"] != n.node_id:  # affinity is hard: this would be a Ray bug, not a user error
            raise InputError(Text(f"verify for node {n.node_id} ran on {out['node_id']}.",
                                  f"节点 {n.node_id} 的验收运行在了 {out['node_id']} 上。"))
        report_nodes.append(node_from_dict(out["evidence"], f"ray:{n.node_id[:12]}@{n.ip}", claim))
    return judge_fleet(report_nodes)
