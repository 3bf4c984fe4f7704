"""The command line's own parse errors, worded by gpuwise in the user's language.

Typer (with its vendored Click and pydantic) refuses a value that does not convert, an unknown
flag, a missing value or argument before any gpuwise code runs, and says so in English
("Invalid value for '--micro-batch': Input should be a valid integer, ..."). `as_gpuwise_error`
turns each of those exceptions into the `GpuwiseError` gpuwise would have raised itself: the flag
and the value quoted, the valid range from `gpuwise.bounds` where it has one, close matches for a
misspelt flag or command, and the next step. Only the structured fields of the exceptions are read
(the parameter, the option name), never their English text, except for the two Click errors that
carry nothing else (an unknown command, extra arguments), whose quoted word is taken back out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer._click import exceptions as cx

from gpuwise.bounds import BOUNDS, Bound, out_of_range
from gpuwise.errors import GpuwiseError, InputError, unknown_name
from gpuwise.i18n import Lang, Text, pick_lang

_LANGS = ("zh", "en", "zh-cn", "zh_cn", "cn")
# A required value the catalog can list: the listing command goes in the hint.
_LISTED = {"--card": "gpuwise cards", "--provider": "gpuwise prices"}
_BY_FLAG = {b.flag_name: b for b in BOUNDS.values()}  # --tokens is the field train_tokens


def _options(args: Sequence[str]) -> list[str]:
    """The arguments before `--` (after it every word is a value)."""
    return list(args[:args.index("--")]) if "--" in args else list(args)


def lang_in(args: Sequence[str]) -> Lang:
    """The language asked for by `--lang X` / `--lang=X` in raw arguments, else the locale's
    (an unknown --lang value falls back to the locale: the error about it must be readable)."""
    value = flag_value(args, ("--lang",))
    return pick_lang(value if value is not None and value.lower() in _LANGS else None)


def json_in(args: Sequence[str]) -> bool:
    return "--json" in _options(args)


def flag_value(args: Sequence[str], opts: Sequence[str]) -> str | None:
    """The last value given to any of `opts` in raw arguments (`--x V` or `--x=V`)."""
    found: str | None = None
    words = _options(args)
    for i, word in enumerate(words):
        name, eq, inline = word.partition("=")
        if name in opts:
            found = inline if eq else (words[i + 1] if i + 1 < len(words) else found)
    return found


def _flag(param: Any) -> str:
    """An option's long flag (`--micro-batch`), an argument's name as the help shows it (SRC)."""
    opts = list(getattr(param, "opts", ()) or ())
    if getattr(param, "param_type_name", "") == "argument" or not opts:
        return str(param.name or "?").upper()
    return str(max(opts, key=lambda o: (o.startswith("--"), len(o))))


def _path(ctx: Any) -> str:
    """`gpuwise prices import`: the commands' names only (Click's command_path also writes a
    group's own arguments, `gpuwise prices [card] import`, which is not a command to type)."""
    names: list[str] = []
    while ctx is not None:
        names.insert(0, ctx.info_name or "gpuwise")
        ctx = ctx.parent
    return " ".join(names) or "gpuwise"


def _help_hint(ctx: Any, path: str | None = None) -> Text:
    path = path or _path(ctx)
    return Text(f"Run `{path} --help` for its options.", f"运行 `{path} --help` 查看用法。")


def _command_of(root: Any, args: Sequence[str]) -> tuple[Any, str]:
    """The (sub)command the arguments name, and its path, for an error Click raised without a
    context (the option parser's): the leading words that are subcommand names."""
    command, path = root, ["gpuwise"]
    for word in _options(args):
        sub = getattr(command, "commands", {}).get(word)
        if word.startswith("-") or sub is None:
            if not word.startswith("-") and getattr(command, "commands", None):
                break
            continue
        command, path = sub, [*path, word]
    return command, " ".join(path)


def _annotation(param: Any) -> Any:
    desc = getattr(param, "type_descriptor", None)
    return getattr(desc, "annotation", None)


def _kind(param: Any) -> str | None:
    """'int', 'float' or 'path' for the parameters gpuwise has; None for any other."""
    ann = _annotation(param)
    text = str(ann)
    if ann is bool:
        return None
    if ann is int or text.startswith("int") or "[int]" in text:
        return "int"
    if ann is float or text.startswith("float") or "[float]" in text:
        return "float"
    if isinstance(ann, type) and issubclass(ann, Path) or "Path" in text:
        return "path"
    return None


def _typer_bound(param: Any, flag: str, kind: str) -> Bound | None:
    """The range a Typer option declares itself (`min=`/`max=`, e.g. `serve --port`)."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is None and high is None:
        return None
    return Bound(str(param.name), "int" if kind == "int" else "float",
                 float("-inf") if low is None else low, float("inf") if high is None else high, flag=flag)


def _bad_value(err: cx.BadParameter, args: Sequence[str]) -> GpuwiseError:
    param = err.param
    if param is None:
        return InputError(Text(f"Invalid value: {err.message}", f"取值无效：{err.message}"),
                          hint=_help_hint(err.ctx))
    flag, kind = _flag(param), _kind(param)
    raw = flag_value(args, list(param.opts)) if param.param_type_name == "option" else None
    shown = raw if raw is not None else "?"
    if kind in ("int", "float"):
        bound = _BY_FLAG.get(flag) or _typer_bound(param, flag, kind)
        if bound is not None and bound.low > float("-inf") and bound.high < float("inf"):
            return out_of_range(bound, shown, flag)
        if bound is not None:  # one-sided: at least low
            word = ("a whole number", "整数") if kind == "int" else ("a number", "数值")
            low = f"{bound.low:g}"
            return InputError(Text(f"{flag} must be {word[0]} of at least {low}; got {shown!r}.",
                                   f"{flag} 必须是不小于 {low} 的{word[1]}，实际为 {shown!r}。"))
        word = ("a whole number", "整数") if kind == "int" else ("a number", "数值")
        return InputError(Text(f"{flag} must be {word[0]}; got {shown!r}.",
                               f"{flag} 必须是{word[1]}，实际为 {shown!r}。"), hint=_help_hint(err.ctx))
    return InputError(Text(f"Invalid value for {flag}: {shown!r}.", f"{flag} 的取值无效：{shown!r}。"),
                      hint=_help_hint(err.ctx))


def _missing(err: cx.MissingParameter) -> GpuwiseError:
    param = err.param
    name = _flag(param) if param is not None else "?"
    listing = _LISTED.get(name)
    hint = (Text(f"Run `{listing}` to list them.", f"运行 `{listing}` 查看全部。") if listing
            else _help_hint(err.ctx))
    if param is not None and param.param_type_name == "argument":
        return InputError(Text(f"Missing the argument {name}.", f"缺少参数 {name}。"), hint=hint)
    return InputError(Text(f"Missing the option {name}: it is required.", f"缺少必填选项 {name}。"), hint=hint)


def _all_opts(command: Any) -> list[str]:
    return [o for p in getattr(command, "params", ()) for o in (*p.opts, *p.secondary_opts)
            if o.startswith("-")] + ["--help"]


def _no_such_option(err: cx.NoSuchOption, root: Any, args: Sequence[str]) -> GpuwiseError:
    command, path = (err.ctx.command, _path(err.ctx)) if err.ctx is not None else _command_of(root, args)
    choices = _all_opts(command)
    # only close spellings: at difflib's 0.5 a long command's flags would suggest unrelated ones
    near = difflib.get_close_matches(err.option_name, choices, n=3, cutoff=0.75)
    # a short list is named whole; a long one only by its close spellings, or not at all
    return unknown_name(Text("option", "选项"), err.option_name, choices if len(choices) <= 8 else near,
                        f"{path} --help")


def _option_usage(err: cx.BadOptionUsage, root: Any, args: Sequence[str]) -> GpuwiseError:
    opt = err.option_name
    command, path = (err.ctx.command, _path(err.ctx)) if err.ctx is not None else _command_of(root, args)
    param = next((p for p in getattr(command, "params", ()) if opt in (*p.opts, *p.secondary_opts)), None)
    if param is not None and getattr(param, "is_flag", False):
        return InputError(Text(f"{opt} is a switch and takes no value: write {opt} alone.",
                               f"{opt} 是开关，不接受取值：只写 {opt} 即可。"), hint=_help_hint(None, path))
    listing = _LISTED.get(opt)
    hint = (Text(f"Run `{listing}` to list them.", f"运行 `{listing}` 查看全部。") if listing
            else _help_hint(None, path))
    return InputError(Text(f"{opt} needs a value after it.", f"{opt} 后面缺少取值。"), hint=hint)


_NO_COMMAND = re.compile(r"^No such command (['\"])(?P<name>.*?)\1\.")
_EXTRA = re.compile(r"unexpected extra arguments? ?(?:\(s\))? \((?P<extra>.*)\)$", re.DOTALL)


def _plain_usage(err: cx.UsageError) -> GpuwiseError:
    ctx = err.ctx
    path = _path(ctx)
    commands = getattr(ctx.command, "commands", None) if ctx is not None else None
    named = _NO_COMMAND.match(err.message)
    if named and commands is not None:
        visible = [n for n, c in commands.items() if not getattr(c, "hidden", False)]
        return unknown_name(Text("command", "命令"), named.group("name"), visible, f"{path} --help")
    extra = _EXTRA.search(err.message)
    if extra:
        words = extra.group("extra")
        return InputError(Text(f"Unexpected extra argument(s): {words}. A value with spaces needs quotes.",
                               f"多余的参数：{words}。含空格的取值请加引号。"), hint=_help_hint(ctx))
    if commands is not None:
        return InputError(Text("Missing a command.", "缺少子命令。"), hint=_help_hint(ctx))
    return InputError(Text(f"Invalid command line: {err.message}", f"命令行有误：{err.message}"),
                      hint=_help_hint(ctx))


def as_gpuwise_error(err: cx.ClickException, args: Sequence[str], root: Any) -> GpuwiseError:
    """The gpuwise error for one of the command line's parse errors (see the module text);
    `root` is the Click command tree the arguments were given to."""
    if isinstance(err, cx.MissingParameter):
        return _missing(err)
    if isinstance(err, cx.BadParameter):
        return _bad_value(err, args)
    if isinstance(err, cx.NoSuchOption):
        return _no_such_option(err, root, args)
    if isinstance(err, cx.BadOptionUsage):
        return _option_usage(err, root, args)
    if isinstance(err, cx.UsageError):
        return _plain_usage(err)
    if isinstance(err, cx.FileError):
        return InputError(Text(f"Could not open {err.ui_filename}: {err.message}",
                               f"无法打开 {err.ui_filename}：{err.message}"))
    return InputError(Text(err.format_message(), err.format_message()))


__all__ = ["as_gpuwise_error", "flag_value", "json_in", "lang_in"]
