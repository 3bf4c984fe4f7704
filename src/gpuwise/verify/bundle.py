"""The evidence bundle of a verify run: raw evidence (with its content hash), the verdict,
Markdown and HTML reports (with the raw tool outputs and the sustained window), and a
SHA256SUMS file over all of them, in one folder to hand to a provider."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from gpuwise.errors import InputError
from gpuwise.i18n import Lang, Text
from gpuwise.jsonable import json_default
from gpuwise.verify.judge import Verdict
from gpuwise.verify.raw import save_evidence
from gpuwise.verify.report import render_html, render_markdown

__all__ = ["BUNDLE_FILES", "write_bundle"]

BUNDLE_FILES = ("raw.json", "verdict.json", "report.md", "report.html")


def write_bundle(verdict: Verdict, folder: str | Path, lang: Lang = "en") -> Path:
    """Write the bundle into `folder` (created; existing bundle files are replaced)."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        save_evidence(verdict.evidence, out / "raw.json")
        (out / "verdict.json").write_text(
            json.dumps(verdict.to_dict(), ensure_ascii=False, indent=2, default=json_default) + "\n",
            encoding="utf-8")
        (out / "report.md").write_text(render_markdown(verdict, lang), encoding="utf-8")
        (out / "report.html").write_text(render_html(verdict, lang), encoding="utf-8")
        sums = [f"{hashlib.sha256((out / name).read_bytes()).hexdigest()}  {name}" for name in BUNDLE_FILES]
        (out / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(Text(f"Cannot write the bundle to {out}: {exc}", f"无法把证据包写入 {out}：{exc}")) from exc
    return out
