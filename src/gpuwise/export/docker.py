"""`docker run` command for a serving plan: the stack's pinned vLLM image on one machine.

Sources: vLLM's "Using Docker" page (https://docs.vllm.ai/en/stable/deployment/docker/): the
official `vllm/vllm-openai` image's entrypoint is `vllm serve`, so the model and the flags
follow the image name; `--ipc=host` (or `--shm-size`) gives PyTorch the shared memory it needs;
`-v ~/.cache/huggingface:/root/.cache/huggingface` keeps downloads; `--env HF_TOKEN` passes the
token through. GPUs: the NVIDIA Container Toolkit's `--gpus '"device=0,1"'` (the inner quotes
keep the comma list one value). ROCm (`--device /dev/kfd --device /dev/dri --group-add video`)
and Ascend (the davinci devices and driver mounts) take the stack row's `docker_run_args`.
A node's replicas run in one container with vLLM's `--data-parallel-size`; a plan across nodes
is the same line on each node behind a load balancer.
"""

from __future__ import annotations

from gpuwise.export._common import Env, not_for, serve_image, shell_join, stack
from gpuwise.export._launch import check_scheduler
from gpuwise.export._plan import Plan
from gpuwise.export.vllm import SERVE_PORT, serve_tokens
from gpuwise.export.vllm import notes as serve_notes
from gpuwise.textsafe import comment_line

__all__ = ["HF_CACHE", "docker_tokens", "emit"]

# $HOME, not ~: docker needs an absolute host path, and a quoted ~ would not expand.
HF_CACHE = "$HOME/.cache/huggingface:/root/.cache/huggingface"


def _devices(plan: Plan) -> list[str]:
    """The flags that hand the node's GPUs to the container, by stack."""
    row, n = stack(plan), plan.gpus_per_node
    ids = ",".join(str(i) for i in range(n))
    args = [a for a in row.docker_run_args if not a.startswith("--gpus")]
    if row.id == "cuda":
        args = ["--gpus", f'"device={ids}"', *args]
    else:
        if row.id == "cann":  # each NPU is its own device node (vllm-ascend's docker run)
            args = [f"--device=/dev/davinci{i}" for i in range(n)] + args
        args += ["--env", f"{row.visible_devices_env}={ids}"]
    if not any(a.startswith(("--ipc", "--shm-size")) for a in args):
        args.append("--ipc=host")
    return args


def _official(plan: Plan) -> bool:
    """The stack's own CUDA image, whose entrypoint is `vllm serve`."""
    return plan.image is None and stack(plan).id == "cuda"


def docker_tokens(plan: Plan) -> list[str]:
    """`docker run ...` as a list of arguments, the serve arguments last."""
    if plan.training:
        raise not_for("docker", plan, "it is a training plan; the docker target runs a vLLM "
                      "server. Use k8s, skypilot or dstack.",
                      "这是训练计划；docker 目标运行 vLLM 服务，请导出 k8s、skypilot 或 dstack。")
    check_scheduler(plan, "docker", replicas_ok=True)
    serve = serve_tokens(plan)
    t = ["docker", "run", "--rm", *_devices(plan), "-p", f"{SERVE_PORT}:{SERVE_PORT}",
         "-v", Env(HF_CACHE), "--env", "HF_TOKEN"]
    if _official(plan):
        return [*t, serve_image(plan), *serve[2:]]
    # Another image: name the entrypoint, so the line does not depend on the image's own.
    return [*t, "--entrypoint", "vllm", serve_image(plan), *serve[1:]]


def emit(plan: Plan) -> str:
    tokens = docker_tokens(plan)
    notes = serve_notes(plan)
    if plan.nodes == 1 and plan.replicas > 1:
        notes.append(f"One container serves the {plan.replicas} replicas with vLLM's data "
                     f"parallel on port {SERVE_PORT}.")
    lines = [f"# {comment_line(n)}" for n in notes]
    return "\n".join([*lines, shell_join(tokens)]) + "\n"
