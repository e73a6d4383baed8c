"""Local stacks only the tests and benches run: an Alertmanager cluster, VictoriaMetrics, shards.

The demo and the fleet replay need only `trainsignals.stacks` (one Prometheus and
Alertmanager, the process reaper), which ships in the package; these build on it.
"""
