"""The web server's default bounds, apart so that `gpuwise serve`'s flags can name them without
importing the server (the CLI starts faster)."""

from __future__ import annotations

# Expected queueing past which a request is refused (503 + Retry-After) rather than held. N
# closed-loop clients queue N / throughput whatever the bound: a bound below that only turns
# answers into 503s that the same clients send again (measured on this 2-core machine with
# 200 clients and a 1.5 s bound: 1,991 of 3,254 plan requests refused, 39 answers/s, no more
# answers than without it). So the bound sits well above the 2 s p99 target of 200 clients
# (issue 15): a server that holds the target never refuses, and one that is overloaded (more
# clients, slower plans, a busy machine) still tells a client to come back rather than keep it
# past a common client timeout (httpx: 5 s).
MAX_WAIT_S = 5.0
COMPUTE_TIMEOUT_S = 30.0  # hub lookups make several requests of up to 10 s each (catalog/hub.py)
