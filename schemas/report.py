"""The overlap report (``commopt report --format json``, ``report.json``).

One document holds everything the renderers draw: the before (and, when given, after)
schedule's simulated numbers, its timeline events per lane, its memory curve, every
collective's timing and, for the most exposed ones, why they stay exposed. All times are
estimates in microseconds from the estimator named in ``estimator``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

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


class RowColumns(Sequence[Any]):
    """Many rows of one model (:attr:`row_model`) kept column by column: one list per field.

    A 100,000-node report holds about 190,000 events and 80,000 nodes; as models they cost
    about 1 KiB each and are read back one attribute at a time. Here each row costs a
    reference per field (the values are the builder's own objects), the builder fills the
    columns at once and the writers read them with ``zip``. As a field of a model it reads
    and writes exactly the JSON of ``list[row_model]`` (the same schema, validation and
    bytes); indexing or iterating gives the row models, made on demand.
    """

    row_model: ClassVar[type[BaseModel]]
    __slots__ = ("columns",)

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        """``columns``: every field of :attr:`row_model`, in its order, each a list of values
        already of the field's type, all of one length (nothing is checked or copied)."""
        self.columns = columns

    @classmethod
    def from_rows(cls, rows: Iterable[BaseModel]) -> RowColumns:
        """The columns of ``rows`` (instances of :attr:`row_model`)."""
        rows = list(rows)
        return cls({name: [getattr(r, name) for r in rows] for name in cls.row_model.model_fields})

    @classmethod
    def from_tuples(cls, rows: Sequence[tuple[Any, ...]]) -> RowColumns:
        """The columns of ``rows``, each the values of :attr:`row_model`'s fields in order,
        already of their types (nothing is checked)."""
        names = list(cls.row_model.model_fields)
        columns = list(map(list, zip(*rows, strict=True))) if rows else [[] for _ in names]
        return cls(dict(zip(names, columns, strict=True)))

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.row_model.model_construct(**{name: col[k] for name, col in self.columns.items()})

    def __iter__(self) -> Iterator[BaseModel]:
        names = tuple(self.columns)
        make = self.row_model.model_construct
        for values in zip(*self.columns.values(), strict=True):
            yield make(**dict(zip(names, values, strict=True)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowColumns):
            return self.row_model is other.row_model and all(
                list(a) == list(b) for a, b in zip(self.columns.values(), other.columns.values(),
                                                   strict=True))
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} rows)"

    def plain_rows(self) -> list[dict[str, Any]]:
        """The rows as dicts of their fields, in order (what ``model_dump`` gives a row)."""
        return list(map(dict, map(zip, repeat(tuple(self.columns)), zip(*self.columns.values(), strict=True))))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Validated as ``list[row_model]`` (an instance is taken as it is), dumped as its
        rows' dicts: the JSON, its schema and the dumped data are those of the list."""
        rows = handler.generate_schema(list[cls.row_model])  # type: ignore[name-defined]
        from_rows = core_schema.no_info_after_validator_function(cls.from_rows, rows)
        return core_schema.json_or_python_schema(
            json_schema=from_rows,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_rows]),
            serialization=core_schema.plain_serializer_function_ser_schema(
                cls.plain_rows, return_schema=core_schema.list_schema(core_schema.any_schema())),
        )


class EventColumns(RowColumns):
    """The events of one schedule (:class:`ReportEvent`), column by column."""

    row_model = ReportEvent
    __slots__ = ()


class NodeColumns(RowColumns):
    """The nodes of a report (:class:`NodeInfo`), column by column."""

    row_model = NodeInfo
    __slots__ = ()


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
    events: EventColumns
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
    nodes: NodeColumns = Field(description="every node that appears on a timeline")
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
