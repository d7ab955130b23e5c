"""The load generator (server_control/bench/loadgen.py) against a real simulator process."""

import httpx

from server_control.bench import loadgen, referee
from server_control.protocol import decision
from tests.support.sim import CLIENT_WINDOW_TIME_SCALE


def test_crossover_and_suggested_threshold_from_rows():
    per_mode = {
        decision.SPECULATIVE: [{"concurrency": c, "tok_s": t} for c, t in [(1, 96), (4, 300), (8, 340)]],
        decision.TARGET_ONLY: [{"concurrency": c, "tok_s": t} for c, t in [(1, 74), (4, 290), (8, 530)]],
    }
    assert loadgen.crossover(per_mode) == 8
    assert loadgen.previous_level([1, 4, 8], 8) == 4
    assert loadgen.crossover({decision.SPECULATIVE: per_mode[decision.SPECULATIVE]}) is None


async def test_run_level_counts_streamed_tokens(sim_factory):
    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
    r = await loadgen.run_level(sim.url, 3, warmup_s=0.3, measure_s=1.0, max_tokens=64)
    assert r.errors == 0, r.error_sample
    assert r.tokens > 0 and r.tok_s > 0 and r.ttft_p50_s is not None
    assert await loadgen.set_force(sim.url, decision.TARGET_ONLY)
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.FORCE_KEY] == decision.TARGET_ONLY


class _NumbersOnly:
    """A /set_internal_state that answers like SGLang 0.5.23: its request type holds
    numbers only, so a JSON string is refused with 400 (not 422) before any scheduler."""

    def __enter__(self):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                value = body["server_args"][decision.FORCE_KEY]
                seen.append(value)
                ok = isinstance(value, int)
                data = b"[true]" if ok else b'{"error": "Expected `int | float`, got `str`"}'
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


async def test_set_force_sends_the_index_when_the_server_refuses_a_string_with_400():
    with _NumbersOnly() as server:
        assert await loadgen.set_force(server.url, decision.TARGET_ONLY)
        assert server.seen == [decision.TARGET_ONLY, decision.FORCE_CHOICES.index(decision.TARGET_ONLY)]


def test_rotated_starts_each_round_one_arm_later():
    arms = ["plain", "speculative", "target_only", "auto"]
    assert [loadgen.rotated(arms, k) for k in range(5)] == [
        arms,
        arms[1:] + arms[:1],
        arms[2:] + arms[:2],
        arms[3:] + arms[:3],
        arms,
    ]


def test_share_problem_names_a_forced_window_that_ran_the_other_mode():
    def win(spec, target, force):
        return {
            "steps": {decision.SPECULATIVE: spec, decision.TARGET_ONLY: target},
            "target_only_share": target / (spec + target) if spec + target else None,
            "force": force,
        }

    assert referee.share_problem(decision.TARGET_ONLY, win(0, 50, decision.TARGET_ONLY)) is None
    assert referee.share_problem(decision.SPECULATIVE, win(50, 0, decision.SPECULATIVE)) is None
    assert "2.0% of the window" in referee.share_problem(decision.SPECULATIVE, win(49, 1, decision.SPECULATIVE))
    assert "no decode step" in referee.share_problem(decision.TARGET_ONLY, win(0, 0, decision.TARGET_ONLY))
    assert "force=auto" in referee.share_problem(decision.TARGET_ONLY, win(0, 9, decision.AUTO))
    assert referee.share_problem(decision.AUTO, win(3, 9, decision.AUTO)) is None


async def test_sweep_interleaves_every_arm_in_every_round_and_checks_the_server(sim_factory):
    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
    modes = [decision.SPECULATIVE, decision.TARGET_ONLY, decision.AUTO]
    order = []
    result = await loadgen.sweep(
        sim.url,
        [2, 6],
        modes=modes,
        rounds=2,
        warmup_s=0.3,
        measure_s=0.8,
        max_tokens=32,
        progress=lambda r: order.append((r.concurrency, r.mode)),
    )
    assert order == [(c, m) for c in (2, 6) for m in modes + modes[1:] + modes[:1]]
    assert result["problems"] == [] and result["rounds"] == 2
    cells = {m: result["per_mode"][m] for m in modes}
    assert [len(cell["rounds"]) for rows in cells.values() for cell in rows] == [2] * 6
    assert all(c["target_only_share"] == 0 for c in cells[decision.SPECULATIVE])
    assert all(c["target_only_share"] == 1 for c in cells[decision.TARGET_ONLY])
    assert all(
        r["steps"]["ms_per_step_by_mode"][decision.TARGET_ONLY] > 0 for c in cells[decision.TARGET_ONLY] for r in c["rounds"]
    )
    assert all(r["drain_s"] is not None for rows in cells.values() for c in rows for r in c["rounds"])
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.FORCE_KEY] == decision.AUTO


async def test_sweep_catches_a_force_the_server_never_applied(sim_factory, monkeypatch):
    """The negative control of the share check: the harness believes a force that never
    reached the server (set_force answers True and sends nothing); the server's own step
    counters say the target-only window speculated, and the sweep reports it."""
    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()

    async def believed(url, mode, api_key=None):
        return True

    monkeypatch.setattr(loadgen, "set_force", believed)
    result = await loadgen.sweep(
        sim.url, [2], modes=[decision.SPECULATIVE, decision.TARGET_ONLY], rounds=1, warmup_s=0.3, measure_s=0.8, max_tokens=32
    )
    assert result["problems"] == [
        "forced speculative: the server reports force=auto",
        "forced target_only: 0.0% of the window's decode steps ran target-only (steps "
        f"{result['per_mode'][decision.TARGET_ONLY][0]['rounds'][0]['steps']['steps']})",
    ], result["problems"]


async def test_a_window_waits_for_what_the_last_one_left_running(sim_factory):
    """Requests still running when a window starts are counted (leftover) and, with drain,
    waited for: the window then starts on an idle server; without drain it does not."""
    import asyncio

    sim = sim_factory(time_scale=1.0).wait_ready()  # real time: 400 tokens take seconds
    body = {"prompt": "x", "max_tokens": 400, "ignore_eos": True, "temperature": 0}

    async def leave_running(client):
        tasks = [asyncio.create_task(client.post(sim.url + "/v1/completions", json=body)) for _ in range(4)]
        for _ in range(100):
            if (await referee.idle(client, sim.url)) == 4:
                return tasks
            await asyncio.sleep(0.05)
        raise AssertionError("the 4 requests never ran")

    async with httpx.AsyncClient(trust_env=False, timeout=120) as client:
        tasks = await leave_running(client)
        undrained = await loadgen.run_level(sim.url, 1, warmup_s=0.1, measure_s=0.3, max_tokens=8, drain=False)
        assert undrained.leftover == 4 and undrained.drain_s is None
        await asyncio.gather(*tasks)
        tasks = await leave_running(client)
        drained = await loadgen.run_level(sim.url, 1, warmup_s=0.1, measure_s=0.3, max_tokens=8)
        assert drained.leftover == 4 and drained.drain_s > 0
        assert all(t.done() for t in tasks)  # the window began only after they finished
        await asyncio.gather(*tasks)


async def test_a_slow_start_read_does_not_shorten_the_measured_window(sim_factory, monkeypatch):
    """The window opens once the server's start counters are in. It used to open at a
    fixed time: a start read that came back after the window's planned end (a loaded
    machine) left an empty window, "forced target_only: the server took no decode step in
    the window" (a 4-worker fast loop, tests/cli/test_bench.py)."""
    import asyncio

    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
    assert await loadgen.set_force(sim.url, decision.TARGET_ONLY)
    real = referee.counters
    reads = []

    async def slow_first_read(client, url):
        reads.append(url)
        if len(reads) == 1:  # the start read: answered after the planned window has ended
            await asyncio.sleep(1.0)
        return await real(client, url)

    monkeypatch.setattr(referee, "counters", slow_first_read)
    r = await loadgen.run_level(sim.url, 2, warmup_s=0.2, measure_s=0.5, max_tokens=64, mode=decision.TARGET_ONLY)
    assert len(reads) == 2 and r.errors == 0, (reads, r.error_sample)
    assert r.problem is None, (r.problem, r.steps["steps"], reads)
    assert r.steps["steps"][decision.TARGET_ONLY] > 0 and r.tokens > 0, (r.steps, r.tokens)
