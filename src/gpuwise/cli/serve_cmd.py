"""`gpuwise serve`: the web page and JSON API on a local port (the `[web]` extra)."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer

from gpuwise.cli.common import LangOpt, fail, lang_of
from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang, Text
from gpuwise.web.defaults import COMPUTE_TIMEOUT_S, MAX_WAIT_S

INSTALL_HINT = Text("Install the web extra: pip install 'gpuwise[web]'",
                    "请安装网页组件：pip install 'gpuwise[web]'")


def register(app: typer.Typer) -> None:
    app.command("serve", help="Serve the web page and JSON API. 启动网页与 JSON 接口。")(serve)


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on. 监听地址。")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port. 端口。", min=1, max=65535)] = 8000,
    workers: Annotated[int | None, typer.Option(
        "--workers", help="Plan worker processes in all (default: one per core), warmed before the server "
                          "answers; estimates run apart, in two processes of their own, never behind a plan. "
                          "方案计算进程总数（默认每核一个）；估算在另外两个进程中运行，从不排在方案之后。")] = None,
    processes: Annotated[int, typer.Option(
        "--processes", help="Server processes (event loops) in front of the plan workers (default 1: one "
                            "queue for every worker; more only if one loop cannot keep up). "
                            "服务进程数（默认 1，所有计算进程共用一个队列）。", min=1, max=64)] = 1,
    queue_wait: Annotated[float, typer.Option(
        "--queue-wait", help="Seconds a request may queue for a worker: one expected to queue longer is "
                             "answered 503 with Retry-After at once, one still queued then is answered so. "
                             "排队上限（秒）：预计超过即返回 503，排队到时仍未开始也返回 503。",
        min=0.0, max=600)] = MAX_WAIT_S,
    compute_timeout: Annotated[float, typer.Option(
        "--compute-timeout", help="Seconds one request's work may run; past that it is 504 and its worker "
                                  "is replaced. 单个请求的计算时限（秒）。", min=0.1, max=3600)] = COMPUTE_TIMEOUT_S,
    request_timeout: Annotated[float, typer.Option(
        "--request-timeout", help="Seconds a client has to send a whole request (slow clients are cut off). "
                                  "接收完整请求的时限（秒）。", min=0.1, max=600)] = 10.0,
    per_client: Annotated[int, typer.Option(
        "--max-connections-per-client", help="Open connections per client address; idle ones are closed "
                                             "first. 每个客户端地址的连接上限。", min=1, max=65536)] = 256,
    lang: LangOpt = None,
) -> None:
    """Serve the page at http://HOST:PORT/ and the API under /api (schema at /openapi.json)."""
    import os

    chosen = lang_of(lang)
    if workers is not None and not 1 <= workers <= 256:
        fail(GpuwiseError(Text(f"--workers must be between 1 and 256; got {workers}.",
                               f"--workers 必须在 1 到 256 之间，实际为 {workers}。")), json_out=False, lang=chosen)
    try:
        import uvicorn

        from gpuwise.web.protocol import Limits
    except ImportError as exc:
        fail(GpuwiseError(Text(f"The web server needs a package that is missing ({exc.name}).",
                               f"网页服务缺少依赖包（{exc.name}）。"), hint=INSTALL_HINT),
             json_out=False, lang=chosen)
    from gpuwise.web.lanes import default_workers

    limits = Limits(request_timeout_s=request_timeout, per_client=per_client)
    os.environ.update(limits.to_env())  # read by the protocol in every server process
    # One plan worker process per core by default, all behind one queue in one event loop (it
    # parses HTTP for ~1,000 requests/s, far more than 2 cores can plan); estimates run in that
    # process's light lane, never behind a plan. With --processes N each gets a share.
    total = workers or default_workers()
    os.environ.update({"GPUWISE_SERVE_WORKERS": str(max(1, total // processes)),
                       "GPUWISE_SERVE_QUEUE_WAIT_S": str(queue_wait),
                       "GPUWISE_SERVE_COMPUTE_TIMEOUT_S": str(compute_timeout)})
    from gpuwise.web.protocol import uvicorn_options

    shown = f"[{host}]" if ":" in host else host
    _check_bindable(host, port, shown, chosen)
    typer.echo(Text(f"gpuwise: http://{shown}:{port}/  (API: /api, schema: /openapi.json; Ctrl+C stops)",
                    f"gpuwise：http://{shown}:{port}/ （接口 /api，模式 /openapi.json；Ctrl+C 停止）")
               .render(chosen))
    common: dict[str, Any] = {"host": host, "port": port, "log_level": "warning", "server_header": False,
                              **uvicorn_options(limits)}
    try:
        if processes > 1:  # uvicorn starts each process from the import string
            uvicorn.run("gpuwise.web.app:app_from_env", factory=True, workers=processes, **common)
        else:
            from gpuwise.web.app import app_from_env

            uvicorn.run(app_from_env(), **common)
    except OSError as exc:  # the address is taken or cannot be bound
        _cannot_listen(exc, shown, port, chosen)


def _cannot_listen(exc: OSError, shown: str, port: int, lang: Lang) -> NoReturn:
    from gpuwise.i18n import os_reason

    why = os_reason(exc)
    fail(GpuwiseError(Text(f"Cannot listen on {shown}:{port}: {why.en}.", f"无法监听 {shown}:{port}：{why.zh}。")),
         json_out=False, lang=lang)


def _check_bindable(host: str, port: int, shown: str, lang: Lang) -> None:
    """A taken or foreign address is refused here, in the user's language: uvicorn only logs
    'error while attempting to bind' in English and exits."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(infos[0][4])
    except OSError as exc:  # socket.gaierror too: a host name that does not resolve
        _cannot_listen(exc, shown, port, lang)
