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


@pytest.fixture
def sim(sim_factory):
    """A ready simulator: tp=2, threshold=5, idle traffic, metrics on, time scale 20."""
    return sim_factory("--enable-metrics").wait_ready()
