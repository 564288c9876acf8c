import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.stats import percentile


def test_percentile_interpolates_between_ranks():
    # Ranks 0..4 of [10, 20, 30, 40, 50]: the 75th percentile sits at rank 3 exactly,
    # the 90th at rank 3.6, 40 + 0.6 x 10.
    assert percentile([50, 10, 40, 20, 30], 75) == 40
    assert percentile([50, 10, 40, 20, 30], 90) == pytest.approx(46)
    assert percentile([7], 95) == 7
    assert percentile([], 50) is None


def test_percentile_rejects_a_share_outside_0_to_100():
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1, 2], 101)


@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=2, max_size=60),
    st.integers(min_value=1, max_value=99),
)
def test_percentile_equals_statistics_quantiles_inclusive(values, pct):
    expected = statistics.quantiles(values, n=100, method="inclusive")[pct - 1]
    assert percentile(values, pct) == pytest.approx(expected, rel=1e-9, abs=1e-6)
