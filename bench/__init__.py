"""Benchmarks (``make bench``). Each ``bench/bench_*.py`` module has ``run(quick: bool) -> str``
returning a Markdown section; ``python -m bench`` prints them and writes ``BENCHMARKS.md``."""
