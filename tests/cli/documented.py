"""Every `specconsole ...` command line the README and docs/ show, and what it names: the
command path (``("fleet", "status")``) and the options it uses, read against the real
parser (console/cli/main.py ``build_parser``). tests/cli/test_documented_commands.py runs
them."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from console.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
_SPAN = re.compile(r"`(specconsole [^`\n]*)`")
_OPTION = re.compile(r"^(--?[a-zA-Z][a-zA-Z0-9-]*)")


@dataclass(frozen=True)
class Documented:
    file: str  # relative to the repository
    line: str  # as shown (comments after `  #` dropped)
    path: tuple[str, ...]  # the command path through the parser; () = the default (`ui`)
    options: tuple[str, ...]  # every option the line names


def command_lines() -> list[tuple[str, str]]:
    """(file, line) for every command in an inline code span, a fenced block or an indented block."""
    out: list[tuple[str, str]] = []
    for f in DOC_FILES:
        rel = str(f.relative_to(REPO))
        text = f.read_text()
        out += [(rel, m.group(1).strip()) for m in _SPAN.finditer(text)]
        fenced = False
        for raw in text.splitlines():
            if raw.strip().startswith("```"):
                fenced = not fenced
                continue
            s = raw.strip()
            if (fenced or raw.startswith("    ")) and s.startswith("specconsole "):
                out.append((rel, re.split(r"\s{2,}#|\s#\s", s)[0].strip()))
    return sorted(set(out))


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _paths(tokens: list[str], parser: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """The command paths the leading words name ("status|threshold" and "launch/stop" name several)."""
    subs = _subparsers(parser)
    if not tokens or not subs:
        return [((), parser)]
    words = [w for w in re.split(r"[|/]", tokens[0]) if w]
    if not words or not all(w in subs for w in words):
        return [((), parser)]
    out = []
    for w in words:
        out += [((w, *rest), p) for rest, p in _paths(tokens[1:], subs[w])]
    return out


def documented() -> list[Documented]:
    root = build_parser()
    out = []
    for rel, line in command_lines():
        tokens = line.split()[1:]
        for path, _parser in _paths(tokens, root):
            if not path and tokens and not tokens[0].startswith(("-", "[")):
                continue  # prose such as "specconsole does ...": not a command
            options = tuple(m.group(1) for t in tokens for part in re.split(r"[|\[\]]", t) if (m := _OPTION.match(part)))
            out.append(Documented(rel, line, path or ("ui",), options))
    return out


def parser_for(path: tuple[str, ...]) -> argparse.ArgumentParser:
    p = build_parser()
    for word in path:
        p = _subparsers(p)[word]
    return p


def known_options(path: tuple[str, ...]) -> set[str]:
    if path == ("sim",):  # every argument goes on to the simulator's own parser
        from server_control.sim.args import build_parser as sim_parser  # noqa: PLC0415

        return set(sim_parser()._option_string_actions)
    return set(parser_for(path)._option_string_actions)
