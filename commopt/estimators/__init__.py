"""Runtime estimators: how long each node takes, in microseconds.

``resolve(spec, options) -> EstimatorChain``; ``chain.durations(graph)`` gives every node a
value. Built-ins: ``analytical``, ``profile``, ``table``, ``benchmark``; plug-ins come from the
entry-point group ``commopt.estimators``.
"""

from commopt.estimators.base import Estimator, EstimatorChain, EstimatorError
from commopt.estimators.options import EstimatorOptions
from commopt.estimators.registry import list_estimators, resolve

__all__ = [
    "Estimator",
    "EstimatorChain",
    "EstimatorError",
    "EstimatorOptions",
    "list_estimators",
    "resolve",
]
