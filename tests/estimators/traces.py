"""Small hand-written Kineto traces in both formats, for parser tests."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

#: Real profiler traces (HTA, PARAM, Chakra samples) for the profile estimator's tests. They are
#: not part of the repository: point ``COMMOPT_TRACES`` at a copy; tests that need them skip
#: when the directory is absent. The default is where the project's CI machines keep them.
SHARED_TRACES = Path(os.environ.get(
    "COMMOPT_TRACES", Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"))


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def new_format_trace() -> dict:
    """Two steps; per step an all_reduce with args on the kernel and an mm with shapes."""
    ev = []
    for step, base in ((1, 0), (2, 1000)):
        ev.append(_x("user_annotation", f"ProfilerStep#{step}", base, 900))
        ev.append(_x("cpu_op", "aten::mm", base + 10, 50, **{"External id": 100 + step,
                     "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"]}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", base + 20, 5,
                     **{"External id": 100 + step, "correlation": 500 + step}))
        ev.append(_x("kernel", "void gemm_kernel()", base + 30, 40 + step, pid=0, tid=7,
                     **{"External id": 100 + step, "correlation": 500 + step}))
        ev.append(_x("cpu_op", "record_param_comms", base + 100, 30, **{"External id": 200 + step}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernelExC", base + 110, 5,
                     **{"External id": 200 + step, "correlation": 600 + step}))
        ev.append(_x("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                     base + 120, 100 * step, pid=0, tid=40,
                     **{"External id": 200 + step, "correlation": 600 + step, "Collective name": "allreduce",
                        "In msg nelems": 1024 * step, "Out msg nelems": 1024 * step, "Group size": 2,
                        "dtype": "Float", "Process Group Name": "0"}))
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2},
            "deviceProperties": [{"name": "Test GPU"}], "traceEvents": ev}


def old_format_trace() -> dict:
    """Collective info only on the CPU side; a SendRecv kernel that is really an all_to_all."""
    ev = [
        _x("user_annotation", "ProfilerStep#7", 0, 900),
        _x("cpu_op", "c10d::alltoall_base_", 100, 80, **{"External id": 1}),
        _x("user_annotation", "nccl:all_to_all", 110, 50, **{"External id": 2,
           "Input Dims": [[8, 256]], "Input type": ["c10::BFloat16"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 120, 5, **{"External id": 77, "correlation": 77}),
        _x("kernel", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", 130, 300, pid=0, tid=21,
           **{"External id": 77, "correlation": 77}),
        _x("cpu_op", "c10d::_allgather_base_", 300, 80, **{"External id": 3,
           "Input Dims": [[4096], [1024], []], "Input type": ["float", "float", ""]}),
        _x("user_annotation", "nccl:_all_gather_base", 310, 50, **{"External id": 4,
           "Input Dims": [[1024]], "Input type": ["float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 320, 5, **{"External id": 78, "correlation": 78}),
        _x("kernel", "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", 330, 200, pid=0, tid=21,
           **{"External id": 78, "correlation": 78}),
        _x("cpu_op", "aten::relu", 500, 40, **{"External id": 5, "Input Dims": [[128]], "Input type": ["float"]}),
        _x("cpu_op", "aten::clamp_min", 505, 30, **{"External id": 6, "Input Dims": [[128], []],
           "Input type": ["float", "Scalar"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 510, 5, **{"External id": 79, "correlation": 79}),
        _x("kernel", "void elementwise()", 520, 9, pid=0, tid=7, **{"External id": 79, "correlation": 79}),
        _x("kernel", "void orphan()", 600, 3, pid=0, tid=7, **{"External id": 80, "correlation": 80}),
    ]
    return {"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8}, "traceEvents": ev}


def write(path: Path, data: dict, *, gz: bool = False) -> Path:
    """Write a trace as JSON (gzip-compressed when ``gz``)."""
    text = json.dumps(data).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return path


def rank_trace(rank: int, world: int, kernels, *, clock_offset: float = 0.0, step: int = 1,
               group_size: int | None = None, compute=()) -> dict:
    """One rank's new-format trace of NCCL kernels and compute kernels.

    ``kernels``: (collective name, elements, start us, end us) on the rank's true clock;
    ``clock_offset`` is added to every time (a rank whose clock runs ahead). ``compute``:
    (kernel name, start us, duration us) of compute kernels (grid [8,1,1], block [128,1,1]).
    """
    ev = [_x("user_annotation", f"ProfilerStep#{step}", clock_offset - 100, 1e6)]
    for i, (coll, elems, start, end) in enumerate(kernels):
        ext, corr = 1000 + i, 5000 + i
        ev.append(_x("cpu_op", "record_param_comms", clock_offset + start - 50, 20, **{"External id": ext}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernelExC", clock_offset + start - 40, 5,
                     **{"External id": ext, "correlation": corr}))
        ev.append(_x("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                     clock_offset + start, end - start, pid=0, tid=40,
                     **{"External id": ext, "correlation": corr, "Collective name": coll,
                        "In msg nelems": elems, "Out msg nelems": elems, "Group size": group_size or world,
                        "dtype": "Float", "Process Group Name": "0", "stream": 40}))
    for i, (name, start, dur) in enumerate(compute):
        ext, corr = 3000 + i, 7000 + i
        ev.append(_x("cpu_op", "aten::mm", clock_offset + start - 30, 10, **{"External id": ext}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", clock_offset + start - 20, 5,
                     **{"External id": ext, "correlation": corr}))
        ev.append(_x("kernel", name, clock_offset + start, dur, pid=0, tid=7,
                     **{"External id": ext, "correlation": corr, "grid": [8, 1, 1], "block": [128, 1, 1],
                        "stream": 7}))
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": world},
            "deviceProperties": [{"name": "Test GPU"}], "traceEvents": ev}



def parse_all(tmp_path: Path, traces: list[dict]):
    """Hand-written traces written as ``rank<i>.json`` and parsed, in order."""
    from commopt.estimators.kineto import parse_trace

    return [parse_trace(write(tmp_path / f"rank{i}.json", t)) for i, t in enumerate(traces)]
