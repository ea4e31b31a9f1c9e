"""Rate–distortion benchmarks: codec adapters, metrics, BD-rate, runner and ``bench`` CLI."""
