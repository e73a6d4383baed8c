"""The kinds the pipeline walks, by name, in the order registered."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from trainsignals.generator.artifacts.kind import ArtifactKind


class Registry:
    def __init__(self, kinds: Iterable[ArtifactKind] = ()) -> None:
        self._kinds: dict[str, ArtifactKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: ArtifactKind) -> ArtifactKind:
        if kind.name in self._kinds:
            raise ValueError(f"an artifact kind named {kind.name!r} is already registered")
        self._kinds[kind.name] = kind
        return kind

    def unregister(self, name: str) -> ArtifactKind:
        return self._kinds.pop(name)

    def names(self) -> list[str]:
        return list(self._kinds)

    def __iter__(self) -> Iterator[ArtifactKind]:
        return iter(list(self._kinds.values()))

    def __len__(self) -> int:
        return len(self._kinds)


def add_files(files: dict[str, str], new: dict[str, str], kind: ArtifactKind) -> None:
    """files |= new, refusing a path another kind already wrote (one file, one kind)."""
    clash = [path for path in new if path in files]  # not keys() & keys(): files is large
    if clash:
        raise ValueError(
            f"artifact kind {kind.name!r} writes {clash[0]}, which is already written "
            "(by another kind, or by this kind for another job): give it another path"
        )
    files |= new
