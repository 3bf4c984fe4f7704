"""`gpuwise submit` and `gpuwise inventory`: jobs that declare GPU memory, on Ray or Kubernetes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, run_command
from gpuwise.errors import InputError
from gpuwise.i18n import Lang, Text

RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="Ray cluster: HOST:PORT, ray://HOST:PORT or auto. Ray 集群地址。")]
ConnectOpt = Annotated[float, typer.Option(
    "--connect-timeout", help="Seconds to wait for the cluster to answer. 连接超时秒数。", min=1, max=600)]


def register(app: typer.Typer) -> None:
    app.command("submit", help="Run jobs that declare their GPU memory (or have gpuwise estimate it) on a Ray "
                               "cluster, or print the Kubernetes (HAMi) or `ray job submit` form. "
                               "按声明的显存把任务提交到 Ray 集群，或输出 Kubernetes 形式。")(submit)
    app.command("inventory", help="The GPU memory this node should advertise to Ray as gpu_memory_gib, or the "
                                  "nodes of a Ray cluster. 本节点应向 Ray 声明的显存，或集群节点清单。")(inventory)


def submit(
    jobs: Annotated[list[Path], typer.Argument(help="Job files (TOML). 任务文件。")],
    ray_address: RayAddressOpt = None,
    emit: Annotated[str | None, typer.Option(
        "--emit", help="Print instead of running: k8s (a Job with HAMi nvidia.com/gpumem) or ray "
                       "(`ray job submit`). 只输出，不运行。")] = None,
    connect_timeout: ConnectOpt = 30.0,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    run_command(json_out, lang_flag, lambda: _submit(jobs, ray_address, emit, connect_timeout), _render_submit)


def _submit(paths: list[Path], address: str | None, emit: str | None, connect_s: float) -> dict[str, Any]:
    from gpuwise.fleet.jobs import k8s_job, load_job, ray_job_submit_line, sized

    if emit not in (None, "k8s", "ray"):
        from gpuwise.errors import unknown_name

        raise unknown_name(Text("--emit target", "--emit 目标"), emit, ("k8s", "ray"), "gpuwise submit --help")
    jobs = [sized(load_job(p)) for p in paths]
    if emit == "k8s":
        return {"schema_version": 1, "kind": "gpuwise.submit.k8s", "manifests": [k8s_job(j) for j in jobs]}
    if emit == "ray":
        return {"schema_version": 1, "kind": "gpuwise.submit.ray", "commands": [ray_job_submit_line(j) for j in jobs]}
    if address is None:
        raise InputError(Text("Give --ray-address (or --emit k8s|ray to print the job instead).",
                              "请给出 --ray-address（或用 --emit k8s|ray 只输出任务）。"))
    from gpuwise.fleet.ray_jobs import submit_jobs

    results = submit_jobs(jobs, address, connect_s)
    return {"schema_version": 1, "kind": "gpuwise.submit", "jobs": [r.to_dict() for r in results]}


def _render_submit(d: dict[str, Any], lang: Lang) -> None:
    if d["kind"] == "gpuwise.submit.k8s":
        import yaml

        typer.echo(yaml.safe_dump_all(d["manifests"], sort_keys=False), nl=False)
        return
    if d["kind"] == "gpuwise.submit.ray":
        typer.echo("\n".join(d["commands"]))
        return
    for j in d["jobs"]:
        typer.echo(Text(f"{j['name']}: {j['memory_gib']:g} GiB ({j['memory_source']}), {j['gpus']} GPU(s) -> node "
                        f"{j['node_id'][:12]} ({j['node_ip']}), exit {j['returncode']}",
                        f"{j['name']}：{j['memory_gib']:g} GiB（{j['memory_source']}），{j['gpus']} 张 GPU -> 节点 "
                        f"{j['node_id'][:12]}（{j['node_ip']}），退出码 {j['returncode']}").render(lang))
        if j["stdout"].strip():
            typer.echo("  " + j["stdout"].strip().splitlines()[-1])


def inventory(
    from_file: Annotated[Path | None, typer.Option(
        "--from", help="Read the GPUs from saved verify evidence. 从已保存的验收数据读取。")] = None,
    card: Annotated[str | None, typer.Option("--card", help="Or name the card... 显卡型号。")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="...and how many. 数量。")] = None,
    ray_address: RayAddressOpt = None,
    connect_timeout: ConnectOpt = 30.0,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    def compute() -> dict[str, Any]:
        if ray_address is not None:
            from gpuwise.fleet.ray_jobs import cluster_inventory

            return {"schema_version": 1, "kind": "gpuwise.inventory.cluster",
                    "nodes": cluster_inventory(ray_address, connect_timeout)}
        from gpuwise.fleet.inventory import node_inventory

        return node_inventory(from_file, card, gpus).to_dict()

    run_command(json_out, lang_flag, compute, _render_inventory)


def _render_inventory(d: dict[str, Any], lang: Lang) -> None:
    if d["kind"] == "gpuwise.inventory.cluster":
        for n in d["nodes"]:
            typer.echo(f"{n['node_id'][:12]} {n['ip']}: {n['gpus']} GPU, gpu_memory_gib {n['gpu_memory_gib']:g}, "
                       f"CPU {n['cpus']:g}")
        return
    typer.echo(Text(f"{d['gpus']} GPU(s), {d['resources']['gpu_memory_gib']} GiB in all ({d['source']}).",
                    f"{d['gpus']} 张 GPU，共 {d['resources']['gpu_memory_gib']} GiB（{d['source']}）。").render(lang))
    typer.echo(d["ray_start"])
    typer.echo(Text(f"HAMi counts nvidia.com/gpumem per GPU (MiB): {d['hami_gpumem_mib_per_gpu']}",
                    f"HAMi 按每卡 MiB 计 nvidia.com/gpumem：{d['hami_gpumem_mib_per_gpu']}").render(lang))
