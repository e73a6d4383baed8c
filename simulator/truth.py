"""The simulator's ground truth: every real second of the job in one goodput category.

The categories are the ones the generated goodput rules measure (generator/signals/goodput.py);
tests compare those rules' numbers with this account. Stepping time is counted per completed
step; the rest per tick.
"""

from __future__ import annotations


class GroundTruth(dict[str, float]):
    """{category: real seconds}; a dict, so a copy of it is a plain snapshot."""

    def add(self, category: str, seconds: float) -> None:
        self[category] = self.get(category, 0.0) + seconds

    def tick(
        self,
        *,
        live: bool,
        restoring: bool,
        phase: str,
        stepping: bool,
        seconds: float,
        unfinished_step: float,
    ) -> None:
        """A tick's real seconds. Stepping ticks count per completed step (`step`); the part
        of a step that never completes (`unfinished_step`) counts when it is dropped: as
        other, or as recovery when the ranks are gone."""
        if stepping:
            return
        if unfinished_step > 0:
            self.add("other" if live else "recovery", unfinished_step)
        if not live:
            category = "recovery"
        elif restoring:
            category = "checkpoint_restore"
        elif phase == "startup":
            category = "startup"
        elif phase in ("eval", "checkpoint"):
            category = "eval" if phase == "eval" else "checkpoint_save"
        else:
            category = "other"  # in phase train without stepping: a hang
        self.add(category, seconds)

    def step(self, seconds: float, wait: float, *, first: bool, new_progress: bool) -> None:
        """A completed step: start-up until the incarnation's first step, else its data wait
        and its compute, which is goodput only where the step was not done before."""
        if first:
            self.add("startup", seconds)
            return
        self.add("data_wait", wait * seconds)
        self.add("goodput" if new_progress else "lost_progress", (1.0 - wait) * seconds)
