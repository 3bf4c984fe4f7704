"""Charts for `gpuwise estimate|plan --plot out.png|out.svg` (matplotlib, the `[plot]` extra).

Presentation only: the figures come from the commands' --json objects. matplotlib is
imported inside the functions, and only its object API is used (no pyplot global state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError, InputError
from gpuwise.i18n import Lang, Text, os_reason, pick_lang

GIB = 2**30
SUFFIXES = (".png", ".svg")
# matplotlib's default DejaVu Sans has no CJK glyphs; these are the common CJK system fonts
# (shared/research/ecosystem.md, section 4). Debian: apt-get install fonts-noto-cjk.
CJK_FONTS = ["Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Micro Hei",
             "WenQuanYi Zen Hei", "Microsoft YaHei", "PingFang SC", "SimHei"]
COMPONENTS = ("weights", "kv_cache", "activations", "gradients", "optimizer", "overhead")
COLORS = {"weights": "#2457c5", "kv_cache": "#e08a1e", "activations": "#8e44ad", "gradients": "#c0392b",
          "optimizer": "#16794a", "overhead": "#7f8c8d", "other": "#b7950b", "free": "#dfe4ea"}
T = {
    "weights": Text("weights", "权重"), "kv_cache": Text("KV cache", "KV 缓存"),
    "activations": Text("activations", "激活"), "gradients": Text("gradients", "梯度"),
    "optimizer": Text("optimizer states", "优化器状态"),
    "overhead": Text("CUDA context + workspaces", "CUDA 上下文与工作区"),
    "other": Text("other", "其他"), "free": Text("free (usable)", "空闲（可用）"),
    "usable": Text("usable memory", "可用显存"), "memory": Text("memory per GPU (GiB)", "每卡显存（GiB）"),
    "fits": Text("fits, headroom {x} GiB", "放得下，余量 {x} GiB"),
    "no_fit": Text("does not fit, short by {x} GiB", "放不下，还差 {x} GiB"),
    "cost": Text("cost per hour (CNY)", "每小时成本（元）"), "speed": Text("throughput (tokens/s)", "吞吐（token/秒）"),
    "plans": Text("ranked plans", "方案排名"), "no_plan": Text("no plan meets the constraints", "没有满足条件的方案"),
    "infer": Text("inference", "推理"), "full": Text("full fine-tune", "全参微调"),
    "lora": Text("LoRA fine-tune", "LoRA 微调"), "qlora": Text("QLoRA fine-tune", "QLoRA 微调"),
    "pretrain": Text("pre-training", "预训练"),
}


def _task(task: str, lang: Lang) -> str:
    return T[task].render(lang) if task in T else task
MISSING = Text("Drawing charts needs matplotlib.", "绘图需要 matplotlib。")
INSTALL = Text("Install it with: pip install 'gpuwise[plot]'", "安装方法：pip install 'gpuwise[plot]'")


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401 - checks the package is whole
    except ImportError as exc:
        raise GpuwiseError(MISSING, hint=INSTALL) from exc
    return matplotlib


# Font files of those families, by file name (Debian fonts-noto-cjk: NotoSansCJK-Regular.ttc).
_CJK_FILES = ("notosanscjk", "notoserifcjk", "sourcehansans", "wqy", "msyh", "pingfang", "simhei")
FALLBACK = Text("The chart is drawn in English: matplotlib finds no Chinese font. Install one "
                "(Debian/Ubuntu: apt-get install fonts-noto-cjk) and run the command again.",
                "图表改用英文绘制：matplotlib 找不到中文字体。请安装中文字体（Debian/Ubuntu："
                "apt-get install fonts-noto-cjk）后重新运行。")


def cjk_font_available() -> bool:
    """A CJK font matplotlib can use. matplotlib lists system fonts once, in a cache made when
    it was first imported; a font installed after that is unknown to it until the cache is
    rebuilt. So when none is known, look for CJK font files on disk and add them."""
    from matplotlib import font_manager

    names = {f.name for f in font_manager.fontManager.ttflist}
    if any(name in names for name in CJK_FONTS):
        return True
    for path in font_manager.findSystemFonts():
        if any(part in Path(path).name.lower().replace("-", "").replace("_", "") for part in _CJK_FILES):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    names = {f.name for f in font_manager.fontManager.ttflist}
    return any(name in names for name in CJK_FONTS)


def _style(lang: Lang) -> tuple[dict[str, Any], Lang]:
    """rcParams for the language; Chinese falls back to English labels without a CJK font."""
    rc: dict[str, Any] = {"svg.hashsalt": "gpuwise", "axes.spines.top": False, "axes.spines.right": False}
    if lang == "zh":
        if not cjk_font_available():
            return rc, "en"
        rc.update({"font.sans-serif": [*CJK_FONTS, "DejaVu Sans"], "font.family": "sans-serif",
                   "axes.unicode_minus": False})
    return rc, lang


def memory_parts(memory: dict[str, Any], usable: float) -> dict[str, float]:
    """GiB per stacked component, plus what is left of usable memory ("free")."""
    parts = {c: float(memory.get(c) or 0) / GIB for c in COMPONENTS}
    required = float(memory.get("required") or 0) / GIB or sum(parts.values())
    parts["other"] = max(required - sum(parts.values()), 0.0)
    parts["free"] = max(usable / GIB - required, 0.0)
    return parts


def _memory_axes(ax: Any, bars: list[tuple[str, dict[str, Any], float]], lang: Lang) -> None:
    rows = [(label, memory_parts(mem, usable), usable / GIB) for label, mem, usable in bars]
    ys = list(range(len(rows)))[::-1]
    order = (*COMPONENTS, "other", "free")
    for i, key in enumerate(order):
        if not any(parts[key] for _, parts, _ in rows):
            continue
        lefts = [sum(parts[k] for k in order[:i]) for _, parts, _ in rows]
        ax.barh(ys, [parts[key] for _, parts, _ in rows], left=lefts, color=COLORS[key],
                label=T[key].render(lang), height=0.6)
    for n, (_, _, usable) in enumerate(rows):  # the usable line across each bar
        ax.vlines(usable, ys[n] - 0.42, ys[n] + 0.42, colors="#1d232b", linewidths=2.5, zorder=3,
                  label=T["usable"].render(lang) if n == 0 else None)
    ax.set_yticks(ys, [label for label, _, _ in rows])
    ax.set_xlabel(T["memory"].render(lang))


def _figure(height: float, width: float = 9.0) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: Path) -> None:
    if fig.axes and fig.axes[0].get_legend_handles_labels()[0]:
        fig.legend(loc="outside lower center", ncol=5, fontsize=8, frameon=False)
    import io

    from gpuwise.safefile import write_output

    svg = path.suffix.lower() == ".svg"
    meta = {"Date": None} if svg else {"Software": None}
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="svg" if svg else "png", dpi=150, metadata=meta)
        write_output(path, buf.getvalue(), replace=True)  # whole, never through a symbolic link
    except OSError as exc:
        raise InputError(Text(f"Cannot write {path}: {exc.strerror or exc}.",
                              f"无法写入 {path}：{os_reason(exc).zh}。")) from exc


def plot_estimate(r: dict[str, Any], path: Path, lang: Lang) -> None:
    fig = _figure(2.6)
    ax = fig.add_subplot()
    _memory_axes(ax, [(f"{r['card']} ×{r['gpus']}", r["memory"], r["usable_bytes"])], lang)
    head = r["headroom_bytes"] / GIB
    verdict = (T["fits"] if r["fits"] else T["no_fit"]).render(lang).format(x=f"{abs(head):,.1f}")
    ax.set_title(f"{r['model']['name']} · {r['card']} × {r['gpus']} · {_task(r['task'], lang)} — {verdict}",
                 fontsize=10)
    _save(fig, path)


def plot_plan(r: dict[str, Any], path: Path, lang: Lang) -> None:
    plans = r.get("plans") or []
    fig = _figure(3.0 + 0.45 * max(len(plans), 1), 12.0)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    labels = [f"#{i} {p['card_name']} ×{p['gpus']} {p['weights']}" for i, p in enumerate(plans, 1)]
    if plans:
        _memory_axes(left, [(lbl, p["memory"], p["memory"]["usable_bytes"]) for lbl, p in zip(labels, plans)], lang)
    left.set_title(f"{r['model']} · {_task(r['task'], lang)} · " + T["plans" if plans else "no_plan"].render(lang),
                   fontsize=10)
    for i, p in enumerate(plans, 1):
        speed, cost = p.get("speed") or {}, p.get("cost") or {}
        y = speed.get("throughput_tokens_per_s", speed.get("tokens_per_s"))
        if y is None or cost.get("per_hour") is None:
            continue
        right.scatter([cost["per_hour"]], [y], color="#2457c5", s=40)
        right.annotate(f"#{i}", (cost["per_hour"], y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    right.set_xlabel(T["cost"].render(lang))
    right.set_ylabel(T["speed"].render(lang))
    right.set_xlim(left=0)
    right.set_ylim(bottom=0)
    _save(fig, path)


def save_plot(result: dict[str, Any], path: str | Path, lang: Lang = "en") -> Path:
    """Draw an estimate or plan --json object to a .png or .svg file; returns the path."""
    return draw(result, path, lang)[0]


def draw(result: dict[str, Any], path: str | Path, lang: Lang = "en") -> tuple[Path, Text | None]:
    """`save_plot`, and why the chart's language differs from `lang` (None when it does not)."""
    out = Path(path)
    if out.suffix.lower() not in SUFFIXES:
        raise InputError(Text(f"--plot must end in .png or .svg, got '{out}'.",
                              f"--plot 的扩展名必须是 .png 或 .svg，实际为“{out}”。"))
    mpl = _matplotlib()
    rc, drawn = _style(lang)
    with mpl.rc_context(rc):
        if "plans" in result:
            plot_plan(result, out, drawn)
        elif "memory" in result:
            plot_estimate(result, out, drawn)
        else:
            raise InputError(Text("Only estimate and plan results can be plotted.",
                                  "只能为 estimate 与 plan 的结果绘图。"))
    return out, FALLBACK if drawn != lang else None


def with_plot(result: dict[str, Any], path: str | None, lang_flag: str | None = None) -> dict[str, Any]:
    """For the CLI: draw `result` when --plot was given, say on stderr when the chart could not be
    in the asked language, and hand the result back unchanged."""
    if path:
        import sys

        lang = pick_lang(lang_flag)
        _, note = draw(result, path, lang)
        if note is not None:
            sys.stderr.write(note.render(lang) + "\n")
    return result
