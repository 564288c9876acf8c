"""Data as literal text in a Markdown document (the fault report attached to tickets).

A job's name, a log line or a close reason is written by users; pasted raw into Markdown, it
could add links, images, raw HTML, headings or break out of its code span.
"""

import re

# CommonMark lets a backslash escape any ASCII punctuation; these are the ones that start markup
# inside a line (every value is written inline, after its label, with its newlines folded).
INLINE_MARKUP = re.compile(r"([\\`*_\[\]<>&|~!#])")
LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


def markdown_text(value: object) -> str:
    """``value`` as inline Markdown text that renders exactly as written, on one line."""
    return INLINE_MARKUP.sub(r"\\\1", LINE_BREAKS.sub(" ", str(value)))


def markdown_code(value: object) -> str:
    """``value`` as an inline code span: fenced with more backticks than any run inside it."""
    text = LINE_BREAKS.sub(" ", str(value))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"
