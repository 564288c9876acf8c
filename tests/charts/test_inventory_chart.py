"""Chart builders are pure: no database, no Django."""

from efficiency.charts.inventory import gpu_ownership_figure
from efficiency.selectors.inventory import OwnershipRow


def test_one_stacked_trace_per_gpu_model_with_shared_pool_labelled():
    rows = [
        OwnershipRow("BEV", "H100", 16),
        OwnershipRow("BEV", "A100", 8),
        OwnershipRow("Mapping", "A100", 24),
        OwnershipRow(None, "H100", 40),
    ]
    figure = gpu_ownership_figure(rows, title="GPUs", shared_pool_label="Shared pool", axis_label="GPUs")
    traces = {trace.name: dict(zip(trace.x, trace.y, strict=True)) for trace in figure.data}
    assert traces == {
        "A100": {"BEV": 8, "Mapping": 24, "Shared pool": 0},
        "H100": {"BEV": 16, "Mapping": 0, "Shared pool": 40},
    }
    assert figure.layout.barmode == "stack"
    assert figure.layout.title.text == "GPUs"


def test_no_rows_gives_an_empty_figure_not_an_error():
    figure = gpu_ownership_figure([], title="GPUs", shared_pool_label="Shared pool", axis_label="GPUs")
    assert len(figure.data) == 0
