"""Which evidence is trusted for what (efficiency.analysis.faults.trust): pure rules, no database."""

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.faults.trust import (
    NODE_NOT_OF_JOB,
    NODE_WITHOUT_JOB,
    job_output_node,
    kernel_log_node,
    source_has_kernel_logs,
)

names = st.sampled_from(["gpu-a01", "gpu-a02", "gpu-b01", "", "kern", "../gpu-a01", "gpu-a01.log"])


def test_a_kernel_log_is_kern_host_log_of_that_host_with_no_job():
    assert kernel_log_node(stream="kern/gpu-a01.log", node="gpu-a01", job="") == "gpu-a01"


def test_a_kernel_stream_that_names_a_job_another_host_or_no_host_is_job_output():
    assert kernel_log_node(stream="kern/gpu-a01.log", node="gpu-a01", job="8812") is None
    assert kernel_log_node(stream="kern/gpu-a01.log", node="gpu-b01", job="") is None
    assert kernel_log_node(stream="kern/gpu-a01.log", node="", job="") is None
    assert kernel_log_node(stream="8812/kern/gpu-a01.log", node="gpu-a01", job="") is None
    assert kernel_log_node(stream="kern/x/gpu-a01.log", node="gpu-a01", job="") is None


def test_only_log_files_and_push_sources_declared_so_carry_kernel_logs():
    assert source_has_kernel_logs(kind="log_files", config={})
    assert source_has_kernel_logs(kind="log_push", config={"kernel_logs": True})
    assert not source_has_kernel_logs(kind="log_push", config={})
    assert not source_has_kernel_logs(kind="log_push", config={"kernel_logs": "yes"})


def test_job_output_keeps_a_node_of_its_job_and_refuses_others_with_the_reason():
    nodes = frozenset({"gpu-a01", "gpu-a02"})
    assert job_output_node(claims=["gpu-a01", ""], job_nodes=nodes).node == "gpu-a01"
    assert job_output_node(claims=["gpu-a01", "gpu-a02"], job_nodes=nodes).node == "gpu-a02"
    refused = job_output_node(claims=["gpu-a01", "gpu-b01"], job_nodes=nodes)
    assert (refused.node, refused.refused, refused.refused_name) == (None, NODE_NOT_OF_JOB, "gpu-b01")
    assert job_output_node(claims=["gpu-a01"], job_nodes=None).refused == NODE_WITHOUT_JOB
    assert job_output_node(claims=["", ""], job_nodes=None) == job_output_node(claims=[], job_nodes=nodes)


@given(st.lists(names, max_size=3), st.one_of(st.none(), st.frozensets(names)))
def test_job_output_never_keeps_a_node_outside_its_jobs_nodes(claims, job_nodes):
    claim = job_output_node(claims=claims, job_nodes=job_nodes)
    if claim.node is not None:
        assert job_nodes is not None
        assert all(name in job_nodes for name in claims if name)
    assert (claim.refused is None) or claim.node is None
