"""The use cases the shells call: fit every pool (`fit`), re-tune a pool with `protection:`
(`tune`), and review a pool at an instant (`review`); the replay they run is `replay/`. The daemon and the
commands are thin shells over these; nothing here imports a shell (`tests/test_layout.py`)."""
