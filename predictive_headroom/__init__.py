"""predictive-headroom: warm spare capacity in Kubernetes, sized ahead of demand."""

__version__ = "0.1.0"
