"""tail -F semantics with real files and a real event loop: the file appears later, grows,
holds a partial line, is truncated, rotated, removed and re-created."""

import asyncio
import os
import time

import pytest

from server_control.logs import Follower, LogPipeline, LogStore

POLL = 0.02
DEADLINE = 15.0


async def eventually(cond, what: str):
    end = time.monotonic() + DEADLINE
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def append(path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
async def follow(tmp_path):
    tasks = []

    def start(name="server.log", **kw):
        path = tmp_path / name
        store = LogStore()
        seen = []
        pipeline = LogPipeline(path, store, seen.append, poll_interval=POLL, **kw)
        tasks.append(asyncio.create_task(pipeline.run()))
        return path, store, pipeline, seen

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def raws(store):
    return [r.raw for r in store.records()]


async def test_file_created_later_then_appended(follow):
    path, store, pipeline, seen = follow()
    await asyncio.sleep(POLL * 3)
    assert pipeline.state == "waiting" and store.total == 0
    append(path, "one\ntwo\n")
    await eventually(lambda: store.total == 2, "the first two lines")
    assert pipeline.state == "following"
    append(path, "three\n")
    await eventually(lambda: store.total == 3, "the appended line")
    assert [(r.line, r.raw) for r in store.records()] == [(1, "one"), (2, "two"), (3, "three")]
    assert seen[-1] == 3 and pipeline.new_records.is_set()


async def test_partial_line_is_held_until_its_newline(follow):
    path, store, pipeline, _ = follow()
    append(path, "complete\npart")
    await eventually(lambda: pipeline.follower.position == len("complete\npart"), "the read")
    assert raws(store) == ["complete"]
    append(path, "ial\n")
    await eventually(lambda: store.total == 2, "the finished line")
    assert raws(store) == ["complete", "partial"]


async def test_truncation_restarts_from_the_top(follow):
    path, store, pipeline, _ = follow()
    append(path, "".join(f"old line {i}\n" for i in range(1, 6)))
    await eventually(lambda: store.total == 5, "five lines")
    with open(path, "w") as f:  # truncate and write less than before, as copytruncate + a writer would
        f.write("new 1\n")
    await eventually(lambda: store.total == 6, "the line after truncation")
    assert pipeline.follower.truncations == 1
    assert store.records()[-1].raw == "new 1" and store.records()[-1].line == 1
    append(path, "new 2\n")
    await eventually(lambda: store.total == 7, "a later line")
    assert store.records()[-1].line == 2


async def test_truncate_to_empty_then_write(follow):
    path, store, pipeline, _ = follow()
    append(path, "a\nb\nc\n")
    await eventually(lambda: store.total == 3, "three lines")
    os.truncate(path, 0)
    await eventually(lambda: pipeline.follower.truncations == 1, "the truncation to be seen")
    append(path, "after a much longer line than before\n")
    await eventually(lambda: store.total == 4, "the new line")
    assert store.records()[-1].raw == "after a much longer line than before"


async def test_rotation_reads_old_file_to_its_end_then_the_new_one(follow):
    path, store, pipeline, _ = follow()
    append(path, "first file 1\n")
    await eventually(lambda: store.total == 1, "the first line")
    rotated = path.with_name("server.log.1")
    with open(path, "a") as old:
        os.rename(path, rotated)
        old.write("first file 2, written after the rename\nfirst file partial")  # writer still has it open
    append(path, "second file 1\nsecond file 2\n")
    await eventually(lambda: store.total == 5, "lines of both files")
    assert pipeline.follower.rotations == 1
    assert [(r.line, r.raw) for r in store.records()] == [
        (1, "first file 1"),
        (2, "first file 2, written after the rename"),
        (3, "first file partial"),
        (1, "second file 1"),
        (2, "second file 2"),
    ]


async def test_removed_then_recreated(follow):
    path, store, pipeline, _ = follow()
    append(path, "before\n")
    await eventually(lambda: store.total == 1, "the first line")
    os.unlink(path)
    await asyncio.sleep(POLL * 5)
    assert store.total == 1
    append(path, "after\n")
    await eventually(lambda: store.total == 2, "the line of the new file")
    assert store.records()[-1].raw == "after" and store.records()[-1].line == 1


async def test_traceback_at_the_end_is_flushed_when_the_writer_goes_quiet(follow):
    path, store, _, _ = follow(idle_flush_s=0.1)
    append(
        path,
        "[2026-11-29 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "s.py", line 1, in run\n'
        "ValueError: boom\n",
    )
    await eventually(lambda: store.total == 1, "the traceback record")
    rec = store.records()[0]
    assert rec.kind == "traceback" and rec.raw.endswith("ValueError: boom")


async def test_idle_follower_sleeps_between_polls(tmp_path):
    follower = Follower(tmp_path / "absent.log", poll_interval=POLL)
    polls = 0
    original = follower.poll

    def counting_poll():
        nonlocal polls
        polls += 1
        return original()

    follower.poll = counting_poll
    started = time.monotonic()
    gen = follower.events()
    task = asyncio.create_task(gen.__anext__())
    await asyncio.sleep(0.3)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    elapsed = time.monotonic() - started
    assert 1 <= polls <= elapsed / POLL + 2  # a busy loop would poll thousands of times


def test_directory_is_an_error_not_a_crash(tmp_path):
    follower = Follower(tmp_path)
    assert follower.poll() is None
    assert "not a regular file" in follower.error


async def test_large_burst_arrives_whole(follow):
    path, store, _, _ = follow(chunk_size=4096)
    text = "".join(f"[2026-11-29 10:00:00 TP0] burst line {i}\n" for i in range(20_000))
    append(path, text)
    await eventually(lambda: store.total == 20_000, "all burst lines")
    assert [r.line for r in store.tail(2)] == [19_999, 20_000]


def _rotate(path, keep: int) -> None:
    """The keeper's rotation (proc/keeper.py): <log>.i -> <log>.i+1 from the oldest, <log> -> <log>.1."""
    for i in range(keep - 1, 0, -1):
        src = path.with_name(f"{path.name}.{i}")
        if src.exists():
            os.rename(src, path.with_name(f"{path.name}.{i + 1}"))
    os.rename(path, path.with_name(f"{path.name}.1"))


def _drain(follower: Follower) -> bytes:
    out = b""
    for _ in range(100):
        event = follower.poll()
        if event is None:
            break
        if event[0] == "data" and event[1] is not None:
            out += event[1]
    return out


def test_parts_rotated_away_between_two_polls_are_read_in_order(tmp_path):
    """A loaded follower may poll only after the writer rotated twice or more (CI: 3,000 lines
    in 20 kB parts, the follower saw 'every line' never): each part written after the one it
    was reading is read, oldest first, before the current file; none is skipped."""
    path = tmp_path / "r.log"
    append(path, "part 1\n")
    follower = Follower(path)
    assert _drain(follower) == b"part 1\n"
    for n in (2, 3, 4):  # three rotations, no poll in between
        _rotate(path, keep=10)
        append(path, f"part {n}\n")
    assert _drain(follower) == b"part 2\npart 3\npart 4\n"
    assert follower.rotations == 3
    _rotate(path, keep=10)
    append(path, "part 5\n")
    assert _drain(follower) == b"part 5\n"
