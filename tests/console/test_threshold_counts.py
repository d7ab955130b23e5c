"""Issue 31 item 4 on the screen: the live chart says, where an operator hovers, that its
batch and N count raw decode requests (never padded to a CUDA-graph size)."""

from __future__ import annotations

from console.widgets.live_panel import LivePanel


async def test_the_live_chart_says_what_the_batch_and_n_count(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        tip = str(app.screen.query_one(LivePanel).tooltip)
        assert "decode requests in the step, raw (never padded to a CUDA-graph size)" in tip, tip
        assert "target-only while batch > N" in tip, tip
