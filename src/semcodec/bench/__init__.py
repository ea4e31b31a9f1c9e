"""Benchmarks: codec adapters, BD-rate, the rate–distortion runner and its reports (``rd``), speed
and large images; run them with ``semcodec bench rd|compare|merge|report|speed|large``."""
