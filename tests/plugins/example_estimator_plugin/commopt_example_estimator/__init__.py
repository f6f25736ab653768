"""An example commopt estimator plug-in: every compute node takes ``flat_us`` microseconds."""

from __future__ import annotations


class FlatComputeEstimator:
    """Gives compute nodes a fixed duration and leaves everything else to the next estimator."""

    name = "flat"
    flat_us = 3.25

    def __init__(self, options=None) -> None:
        self.options = options
        self.notes = [f"flat: every compute node takes {self.flat_us} us"]

    def estimate(self, node, graph):
        """``flat_us`` for compute nodes, None (defer) for the rest."""
        return self.flat_us if node.kind.label == "compute" else None
