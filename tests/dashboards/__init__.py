"""The generated Grafana dashboard: schema-valid, deterministic, tied to the spec and alerts."""
