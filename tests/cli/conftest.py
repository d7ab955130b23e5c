"""The command tests use the run fixtures (private state dir, profiles, process groups
stopped at teardown) and the console's fake session."""

from tests.console.conftest import fake  # noqa: F401 (fixture)
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)
from tests.session.conftest import sim_profile  # noqa: F401 (fixture)
