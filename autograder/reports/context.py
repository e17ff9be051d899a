"""What every class report is given besides the records and the output folder (:class:`ReportRun`), and the one
signature a class report has (:data:`ClassReport`), so that a new format is one module and one registry line."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..records.results import SubmissionResult

if TYPE_CHECKING:
    from .drawer import Drawer


@dataclass
class ReportRun:
    """One writing of the class's reports: ``drawer`` draws the charts in its own process (None: drawn here),
    ``written`` names the students whose own reports are written already (from these same records)."""

    drawer: Drawer | None = None
    written: Collection[str] = ()
    _last: list[Callable[[], list[Path]]] = field(default_factory=list)

    def finish_last(self, finish: Callable[[], list[Path]]) -> None:
        """Run ``finish`` (it returns the paths it wrote) after every report has been started: a report whose
        slow part (charts) runs elsewhere starts it, and writes its page once the others are written."""
        self._last.append(finish)

    def finish(self) -> list[Path]:
        """Run what :meth:`finish_last` put off, in order; the paths they wrote."""
        return [path for finish in self._last for path in finish()]


# write(records sorted by id, output folder, the run) -> the paths written
ClassReport = Callable[[Sequence[SubmissionResult], Path, ReportRun], list[Path]]
