"""Hardware presets for the analytical estimator, and loading ``--hardware FILE.json``.

Every constant cites its public source. Peaks are dense tensor-core TFLOPS (the datasheets'
headline numbers with sparsity are halved); link bandwidths are per GPU per direction
(datasheets quote NVLink as the bidirectional total, so it is halved). Collective latencies
follow NCCL's own tuning model (``src/graph/tuning.cc``, ``baseLat``/``hwLat`` for ring LL:
6.6 us base, 0.6 us per NVLink step, 2.7 us per network step), the same source
``torch._inductor.comm_analysis`` cites.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from commopt.errors import OptionError, suggest
from commopt.schemas.hardware import HardwareSpec

_NCCL_LAT = {"base_latency_us": 6.6, "intra_node_hop_latency_us": 0.6, "inter_node_hop_latency_us": 2.7}

PRESETS: dict[str, HardwareSpec] = {
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5 column), nvidia.com/en-us/data-center/h100/:
    # FP64 tensor 67 TF, TF32 989 TF* / BF16 1,979 TF* / FP8 3,958 TF* (*with sparsity, halved
    # here), FP32 67 TF, HBM3 3.35 TB/s, NVLink 900 GB/s (bidirectional).
    # DGX H100 user guide: 8x ConnectX-7 400 Gb/s, one per GPU -> 50 GB/s per direction.
    "h100": HardwareSpec(
        name="NVIDIA H100 SXM",
        peak_tflops={"float64": 67.0, "float32": 67.0, "tfloat32": 494.7, "bfloat16": 989.4,
                     "float16": 989.4, "float8_e4m3fn": 1978.9, "float8_e5m2": 1978.9},
        memory_bandwidth_gbps=3350.0, intra_node_bandwidth_gbps=450.0,
        inter_node_bandwidth_gbps=50.0, **_NCCL_LAT,
    ),
    # NVIDIA H200 datasheet, nvidia.com/en-us/data-center/h200/: same tensor cores as H100 SXM
    # (BF16 1,979 TF with sparsity), HBM3e 4.8 TB/s, NVLink 900 GB/s; DGX H200: 8x 400 Gb/s NICs.
    "h200": HardwareSpec(
        name="NVIDIA H200 SXM",
        peak_tflops={"float64": 67.0, "float32": 67.0, "tfloat32": 494.7, "bfloat16": 989.4,
                     "float16": 989.4, "float8_e4m3fn": 1978.9, "float8_e5m2": 1978.9},
        memory_bandwidth_gbps=4800.0, intra_node_bandwidth_gbps=450.0,
        inter_node_bandwidth_gbps=50.0, **_NCCL_LAT,
    ),
    # NVIDIA A100 Tensor Core GPU datasheet (80GB SXM), nvidia.com/en-us/data-center/a100/:
    # FP64 tensor 19.5 TF, FP32 19.5 TF, TF32 156 TF, BF16/FP16 312 TF (dense), HBM2e
    # 2,039 GB/s, NVLink 600 GB/s (bidirectional); DGX A100: 8x HDR 200 Gb/s -> 25 GB/s.
    "a100": HardwareSpec(
        name="NVIDIA A100 80GB SXM",
        peak_tflops={"float64": 19.5, "float32": 19.5, "tfloat32": 156.0, "bfloat16": 312.0,
                     "float16": 312.0},
        memory_bandwidth_gbps=2039.0, intra_node_bandwidth_gbps=300.0,
        inter_node_bandwidth_gbps=25.0, **_NCCL_LAT,
    ),
    # NVIDIA Blackwell datasheet, HGX B200 column (1,000 W), nvidia.com/en-us/data-center/hgx/
    # (tabulated at glennklockwood.com/garden/processors/B200): FP64 40 TF, FP32 80 TF, TF32
    # 1.1 PF / BF16 2.25 PF / FP8 4.5 PF dense, HBM3e 8 TB/s, NVLink 5 1.8 TB/s
    # (bidirectional); DGX B200 datasheet: 8x ConnectX-7 400 Gb/s, one per GPU.
    "b200": HardwareSpec(
        name="NVIDIA B200",
        peak_tflops={"float64": 40.0, "float32": 80.0, "tfloat32": 1100.0, "bfloat16": 2250.0,
                     "float16": 2250.0, "float8_e4m3fn": 4500.0, "float8_e5m2": 4500.0},
        memory_bandwidth_gbps=8000.0, intra_node_bandwidth_gbps=900.0,
        inter_node_bandwidth_gbps=50.0, **_NCCL_LAT,
    ),
    # AMD Instinct MI300X data sheet, amd.com/en/products/accelerators/instinct/mi300/mi300x.html:
    # FP64 matrix 163.4 TF, FP32 163.4 TF, TF32 653.7 TF, BF16/FP16 1,307.4 TF, FP8 2,614.9 TF
    # (dense), HBM3 5.3 TB/s, Infinity Fabric 7 links x 64 GB/s per direction = 448 GB/s;
    # platform NICs 400 Gb/s per GPU -> 50 GB/s. RCCL latencies taken as NCCL's.
    "mi300x": HardwareSpec(
        name="AMD Instinct MI300X",
        peak_tflops={"float64": 163.4, "float32": 163.4, "tfloat32": 653.7, "bfloat16": 1307.4,
                     "float16": 1307.4, "float8_e4m3fnuz": 2614.9, "float8_e5m2fnuz": 2614.9},
        memory_bandwidth_gbps=5300.0, intra_node_bandwidth_gbps=448.0,
        inter_node_bandwidth_gbps=50.0, **_NCCL_LAT,
    ),
}

#: Other spellings users type for the presets.
ALIASES = {"h100-sxm": "h100", "h100_sxm": "h100", "h200-sxm": "h200", "a100-80gb": "a100",
           "a100_80gb": "a100", "mi300": "mi300x"}


def load_hardware(spec: str | HardwareSpec | None) -> HardwareSpec:
    """A preset by name (``h100``, ``h200``, ``a100``, ``b200``, ``mi300x``) or a JSON file.

    A file must give every field of :class:`~commopt.schemas.hardware.HardwareSpec` that has
    no default; a missing, negative or unknown field is one :class:`OptionError` naming it.
    """
    if spec is None:
        return PRESETS["h100"]
    if isinstance(spec, HardwareSpec):
        return spec
    key = ALIASES.get(spec.lower(), spec.lower())
    if key in PRESETS:
        return PRESETS[key]
    path = Path(spec)
    if not path.suffix.lower() == ".json" and not path.exists():
        raise OptionError(
            f"unknown hardware {spec!r}; presets are {', '.join(sorted(PRESETS))} or a .json file"
            + suggest(key, sorted(PRESETS)),
            field="--hardware",
        )
    if not path.is_file():
        raise OptionError("no such hardware file", file=str(path), field="--hardware")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OptionError(f"not a JSON hardware file: {exc}", file=str(path)) from None
    try:
        hw = HardwareSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or None
        raise OptionError(err["msg"].lower(), file=str(path), field=loc) from None
    for dtype, tflops in hw.peak_tflops.items():
        if not tflops > 0:
            raise OptionError("must be greater than 0", file=str(path), field=f"peak_tflops.{dtype}")
    if "float32" not in hw.peak_tflops:
        raise OptionError("field required (the fallback for unlisted dtypes)", file=str(path),
                          field="peak_tflops.float32")
    return hw
