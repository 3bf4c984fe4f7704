"""The fields of a card row in cards.toml: names, types, which are required.

docs/data-schema.md describes them for people; this table is what the loader enforces.
"""

from __future__ import annotations

from gpuwise.catalog._datafile import FieldSpec

VENDORS = ("nvidia", "amd", "huawei")
INTERCONNECTS = ("nvlink", "nvlink-bridge", "none", "infinity-fabric", "hccs")
SOFTWARE = ("cuda", "rocm", "cann")
VERIFICATION = ("official", "partial", "secondary", "unverified")
# What a vendor's cards run when a user row does not say.
DEFAULT_SOFTWARE = {"nvidia": "cuda", "amd": "rocm", "huawei": "cann"}

_F = FieldSpec
_NUM = FieldSpec("float")

CARD_FIELDS: dict[str, FieldSpec] = {
    "id": _F("str", required=True),
    "name": _F("str", required=True),
    "vendor": _F("str", required=True, choices=VENDORS),
    "architecture": _F("str", required=True),
    "form_factor": _F("str", required=True),
    "aliases": _F("strlist"),
    "pci_device_ids": _F("strlist"),
    "memory_gb": _F("float", required=True, positive=True),
    "memory_cuda_gib": _F("float", required=True, positive=True),
    "memory_type": _F("str"),
    "mem_bw_gbps": _F("float", required=True, positive=True),
    "fp32_tflops": _NUM,
    "tf32_dense_tflops": _NUM,
    "bf16_dense_tflops": _NUM,
    "fp16_dense_tflops": _NUM,
    "fp16_fp16acc_dense_tflops": _NUM,
    "fp8_dense_tflops": _NUM,
    "int8_dense_tops": _NUM,
    "fp4_dense_tflops": _NUM,
    "bf16_sparse_tflops": _NUM,
    "fp8_sparse_tflops": _NUM,
    "int8_sparse_tops": _NUM,
    "interconnect": _F("str", choices=INTERCONNECTS),
    "nvlink_gen": _F("int"),
    "interconnect_bw_gbps": _NUM,
    "interconnect_max_gpus": _F("int", positive=True),
    "max_gpus_per_node": _F("int", positive=True),
    "pcie_p2p": _F("bool"),
    "pcie_gen": _F("int", positive=True),
    "pcie_lanes": _F("int", positive=True),
    "tdp_w": _F("float", positive=True),
    "ecc": _F("bool"),
    "ecc_note": _F("str"),
    "mig_profiles": _F("strlist"),
    "compute_capability": _F("str"),
    "software": _F("str", choices=SOFTWARE),
    "release_year": _F("int", positive=True),
    "family": _F("str", required=True),
    "verification": _F("str", choices=VERIFICATION),
    "sources": _F("strlist", required=True),
    "derived": _F("strlist"),
    "unverified": _F("strlist"),
    "notes": _F("str"),
}

# Fields that describe provenance or identity, not a measurable property: they cannot be
# listed in `derived` / `unverified`.
META_FIELDS = frozenset({"id", "name", "vendor", "aliases", "pci_device_ids", "family", "verification",
                         "sources", "derived", "unverified", "notes", "ecc_note"})

AMBIGUOUS_FIELDS: dict[str, FieldSpec] = {
    "names": _F("strlist", required=True),
    "default": _F("str", required=True),
    "candidates": _F("strlist", required=True),
}

TOP_LEVEL_KEYS = {"schema_version", "card", "ambiguous"}
