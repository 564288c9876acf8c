"""The node table's rows written in Python (``{% node_rows %}``) are the markup the template loop
they replaced wrote, for any node, in both languages: same cells, same escaping, same links."""

import re

from django.template import engines
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st

from efficiency.choices import NodeState
from efficiency.models import Cluster, Department, Node
from efficiency.templatetags.portal import node_rows

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
