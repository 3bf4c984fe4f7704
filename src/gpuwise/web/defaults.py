"""The web server's default bounds, apart so that `gpuwise serve`'s flags can name them without
importing the server (the CLI starts faster)."""

from __future__ import annotations

# Expected queueing before a request is refused (503 + Retry-After instead). 200 closed-loop
# clients on 2 plan workers queue ~100 plans per worker: at 10-15 ms a plan that is 1-1.5 s, so
# the bound sits just above it and p99 (wait + the plan) stays under 2 s; past it the server
# sheds load rather than letting every answer slow down.
MAX_WAIT_S = 1.5
COMPUTE_TIMEOUT_S = 30.0  # hub lookups make several requests of up to 10 s each (catalog/hub.py)
