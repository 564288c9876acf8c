"""GPU shares: a job may hold part of a GPU (a GPU-sharing pod asks for 500 milli-GPUs).

Counts of GPUs are kept in thousandths (``gpu_milli``) so that sums stay exact; this module
turns them into the numbers pages show. Plain Python: models, selectors and template tags use it.
"""

MILLI_PER_GPU = 1000


def gpus_text(gpu_milli: int) -> str:
    """Thousandths of GPUs as a number of GPUs, without trailing zeros: 8000 → "8", 500 → "0.5"."""
    whole, rest = divmod(gpu_milli, MILLI_PER_GPU)
    if not rest:
        return str(whole)
    return f"{whole}.{rest:03d}".rstrip("0")
