"""A synthetic training job with fake GPUs and injectable faults, serving trainsignals' metrics.

`Simulation` (Python API), `SCENARIOS` (the scenario table end-to-end tests read) and the
click command `simulate` (in .cli). See simulator/README.md.
"""

from .job import Simulation, effective_spec
from .profile import JobProfile
from .scenarios import SCENARIOS, Conditions, Scenario
from .targets import Target

__all__ = [
    "SCENARIOS",
    "Conditions",
    "JobProfile",
    "Scenario",
    "Simulation",
    "Target",
    "effective_spec",
]
