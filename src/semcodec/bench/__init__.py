"""Benchmarks: codec adapters, BD-rate, the quality metrics measured (``quality``), the
rate–distortion runner and its reports (``rd``), the matched-bytes comparison (``matched``),
speed and large images, the enhancement network's kernels; run them with
``semcodec bench rd|compare|merge|report|matched|speed|large|kernels``."""
