"""`z` / `Z` / `c`: the live chart's zoom over the profile's history and the metric it shows
(console/widgets/live_panel.py). A mixin of ``ServerScreen`` (console/screens/server.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from console.widgets.live_panel import LivePanel

if TYPE_CHECKING:
    from textual.screen import Screen

    _Base = Screen[Any]
else:
    _Base = object


class ChartActions(_Base):
    def _chart(self) -> LivePanel:
        return self.query_one(LivePanel)

    def action_chart_zoom_out(self) -> None:
        self.notify(f"chart: {self._chart().zoom_out(1)}", timeout=2)

    def action_chart_zoom_in(self) -> None:
        self.notify(f"chart: {self._chart().zoom_out(-1)}", timeout=2)

    def action_chart_metric(self) -> None:
        self.notify(f"chart: {self._chart().cycle_metric()}", timeout=2)
