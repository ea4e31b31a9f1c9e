"""``python -m semcodec.bench.speed --worker SPEC RESULT``: one measured child process."""

import sys

from semcodec.bench.speed.measure import main

sys.exit(main())
