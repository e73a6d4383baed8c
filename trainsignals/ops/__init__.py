"""The tools people run on a live or generated setup: `trainsignals postmortem`, `readiness`,
`diff` (review.py), `lint` and `goodput`, wired in trainsignals/cli/main.py.

Not to be confused with generator/oncall/, the on-call load artifacts (pages per shift) the
generator writes. query.py is their shared access to Prometheus's HTTP API.
"""
