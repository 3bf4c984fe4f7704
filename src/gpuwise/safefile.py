"""Bounded readers for every file gpuwise reads: a user's config.json, safetensors headers and
indexes, GGUF headers, price and card TOML files, contracts, saved evidence and plans.

- A size cap enforced by reading (at most `max_bytes + 1` bytes), never trusted from `st_size`
  (`/proc` files say 0, `/dev/zero` never ends).
- Only regular files: a FIFO, a device, a socket or a directory is refused with a message; the
  file is opened non-blocking, so a FIFO with no writer never hangs the reader.
- JSON: nesting depth and number length bounded before any value is built; NaN, Infinity and
  numbers that overflow a float are refused (RFC 8259 JSON has none of them).
- TOML: the same depth and number-length bounds; `nan` and `inf` are refused unless the caller
  allows them.
- Every failure is a bilingual `DataError` that names the file.

Outputs (`write_output`): never through a symbolic link, never onto a folder or device, whole
or not at all (a temporary file renamed over the target); a missing folder or a full disk is a
message naming the path.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import IO, Any

from gpuwise.errors import DataError, InputError
from gpuwise.i18n import Text, os_reason

MAX_DEPTH = 64  # a real config.json nests 3-4 levels, a safetensors header 3, a TOML file 3
MAX_NUMBER_CHARS = 100  # digits of one number literal: a 64-bit integer has 20
_CHUNK = 1 << 20
FILE, JSON_FILE, TOML_FILE = Text("file", "文件"), Text("JSON file", "JSON 文件"), Text("TOML file", "TOML 文件")
_KINDS = ((stat.S_ISDIR, Text("a directory", "目录")), (stat.S_ISFIFO, Text("a FIFO (named pipe)", "命名管道")),
          (stat.S_ISCHR, Text("a character device", "字符设备")), (stat.S_ISBLK, Text("a block device", "块设备")),
          (stat.S_ISSOCK, Text("a socket", "套接字")))
# The skeleton of a document: escapes dropped, then strings (and TOML comments) emptied. Each
# pattern is linear: no string pattern can rescan past a closing quote or a line end.
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_JSON_STRING = re.compile(r'"[^"]*"')
_TOML_STRING = re.compile(r'"[^"\n]*"|\'[^\'\n]*\'|#[^\n]*')
_NUMBER_RUN = re.compile(rf"[0-9eE+\-._]{{{MAX_NUMBER_CHARS + 1},}}")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _error(path: Path | str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{path}: {en}", f"{path}：{zh}"),
                     hint=Text("Check the file name, or pass the file itself (not a pipe, device or folder).",
                               "请检查文件名，或直接传入该文件（而不是管道、设备或文件夹）。"))


def _size_text(n: int) -> Text:
    if n >= 2**10:
        text = f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"
        return Text(text, text)
    return Text(f"{n} bytes", f"{n} 字节")


def open_regular(path: Path | str) -> IO[bytes]:
    """A regular file opened for reading; anything else (FIFO, device, folder) is a DataError."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _error(path, f"cannot be read: {exc.strerror or exc}.", f"无法读取：{os_reason(exc).zh}。") from None
    try:
        mode = os.fstat(fd).st_mode
        for test, kind in _KINDS:
            if test(mode):
                raise _error(path, f"is {kind.en}, not a file.", f"是{kind.zh}，不是普通文件。")
        if not stat.S_ISREG(mode):
            raise _error(path, "is not a regular file.", "不是普通文件。")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_regular(path: Path | str) -> None:
    """Refuse a path that is not a regular file (for readers that map the file themselves)."""
    open_regular(path).close()


def read_bytes(path: Path | str, max_bytes: int, what: Text | str = FILE) -> bytes:
    """The whole file, refused when it holds more than `max_bytes` (counted while reading)."""
    with open_regular(path) as fh:
        return read_capped(fh, max_bytes, path, what)


def read_capped(fh: IO[bytes], max_bytes: int, path: Path | str, what: Text | str = FILE) -> bytes:
    """At most `max_bytes` from an open file; more is a DataError naming `what`."""
    parts: list[bytes] = []
    seen = 0
    try:
        while seen <= max_bytes:
            chunk = fh.read(min(_CHUNK, max_bytes + 1 - seen))
            if not chunk:
                break
            parts.append(chunk)
            seen += len(chunk)
    except OSError as exc:
        raise _error(path, f"cannot be read: {exc.strerror or exc}.", f"无法读取：{os_reason(exc).zh}。") from None
    if seen > max_bytes:
        name = what if isinstance(what, Text) else Text(what, what)
        limit = _size_text(max_bytes)
        raise _error(path, f"is larger than {limit.en}: not a {name.en}.", f"超过 {limit.zh}，不是{name.zh}。")
    return b"".join(parts)


def read_text(path: Path | str, max_bytes: int, what: Text | str = FILE) -> str:
    raw = read_bytes(path, max_bytes, what)
    return decode_utf8(raw, path)


def decode_utf8(raw: bytes, origin: Path | str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(origin, f"is not UTF-8 text (byte {exc.start}).",
                     f"不是 UTF-8 文本（第 {exc.start} 字节）。") from None


_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}


def _depth(skeleton: str) -> int:
    """The deepest bracket nesting of a skeleton (its strings already emptied)."""
    return max(itertools.accumulate(map(_DELTA.__getitem__, _NOT_BRACKET.sub("", skeleton))), default=0)


def _check_shape(skeleton: str, origin: Path | str, max_depth: int) -> None:
    if _depth(skeleton) > max_depth:
        raise _error(origin, f"nests deeper than {max_depth} levels.", f"嵌套超过 {max_depth} 层。")
    long_number = _NUMBER_RUN.search(skeleton)
    if long_number:
        raise _error(origin, f"holds a number longer than {MAX_NUMBER_CHARS} characters.",
                     f"包含超过 {MAX_NUMBER_CHARS} 个字符的数字。")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} does not fit in a float")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_json(text: str | bytes, origin: Path | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Strict, bounded JSON: depth and number length checked first; NaN/Infinity refused."""
    if isinstance(text, bytes):
        text = decode_utf8(text, origin)
    _check_shape(_JSON_STRING.sub('""', _ESCAPE.sub("", text)), origin, max_depth)
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise _error(origin, f"is not valid JSON: {str(exc)[:200]}.",
                     f"不是合法的 JSON：{str(exc)[:200]}。") from None


def loads_json_object(text: str | bytes, origin: Path | str, what: Text | str = JSON_FILE) -> dict[str, Any]:
    data = loads_json(text, origin)
    if not isinstance(data, dict):
        name = what if isinstance(what, Text) else Text(what, what)
        raise _error(origin, f"is not a JSON object: not a {name.en}.", f"不是 JSON 对象，不是{name.zh}。")
    return data


def read_json(path: Path | str, max_bytes: int, what: Text | str = JSON_FILE) -> Any:
    return loads_json(read_bytes(path, max_bytes, what), path)


def read_json_object(path: Path | str, max_bytes: int, what: Text | str = JSON_FILE) -> dict[str, Any]:
    return loads_json_object(read_bytes(path, max_bytes, what), path, what)


def loads_toml(text: str | bytes, origin: Path | str, *, allow_nan: bool = False,
               max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Bounded TOML: depth and number length checked first; nan/inf refused unless allowed."""
    if isinstance(text, bytes):
        text = decode_utf8(text, origin)
    _check_shape(_TOML_STRING.sub('""', _ESCAPE.sub("", text)), origin, max_depth)
    import tomllib  # here, not at import: a cold estimate reads its data files from the cache

    try:
        return tomllib.loads(text, parse_float=float if allow_nan else _finite)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        raise _error(origin, f"is not valid TOML: {str(exc)[:200]}.",
                     f"不是合法的 TOML：{str(exc)[:200]}。") from None


def read_toml(path: Path | str, max_bytes: int, what: Text | str = TOML_FILE) -> dict[str, Any]:
    return loads_toml(read_bytes(path, max_bytes, what), path)


__all__ = ["MAX_DEPTH", "MAX_NUMBER_CHARS", "check_output", "check_regular", "decode_utf8", "loads_json",
           "loads_json_object", "loads_toml", "open_regular", "read_bytes", "read_capped", "read_json",
           "read_json_object", "read_text", "read_toml", "replaced_note", "write_output"]


# ------------------------------------------------------------------ output files

def check_output(path: Path | str, *, replace: bool) -> bool:
    """Whether `path` can take an output file; True when it replaces an existing regular file.

    Refused with a message: a symbolic link (never written through), a folder, FIFO or device,
    a missing folder, and an existing file when `replace` is False."""
    p = Path(path)
    try:
        info = os.lstat(p)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _out_error(p, f"cannot be checked: {exc.strerror or exc}.",
                         f"无法检查：{os_reason(exc).zh}。") from None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise _out_error(p, "is a symbolic link; gpuwise does not write through links.",
                             "是符号链接；gpuwise 不会经由链接写入。")
        for test, kind in _KINDS:
            if test(info.st_mode):
                raise _out_error(p, f"is {kind.en}, not a file.", f"是{kind.zh}，不是普通文件。")
        if not replace:
            raise _out_error(p, "already exists.", "已存在。")
        return True
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise _out_error(p, f"cannot be written: the folder {parent} does not exist.",
                         f"无法写入：文件夹 {parent} 不存在。")
    return False


def write_output(path: Path | str, data: bytes | str, *, replace: bool = False) -> bool:
    """Write an output file whole (a temporary file in the same folder, then renamed over the
    target), never through a symbolic link. Returns True when an existing file was replaced."""
    p = Path(path)
    existed = check_output(p, replace=replace)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _out_error(p, f"cannot be written: {exc.strerror or exc}.",
                         f"无法写入：{os_reason(exc).zh}。") from None
    return existed


def _out_error(path: Path, en: str, zh: str) -> InputError:
    return InputError(Text(f"{path}: {en}", f"{path}：{zh}"),
                      hint=Text("Choose another output path.", "请换一个输出路径。"))


def replaced_note(path: Path | str) -> Text:
    return Text(f"Replaced the existing file {path}.", f"已替换原有文件 {path}。")
