"""Fleet fixtures: a real sshd on 127.0.0.1 as the "remote host" (one per test session),
simulated replicas in light mode (one process each, short lifetimes), a state dir each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sim import free_port
from tests.support.sshd import sshd_available, start_sshd

SIM_LIFETIME_S = 180


def write_profile(
    directory: Path,
    name: str,
    *,
    port: int | None = None,
    traffic: str = "idle",
    threshold: int = 4,
    tp: int = 2,
    extra: str = "",
    time_scale: float = 20,
    lifetime: float = SIM_LIFETIME_S,
) -> Path:
    """A simulator profile (light mode, time scale 20, bounded lifetime) in ``directory``."""
    path = Path(directory) / f"{name}.toml"
    path.write_text(f'''name = "{name}"
[server]
kind = "sim"
port = {port or free_port()}
tp_size = {tp}
extra_args = ["--decode-log-interval", "5"]
[dynamic]
threshold = {threshold}
[restart]
stop_grace_s = 3
[sim]
light = true
time_scale = {time_scale}
max_lifetime = {lifetime}
traffic = "{traffic}"
{extra}''')
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    why = sshd_available()
    if why:
        pytest.skip(why)
    with start_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def remote_member(sshd, profile: Path, remote_state: Path, **extra) -> dict:
    """A fleet-file member on the test sshd, running this checkout's CLI there."""
    return {
        "host": sshd.host,
        "profile": str(profile),
        "ssh_options": sshd.ssh_options,
        "command": sshd.remote_command,
        "env": sshd.remote_env(remote_state),
        **extra,
    }
