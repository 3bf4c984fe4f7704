"""Bilingual text: every user-facing string carries English and Chinese.

Library code builds `Text(en=..., zh=...)` and never decides the language; the shells
call `.render(lang)` with the language picked by `pick_lang()`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")


@dataclass(frozen=True)
class Text:
    """One message in both languages."""

    en: str
    zh: str

    def render(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en

    def __str__(self) -> str:
        return self.en

    def __add__(self, other: Text) -> Text:
        return Text(self.en + other.en, self.zh + other.zh)


# The operating system's reasons, which Python gives in English only (OSError.strerror).
_OS_REASONS_ZH = {"ENOENT": "没有这个文件或文件夹", "EACCES": "没有权限", "EPERM": "不允许该操作",
                  "EISDIR": "这是一个文件夹", "ENOTDIR": "路径中有一段不是文件夹", "ELOOP": "符号链接层数过多",
                  "ENAMETOOLONG": "文件名过长", "ENOSPC": "磁盘空间不足", "EROFS": "只读文件系统",
                  "EBUSY": "设备或资源正忙", "ENXIO": "设备不存在或未就绪", "EEXIST": "文件已存在",
                  "EIO": "输入/输出错误", "EMFILE": "打开的文件过多", "EFBIG": "文件过大", "EINVAL": "参数无效",
                  "EADDRINUSE": "地址已被占用", "EADDRNOTAVAIL": "无法使用该地址",
                  "ECONNREFUSED": "连接被拒绝", "ECONNRESET": "连接被重置", "ETIMEDOUT": "连接超时",
                  "ENETUNREACH": "网络不可达", "EHOSTUNREACH": "主机不可达"}


def os_reason(exc: BaseException) -> Text:
    """Why an OSError happened, in both languages ('No such file or directory' / '没有这个文件或文件夹');
    an errno without Chinese words keeps the system's English."""
    import errno

    en = str(getattr(exc, "strerror", None) or exc)
    if type(exc).__name__ == "gaierror":  # socket.getaddrinfo: its codes are not errno's
        return Text(en, "无法解析该主机名")
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    return Text(en, _OS_REASONS_ZH.get(name, en))


def net_reason(cause: object, limit: int = 200) -> Text:
    """Why a network request failed, in both languages: the OS reason of the OSError inside an
    HTTP library's error (its cause chain, or the '[Errno 111]' it quotes); a timeout; else the
    library's own words in both."""
    import errno
    import re

    en = f"{cause!s:.{limit}}"
    seen: object = cause
    for _ in range(8):  # the chain an HTTP client wraps round the socket's error
        if isinstance(seen, OSError) and seen.errno is not None:
            return Text(en, os_reason(seen).zh)
        seen = getattr(seen, "reason", None) or getattr(seen, "__cause__", None) or getattr(seen, "__context__", None)
        if seen is None:
            break
    quoted = re.search(r"\[Errno (-?\d+)\]", en)
    if quoted:
        name = errno.errorcode.get(int(quoted.group(1)), "")
        if name in _OS_REASONS_ZH:
            return Text(en, _OS_REASONS_ZH[name])
    if "timed out" in en.lower() or "timeout" in type(cause).__name__.lower():
        return Text(en, "连接超时")
    return Text(en, en)


def read_reason(exc: BaseException) -> Text:
    """Why a text file could not be read as JSON, in both languages (json's and the codec's
    messages are English only): where the JSON breaks, bad UTF-8, nesting, or the OS reason."""
    import json

    if isinstance(exc, json.JSONDecodeError):
        return Text(str(exc)[:200], f"第 {exc.lineno} 行第 {exc.colno} 列处不是有效的 JSON")
    if isinstance(exc, UnicodeDecodeError):
        return Text(str(exc)[:200], f"第 {exc.start} 字节处不是 UTF-8 文本")
    if isinstance(exc, RecursionError):
        return Text(str(exc)[:200], "嵌套层数过深")
    if isinstance(exc, OSError):
        return os_reason(exc)
    return Text(str(exc)[:200], str(exc)[:200])


def pick_lang(flag: str | None = None) -> Lang:
    """`--lang` wins, then GPUWISE_LANG, then the locale (LC_ALL, LC_MESSAGES, LANG)."""
    for value in (flag, os.environ.get("GPUWISE_LANG")):
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    import locale  # only here: most runs are settled by the variables above

    loc = locale.getlocale()[0] or ""
    return "zh" if loc.lower().startswith("zh") else "en"
