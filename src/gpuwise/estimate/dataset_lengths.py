"""A dataset's token lengths, as a request states them, and the batch lengths a run then meets.

ms-swift prints a dataset's statistics as 'Dataset Token Length: 3234.4±2547.5, min=91, max=19548'
(docs/source_en/LLM/Benchmark.md@46922151e; swift/llm/utils/utils.py stat_dataset adds ', size=N'),
and `--dataset-lengths` takes that line as it is, or the plain form
'mean=3234.4,std=2547.5,min=91,max=19548[,samples=4959]'.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from gpuwise.errors import InputError
from gpuwise.i18n import Text

# samples a run draws when the input does not say (the ms-swift 1.x benchmark's train_dataset_sample)
DEFAULT_SAMPLES = 1000
MAX_SAMPLES = 5_000  # replayed at most: the reserve grows ever more slowly (it is a running maximum of
# segments cut), and a plan replays once per candidate
MAX_TOKENS = 1 << 24
SEED = 0  # the run's shuffle is unknown; one fixed draw keeps every estimate reproducible
_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_MSSWIFT = re.compile(rf"^(?:dataset token length:\s*)?{_NUMBER}\s*(?:±|\+-|\+/-)\s*{_NUMBER}\s*,\s*min\s*=\s*{_NUMBER}"
                      rf"\s*,\s*max\s*=\s*{_NUMBER}(?:\s*,\s*(?:size|samples)\s*=\s*{_NUMBER})?$", re.IGNORECASE)
_PLAIN_KEYS = ("mean", "std", "min", "max")
_HELP = Text("Write it as ms-swift prints it, '3234.4±2547.5, min=91, max=19548' (optionally ', size=4959'), "
             "or as 'mean=3234.4,std=2547.5,min=91,max=19548,samples=4959'.",
             "请按 ms-swift 打印的格式书写，如“3234.4±2547.5, min=91, max=19548”（可加“, size=4959”），"
             "或写作“mean=3234.4,std=2547.5,min=91,max=19548,samples=4959”。")


def _fail(en: str, zh: str) -> InputError:
    return InputError(Text(f"--dataset-lengths: {en} {_HELP.en}", f"--dataset-lengths：{zh}{_HELP.zh}"))


@dataclass(frozen=True)
class DatasetLengths:
    """Tokens per sample: mean and standard deviation, shortest and longest, and how many samples
    the run draws (None: DEFAULT_SAMPLES)."""

    mean: float
    std: float
    shortest: int
    longest: int
    samples: int | None = None

    def __post_init__(self) -> None:
        if not (1 <= self.shortest <= self.mean <= self.longest <= MAX_TOKENS):
            raise _fail(f"needs 1 <= min <= mean <= max <= {MAX_TOKENS:,}; got mean {self.mean:g}, "
                        f"min {self.shortest}, max {self.longest}.",
                        f"需要 1 ≤ min ≤ mean ≤ max ≤ {MAX_TOKENS:,}；实际 mean {self.mean:g}、"
                        f"min {self.shortest}、max {self.longest}。")
        if not 0 <= self.std <= self.longest - self.shortest:
            raise _fail(f"the spread {self.std:g} must be between 0 and max - min ({self.longest - self.shortest}).",
                        f"标准差 {self.std:g} 必须在 0 与 max - min（{self.longest - self.shortest}）之间。")
        if self.samples is not None and not 1 <= self.samples <= 10**9:
            raise _fail(f"samples must be between 1 and 1,000,000,000; got {self.samples}.",
                        f"samples 必须在 1 到 1,000,000,000 之间，实际为 {self.samples}。")

    @property
    def run_samples(self) -> int:
        return min(self.samples or DEFAULT_SAMPLES, MAX_SAMPLES)

    def text(self) -> str:
        """ms-swift's form, read back by `parse_dataset_lengths`."""
        size = f", size={self.samples}" if self.samples is not None else ""
        return f"{self.mean:g}±{self.std:g}, min={self.shortest}, max={self.longest}{size}"


def _whole(value: str, name: str) -> int:
    number = float(value)
    if number != int(number):
        raise _fail(f"{name} must be a whole number of tokens; got {value}.",
                    f"{name} 必须是整数个 token，实际为 {value}。")
    return int(number)


def parse_dataset_lengths(text: str) -> DatasetLengths:
    """ms-swift's 'mean±std, min=a, max=b[, size=n]' or 'mean=..,std=..,min=..,max=..[,samples=n]'."""
    raw = text.strip()
    found = _MSSWIFT.match(raw)
    if found:
        mean, std, low, high, size = found.groups()
        return DatasetLengths(float(mean), float(std), _whole(low, "min"), _whole(high, "max"),
                              _whole(size, "size") if size else None)
    parts = dict(p.partition("=")[::2] for p in raw.replace(" ", "").lower().split(",") if p)
    extra = sorted(set(parts) - {*_PLAIN_KEYS, "samples", "size"})
    lacking = [k for k in _PLAIN_KEYS if k not in parts]
    if extra or lacking:
        named = ", ".join(extra) if extra else "; ".join(f"no {k}" for k in lacking)
        raise _fail(f"cannot read '{text}' ({named}).", f"无法解析“{text}”（{named}）。")
    if not all(re.fullmatch(_NUMBER, v) for v in parts.values()):
        raise _fail(f"cannot read '{text}': each statistic is a number.", f"无法解析“{text}”：每项统计须为数字。")
    size = parts.get("samples", parts.get("size"))
    return DatasetLengths(float(parts["mean"]), float(parts["std"]), _whole(parts["min"], "min"),
                          _whole(parts["max"], "max"), _whole(size, "samples") if size else None)


def batch_lengths(d: DatasetLengths, max_length: int, micro_batch: int, drop_longer: bool = True) -> tuple[int, ...]:
    """The padded length of each micro-batch of one pass over `d.run_samples` samples drawn (one
    fixed seed) from a log-normal with the stated mean and spread, kept within the stated min and
    max. Token counts of text are right-skewed and positive, which a log-normal matched to the two
    moments describes (the benchmark set's 3234±2548 with min 91 cannot be a normal). Samples over
    `max_length` are dropped (ms-swift's truncation_strategy 'delete'), or cut to it; each batch is
    padded to its longest sample (no packing). () if none is kept."""
    sigma = math.sqrt(math.log(1 + (d.std / d.mean) ** 2))  # moments of a log-normal
    mu = math.log(d.mean) - sigma**2 / 2
    rnd = random.Random(SEED)
    kept: list[int] = []
    for _ in range(d.run_samples):
        n = round(d.mean)
        for _ in range(1000 if d.std else 0):  # a draw within [min, max]; clamped if none comes
            n = round(rnd.lognormvariate(mu, sigma))
            if d.shortest <= n <= d.longest:
                break
        n = min(max(n, d.shortest), d.longest)
        if n <= max_length or not drop_longer:
            kept.append(min(n, max_length))
    return tuple(max(kept[i:i + micro_batch]) for i in range(0, len(kept), micro_batch))
