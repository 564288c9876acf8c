"""Table rows written in Python (``{% node_rows %}``, ``{% idle_rows %}``, ``{% job_usage_rows %}``)
are the markup the template loops they replaced wrote, for any row, in both languages and any
display time zone: same cells, same escaping, same numbers, same links."""

import re
import zoneinfo
from datetime import UTC, datetime, timedelta

from django.template import engines
from django.utils import timezone, translation
from hypothesis import given
from hypothesis import strategies as st

from efficiency.choices import JobState, NodeState
from efficiency.models import Cluster, Department, Job, Node
from efficiency.selectors.usage import IdleAllocation, JobUsage, UsageTotals
from efficiency.templatetags.portal import idle_rows, job_usage_rows, node_rows

# The loop of templates/efficiency/partials/node_table.html before it became {% node_rows %}.
TEMPLATE_LOOP = engines["django"].from_string(
    """{% load i18n portal %}
  {% for node in nodes %}
    <tr>
      <td><a href="{% url 'efficiency:node-detail' node.pk %}">{{ node.hostname }}</a></td>
      <td>{{ node.cluster.name }}</td>
      <td>{{ node.gpu_model }}</td>
      <td class="num">{{ node.gpu_count }}</td>
      <td>{{ node.rdma_capable|yesno:_("yes,no") }}</td>
      <td>{{ node.fault_domain }}</td>
      <td><span class="state state-{{ node.state }}">{{ node.state|node_state_label }}</span></td>
      <td>{{ node.owner_department.name|default:_("Unowned") }}</td>
    </tr>
  {% empty %}
    <tr><td colspan="8">{% translate "No nodes to show." %}</td></tr>
  {% endfor %}"""
)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['<script>alert("x")</script>', "a & b", "it's", '"quoted"', "机柜-3"]
)


@st.composite
def nodes(draw) -> list[Node]:
    made = []
    for pk in range(1, draw(st.integers(0, 6)) + 1):
        node = Node(
            pk=pk * draw(st.integers(1, 10_000)),
            hostname=draw(TEXT),
            gpu_model=draw(TEXT),
            gpu_count=draw(st.integers(0, 16)),
            rdma_capable=draw(st.booleans()),
            fault_domain=draw(TEXT),
            state=draw(st.sampled_from(NodeState.values)),
        )
        node.cluster = Cluster(pk=1, name=draw(TEXT), slug="c")
        owner = draw(st.none() | TEXT)
        node.owner_department = None if owner is None else Department(pk=2, name=owner, code="d")
        made.append(node)
    return made


def _tags_only(html: str) -> str:
    return re.sub(r">\s+<", "><", html.strip())


@given(nodes=nodes(), language=st.sampled_from(["en", "zh-hans"]))
def test_node_rows_are_the_template_loops_markup(nodes, language):
    with translation.override(language):
        assert _tags_only(node_rows(nodes)) == _tags_only(TEMPLATE_LOOP.render({"nodes": nodes}))


# The loops of templates/efficiency/inventory/partials/department_jobs.html before they became
# {% idle_rows %} and {% job_usage_rows %}.
IDLE_LOOP = engines["django"].from_string(
    """{% load i18n portal %}
    {% for idle in idle_allocations %}
      <tr><td><a href="{% url 'efficiency:job-detail' idle.job.pk %}">{{ idle.job.external_id }}</a></td><td>{{ idle.job.name|truncatechars:40 }}</td><td>{{ idle.job.user_name }}</td>
        <td>{{ idle.start|when:"Y-m-d H:i" }}</td><td>{{ idle.end|when:"Y-m-d H:i" }}</td><td class="num">{{ idle.idle_hours }}</td><td class="num">{{ idle.wasted_gpu_hours|floatformat:1 }}</td></tr>
    {% empty %}
      <tr><td colspan="7">{% translate "No idle allocations in this range." %}</td></tr>
    {% endfor %}"""  # noqa: E501
)
USAGE_LOOP = engines["django"].from_string(
    """{% load i18n portal %}
    {% for row in jobs_usage %}
      <tr><td><a href="{% url 'efficiency:job-detail' row.job.pk %}">{{ row.job.external_id }}</a></td><td>{{ row.job.name|truncatechars:40 }}</td><td>{{ row.job.user_name }}</td>
        <td><span class="state state-{{ row.job.state }}">{{ row.job.state|job_state_label }}</span></td><td class="num">{{ row.job.gpus_text }}</td>
        <td class="num">{{ row.gpu_hours|floatformat:1 }}</td><td class="num">{% if row.placed %}{{ row.efficiency|pct }}{% else %}<small class="muted placement-unknown">{% translate "placement unknown" %}</small>{% endif %}</td></tr>
    {% empty %}
      <tr><td colspan="7">{% translate "No jobs held GPUs in this range." %}</td></tr>
    {% endfor %}"""  # noqa: E501
)
# Year 1 and 9998 included: moments a display zone cannot hold are shown in UTC, and say so.
MOMENTS = st.datetimes(datetime(1, 1, 1), datetime(9998, 12, 31), timezones=st.just(UTC))
GPU_SECONDS = st.floats(0, 1e9, allow_nan=False)


@st.composite
def jobs(draw) -> list[Job]:
    return [
        Job(
            pk=pk * draw(st.integers(1, 10_000)),
            external_id=draw(TEXT),
            name=draw(TEXT | st.text(min_size=35, max_size=60)),
            user_name=draw(TEXT),
            state=draw(st.sampled_from(JobState.values)),
            gpu_count=draw(st.integers(0, 64)),
            gpu_milli=draw(st.none() | st.integers(0, 64_000)),
        )
        for pk in range(1, draw(st.integers(0, 5)) + 1)
    ]


@given(
    jobs=jobs(),
    data=st.data(),
    language=st.sampled_from(["en", "zh-hans"]),
    zone=st.sampled_from(["UTC", "Asia/Shanghai", "America/St_Johns"]),
)
def test_job_part_rows_are_the_template_loops_markup(jobs, data, language, zone):
    idle = [
        IdleAllocation(
            job=job,
            start=(start := data.draw(MOMENTS)),
            end=start + timedelta(hours=data.draw(st.integers(0, 500))),
            idle_hours=data.draw(st.integers(0, 10**6)),
            wasted_gpu_hours=data.draw(st.floats(0, 1e7, allow_nan=False)),
        )
        for job in jobs
    ]
    usage = [
        JobUsage(
            job=job,
            totals=UsageTotals(allocated_gpu_s=data.draw(GPU_SECONDS), busy_gpu_s=data.draw(GPU_SECONDS)),
            placed=data.draw(st.booleans()),
        )
        for job in jobs
    ]
    with translation.override(language), timezone.override(zoneinfo.ZoneInfo(zone)):
        assert _tags_only(idle_rows(idle)) == _tags_only(IDLE_LOOP.render({"idle_allocations": idle}))
        assert _tags_only(job_usage_rows(usage)) == _tags_only(USAGE_LOOP.render({"jobs_usage": usage}))
