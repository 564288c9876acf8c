"""The review pack's charts, drawn from the sealed content."""

from efficiency.analysis.committee.copy import department_copy
from efficiency.charts.committee import pack_charts
from tests.views.committee_content import pack_content

KEYS = {"waterfall", "states", "heatmap", "node_classes", "dept:vision", "dept:radar", "scatter", "pareto",
        "phases", "incident_pareto", "ageing", "showback"}  # fmt: skip


def test_every_chart_of_a_whole_pack_is_drawn_under_its_key():
    assert set(pack_charts(pack_content())) == KEYS


def test_the_states_are_a_100_percent_stack_and_the_waterfall_ends_at_busy():
    content = pack_content()
    charts = pack_charts(content)
    assert {trace.groupnorm for trace in charts["states"].data} == {"percent"}
    waterfall = charts["waterfall"].data[0]
    assert list(waterfall.measure) == ["absolute", "relative", "relative", "relative", "total"]
    totals = content["cluster_section"]["totals"]
    assert sum(waterfall.y[:-1]) == totals["busy"]


def test_a_department_chart_steps_its_guarantee_line():
    figure = pack_charts(pack_content())["dept:vision"]
    guarantee = figure.data[-1]
    assert guarantee.line.shape == "hv"
    assert guarantee.stackgroup is None
    assert [trace.stackgroup for trace in figure.data[:-1]] == ["gpus"] * 3


def test_a_head_copy_draws_only_their_department():
    charts = pack_charts(department_copy(pack_content(), ["vision"]))
    assert set(charts) == {"dept:vision", "scatter", "pareto", "showback"}
    assert "Radar" not in charts["scatter"].to_json()


def test_unavailable_sections_draw_nothing_and_names_are_not_markup():
    content = pack_content([("x", "<a href='https://evil'>X</a>", 8)], unavailable=("reliability", "tickets"))
    charts = pack_charts(content)
    assert "phases" not in charts
    assert "ageing" not in charts
    assert "<a href" not in charts["showback"].to_json()
