"""Fixtures shared across test folders."""

import pytest

from tests.support.sim import start_sim


@pytest.fixture
def sim_factory(tmp_path):
    """start_sim(...) with every started simulator stopped (by its group) at teardown."""
    handles = []

    def factory(*extra_args, **kwargs):
        handle = start_sim(tmp_path, *extra_args, **kwargs)
        handles.append(handle)
        return handle

    yield factory
    for handle in handles:
        handle.stop()
