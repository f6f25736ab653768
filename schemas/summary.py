"""``summary.json``, written by ``commopt optimize`` next to the reordered graph.

All simulated times are estimates in microseconds from the estimator named in
``estimator``. Re-running on the same input gives byte-identical files except for the wall
times ``optimizer_seconds`` and ``timings`` (set to null by ``--no-timings``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from commopt.schemas.buffer_plan import PlanComparison


class SimNumbers(BaseModel):
    """Simulated numbers of one order."""

    makespan_us: float
    exposed_comm_us: float
    overlap_ratio: float = Field(ge=0, le=1)
    peak_memory_bytes: int


class PassSummary(BaseModel):
    """One pass of the pipeline: the order it got and the order it returned."""

    name: str
    before: SimNumbers
    after: SimNumbers
    changed: bool = Field(description="the pass returned a different order")
    note: str | None = Field(None, description="e.g. why an order was not taken")


class CollectiveCount(BaseModel):
    """Collectives of one type in one process group."""

    group: str
    type: str
    count: int


class PassTiming(BaseModel):
    """Wall time of one pass."""

    name: str
    seconds: float


class Timings(BaseModel):
    """Wall times: the only part of the summary that changes between identical runs."""

    load_seconds: float
    estimate_seconds: float
    passes: list[PassTiming]


class MemoryFootprint(BaseModel):
    """What one rank holds while the emitted runner executes the step (largest rank's sizes):
    every communication arena for the whole step plus, at its peak, the other live tensors
    (graph inputs included). ``--max-memory-increase`` bounds this number."""

    accounting: Literal["persistent buffers"] = Field(
        "persistent buffers", description="the runner keeps one arena per process group for the "
                                          "whole step; the arenas count in full")
    budget_bytes: int = Field(description="(1 + max_memory_increase) x the original order's footprint")
    before_bytes: int = Field(description="footprint of the original order (arenas at their lower bound)")
    after_bytes: int = Field(description="footprint of the new order: with an output set, exactly what "
                                         "the runner holds (its --memory measures it); otherwise with "
                                         "the arenas at their lower bound")
    arena_before_bytes: int = Field(description="the arenas of the original order (their lower bound)")
    arena_after_bytes: int = Field(description="the arenas of the new order (the plan's, with an output set)")


class SolverRun(BaseModel):
    """What the exact solver (``--solver exact``) did."""

    status: str = Field(description="'optimal' (proven), 'feasible' (time limit), 'no solution', "
                                    "or 'windows' (windowed improvement of a large graph)")
    time_limit_seconds: float
    seconds: float | None = Field(description="wall time (null with --no-timings)")
    makespan_us: float = Field(description="makespan of the order the solver returned (simulated)")
    proven_bound_us: float | None = Field(
        description="the solver's proven lower bound (null: none proven for the whole graph, "
                    "as in windowed mode)")
    kept: bool = Field(description="the solver's order replaced the heuristic's (strictly better, "
                                   "every invariant kept, within the memory budget)")
    note: str | None = None


class Certificate(BaseModel):
    """A proven lower bound on the makespan of every order that keeps the invariants, and the
    gap to the optimum it proves for this order."""

    lower_bound_us: float = Field(description="the best proven lower bound")
    source: Literal["bounds", "exact solver"] = Field(
        description="'bounds': the best cheap bound (bounds_us); 'exact solver': the solver proved more")
    gap_to_optimal: float = Field(
        description="after.makespan_us / lower_bound_us - 1: the makespan is proven to be at most "
                    "this fraction above the optimum (an upper bound on the gap: the optimum may "
                    "be above the lower bound)")
    proven_optimal: bool = Field(description="the makespan equals the lower bound")
    bounds_us: dict[str, float] = Field(
        description="each cheap bound: compute, busiest_stream, critical_path, compute_heads_tails, "
                    "group_streams, collective_chain (docs/solver.md)")
    solver: SolverRun | None = Field(None, description="the exact solver's run (null: not asked for)")
class AssumedSize(BaseModel):
    """One data-dependent size (an unbacked symbol of the program) and the value commopt
    assumed for it to estimate, simulate and plan. The runner never uses it: it computes the
    real size when the step runs."""

    symbol: str = Field(description="the symbol torch.export gave the size (u0, u1, ...)")
    assumed: int = Field(ge=0, description="the value every estimate, simulation and plan used")
    basis: Literal["given", "given-default", "even-split", "range"] = Field(
        description="given: --assume SYMBOL=N; given-default: --assume '*=N'; even-split: an "
                    "all_to_all split with every rank sending as many rows to every peer; range: "
                    "the largest value torch.export proved possible")
    reason: str = Field(description="the basis in words")
    defined_by: str | None = Field(description="the node computing the size when the program runs")
    collectives: list[str] = Field(description="collectives whose splits or sizes it sets")
    nodes: int = Field(ge=0, description="nodes whose value depends on it (tensors sized by it, size arithmetic on it)")
    low: int | None = Field(None, description="smallest value torch.export proved possible")
    high: int | None = Field(None, description="largest value torch.export proved possible "
                                               "(null: unbounded)")


class SizeScenario(BaseModel):
    """The original order and commopt's order simulated with every data-dependent size at
    ``scale`` times its assumed value (the orders are not re-optimized)."""

    scale: float = Field(gt=0)
    before: SimNumbers
    after: SimNumbers


class DataDependentSizes(BaseModel):
    """Sizes the program only knows when it runs, what commopt assumed for them, and how the
    simulated result moves when they are smaller or larger."""

    statement: str = Field(description="one line: which sizes were assumed, at what values")
    sizes: list[AssumedSize]
    scenarios: list[SizeScenario] = Field(
        description="the result with every data-dependent size scaled (1.0: the assumed values)")
class CrossGroupOrder(BaseModel):
    """Whether collectives of different process groups could change their relative order, and
    the rule that decided it (docs/process-groups.md, "Reordering collectives of different
    groups")."""

    allowed: bool
    rule: Literal["spmd", "one-group", "not-proven", "flag"] = Field(
        description="spmd: every rank provably runs this program in one order; one-group: nothing "
                    "to reorder; not-proven: kept, see reason; flag: the user's explicit choice")
    reason: str
    within_groups: bool = Field(
        False, description="collectives of one group could change their relative order too "
                           "(by default where every rank provably runs the program in one order; "
                           "--keep-group-order turns it off)")


class ScenarioMakespans(BaseModel):
    """The makespan of the original and the new order under one perturbation of the costs."""

    scenario: str = Field(description="e.g. 'comm x1.3' (every collective 30% slower than "
                                      "estimated), 'compute x0.7', 'random #1' (each node its "
                                      "own seeded factor)")
    before_us: float
    after_us: float


class Robustness(BaseModel):
    """How the makespans move when the estimates are off (commopt.sim.robustness): every
    scenario scales costs within +-cost_error; the ranges include the nominal makespans."""

    cost_error: float = Field(description="relative error of every estimate explored (0.3: +-30%)")
    scenarios: list[ScenarioMakespans]
    before_min_us: float
    before_max_us: float
    after_min_us: float
    after_max_us: float


class Bucket(BaseModel):
    """One merged collective (commopt.bucketing): which collectives it replaced and how much
    each rank contributes."""

    collective: str = Field(description="node name of the merged collective in the written graph")
    type: str
    group: str
    dtype: str
    members: list[str] = Field(description="the collectives it replaced, in issue order")
    bytes: int = Field(description="bytes one rank contributes (sum of the members' inputs)")


class Bucketing(BaseModel):
    """What the bucket pass merged and what the merge saved in the simulation."""

    buckets: list[Bucket]
    collectives_before: int
    collectives_after: int
    nodes_after: int = Field(description="nodes of the bucketed program (summary.nodes: the loaded one's)")
    makespan_before_us: float = Field(description="makespan of the order the bucket pass was given")
    makespan_after_us: float = Field(description="makespan of the bucketed program in that order")


class AppliedSlowdown(BaseModel):
    """The compute slowdown every simulation applied: a compute kernel runs ``factor`` times
    as long while any collective is in flight (NCCL kernels occupy SMs)."""

    factor: float = Field(ge=1, allow_inf_nan=False)
    source: str = Field(description="where the factor comes from: the option, or the calibrated "
                                    "profile and how it was measured")


class Summary(BaseModel):
    """What ``commopt optimize`` did to one graph."""

    format: Literal["commopt-summary"] = "commopt-summary"
    version: Literal[1] = 1
    graph: str = Field(description="graph name")
    graph_digest: str | None = Field(
        None, description="identity of the input program: sha256 of its sorted node names, kinds "
                          "and ops (sizes and timings left out); `commopt check --baseline` refuses "
                          "a baseline whose digest differs")
    input: str | None = Field(description="input file name")
    output: str = Field(description="reordered graph file name, in the same directory")
    nodes: int
    collectives: int
    collectives_by_group: list[CollectiveCount]
    estimator: str = Field(description="the estimator chain that gave the durations")
    hardware: str | None = None
    compute_slowdown: AppliedSlowdown | None = Field(
        None, description="compute slowed beside communication in every simulation (null: not modelled)")
    max_memory_increase: float
    memory_budget_bytes: int | None = Field(
        description="(1 + max_memory_increase) x the original padded peak: no pass exceeds it")
    allow_cross_group_reorder: bool
    cross_group: CrossGroupOrder | None = Field(
        None, description="the rule behind allow_cross_group_reorder and why it applied")
    passes: list[PassSummary]
    before: SimNumbers
    after: SimNumbers
    robustness: Robustness | None = Field(
        None, description="makespans of both orders when the cost estimates are off by up to "
                          "+-cost_error (null without collectives)")
    lower_bound_us: float = Field(description="the certificate's proven lower bound on every valid "
                                              "order's makespan (certificate.lower_bound_us)")
    makespan_over_lower_bound: float = Field(description="after.makespan_us / lower_bound_us")
    certificate: Certificate | None = Field(
        None, description="the proven lower bound and the gap to the optimum it proves")
    buffer_plan: PlanComparison | None = Field(
        None, description="communication-buffer arena totals on the new order vs the original")
    memory_accounting: Literal["footprint", "live-tensors"] = Field(
        "footprint", description="what max_memory_increase bounded: the runner's footprint (arenas "
                                 "included) as well as the live-tensor peak, or the live-tensor peak only")
    footprint: MemoryFootprint | None = Field(
        None, description="the memory the emitted runner holds, arenas included, before and after")
    bucketing: Bucketing | None = Field(
        None, description="collectives merged into buckets (null when the bucket pass merged none)")
    data_dependent: DataDependentSizes | None = Field(
        None, description="sizes the program computes when it runs (e.g. all_to_all splits read "
                          "back with .tolist()): every number above used the assumed values "
                          "listed here; null when every size is static")
    outputs: list[str] = Field(
        default_factory=list, description="files written beside summary.json, in writing order")
    notes: list[str] = Field(default_factory=list)
    optimizer_seconds: float | None = Field(
        description="wall time of estimation and passes (null with --no-timings)")
    timings: Timings | None = None


ROOT_MODEL = Summary
