"""The overlap report (``commopt report --format json``, ``report.json``).

One document holds everything the renderers draw: the before (and, when given, after)
schedule's simulated numbers, its timeline events per lane, its memory curve, every
collective's timing and, for the most exposed ones, why they stay exposed. All times are
estimates in microseconds from the estimator named in ``estimator``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from commopt.schemas.summary import Certificate, DataDependentSizes, MemoryFootprint, Robustness

FORMAT_NAME = "commopt-report"
FORMAT_VERSION = 1

#: Why a collective stays exposed (see :mod:`commopt.report.explain`).
ReasonCode = Literal[
    "no_independent_compute",
    "dependency",
    "barrier",
    "memory_budget",
    "queued",
    "schedule",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeInfo(_Model):
    """A node that appears on the timeline (compute, collective or wait)."""

    name: str
    op: str
    kind: str = Field(description="compute, collective or wait")
    duration_us: float = Field(description="estimated duration (a wait's is 0)")
    bytes: int = Field(description="bytes produced (a collective: its padded message size)")
    group: str | None = Field(default=None, description="process group of a collective or wait")
    collective_type: str | None = None


class ReportEvent(_Model):
    """One span on one lane: a node running, or the compute stream blocked in a wait."""

    node: str
    lane: str = Field(description="'compute' or 'comm:<group>'")
    row: int = Field(default=0, description="sub-row inside the lane when spans overlap")
    step: int = Field(description="position of the node in this schedule's order")
    start_us: float
    end_us: float
    exposed: bool = Field(default=False, description="a wait span: compute idle on communication")


class MemoryPoint(_Model):
    """Live tensor bytes from ``time_us`` on."""

    time_us: float
    live_bytes: int


class Reason(_Model):
    """Why a collective is not hidden, derived from the graph and the schedule."""

    code: ReasonCode
    text: str = Field(description="one sentence, with the numbers that support it")


#: What would reduce the exposed communication, as the simulator sees it (see
#: :func:`commopt.report.explain.advise`).
AdviceCode = Literal["order", "bucketing", "comm_bound"]


class Advice(_Model):
    """One change that would help, named only when the simulated numbers support it."""

    code: AdviceCode = Field(description="order: a different order; bucketing: fewer, larger "
                             "collectives; comm_bound: more compute to hide behind or faster "
                             "links")
    text: str = Field(description="one sentence, with the numbers that support it")


class CollectiveReport(_Model):
    """One collective in one schedule: when it was issued, ran and waited for."""

    node: str
    group: str
    type: str
    bytes: int
    issue_step: int
    wait_step: int | None
    issue_us: float
    start_us: float
    end_us: float
    wait: str | None = Field(description="the wait node (the first one when coalesced)")
    waits: list[str] = Field(
        default_factory=list,
        description="every wait node of the collective, in this schedule's order",
    )
    wait_start_us: float | None
    exposed_us: float
    reasons: list[Reason] = Field(
        default_factory=list,
        description="filled for the most exposed collectives (overall and per group) only",
    )


class LaneInfo(_Model):
    """A lane of the timeline: the compute stream or one group's communication stream."""

    name: str
    group: str | None
    rows: int = Field(description="sub-rows needed so that no two spans overlap")
    events: int
    busy_us: float


class ScheduleReport(_Model):
    """The simulated outcome of one order."""

    label: str = Field(description="'before' or 'after'; 'schedule' when the report has one")
    makespan_us: float
    total_compute_us: float
    total_comm_us: float
    comm_us_by_group: dict[str, float]
    exposed_comm_us: float
    overlap_ratio: float = Field(description="share of communication hidden, 0..1")
    lower_bound_us: float
    critical_path_us: float
    peak_memory_bytes: int
    lanes: list[LaneInfo]
    events: list[ReportEvent]
    collectives: list[CollectiveReport]
    memory_curve: list[MemoryPoint] = Field(
        description="downsampled to a bounded number of points; each bucket keeps its peak"
    )


class GroupInfo(_Model):
    """A process group as the report shows it."""

    name: str = Field(description="c10d name")
    size: int
    ranks: list[int] | None
    mesh_dim: str | None = Field(default=None, description="device-mesh dimension, when recorded")


class OverlapReport(_Model):
    """Before/after overlap of one graph: the document every report renderer reads."""

    format: Literal["commopt-report"] = FORMAT_NAME
    version: Literal[1] = FORMAT_VERSION
    graph: str
    source: str | None
    node_count: int
    world_size: int | None
    estimator: str = Field(description="estimator chain that produced every duration")
    groups: list[GroupInfo]
    nodes: list[NodeInfo] = Field(description="every node that appears on a timeline")
    before: ScheduleReport
    after: ScheduleReport | None
    top_exposed: list[str] = Field(
        description="names of the most exposed collectives of the last schedule, worst first"
    )
    advice: list[Advice] = Field(
        default_factory=list,
        description="what would reduce the exposed communication of the last schedule; empty "
                    "when the simulator points to nothing",
    )
    notes: list[str] = Field(default_factory=list)
    certificate: Certificate | None = Field(
        None, description="the proven lower bound on every valid order and the gap to the "
                          "optimum it proves for the last schedule")
    data_dependent: DataDependentSizes | None = Field(
        None, description="sizes the program computes when it runs: the values every number "
                          "above assumed, and the result at multiples of them; null when every "
                          "size is static")
    footprint: MemoryFootprint | None = Field(
        None, description="what the runner holds (arenas + other live tensors) in the first and "
                          "the last schedule; null without collectives")
    robustness: Robustness | None = Field(
        None, description="makespans of the first and the last schedule when every cost estimate "
                          "is off by up to +-cost_error; null without collectives")

    @property
    def final(self) -> ScheduleReport:
        """The schedule the report is about: 'after' when present, else 'before'."""
        return self.after if self.after is not None else self.before


ROOT_MODEL = OverlapReport
