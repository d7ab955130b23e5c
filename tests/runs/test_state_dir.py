"""State directory hardening: record temp files never follow a planted symlink, a group-
or world-writable (or foreign) state dir is refused, logs are 0600 unless the profile says."""

from __future__ import annotations

import os
import stat

import pytest

from server_control.config.profile import ProfileError, load_profile
from server_control.state import private_files, runs
from server_control.state.state_dir import StateDirError, resolve_state_dir
from server_control.supervision.supervisor import Supervisor
from tests.support.records import own_record


def test_a_symlink_at_the_temp_name_is_never_written_through(state_dir, tmp_path, monkeypatch):
    target = tmp_path / "precious"
    target.write_text("keep me")
    runs_d = runs.runs_dir()
    # the name the record writer used to take (".<name>.json.<pid>.tmp") and a forced one
    (runs_d / f".r.json.{os.getpid()}.tmp").symlink_to(target)
    runs.save_record(own_record())
    assert target.read_text() == "keep me"
    assert runs.load_record("r").pid == os.getpid()

    monkeypatch.setattr(private_files, "_token", lambda: "fixed")
    (runs_d / ".r.json.fixed.tmp").symlink_to(target)
    with pytest.raises(FileExistsError, match="private temporary file"):
        runs.save_record(own_record(port=2))
    assert target.read_text() == "keep me" and runs.load_record("r").port == 1


@pytest.mark.parametrize("mode", [0o770, 0o757, 0o777])
def test_group_or_world_writable_state_dir_is_refused(state_dir, mode):
    resolve_state_dir()
    os.chmod(state_dir, mode)
    with pytest.raises(StateDirError, match=rf"group- or world-writable \(mode {mode:04o}\).*chmod go-w"):
        runs.save_record(own_record())
    os.chmod(state_dir, 0o700)
    resolve_state_dir()


def test_loose_runs_dir_and_foreign_owner_are_refused(state_dir):
    d = runs.runs_dir()
    os.chmod(d, 0o777)
    with pytest.raises(StateDirError, match="runs is group- or world-writable"):
        runs.load_record("r")
    os.chmod(d, 0o700)
    if os.geteuid() == 0:
        os.chown(state_dir, 65534, -1)
        with pytest.raises(StateDirError, match="belongs to uid 65534"):
            resolve_state_dir()
        os.chown(state_dir, 0, -1)


async def test_log_files_are_0600_unless_the_profile_says(make_profile, groups, state_dir):
    path = make_profile("m", tp=1)
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    assert stat.S_IMODE(os.stat(rec.log_path).st_mode) == 0o600
    assert (await sup.stop()).ok
    path.write_text(path.read_text().replace('kind = "sim"\n', 'kind = "sim"\nlog_mode = "0640"\n'))
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    assert stat.S_IMODE(os.stat(rec.log_path).st_mode) == 0o640
    assert (await sup.stop()).ok


@pytest.mark.parametrize(
    "value, why",
    [
        ("0666", "writable by group or others"),
        ("0644x", "octal file mode"),
        ("0400", "owner read and write"),
        ("0700", "executable"),
    ],
)
def test_bad_log_mode_is_refused_with_the_reason(make_profile, value, why):
    path = make_profile("b", tp=1)
    path.write_text(path.read_text().replace('kind = "sim"\n', f'kind = "sim"\nlog_mode = "{value}"\n'))
    with pytest.raises(ProfileError, match=rf"\[server\] log_mode: .*{why}"):
        load_profile(path)


def test_a_state_dir_linked_to_a_shared_directory_is_refused_naming_the_target(tmp_path, monkeypatch):
    """A state dir that is a symlink to /tmp was refused with "chmod go-w <the link>", which
    would have changed /tmp itself."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = tmp_path / "state-link"
    link.symlink_to(shared)
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(link))
    with pytest.raises(StateDirError) as info:
        resolve_state_dir()
    assert f"is a link to {shared}" in str(info.value) and "chmod" not in str(info.value)
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
