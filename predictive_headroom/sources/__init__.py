"""Demand history sources: Prometheus (HTTP query API) and CSV files."""
