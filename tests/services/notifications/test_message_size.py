"""Whatever the titles, a chat message stays within the vendor's size limit (WeCom: 4096 bytes)."""

from hypothesis import given
from hypothesis import strategies as st

from efficiency.services.notifications.channels import CHAT_MAX_BYTES, markdown_text, plain_text, slack_text
from efficiency.services.notifications.messages import Item, Message, clip

titles = st.lists(st.text(min_size=0, max_size=400), min_size=1, max_size=60)


def _message(texts: list[str]) -> Message:
    items = [
        Item(
            headline=clip(f"Ticket #{i}: {text}"),
            details=[clip(f"Department: {text}")],
            url=f"https://p/t/{i}/",
        )
        for i, text in enumerate(texts)
    ]
    if len(items) == 1:
        return Message(subject=items[0].headline, items=items)
    return Message(subject=f"Digest: {len(items)}", items=items[:20], more=max(0, len(items) - 20))


@given(titles)
def test_every_chat_rendering_fits_the_limit_and_counts_what_it_leaves_out(texts):
    message = _message(texts)
    for render in (markdown_text, slack_text, plain_text):
        text = render(message)
        assert len(text.encode()) <= CHAT_MAX_BYTES
        if message.more:
            assert "more: see the portal." in text


def test_long_chinese_titles_fill_a_digest_up_to_the_limit():
    message = _message(["数据处理部门的训练任务未启用 NCCL RDMA 导致训练速度减半" * 10] * 200)
    text = markdown_text(message)
    assert 3000 < len(text.encode()) <= CHAT_MAX_BYTES
    assert text.endswith("more: see the portal.")
