"""The plain-data model of a runner script: what :mod:`commopt.codegen.render` pastes into the
template. Built by :func:`commopt.codegen.model.build_model`; nothing here computes anything."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupSpec:
    """A process group to create: its c10d name, size and every rank set (None: the world)."""

    var: str
    name: str
    size: int
    rank_sets: tuple[tuple[int, ...], ...] | None


@dataclass(frozen=True)
class InputSpec:
    """A graph input: its node, name in ``--inputs`` files, dtype and local shape per rank."""

    node: int
    name: str
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    role: str
    key: str | None = None  # state-dict key (a .pt2 parameter's or buffer's target)


@dataclass(frozen=True, slots=True)
class BufferSpec:
    """A communication buffer's view: arena (group variable), byte offset, dtype, shape."""

    var: str
    group_var: str
    offset_bytes: int
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class EmulatedSpec:
    """A node without a runnable operation: busy-wait ``duration_us``, then yield filled outputs."""

    node: int
    duration_us: float
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    fill: float


@dataclass
class RunnerModel:
    """Everything the template needs, as plain values: ``steps`` holds one record per node in
    the graph's order (:mod:`commopt.codegen.lowering`), ``optimized_order`` the node indices
    of commopt's order; the original order is the table's own."""

    graph_name: str
    source: str
    world_size: int | None
    plan_digest: str
    groups: list[GroupSpec]
    inputs: list[InputSpec]
    arenas: list[tuple[str, int]]
    buffers: list[BufferSpec]
    ops: dict[str, str]
    emulated: list[EmulatedSpec]
    steps: list[tuple]
    optimized_order: list[int]
    copies_per_iter: int = 0
    #: bytes those copies move per step (largest rank's sizes)
    copy_bytes_per_iter: int = 0
    zero_copy_per_iter: int = 0
    #: parameters living in the arena: (buffer view variable, input name), placed once
    persistent_params: list[tuple[str, str]] = field(default_factory=list)
    #: collective tensors per step read straight from a persistent parameter slot (no copy)
    persistent_reads_per_iter: int = 0
    #: peak bytes of one rank in the optimized step, predicted (the runner's --memory checks it)
    predicted_peak_bytes: int = 0
    notes: list[str] = field(default_factory=list)
