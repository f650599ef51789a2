"""The forecast report: building, per-pool analysis, HTML rendering, reports on disk."""
