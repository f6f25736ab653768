"""Bucketing: merge small collectives of one group into one where the simulator says it pays
(docs/bucketing.md). :mod:`.rewrite` builds the bucketed graph, :mod:`.eligibility` says what
may be merged, :mod:`.select` chooses with the simulator; the ``bucket`` pass
(:mod:`commopt.passes.bucket`) runs them in a pipeline."""

from commopt.bucketing.rewrite import Bucket, Rewritten, apply_buckets
from commopt.bucketing.select import Choice, choose_buckets

__all__ = ["Bucket", "Choice", "Rewritten", "apply_buckets", "choose_buckets"]
