"""``python -m semcodec.bench.speed --worker SPEC RESULT``: one measured child process."""

import sys

from semcodec.bench.speed.child import main

sys.exit(main())
