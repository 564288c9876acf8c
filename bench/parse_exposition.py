"""Samples per second of ``parse_exposition`` beside prometheus_client's parser, same text.

Generates one dcgm-exporter style ``/metrics`` page of about 500k lines (HELP/TYPE per metric,
then one line per GPU or MIG instance, labels in the exporter's order) and times one run of each
parser over it. No database needed:

    .venv/bin/python bench/parse_exposition.py [--lines 500000]
"""

import argparse
import sys
import time
from pathlib import Path

# Run as a script from the repository root or from bench/: make the project importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client.parser import text_string_to_metric_families

from efficiency.collectors.exposition import parse_exposition

METRICS = [
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda i: str(1410 - i % 300)),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda i: "1593"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", lambda i: str(40 + i % 30)),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda i: str(35 + i % 40)),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda i: f"{60 + (i * 7.31) % 600:.6f}"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda i: str(i % 101)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", lambda i: str(i % 37)),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda i: str(81000 - i % 80000)),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda i: str(i % 80000)),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", lambda i: "0"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
     lambda i: f"{(i % 1000) / 1000:.6f}"),
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.",
     lambda i: f"{(i % 997) / 997:.6f}"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active.",
     lambda i: f"{(i % 991) / 991:.6f}"),
]  # fmt: skip


def dcgm_page(target_lines: int) -> str:
    """A dcgm-exporter page with about ``target_lines`` lines (8 GPUs per host, pods on half)."""
    gpus = max(1, (target_lines - 2 * len(METRICS)) // len(METRICS))
    label_sets = []
    for n in range(gpus):
        host, gpu = divmod(n, 8)
        pod = (
            f',container="trainer",namespace="dept-{host % 9}",pod="train-{host}-{gpu}"'
            if n % 2
            else ',container="",namespace="",pod=""'
        )
        label_sets.append(
            f'gpu="{gpu}",UUID="GPU-{n:08x}-13cc-013a-d88f-2bcf5ae8bc77",'
            f'pci_bus_id="00000000:{gpu + 0x1A:02X}:00.0",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-{host:05d}",'
            f'DCGM_FI_DRIVER_VERSION="535.129.03"{pod}'
        )
    lines = []
    for name, help_text, value in METRICS:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{{{labels}}} {value(i)}" for i, labels in enumerate(label_sets))
    return "\n".join(lines) + "\n"


def main() -> None:
    """Time both parsers once over the same page and print the figures and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=500_000)
    args = parser.parse_args()

    text = dcgm_page(args.lines)
    print(f"page: {text.count(chr(10)):,} lines, {len(text) / 1e6:.1f} MB")

    started = time.perf_counter()
    ours = parse_exposition(text)
    ours_s = time.perf_counter() - started

    started = time.perf_counter()
    reference_count = sum(len(family.samples) for family in text_string_to_metric_families(text))
    reference_s = time.perf_counter() - started

    if len(ours.records) != reference_count or ours.rejected:
        raise SystemExit(f"mismatch: ours {len(ours.records)} (+{len(ours.rejected)} rejected), "
                         f"prometheus_client {reference_count}")  # fmt: skip
    ours_rate = len(ours.records) / ours_s
    reference_rate = reference_count / reference_s
    for label, count, seconds, rate in [
        ("parse_exposition", len(ours.records), ours_s, ours_rate),
        ("prometheus_client", reference_count, reference_s, reference_rate),
    ]:
        print(f"{label + ':':<19} {count:>9,} samples in {seconds:6.2f} s = {rate:>11,.0f}/s")
    print(f"ratio: {ours_rate / reference_rate:.1f}x")


if __name__ == "__main__":
    main()
