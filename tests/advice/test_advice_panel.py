"""The advisor's panel (`A`) says which tok/s it measured and which it fitted: it showed the
fitted lines' values unlabelled (batch 1: 202 where `advise` measured 93.8 +- 1.0), and
they could contradict the crossover it printed beside them."""

import re

from textual.app import App

from console.widgets.advice_panel import AdvicePanel, batch_cell
from server_control.advice.words import advise
from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY
from server_control.protocol.crossover import estimate
from tests.console.screen_text import screen_text, wait_for
from tests.support.advice import curves


def _measured(e, mode, b):
    return next((p for p in e.points if p.mode == mode and p.lo <= b <= (p.hi or b)), None)


def test_a_cell_shows_the_measurement_where_there_is_one_and_marks_the_fit_elsewhere():
    got, _ = curves(8, share=0.1, lo=3, hi=20)  # nothing ran below batch 3
    e = estimate(got)
    seen_fit = seen_measured = 0
    for b in range(1, 14):
        cell = batch_cell(e, b)
        assert cell is not None
        spec, tgt = cell.split(":", 1)[1].split("/")
        for mode, shown in ((SPECULATIVE, spec), (TARGET_ONLY, tgt)):
            p = _measured(e, mode, b)
            if p is None:
                assert shown == f"~{e.tok_s(mode, b):.0f}", (b, mode, cell)
                seen_fit += 1
            else:
                assert shown == f"{p.tok_s:.0f}±{p.tok_s_se:.0f}", (b, mode, cell)
                seen_measured += 1
    assert seen_fit and seen_measured  # both kinds occur in this range


class _Host(App[None]):
    def compose(self):
        yield AdvicePanel(id="advice")


async def test_the_panel_names_how_the_crossover_was_found_and_labels_the_cells():
    got, _ = curves(8, share=0.1)
    e = estimate(got)
    app = _Host()
    async with app.run_test(size=(200, 12)) as pilot:
        app.query_one(AdvicePanel).advice = advise(e, 8)
        await wait_for(pilot, lambda: "crossover batch" in screen_text(app), what="the panel")
        text = screen_text(app)
        assert e.bands and e.extrapolated == 1.0  # target-only won the lowest band both modes ran
        assert f"crossover batch {e.crossover} (at the edge of the batches both modes ran, from {e.bands[0].lo})" in text
        assert "(± measured, ~ fitted)" in text
        assert re.search(r"\d+:\d+±\d+/\d+±\d+", text), text
