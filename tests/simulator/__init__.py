"""Scenario timelines on the deterministic clock: what the endpoints serve at chosen times."""
