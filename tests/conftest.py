import pytest

from dlmeval.data.paths import data_dir


@pytest.fixture(scope="session")
def data_root():
    """The shared data directory (``../shared/data`` beside the checkout, or DLMEVAL_DATA)."""
    return data_dir()
