"""A plug-in module that fails to import, to prove one broken plug-in breaks nothing else."""

import commopt_example_estimator_missing_dependency  # noqa: F401

Estimator = None
