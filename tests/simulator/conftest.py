"""A week of the reference scenario (64 nodes), simulated once per test session."""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

START = datetime(2024, 5, 6, tzinfo=UTC)  # a Monday
WEEK_END = START + timedelta(days=7)
SEED = 7


def make_simulator(seed: int = SEED, **options: float) -> ClusterSimulator:
    """A fresh simulator of the 64-node reference scenario."""
    return ClusterSimulator(reference_nodes(), seed=seed, start=START, **options)


@pytest.fixture(scope="session")
def sim() -> ClusterSimulator:
    simulator = make_simulator()
    simulator.advance_to(WEEK_END)
    return simulator
