"""The daemon shell: reconcile loop, scheduling, target writes, outcomes, wiring, metrics, HTTP server, logging."""
