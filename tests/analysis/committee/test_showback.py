"""Showback: within / borrowed / unused / lent by hand, the charged + central identity for any
input, and costs in Decimal."""

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.committee.showback import RateCardValue, department_costs, showback


def test_hand_checked_two_departments():
    # One model, 2 hours, 20 GPUs. A guaranteed 8, B guaranteed 4.
    # hour 0: A holds 10 (borrows 2), B holds 1 (3 unused): B lent 2 of its 3.
    # hour 1: A holds 3 (5 unused), B holds 4: nobody borrows, nothing lent.
    result = showback(
        hours=2,
        capacity={"H100": [20, 20]},
        guarantees={("A", "H100"): [8, 8], ("B", "H100"): [4, 4]},
        allocated={("A", "H100"): [10, 3], ("B", "H100"): [1, 4]},
    )
    a, b = result.departments["A"], result.departments["B"]
    assert (a.series("within"), a.series("borrowed"), a.series("unused")) == ([8, 3], [2, 0], [0, 5])
    assert (b.series("within"), b.series("unused"), b.series("lent")) == ([1, 4], [3, 0], [2, 0])
    # charged = guaranteed + borrowed - lent: A 16 + 2, B 8 - 2
    assert (a.charged, b.charged) == (18_000, 6_000)
    # central: 40 capacity - 24 charged = 16 (the unguaranteed, unborrowed pool)
    assert result.central == 16_000
    assert result.charged + result.central == result.capacity


def test_lent_is_proportional_to_unused():
    result = showback(
        hours=1,
        capacity={"A100": [100]},
        guarantees={("A", "A100"): [10], ("B", "A100"): [30], ("C", "A100"): [0]},
        allocated={("A", "A100"): [0], ("B", "A100"): [0], ("C", "A100"): [20]},
    )
    # C borrowed 20 of the 40 unused: A lent 5, B lent 15.
    assert result.departments["A"].total("lent") == 5
    assert result.departments["B"].total("lent") == 15
    assert result.charged + result.central == result.capacity


def test_costs_in_decimal():
    result = showback(
        hours=1,
        capacity={"H100": [10], "T4": [4]},
        guarantees={("A", "H100"): [2]},
        allocated={("A", "H100"): [3], ("A", "T4"): [1]},
    )
    card = RateCardValue(version=1, currency="CNY", rates={"H100": "12.50"}, default_rate="")
    costs, central, unpriced = department_costs(result, card, {"A": 2.0})
    (a,) = costs
    assert a.cost == Decimal("37.50")  # 3 GPU-hours of H100 at 12.50; T4 unpriced
    assert a.cost_per_effective_gpu_hour == Decimal("18.75")
    assert unpriced == ["T4"]
    assert central == Decimal("87.50")  # 7 H100 GPU-hours nobody was charged for


def test_lent_hours_add_up_to_what_was_borrowed_when_the_shares_do_not_divide():
    # Found by the property below: 1 GPU-hour borrowed from unused guarantees of 1 and 2 split
    # 333 + 666 milli-GPU-hours, so one milli-GPU-hour was charged twice and central went to -1.
    result = showback(
        hours=1,
        capacity={"H100": [3]},
        guarantees={("D1", "H100"): [1], ("D2", "H100"): [0], ("D3", "H100"): [2]},
        allocated={("D1", "H100"): [0.0], ("D2", "H100"): [1.0], ("D3", "H100"): [0.0]},
    )
    assert [result.departments[code].lent[0] for code in ("D1", "D3")] == [333, 667]
    assert result.central == 0
    assert result.charged == result.capacity


gpus = st.integers(min_value=0, max_value=64)


@st.composite
def scenarios(draw):
    hours = draw(st.integers(min_value=1, max_value=6))
    models = draw(st.lists(st.sampled_from(["H100", "A100", "T4"]), min_size=1, max_size=3, unique=True))
    codes = draw(st.lists(st.sampled_from(["D1", "D2", "D3", "D4"]), min_size=1, max_size=4, unique=True))
    guarantees, allocated, capacity = {}, {}, {}
    for model in models:
        guarantees.update({(c, model): draw(st.lists(gpus, min_size=hours, max_size=hours)) for c in codes})
        allocated.update(
            {
                (c, model): draw(st.lists(st.floats(0, 64, allow_nan=False), min_size=hours, max_size=hours))
                for c in codes
            }
        )
        capacity[model] = [
            max(sum(guarantees[(c, model)][h] for c in codes), sum(allocated[(c, model)][h] for c in codes))
            + draw(gpus)
            for h in range(hours)
        ]
    return hours, capacity, guarantees, allocated


@given(scenarios())
def test_charged_plus_central_is_capacity(scenario):
    hours, capacity, guarantees, allocated = scenario
    result = showback(hours=hours, capacity=capacity, guarantees=guarantees, allocated=allocated)
    assert result.charged + result.central == result.capacity
    for model, central in result.central_by_model.items():
        assert central >= 0, model  # capacity covers guarantees and allocations here
    for show in result.departments.values():
        for h in range(hours):
            assert show.within[h] + show.unused[h] == show.guarantee[h]
            assert 0 <= show.lent[h] <= show.unused[h]
    borrowed = sum(sum(s.borrowed) for s in result.departments.values())
    lent = sum(sum(s.lent) for s in result.departments.values())
    assert lent <= borrowed
