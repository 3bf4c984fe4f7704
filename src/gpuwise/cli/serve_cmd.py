"""`gpuwise serve`: the web page and JSON API on a local port (the `[web]` extra)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuwise.cli.common import LangOpt, fail, lang_of
from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text

INSTALL_HINT = Text("Install the web extra: pip install 'gpuwise[web]'",
                    "请安装网页组件：pip install 'gpuwise[web]'")


def register(app: typer.Typer) -> None:
    app.command("serve", help="Serve the web page and JSON API. 启动网页与 JSON 接口。")(serve)


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on. 监听地址。")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port. 端口。", min=1, max=65535)] = 8000,
    workers: Annotated[int | None, typer.Option(
        "--workers", help="Computation threads (default: CPU count, at most 8). 计算线程数。")] = None,
    processes: Annotated[int, typer.Option(
        "--processes", help="Server processes; plans are CPU-bound, so use one per core for heavy "
                            "use. 服务进程数。", min=1, max=64)] = 1,
    lang: LangOpt = None,
) -> None:
    """Serve the page at http://HOST:PORT/ and the API under /api (schema at /openapi.json)."""
    chosen = lang_of(lang)
    try:
        import uvicorn

        from gpuwise.web.app import create_app
    except ImportError as exc:
        fail(GpuwiseError(Text(f"The web server needs a package that is missing ({exc.name}).",
                               f"网页服务缺少依赖包（{exc.name}）。"), hint=INSTALL_HINT),
             json_out=False, lang=chosen)
    if workers is not None and not 1 <= workers <= 64:
        fail(GpuwiseError(Text("--workers must be between 1 and 64.", "--workers 必须在 1 到 64 之间。")),
             json_out=False, lang=chosen)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(Text(f"gpuwise: http://{shown}:{port}/  (API: /api, schema: /openapi.json; Ctrl+C stops)",
                    f"gpuwise：http://{shown}:{port}/ （接口 /api，模式 /openapi.json；Ctrl+C 停止）")
               .render(chosen))
    # limit_concurrency: beyond this many open requests uvicorn answers 503 at once.
    common: dict[str, Any] = {"host": host, "port": port, "log_level": "warning", "limit_concurrency": 1024,
              "timeout_keep_alive": 5, "server_header": False}
    if processes > 1:  # uvicorn starts each process from the import string
        uvicorn.run("gpuwise.web.app:create_app", factory=True, workers=processes, **common)
    else:
        uvicorn.run(create_app(workers=workers), **common)
