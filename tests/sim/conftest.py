import pytest


@pytest.fixture
def sim(sim_factory):
    """A ready simulator: tp=2, threshold=5, idle traffic, metrics on, time scale 20."""
    return sim_factory("--enable-metrics").wait_ready()
