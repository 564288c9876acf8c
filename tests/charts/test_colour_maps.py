"""Colour and marker maps keyed by an enum cover exactly that enum: a new category, severity or
node class gets its own colour on purpose, not the fallback by accident."""

from efficiency.charts.faults import (
    CATEGORY_COLORS,
    SEVERITY_ORDER,
    SEVERITY_SIZES,
    SEVERITY_SYMBOLS,
)
from efficiency.charts.usage import NODE_CLASS_COLORS, NODE_CLASS_ORDER
from efficiency.choices import FaultCategory, NodeClass, Severity


def test_every_fault_category_has_a_colour_and_no_colour_lacks_a_category():
    assert set(CATEGORY_COLORS) == set(FaultCategory.values)


def test_every_severity_has_a_marker_shape_a_size_and_a_place_in_the_legend():
    assert set(SEVERITY_SYMBOLS) == set(Severity.values)
    assert set(SEVERITY_SIZES) == set(Severity.values)
    assert sorted(SEVERITY_ORDER) == sorted(Severity.values)
    assert len(set(SEVERITY_SYMBOLS.values())) == len(SEVERITY_SYMBOLS)


def test_every_node_class_but_unknown_has_a_colour_and_a_place_in_the_chart():
    # A node without samples is "unknown": it is drawn after the classes, in the fallback colour.
    classified = set(NodeClass.values) - {NodeClass.UNKNOWN}
    assert set(NODE_CLASS_COLORS) == classified
    assert sorted(NODE_CLASS_ORDER) == sorted(classified)
