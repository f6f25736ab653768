"""The certificate on a schedule: the best proven lower bound and the gap to the optimum.

Every bound here holds for every order that keeps the invariants: the cheap bounds of
:mod:`commopt.sim.bounds` for any order the simulator can replay, and the exact solver's
proven bound (:mod:`commopt.solver`) for the orders its model describes, which are exactly
those. ``makespan / bound - 1`` is then a proven *upper* bound on how far the makespan is
above the optimum; the optimum itself may lie anywhere between the bound and the makespan.
"""

from __future__ import annotations

from commopt.schemas.summary import Certificate, SolverRun
from commopt.sim.result import SimResult

#: Relative slack under which a makespan counts as equal to its bound (float sums).
OPTIMAL_TOLERANCE = 1e-9


def certify(final: SimResult, solver: SolverRun | None = None) -> Certificate:
    """The certificate of the order simulated as ``final``; ``solver``'s proven bound is
    used where it is higher than the cheap bounds."""
    bounds = final.lower_bounds.as_dict() if final.lower_bounds is not None else {}
    bound, source = final.lower_bound_us, "bounds"
    if solver is not None and solver.proven_bound_us is not None and solver.proven_bound_us > bound:
        bound, source = solver.proven_bound_us, "exact solver"
    if bound > final.makespan_us * (1.0 + 1e-6):
        raise RuntimeError(f"lower bound {bound} us ({source}) above the makespan "
                           f"{final.makespan_us} us of an order: a bug in the bound")
    bound = min(bound, final.makespan_us)  # a float sum may land a hair above an optimal makespan
    return Certificate(
        lower_bound_us=bound,
        source=source,
        gap_to_optimal=gap(final.makespan_us, bound),
        proven_optimal=final.makespan_us <= bound * (1.0 + OPTIMAL_TOLERANCE),
        bounds_us=bounds,
        solver=solver,
    )


def gap(makespan_us: float, bound_us: float) -> float:
    """``makespan / bound - 1`` (0 when the bound is 0: nothing to run takes no time)."""
    return makespan_us / bound_us - 1.0 if bound_us > 0 else 0.0


_SOURCE_WORDS = {"bounds": "the cheap bounds", "exact solver": "the exact solver"}


def words(cert: Certificate) -> str:
    """One honest line: how far from optimal the schedule is proven to be at most."""
    src = _SOURCE_WORDS[cert.source]
    if cert.proven_optimal:
        return (f"proven optimal: the makespan equals the lower bound {cert.lower_bound_us:,.1f} us "
                f"(from {src})")
    return (f"within {cert.gap_to_optimal:.1%} of optimal: no order keeping the invariants finishes in "
            f"less than {cert.lower_bound_us:,.1f} us (proven by {src}); the optimum may lie above "
            "that bound, so the true gap may be smaller")
