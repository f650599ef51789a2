"""The pure core: planner, schedule windows, proportional floors and the series values they pass around (no I/O)."""
