import pytest

from console.app import SpecConsoleApp
from tests.console.fakes import FakeSession


@pytest.fixture
def fake():
    return FakeSession()


@pytest.fixture
def make_app(fake):
    def make(**kwargs):
        return SpecConsoleApp(fake, **kwargs)

    return make
