"""Where a log file's stored chunks begin, in lines: what retention pruned from its head counts too.

A line's number is its number in its file (stream and file generation), counted from the file's
first byte, as an editor would show it. Chunks are stored once per start offset and numbered by
adding up the lines of the chunks before them; once retention has pruned a file's first chunks,
``PrunedLogSpan`` keeps how many lines (and bytes) they held, so the chunks still stored keep
their numbers.
"""

from collections.abc import Iterable

from efficiency.models import PrunedLogSpan

FileKey = tuple[int, str, str]  # (source id, stream, file id)


def pruned_heads(files: Iterable[FileKey]) -> dict[FileKey, tuple[int, int]]:
    """Per file: (the offset up to which retention pruned it, the lines it pruned). Files
    retention never touched are absent."""
    files = set(files)
    if not files:
        return {}
    spans = PrunedLogSpan.objects.filter(
        source_id__in={source for source, _, _ in files}, stream__in={stream for _, stream, _ in files}
    ).values_list("source_id", "stream", "file_id", "end_offset", "line_count")
    return {
        (source, stream, file_id): (end, lines)
        for source, stream, file_id, end, lines in spans
        if (source, stream, file_id) in files
    }
