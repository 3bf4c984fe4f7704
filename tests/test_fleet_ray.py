"""Fleet verify and declared-memory jobs on a real local Ray cluster (CPU only, loopback only).

One cluster for the module: three nodes that advertise 24, 80 and 48 GiB of `gpu_memory_gib`
(what `gpuwise inventory` tells GPU nodes to advertise) and a `gpuwise_test_node` resource
standing in for GPUs; recorded evidence stands in for measurements, CPU commands for jobs.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster

from gpuwise.errors import InputError
from gpuwise.fleet.jobs import parse_job
from gpuwise.fleet.ray_jobs import submit_jobs
from tests.fixtures.fleet.helpers import cli
from tests.fixtures.fleet.make_fleet import fleet_dir

HERE = Path(__file__).resolve().parent
FLEET = fleet_dir()  # the 8-node fleet, node-05 7% slow, written from the recorded node
JOBS = HERE / "fixtures" / "fleet" / "jobs"
NODE_MEMORY = (24, 80, 48)
# Without this Ray resolves 127.0.0.1 to the machine's outward address and binds its servers
# there (ray/_private/services.py resolve_ip_for_localhost, ENABLE_RAY_CLUSTER); with it, a
# single-machine cluster uses loopback for everything.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray._private import ray_constants

    saved = {k: os.environ.get(k) for k in LOOPBACK_ENV}
    os.environ.update(LOOPBACK_ENV)  # for the processes Ray starts
    cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # for this process: ray read the variable at import
    small = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
    c = Cluster(initialize_head=True, head_node_args={
        **small, "include_dashboard": False,
        "resources": {"gpu_memory_gib": NODE_MEMORY[0], "gpuwise_test_node": 1}})
    try:
        for mem in NODE_MEMORY[1:]:
            c.add_node(**small, resources={"gpu_memory_gib": mem, "gpuwise_test_node": 1})
        ray.init(address=c.address, log_to_driver=False, configure_logging=False)
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in out:
                out.add(kid)
                todo.append(kid)
    return out


def test_every_ray_server_listens_on_loopback_only(cluster: Any) -> None:
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30, check=True).stdout
    ours = _descendants(os.getpid())
    mine = [line for line in ss.splitlines() if any(int(p) in ours for p in re.findall(r"pid=(\d+)", line))]
    assert len(mine) >= 3, ss  # the GCS and at least the raylets: the check is not vacuous
    for line in mine:
        local = line.split()[3]
        assert local.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]"), line


def test_fleet_verify_runs_one_pinned_task_per_node_and_finds_the_slow_one(cluster: Any) -> None:
    files = [FLEET / "node-01.json", FLEET / "node-02.json", FLEET / "node-05.json"]
    args = ["fleet", "verify", "--ray-address", cluster.address, "--resource", "gpuwise_test_node", "--json"]
    for f in files:
        args += ["--replay", str(f)]
    out = cli(*args)
    data = out.json()
    assert out.code == 1 and data["suspects"] == ["node-05"], out.stdout[-2000:]
    origins = [n["origin"] for n in data["groups"][0]["nodes"]]
    node_ids = {n["NodeID"][:12] for n in ray.nodes() if n["Alive"]}
    assert len(origins) == 3 and {o.split(":")[1].split("@")[0] for o in origins} == node_ids


def test_two_jobs_go_where_their_declared_memory_fits(cluster: Any) -> None:
    out = cli("submit", str(JOBS / "small.toml"), str(JOBS / "big.toml"), "--ray-address", cluster.address, "--json")
    data = out.json()
    assert out.code == 0, out.stdout
    by_name = {j["name"]: j for j in data["jobs"]}
    big, small = by_name["big-lora"], by_name["small-eval"]
    assert big["memory_source"].startswith("estimate") and 48 < big["memory_gib"] <= 80
    eighty = next(n["NodeID"] for n in ray.nodes() if n["Resources"].get("gpu_memory_gib") == 80)
    assert big["node_id"] == eighty  # the only node with that much GPU memory
    assert small["memory_gib"] == 20 and small["returncode"] == 0 and "small-eval ran" in small["stdout"]
    assert big["returncode"] == 0 and "big-lora ran" in big["stdout"]


def test_two_50_gib_jobs_both_wait_for_the_80_gib_node(cluster: Any) -> None:
    jobs = [parse_job({"name": f"half-{i}", "command": [sys.executable, "-c", "print(1)"], "gpus": 0,
                       "cpus": 0.1, "memory_gib": 50, "timeout_s": 60}, "job.toml") for i in range(2)]
    results = submit_jobs(jobs, None)
    eighty = next(n["NodeID"] for n in ray.nodes() if n["Resources"].get("gpu_memory_gib") == 80)
    assert [r.node_id for r in results] == [eighty, eighty] and all(r.returncode == 0 for r in results)


def test_a_job_no_node_can_hold_is_refused_instead_of_pending_forever(cluster: Any) -> None:
    job = parse_job({"name": "huge", "command": ["true"], "gpus": 0, "memory_gib": 100}, "job.toml")
    with pytest.raises(InputError, match="would wait forever"):
        submit_jobs([job], None)


def test_inventory_lists_each_nodes_advertised_gpu_memory(cluster: Any) -> None:
    out = cli("inventory", "--ray-address", cluster.address, "--json")
    assert sorted(n["gpu_memory_gib"] for n in out.json()["nodes"]) == sorted(NODE_MEMORY)


def _gpuwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "LANG": "C.UTF-8", "RAY_ADDRESS": ""})


def test_an_address_where_nothing_listens_is_a_clear_message() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before Ray tries it
    out = _gpuwise("fleet", "verify", "--ray-address", f"127.0.0.1:{port}", "--connect-timeout", "5")
    assert out.returncode == 2 and "does not answer" in out.stderr and "Traceback" not in out.stderr


def test_an_address_that_accepts_but_never_speaks_ray_gives_up_at_the_deadline() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        out = _gpuwise("submit", str(JOBS / "small.toml"), "--ray-address",
                       f"127.0.0.1:{server.getsockname()[1]}", "--connect-timeout", "5")
        assert out.returncode == 2 and "does not answer" in out.stderr, out.stderr[-1500:]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        server.close()


def test_the_kubernetes_form_asks_hami_for_gpu_memory_per_gpu() -> None:
    import yaml

    from gpuwise.fleet.jobs import k8s_job

    job = parse_job({"name": "eval", "command": ["python", "eval.py"], "gpus": 2, "memory_gib": 40}, "job.toml")
    manifest = k8s_job(job)
    assert yaml.safe_load(yaml.safe_dump(manifest)) == manifest
    limits = manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 2 and limits["nvidia.com/gpumem"] == 20480
