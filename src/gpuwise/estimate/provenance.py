"""What each number of an estimate is: `datasheet` (a document: the card's, the model's config,
a price list), `measured` (a `gpuwise verify` calibration file: card, date), `fitted` (a band
fitted on named validation rows) or `formula` (arithmetic on named inputs).

The JSON carries the inputs once (`inputs`) and, per value path, its kind and the inputs it uses
(`values`), so a reader can follow any number back to a document or a measurement."""

from __future__ import annotations

from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.estimate.links import efficiency_table
from gpuwise.estimate.ranges import Ranged

Entry = dict[str, Any]


def _card(card: Card, field: str, what: str) -> Entry:
    return {"kind": "datasheet", "what": f"{card.name} {what}", "source": card.sources[0] if card.sources else "",
            "card_field": f"{field} ({card.provenance(field)})"}


def _efficiency(card: Card) -> Entry:
    table = efficiency_table()
    family = card.family if card.family in table else "default"
    return {"kind": "constant", "what": f"achievable fractions of the datasheet rates for {family} cards",
            "source": f"data/efficiency.toml [{family}]: " + "; ".join(table[family].get("sources", []))}


def inputs_of(model: ModelArch, card: Card, calibration: Any) -> dict[str, Entry]:
    out: dict[str, Entry] = {
        "model": {"kind": "datasheet", "what": f"{model.name} architecture", "source": model.source or "preset"},
        "card_memory": _card(card, "memory_cuda_gib", "memory as CUDA reports it"),
        "runtime": {"kind": "constant", "what": "CUDA context, workspaces, engine defaults",
                    "source": "data/engines.toml"},
    }
    if calibration is not None:
        out["calibration"] = {"kind": "measured", **calibration.to_dict()}  # file, card, date, device id
    else:
        out |= {"card_bandwidth": _card(card, "mem_bw_gbps", "memory bandwidth"),
                "card_tensor_rate": _card(card, "bf16_dense_tflops", "dense tensor rates"),
                "efficiency": _efficiency(card)}
    return out


def _formula(what: str, *inputs: str) -> Entry:
    return {"kind": "formula", "what": what, "inputs": list(inputs)}


def provenance(model: ModelArch, card: Card, *, training: bool, calibration: Any, ranges: Ranged,
               has: frozenset[str]) -> dict[str, Any]:
    """`has`: the sections present in the estimate ("capacity", "speed", "cost", "kv_pool")."""
    rates = ("calibration",) if calibration is not None else ("card_bandwidth", "card_tensor_rate", "efficiency")
    values: dict[str, Entry] = {
        "usable_bytes": {"kind": "datasheet", "inputs": ["card_memory"]},
        "memory.weights": _formula("parameters x bytes per weight, split over TP x PP", "model"),
        "memory.required": _formula("the sum of memory.items (each item's `why` gives its formula)",
                                    "model", "runtime"),
    }
    if "kv_pool" in has:
        values["memory.kv_pool"] = _formula("usable x gpu_memory_utilization - weights - profiled peak - runtime",
                                            "model", "card_memory", "runtime")
    if "capacity" in has:
        values["capacity"] = _formula("KV pool / KV bytes per token", "model", "card_memory")
    if "speed" in has:
        values["speed"] = _formula(
            "FLOPs per token / (tensor rate x MFU) + exposed communication" if training else
            "roofline per step: max(bytes / bandwidth, FLOPs / tensor rate) + overhead", "model", *rates)
    inputs = inputs_of(model, card, calibration)
    if "cost" in has:
        inputs["price"] = {"kind": "datasheet", "what": "price per GPU-hour",
                           "source": "the price list named by cost.provider and cost.as_of"}
        values["cost"] = _formula("price per GPU-hour x GPUs; per token: / the speed above", "price", "model", *rates)
    out: dict[str, Any] = {"inputs": inputs, "values": values}
    cells = {r.cell.key: r.cell for r in ranges.ranges.values()}
    if cells:
        out["ranges"] = {"kind": "fitted", "what": "80 % band of ln(measured / estimated), per group and regime",
                         "source": "validation/points, fitted into data/intervals.toml",
                         "rows": {key: list(c.rows) for key, c in sorted(cells.items())}}
        if calibration is not None:
            out["ranges"]["note"] = ("fitted on estimates from datasheet rates; measured rates remove part of "
                                     "the speed error, so these bands are wider than this estimate needs")
    return out
