"""The contract every artifact kind implements (kind.py) and the registry the pipeline walks
(registry.py). CONTRIBUTING.md "Add an artifact kind" says how to add one."""

from trainsignals.generator.artifacts.kind import ArtifactKind, JobOutput, Run
from trainsignals.generator.artifacts.registry import Registry

__all__ = ["ArtifactKind", "JobOutput", "Registry", "Run"]
