"""What ``Supervisor`` (server_control/supervision/supervisor.py) supervises: the profile it
reads (``SupervisedProfile``: a server's ``Profile`` or the fleet's ``GatewayProfile``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from server_control.config.profile import LaunchSpec


class SupervisedProfile(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def kind(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str: ...

    @property
    def health(self) -> dict[str, Any]: ...

    @property
    def restart(self) -> dict[str, Any]: ...

    @property
    def dynamic(self) -> dict[str, Any]: ...

    @property
    def stop_grace_s(self) -> float: ...

    def launch_spec(self, state_dir: str | Path | None = None, preview: list[str] | None = None) -> LaunchSpec: ...

    def check_port(self) -> None: ...

    def api_key(self, preview: list[str] | None = None) -> str | None: ...

    def admin_api_key(self, preview: list[str] | None = None) -> str | None: ...
