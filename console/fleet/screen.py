"""The fleet screen: a k9s-style table, one row per member, and fleet-wide keys.

Keys act on the selected members (space marks a row), or, with none selected, on every
member the filter shows. Each action ends in one result per member in the panel under the
table; a member that refused, failed or did not answer is listed first, in red.
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.dialogs.confirm import ChoiceScreen, confirm
from console.dialogs.prompt import PromptScreen
from console.fleet.advice import FleetAdvice
from console.fleet.aggregate import Trends, aggregate_line
from console.fleet.member_screen import QUIT, MemberScreen
from console.fleet.palette import FleetCommands
from console.fleet.results import ResultsPanel
from console.fleet.rows import SORTABLE, arrange, cells, stale
from console.fleet.table import FleetTable
from console.keys import bindings_for
from server_control.protocol.decision import validate_threshold

REFRESH_S = 1.0


def gateway_workers(status, down: frozenset[str] = frozenset()) -> Text:
    """The gateway's worker list in one line: member (or URL), health, smg's status, load. smg
    keeps a worker "ready" until its own health checks fail it: a member in ``down`` (it does
    not answer here, or is not serving) is said to be down whatever smg says."""
    if status is None:
        return Text("")
    if not status.reachable:
        return Text(f"gateway workers: not readable ({status.error})", style="red")
    line = Text("gateway workers: " if status.workers else "gateway workers: none")
    for i, w in enumerate(status.workers):
        if i:
            line.append(" | ")
        who = w.member or f"{w.url} (no member)"
        load = f" load {w.load}" if w.load is not None else ""
        if w.member in down:
            line.append(f"{who} DOWN (smg: {w.status})", style="bold red")
        else:
            line.append(f"{who} {w.status}{load}", style="green" if w.healthy else "bold red")
    return line


class FleetScreen(Screen):
    COMMANDS = {FleetCommands}
    BINDINGS = bindings_for("fleet")  # the one key table (console/keys.py): a user keymap rebinds them
    DEFAULT_CSS = """
    FleetScreen #fleet-header { height: 1; padding: 0 1; background: $boost; }
    FleetScreen #fleet-gateway { height: 1; padding: 0 1; }
    FleetScreen #fleet-aggregate { height: auto; max-height: 2; padding: 0 1; }
    FleetScreen #fleet-table { height: 1fr; }
    """

    def __init__(self, fleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.selected: set[str] = set()
        self.sort, self.reverse, self.filter_text = "name", False, ""
        self.order: list[str] = []
        self.last_rows: dict = {}
        self.painted_at = 0.0  # monotonic time of the last table paint (benchmarks read it)
        self._header = ""
        self._workers: Text | None = None
        self.rows_cache: tuple = ()
        self.trends = Trends()
        self._aggregate: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-header")
        yield Static(id="fleet-aggregate")
        yield Static(id="fleet-gateway")
        yield FleetTable(id="fleet-table")
        yield FleetAdvice(self._advice_members, id="fleet-advice")
        yield ResultsPanel(
            "keys act on the selected members (space), or on every member shown; enter opens one, / filters, o sorts",
            id="fleet-results",
        )
        yield Footer()

    @property
    def table(self) -> FleetTable:
        return self.query_one("#fleet-table", FleetTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.refresh_rows()
        self.ticker = self.set_interval(REFRESH_S, self.refresh_rows)

    # ---- painting -------------------------------------------------------------------------
    def refresh_rows(self) -> None:
        """The timer's tick: read every member's row, then paint."""
        self.rows_cache = self.fleet.rows()
        self.trends.add(self.rows_cache)
        self.paint()

    def paint(self) -> None:
        """Paint the cached rows (keys re-sort, filter and select without asking the fleet)."""
        rows = arrange(self.rows_cache, self.sort, self.reverse, self.filter_text)
        cursor = self.cursor_name()
        self.order = [r.name for r in rows]
        self.last_rows = {r.name: {**cells(r, r.name in self.selected), "trend": self.trends.line(r.name)} for r in rows}
        self.table.sorted_by(self.sort, self.reverse)
        self.table.show(self.order, self.last_rows)
        if cursor in self.order and self.order.index(cursor) != self.table.cursor_row:
            self.table.move_cursor(self.order.index(cursor))
        # each line only when it changed, and without re-laying the screen out (their heights
        # stay: the header and the workers one line, the aggregate one or two)
        header = self.header(len(rows))
        if header != self._header:
            self._header = header
            self.query_one("#fleet-header", Static).update(header, layout=False)
        aggregate = aggregate_line(self.rows_cache, self.fleet.gateway_status)
        if aggregate != self._aggregate:
            taller = self._aggregate is None or len(aggregate.split()) != len(self._aggregate.split())
            self._aggregate = aggregate
            self.query_one("#fleet-aggregate", Static).update(aggregate, layout=taller)
        workers = gateway_workers(self.fleet.gateway_status, frozenset(r.name for r in self.rows_cache if stale(r)))
        if workers != self._workers:
            self._workers = workers
            self.query_one("#fleet-gateway", Static).update(workers, layout=False)
        self.painted_at = time.monotonic()

    def header(self, shown: int) -> str:
        bits = [f"fleet {self.fleet.spec.name}: {len(self.fleet.members)} members"]  # short: 80 columns hold it
        if shown != len(self.fleet.members):
            bits.append(f"{shown} shown (/{self.filter_text})")
        if self.selected:
            bits.append(f"{len(self.selected)} selected")
        gw = self.fleet.gateway_status
        if gw is not None:
            bits.append(f"gateway {gw.url.removeprefix('http://')} {gw.state}" + (f" ({gw.error})" if gw.error else ""))
        elif self.fleet.gateway is not None:
            bits.append(f"gateway {self.fleet.gateway.url.removeprefix('http://')}: not read yet")
        return " | ".join(bits)  # the sort: an arrow in the column's title (console/fleet/table.py)

    def cursor_name(self) -> str | None:
        return self.table.cursor_name

    def targets(self) -> list[str]:
        return [n for n in self.order if n in self.selected] or list(self.order)

    def _advice_members(self) -> list[tuple[str, str, object]]:
        return [(r.name, r.url, self.fleet.members.get(r.name)) for r in self.rows_cache if r.reachable]

    # ---- keys -----------------------------------------------------------------------------
    def action_apply_advice(self) -> None:
        plan = self.query_one(FleetAdvice).plan(self.targets())
        if not plan:
            self.app.notify("no member shown has a suggestion that differs from its N", severity="warning")
            return
        lines = "\n".join(f"{m}: N={a.current} -> {a.suggested}  {a.sentence}" for m, a in plan.items())
        self.app.push_screen(
            confirm(f"Set each member's own suggested N?\n{lines}"),
            lambda yes: self.act("threshold", {m: a.suggested for m, a in plan.items()}) if yes else None,
        )

    def action_fleet_help(self) -> None:
        from console.fleet.help import FleetHelpScreen  # noqa: PLC0415

        self.app.push_screen(FleetHelpScreen())

    def action_gateway_log(self) -> None:
        from pathlib import Path  # noqa: PLC0415

        from console.fleet.gateway_log import GatewayLogScreen  # noqa: PLC0415

        status = self.fleet.gateway_status
        path = status.log_path if status is not None else None
        if not path:
            self.app.notify(
                "no gateway log here: the fleet has no gateway, or its run record names no log yet", severity="warning"
            )
            return
        self.app.push_screen(GatewayLogScreen(Path(path)))

    def action_open_member(self) -> None:
        """enter: push the member's server screen; `q` there comes back with the fleet's question."""
        name = self.cursor_name()
        if name is not None:
            screen = MemberScreen(name, self.fleet.members[name].session, self.fleet.spec.name)
            self.app.push_screen(screen, lambda result: self.action_quit_fleet() if result == QUIT else None)

    def action_toggle_select(self) -> None:
        name = self.cursor_name()
        if name is not None:
            self.selected ^= {name}
            self.paint()
            self.table.move_cursor(row=min(self.table.cursor_row + 1, len(self.order) - 1))

    def action_clear(self) -> None:
        self.selected.clear()
        self.filter_text = ""
        self.paint()

    def action_sort(self) -> None:
        self.sort = SORTABLE[(SORTABLE.index(self.sort) + 1) % len(SORTABLE)]
        self.paint()

    def action_sort_reverse(self) -> None:
        self.reverse = not self.reverse
        self.paint()

    def action_filter(self) -> None:
        def done(text) -> None:
            if text is not None:
                self.filter_text = text
                self.paint()

        self.app.push_screen(
            PromptScreen("Filter members (words; !word excludes; empty shows all)", lambda s: s.strip(), self.filter_text), done
        )

    def action_set_n(self) -> None:
        names = self.targets()

        def apply(n: int | None) -> None:
            if n is not None:
                self.act("threshold", {m: n for m in names})

        self.app.push_screen(
            PromptScreen(
                f"Set N (speculation off above this batch) on {len(names)} member(s): {', '.join(names)}", validate_threshold
            ),
            apply,
        )

    def action_step_n(self, delta: int) -> None:
        rows = {r.name: r for r in self.rows_cache}
        values = {m: rows[m].threshold + delta for m in self.targets() if rows[m].threshold is not None}
        if values:
            self.act("threshold", values)
        else:
            self.app.notify("no member shown has a known threshold yet", severity="warning")

    def action_force(self) -> None:
        names = self.targets()
        choices: list[tuple[str, str, object]] = [
            ("a", "auto", "auto"),
            ("s", "speculative", "speculative"),
            ("t", "target-only", "target_only"),
        ]

        def apply(mode: object) -> None:
            if mode is not None:
                self.act("force", {m: mode for m in names})

        self.app.push_screen(ChoiceScreen(f"Force the mode of {len(names)} member(s)", choices), apply)

    def action_verify(self) -> None:
        self.act("verify", {m: None for m in self.targets()})

    def action_launch(self) -> None:
        self.life_cycle("launch")

    def action_stop(self) -> None:
        names = self.targets()
        from console.dialogs.confirm import confirm

        self.app.push_screen(
            confirm(
                f"Stop {len(names)} member(s): {', '.join(names)}"
                + (" and the gateway?" if self._everyone(names) and self.fleet.gateway else "?")
            ),
            self._stop_answer,
        )

    def _stop_answer(self, yes: object) -> None:
        if yes:
            self.life_cycle("stop")

    def _everyone(self, names) -> bool:
        return set(names) == set(self.fleet.members)

    def life_cycle(self, action: str) -> None:
        """launch / stop: of every member and the gateway, or of the members targeted."""
        names = self.targets()
        self.query_one(ResultsPanel).pending(action, names)
        self.run_worker(self._life_cycle(action, names), group="fleet-action")

    async def _life_cycle(self, action: str, names) -> None:
        t0 = time.monotonic()
        results = await self.fleet.act(
            action, names=None if self._everyone(names) else names, wait_s=60 if action == "launch" else None
        )
        self.query_one(ResultsPanel).show(action, results, time.monotonic() - t0)
        self.refresh_rows()

    def action_quit_fleet(self) -> None:
        """q: leave the fleet running (each local member keeps its own supervisor), stop it,
        or stay (console/fleet/leaving.py); a demo fleet that stops on quit only confirms."""
        from console.dialogs.confirm import confirm  # noqa: PLC0415
        from console.fleet.leaving import quit_question  # noqa: PLC0415

        if getattr(self.app, "stops_on_quit", False):
            self.app.push_screen(
                confirm("Quit and stop the demo fleet (started without --keep)?", default_yes=True),
                lambda yes: self.app.exit() if yes else None,
            )
            return
        self.app.push_screen(quit_question(self.fleet), self._quit_answer)

    def _quit_answer(self, choice: object) -> None:
        if choice == "leave":
            self.app.leaving = True  # type: ignore[attr-defined]  # FleetApp: says so after the fleet closed
            self.app.exit()
        elif choice == "stop":
            self.query_one(ResultsPanel).pending("stop", list(self.fleet.members))
            self.run_worker(self._stop_and_quit(), group="fleet-action")

    async def _stop_and_quit(self) -> None:
        results = await self.fleet.act("stop")
        self.query_one(ResultsPanel).show("stop", results)
        self.app.exit()

    # ---- actions --------------------------------------------------------------------------
    def act(self, action: str, values: dict) -> None:
        """Run ``action`` on every member of ``values`` (name -> value) at once."""
        self.query_one(ResultsPanel).pending(action, list(values))
        self.run_worker(self._act(action, values), group="fleet-action")

    async def _act(self, action: str, values: dict) -> None:
        members = self.fleet.members
        t0 = time.monotonic()
        results = await asyncio.gather(*(members[m].act(action, v) for m, v in values.items()))
        label = action if len(set(map(str, values.values()))) != 1 else f"{action} {next(iter(values.values()))}"
        self.query_one(ResultsPanel).show(label.replace(" None", ""), results, time.monotonic() - t0)
        self.refresh_rows()
