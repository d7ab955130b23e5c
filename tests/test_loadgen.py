"""The load generator (server_control/loadgen.py) against a real simulator process."""

import httpx

from server_control import loadgen
from server_control.protocol import decision


def test_crossover_and_suggested_threshold_from_rows():
    per_mode = {decision.SPECULATIVE: [{"concurrency": c, "tok_s": t} for c, t in [(1, 96), (4, 300), (8, 340)]],
                decision.TARGET_ONLY: [{"concurrency": c, "tok_s": t} for c, t in [(1, 74), (4, 290), (8, 530)]]}
    assert loadgen.crossover(per_mode) == 8
    assert loadgen.previous_level([1, 4, 8], 8) == 4
    assert loadgen.crossover({decision.SPECULATIVE: per_mode[decision.SPECULATIVE]}) is None


async def test_run_level_counts_streamed_tokens(sim_factory):
    sim = sim_factory().wait_ready()
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
