"""A ModelArch from a Hugging Face Hub or ModelScope model id, without downloading weights.

Only config.json is downloaded (through each hub's own client, so HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE, MODELSCOPE_ENDPOINT and the local caches work as usual); on the Hugging
Face Hub the safetensors headers are range-read for exact sizes. No code from a repository
is ever run (no trust_remote_code). Every failure becomes a SourceUnavailableError that says
what to do next, and a quick reachability check keeps a dead network from costing minutes
of the clients' retries.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwise.catalog._datafile import read_json_object
from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.safetensors_header import (
    CheckpointHeader,
    TensorEntry,
    tensors_from_header,
    with_checkpoint,
)
from gpuwise.catalog.sources import read_config_file
from gpuwise.errors import GpuwiseError, SourceUnavailableError
from gpuwise.i18n import Text, net_reason

_DEFAULT_TIMEOUT_S = 10.0  # per request; huggingface_hub's own DEFAULT_ETAG_TIMEOUT
_MS_DEFAULT_ENDPOINT = "https://www.modelscope.cn"  # modelscope_hub DEFAULT_MODELSCOPE_DOMAIN
_MS_DEFAULT_REVISION = "master"  # ModelScope's default branch (Hugging Face: main)
_HF_HINT = Text(
    "Use a local model folder or config.json, or a mirror: HF_ENDPOINT=https://hf-mirror.com, "
    "or --hub modelscope.",
    "可改用本地模型文件夹或 config.json，或使用镜像：HF_ENDPOINT=https://hf-mirror.com，或 --hub modelscope。")
_MS_HINT = Text(
    "Use a local model folder or config.json, or the Hugging Face Hub (--hub hf, with "
    "HF_ENDPOINT=https://hf-mirror.com in mainland China).",
    "可改用本地模型文件夹或 config.json，或 Hugging Face（--hub hf；国内可设 HF_ENDPOINT=https://hf-mirror.com）。")


def _timeout() -> float:
    try:
        return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or _DEFAULT_TIMEOUT_S)
    except ValueError:
        return _DEFAULT_TIMEOUT_S


def _missing_package(package: str, extra: str) -> GpuwiseError:
    return GpuwiseError(Text(f"Model ids on this hub need the optional '{package}' package.",
                             f"从该模型仓库读取模型需要可选依赖包 {package}。"),
                        hint=Text(f"pip install 'gpuwise[{extra}]'", f"pip install 'gpuwise[{extra}]'"))


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level failures of whichever HTTP library the hub client already loaded."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError, urllib.error.URLError]
    for module, attr in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError"), ("requests", "Timeout")):
        cls = getattr(sys.modules.get(module), attr, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None) or getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _http_error(status: int | None, site: str, repo: str, token_var: str, hint: Text,
                detail: str) -> SourceUnavailableError:
    if status == 404:
        return SourceUnavailableError(
            Text(f"No model '{repo}' on {site} (HTTP 404).", f"{site} 上没有模型“{repo}”（HTTP 404）。"),
            hint=Text("Check the spelling (owner/name, case matters); run `gpuwise model --list` for presets.",
                      "请检查拼写（所有者/名称，区分大小写）；运行 `gpuwise model --list` 查看预设。"))
    if status in (401, 403):
        return SourceUnavailableError(
            Text(f"'{repo}' on {site} is gated or private (HTTP {status}): it needs an access token.",
                 f"{site} 上的“{repo}”需要授权或为私有（HTTP {status}）：需要访问令牌。"),
            hint=Text(f"Accept the licence on the model page, then set {token_var}=<your token>.",
                      f"请在模型页面同意许可，然后设置 {token_var}=<你的令牌>。"))
    return SourceUnavailableError(
        Text(f"{site} could not serve '{repo}' (HTTP {status}): {detail:.200}",
             f"{site} 无法提供“{repo}”（HTTP {status}）：{detail:.200}"), hint=hint)


# --- Hugging Face ---------------------------------------------------------------------------
def _hf_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _hf_unreachable(endpoint: str, cause: object) -> SourceUnavailableError:
    return SourceUnavailableError(
        Text(f"Cannot reach the Hugging Face Hub (HF_ENDPOINT={endpoint}): {cause!s:.200}",
             f"无法连接 Hugging Face Hub（HF_ENDPOINT={endpoint}）：{net_reason(cause).zh}。"), hint=_HF_HINT)


def _hf_error(exc: BaseException, repo: str, revision: str | None, endpoint: str) -> GpuwiseError:
    """Translate a huggingface_hub exception into a user-facing error."""
    from huggingface_hub import errors as hf

    if isinstance(exc, hf.RevisionNotFoundError):
        return SourceUnavailableError(
            Text(f"'{repo}' has no revision '{revision}'.", f"“{repo}”没有版本“{revision}”。"),
            hint=Text("Use a branch, tag or commit of that repository.", "请使用该仓库的分支、标签或提交。"))
    if isinstance(exc, hf.RemoteEntryNotFoundError):
        return SourceUnavailableError(
            Text(f"'{repo}' has no config.json (a GGUF-only or non-transformers repository?).",
                 f"“{repo}”没有 config.json（只有 GGUF 或不是 transformers 仓库？）。"),
            hint=Text("For a GGUF repository, download one .gguf file and pass its path.",
                      "GGUF 仓库请下载一个 .gguf 文件并传入其路径。"))
    if isinstance(exc, hf.GatedRepoError):
        return _http_error(_status(exc) or 401, "the Hugging Face Hub", repo, "HF_TOKEN", _HF_HINT, str(exc))
    if isinstance(exc, hf.HfHubHTTPError):
        return _http_error(_status(exc), "the Hugging Face Hub", repo, "HF_TOKEN", _HF_HINT,
                           str(exc).splitlines()[0] if str(exc) else "")
    if isinstance(exc, hf.HFValidationError):
        return SourceUnavailableError(Text(f"'{repo}' is not a valid Hugging Face repository id: {exc}",
                                           f"“{repo}”不是有效的 Hugging Face 仓库 ID：{exc}"))
    if isinstance(exc, hf.OfflineModeIsEnabled | hf.LocalEntryNotFoundError) and _hf_offline():
        return SourceUnavailableError(
            Text(f"HF_HUB_OFFLINE is set and config.json of '{repo}' is not in the local cache.",
                 f"已设置 HF_HUB_OFFLINE，且本地缓存中没有“{repo}”的 config.json。"), hint=_HF_HINT)
    return _hf_unreachable(endpoint, exc)


def _hf_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


@contextlib.contextmanager
def _quiet_hf() -> Iterator[None]:
    """No tqdm bars on stderr while gpuwise fetches a few small files."""
    bars = importlib.import_module("huggingface_hub.utils.tqdm")  # the module, not its tqdm class
    was_disabled = bars.are_progress_bars_disabled()
    bars.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            bars.enable_progress_bars()


def _hf_config_path(repo: str, revision: str | None, endpoint: str) -> Path:
    """config.json through the HF cache; a failed reachability check falls back to the cache."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    if not _hf_offline():
        url = hf_hub_url(repo, "config.json", revision=revision, endpoint=endpoint)
        try:
            get_hf_file_metadata(url, timeout=_timeout())  # one request, no retries
        except _transport_errors() as exc:
            try:
                return Path(hf_hub_download(repo, "config.json", revision=revision, local_files_only=True))
            except Exception:  # noqa: BLE001 - any cache miss means: unreachable and not cached
                raise _hf_unreachable(endpoint, exc) from exc
    return Path(hf_hub_download(repo, "config.json", revision=revision, endpoint=endpoint,
                                etag_timeout=_timeout()))


def _hf_checkpoint(repo: str, revision: str | None, endpoint: str) -> CheckpointHeader | Text:
    """Exact tensor sizes from the repository's safetensors headers (HTTP range reads), or a
    note saying why there are none."""
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hf

    if _hf_offline():
        return Text("HF_HUB_OFFLINE is set: sizes are counted from config.json.",
                    "已设置 HF_HUB_OFFLINE：大小按 config.json 计算。")
    api = HfApi(endpoint=endpoint)
    kwargs: dict[str, Any] = {"revision": revision}
    if "timeout" in inspect.signature(api.get_safetensors_metadata).parameters:
        kwargs["timeout"] = _timeout()
    failures: tuple[type[BaseException], ...] = (
        hf.HfHubHTTPError, hf.SafetensorsParsingError, *_transport_errors())
    try:
        meta = api.get_safetensors_metadata(repo, **kwargs)
    except hf.NotASafetensorsRepoError:
        return Text("The repository has no safetensors weights: sizes are counted from config.json.",
                    "仓库中没有 safetensors 权重：大小按 config.json 计算。")
    except failures as exc:
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        return Text(f"The safetensors headers could not be read ({reason}): sizes are counted "
                    "from config.json.", f"无法读取 safetensors 头部（{reason}）：大小按 config.json 计算。")
    tensors: list[TensorEntry] = []
    for filename, file_meta in sorted(meta.files_metadata.items()):
        header = {name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
                  for name, t in file_meta.tensors.items()}
        tensors.extend(tensors_from_header(header, f"{repo}/{filename}"))
    return CheckpointHeader(tuple(sorted(meta.files_metadata)), tuple(tensors))


def arch_from_hf(repo_id: str, revision: str | None = None) -> ModelArch:
    """The architecture of a Hugging Face Hub model, with exact sizes when it has safetensors."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError as exc:
        raise _missing_package("huggingface_hub", "hub") from exc
    endpoint = _hf_endpoint()
    # huggingface_hub's errors are OSError (HTTP, cache, offline) or ValueError (bad repo id)
    failures: tuple[type[BaseException], ...] = (OSError, ValueError, *_transport_errors())
    with _quiet_hf():
        try:
            config_path = _hf_config_path(repo_id, revision, endpoint)
        except failures as exc:
            raise _hf_error(exc, repo_id, revision, endpoint) from exc
        source = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
        arch = arch_from_config(read_config_file(config_path), repo_id, source=source)
        ckpt = _hf_checkpoint(repo_id, revision, endpoint)
    if isinstance(ckpt, CheckpointHeader):
        return with_checkpoint(arch, ckpt)
    return replace(arch, notes=arch.notes + (ckpt,))


# --- ModelScope -----------------------------------------------------------------------------
def _ms_endpoint() -> str:
    """MODELSCOPE_ENDPOINT, else the older MODELSCOPE_DOMAIN, else www.modelscope.cn (as modelscope_hub)."""
    value = os.environ.get("MODELSCOPE_ENDPOINT") or os.environ.get("MODELSCOPE_DOMAIN") or _MS_DEFAULT_ENDPOINT
    value = value.strip().rstrip("/")
    return value if value.startswith(("http://", "https://")) else f"https://{value}"


def _ms_unreachable(endpoint: str, cause: object) -> SourceUnavailableError:
    return SourceUnavailableError(
        Text(f"Cannot reach ModelScope (MODELSCOPE_ENDPOINT={endpoint}): {cause!s:.200}",
             f"无法连接 ModelScope（MODELSCOPE_ENDPOINT={endpoint}）：{net_reason(cause).zh}。"), hint=_MS_HINT)


def _ms_probe(endpoint: str, model_id: str, revision: str) -> None:
    """One bounded request, so a dead network fails in seconds, not after the client's retries.

    Only a connection failure is judged here; HTTP answers (404, 401) are left to the client,
    which sends the user's credentials."""
    query = urllib.parse.urlencode({"Revision": revision, "FilePath": "config.json"})
    url = f"{endpoint}/api/v1/models/{urllib.parse.quote(model_id)}/repo?{query}"
    try:
        with urllib.request.urlopen(url, timeout=_timeout()):
            pass
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _ms_unreachable(endpoint, getattr(exc, "reason", exc)) from exc


def _ms_error(exc: BaseException, model_id: str, endpoint: str) -> SourceUnavailableError:
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = _status(exc)
    if status is None and names & {"NotExistError"}:
        status = 404
    if status is None and names & {"AuthenticationError", "PermissionDeniedError", "NotLoginException"}:
        status = 401
    if status is None and isinstance(exc, _transport_errors()):
        return _ms_unreachable(endpoint, exc)
    return _http_error(status, "ModelScope", model_id, "MODELSCOPE_API_TOKEN", _MS_HINT, str(exc))


def _ms_checkpoint_bytes(model_id: str, revision: str) -> tuple[int, Text]:
    """Stored bytes from the file listing: the index's total_size, else model.safetensors' size."""
    from modelscope.hub.api import HubApi  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from modelscope.hub.file_download import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        model_file_download,
    )

    unknown = Text("Checkpoint sizes were not listed by ModelScope: counted from config.json.",
                   "ModelScope 未列出检查点大小：按 config.json 计算。")
    try:
        files = {str(f.get("Path") or f.get("Name")): f for f in
                 HubApi().get_model_files(model_id, revision=revision, recursive=True)}
        if "model.safetensors.index.json" in files:
            path = model_file_download(model_id, "model.safetensors.index.json", revision=revision)
            total = read_json_object(Path(path), 64 * 2**20, "safetensors index")["metadata"]["total_size"]
            if isinstance(total, int) and total > 0:
                return total, Text("Stored bytes from the safetensors index (total_size).",
                                   "存储字节数取自 safetensors 索引（total_size）。")
        size = files.get("model.safetensors", {}).get("Size")
    except Exception:  # noqa: BLE001 - the listing is a bonus: config.json alone gives exact counts
        return 0, unknown
    if isinstance(size, int) and size > 0:
        return size, Text("Stored bytes from the size of model.safetensors (header included).",
                          "存储字节数取自 model.safetensors 的文件大小（含头部）。")
    return 0, unknown


def arch_from_modelscope(model_id: str, revision: str | None = None) -> ModelArch:
    """The architecture of a ModelScope model (default revision "master")."""
    try:
        from modelscope.hub.file_download import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
            model_file_download,
        )
    except ImportError as exc:
        raise _missing_package("modelscope", "hub") from exc
    endpoint = _ms_endpoint()
    rev = revision or _MS_DEFAULT_REVISION
    _ms_probe(endpoint, model_id, rev)
    try:
        path = Path(model_file_download(model_id, "config.json", revision=rev))
    except Exception as exc:
        raise _ms_error(exc, model_id, endpoint) from exc
    arch = arch_from_config(read_config_file(path), model_id, source=f"modelscope:{model_id}@{rev}")
    stored, note = _ms_checkpoint_bytes(model_id, rev)
    return replace(arch, checkpoint_bytes=stored, notes=arch.notes + (note,))
