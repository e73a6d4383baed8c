"""trainsignals: monitoring-as-code for ML training jobs."""

__version__ = "0.1.0"
