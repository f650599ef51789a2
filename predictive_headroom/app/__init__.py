"""The use cases the shells call: fit every pool (`fit`), re-tune a pool with `protection:`
(`tune`); the replay (simulated cluster, walk-forward refits) is `backtest`. The daemon and the
commands are thin shells over these; nothing here imports a shell (`tests/test_layout.py`)."""
