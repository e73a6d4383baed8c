"""Fleet replay: a Llama-3-scale fault history evaluated against the generated rules on a real
Prometheus (history -> timeline -> emit -> evaluate -> routing -> report)."""
