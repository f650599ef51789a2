"""Kubernetes: API calls and their errors, the replica targets (Deployment, CapacityBuffer), leader election."""
