"""A ModelArch from a model folder on disk: config.json plus safetensors headers, or a GGUF file.

Nothing but headers is read, so a 700 GB checkpoint costs a few milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.safetensors_header import read_checkpoint, with_checkpoint
from gpuwise.catalog.sources import read_config_file
from gpuwise.errors import DataError
from gpuwise.i18n import Text
from gpuwise.safefile import check_regular
from gpuwise.textsafe import clean_text

_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def _model_ggufs(folder: Path) -> list[Path]:
    """The .gguf files that hold a model: vision projectors (mmproj) and later split parts left out."""
    found = sorted(p for p in folder.glob("*.gguf") if p.is_file() and not p.name.lower().startswith("mmproj"))
    return [p for p in found if not (m := _SPLIT_PART.search(p.name)) or m.group(1) == "00001"]


def _pick_gguf(folder: Path, ggufs: list[Path]) -> Path:
    if len(ggufs) == 1:
        return ggufs[0]
    names = ", ".join(p.name for p in ggufs[:6])
    raise DataError(Text(f"{folder} holds {len(ggufs)} GGUF models ({names}): pass one file.",
                         f"{folder} 中有 {len(ggufs)} 个 GGUF 模型（{names}）：请指定其中一个文件。"))


def _missing(folder: Path) -> DataError:
    if any(folder.glob("*.safetensors")):
        return DataError(Text(f"{folder} has .safetensors weights but no config.json, which gpuwise needs "
                              "for the architecture.",
                              f"{folder} 中有 .safetensors 权重，但缺少 gpuwise 读取结构所需的 config.json。"),
                         hint=Text("Download config.json from the model's repository into that folder.",
                                   "请从模型仓库下载 config.json 放入该文件夹。"))
    return DataError(Text(f"{folder} is not a model folder: it has no config.json (with .safetensors "
                          "weights) and no .gguf file.",
                          f"{folder} 不是模型文件夹：既没有 config.json（及 .safetensors 权重），也没有 .gguf 文件。"),
                     hint=Text("Pass a folder saved by transformers/huggingface-cli, a .gguf file, or a "
                               "config.json.",
                               "请传入 transformers/huggingface-cli 保存的文件夹、.gguf 文件或 config.json。"))


def _folder_name(folder: Path) -> str:
    """The folder's name; for a Hugging Face cache snapshot (models--org--name/snapshots/<sha>), the repo id.

    Cleaned to one printable line: a folder name may hold newlines or bidi overrides."""
    resolved = folder.resolve()
    repo = resolved.parent.parent.name
    if resolved.parent.name == "snapshots" and repo.startswith("models--"):
        return clean_text(repo.removeprefix("models--").replace("--", "/")) or "model"
    return clean_text(resolved.name or str(folder)) or "model"


def arch_from_folder(path: Path) -> ModelArch:
    """config.json + safetensors headers (exact bytes); a folder whose weights are a GGUF uses the GGUF."""
    folder = Path(path)
    name = _folder_name(folder)
    config = folder / "config.json"
    ckpt = read_checkpoint(folder)
    ggufs = _model_ggufs(folder)
    if ckpt is None and ggufs:  # the weights here are the GGUF; its header carries the architecture
        from gpuwise.catalog.gguf_reader import arch_from_gguf

        return arch_from_gguf(_pick_gguf(folder, ggufs))
    if not config.is_file():
        if config.exists():
            check_regular(config)  # a FIFO, device or folder named config.json: say which
        raise _missing(folder)
    arch = arch_from_config(read_config_file(config), name, source=str(folder))
    if ckpt is None:
        return replace(arch, notes=arch.notes + (Text(
            "No .safetensors weights in the folder: sizes are counted from config.json.",
            "文件夹中没有 .safetensors 权重：大小按 config.json 计算。"),))
    return with_checkpoint(arch, ckpt)
