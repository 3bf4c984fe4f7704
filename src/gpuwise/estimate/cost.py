"""What it costs: per hour for all GPUs, per million output tokens, per training run,
and the monthly-vs-hourly break-even, from the provider price files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuwise.catalog.prices import PriceOffer, PriceQuote, price_per_gpu_hour


@dataclass(frozen=True)
class Cost:
    """What a deployment costs per hour (and per job or token where known), from one price quote."""

    currency: str
    per_gpu_hour: float
    per_hour: float  # all GPUs of the job
    provider: str
    billing: str
    as_of: str
    per_million_tokens: float | None = None
    per_run: float | None = None
    run_hours: float | None = None
    breakeven_hours_per_month: float | None = None  # above this, monthly billing is cheaper
    low_high_per_hour: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.low_high_per_hour:
            out["low_high_per_hour"] = [round(x, 4) for x in self.low_high_per_hour]
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def _breakeven(card_id: str, provider: str | None, hourly: PriceQuote,
               offers: Sequence[PriceOffer] | None) -> float | None:
    """Hours of use per month above which the monthly price beats paying by the hour."""
    try:
        monthly = price_per_gpu_hour(card_id, provider, "monthly", offers)
    except Exception:  # noqa: BLE001 - an unknown provider for monthly is simply no offer
        return None
    if monthly is None or hourly.mid <= 0 or monthly.currency != hourly.currency:
        return None
    return monthly.mid * monthly.hours_per_unit / hourly.mid


def job_cost(card_id: str, n_gpus: int, *, provider: str | None = None, billing: str = "hourly",
             tokens_per_s: float | None = None, run_seconds: float | None = None,
             offers: Sequence[PriceOffer] | None = None) -> Cost | None:
    """Cost of `n_gpus` of `card_id`; None when no price file lists the card."""
    quote = price_per_gpu_hour(card_id, provider, billing, offers)
    if quote is None:
        return None
    per_hour = quote.mid * n_gpus
    per_million = per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s else None
    hours = run_seconds / 3600 if run_seconds else None
    return Cost(currency=quote.currency, per_gpu_hour=quote.mid, per_hour=per_hour,
                provider=quote.provider, billing=quote.billing, as_of=quote.as_of,
                per_million_tokens=per_million, per_run=per_hour * hours if hours else None,
                run_hours=hours, low_high_per_hour=(quote.low * n_gpus, quote.high * n_gpus),
                breakeven_hours_per_month=_breakeven(card_id, provider, quote, offers)
                if billing == "hourly" else None)
