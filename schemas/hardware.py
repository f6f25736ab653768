"""A machine description for the analytical estimator (``--hardware FILE.json``).

Bandwidths are per GPU and per direction, in GB/s (10^9 bytes per second); peaks are dense
(no sparsity) TFLOPS per dtype. Efficiencies scale peaks down to what kernels and NCCL reach.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class HardwareSpec(BaseModel):
    """One accelerator and its links, as the analytical estimator sees it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="display name, e.g. 'NVIDIA H100 SXM'")
    peak_tflops: dict[str, float] = Field(
        description="dense peak TFLOPS by IR dtype name ('bfloat16', 'float32', ...); dtypes "
        "not listed use 'float32'"
    )
    memory_bandwidth_gbps: float = Field(gt=0, description="HBM bandwidth, GB/s")
    intra_node_bandwidth_gbps: float = Field(
        gt=0, description="GPU-to-GPU link inside a node (NVLink, Infinity Fabric), GB/s per direction"
    )
    inter_node_bandwidth_gbps: float = Field(
        gt=0, description="network bandwidth per GPU between nodes (InfiniBand/RoCE NIC), GB/s per direction"
    )
    base_latency_us: float = Field(ge=0, description="fixed cost of launching a collective, us")
    intra_node_hop_latency_us: float = Field(ge=0, description="added per ring step inside a node, us")
    inter_node_hop_latency_us: float = Field(ge=0, description="added per ring step across nodes, us")
    flops_efficiency: float = Field(0.7, gt=0, le=1, description="share of peak FLOPS kernels reach")
    memory_efficiency: float = Field(0.8, gt=0, le=1, description="share of HBM bandwidth kernels reach")
    link_efficiency: float = Field(0.8, gt=0, le=1, description="share of link bandwidth NCCL reaches")
    min_kernel_us: float = Field(2.0, ge=0, description="shortest time of a kernel that moves data, us")


ROOT_MODEL = HardwareSpec
