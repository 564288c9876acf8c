"""Seconds for ``run_backtest`` of one 14-day cycle on 10,000 GPUs, beside the 10 s limit.

Generates a seeded synthetic cycle: 8,000 H100 + 2,000 A100, 100 departments whose guarantees add
up to 80% of each model, jobs of mostly 1/2/4/8 GPUs with some multi-node ones of 16-256, lognormal
run times (median about an hour before scaling, tail to days), a diurnal arrival pattern, a cluster
about 60% busy at window start, and run times scaled so the offered load is 0.9 of capacity. Times
the "proposal" policy (guarantee + shared pool, borrowing on) at 12,500 / 25,000 / 50,000 jobs and
the largest size, then the "fixed" partition at the largest size for contrast. No database needed:

    .venv/bin/python bench/backtest.py [--jobs 100000] [--seed 7]
"""

import argparse
import math
import random
import sys
import time
from pathlib import Path

# Run as a script from the repository root or from bench/: make the project importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from efficiency.analysis.backtest import BacktestJob, Policy, QueuePolicy, run_backtest

DAY_S = 86_400.0
START_S = 1_793_491_200.0  # 2026-11-02 00:00 UTC
END_S = START_S + 14 * DAY_S
CAPACITY = {"H100": 8_000, "A100": 2_000}
DEPARTMENTS = [f"d{n:03d}" for n in range(100)]
GUARANTEED_SHARE = 0.8
OFFERED_LOAD = 0.9
LIMIT_S = 10.0
SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
SIZE_WEIGHTS = [0.35, 0.20, 0.15, 0.22, 0.04, 0.02, 0.01, 0.007, 0.003]
BUSY_AT_START = 0.6


def split(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights``, largest remainders first, adding up exactly."""
    shares = [total * w / sum(weights) for w in weights]
    counts = [math.floor(share) for share in shares]
    by_remainder = sorted(range(len(weights)), key=lambda n: counts[n] - shares[n])
    for n in by_remainder[: total - sum(counts)]:
        counts[n] += 1
    return counts


def proposal_policy(rng: random.Random) -> Policy:
    """Guarantees for 100 departments of uneven size, 80% of each model; borrowing unlimited."""
    weights = [rng.lognormvariate(0, 0.8) for _ in DEPARTMENTS]
    quotas = {}
    for model, capacity in CAPACITY.items():
        for department, guaranteed in zip(
            DEPARTMENTS, split(round(capacity * GUARANTEED_SHARE), weights), strict=True
        ):
            quotas[(department, model)] = QueuePolicy(guaranteed_gpus=guaranteed)
    return Policy(key="proposal", capacity=dict(CAPACITY), quotas=quotas, borrowing=True)


def fixed_policy(proposal: Policy) -> Policy:
    """Every GPU fixed to a department (the proposal's guarantees scaled up to the capacity)."""
    quotas = {}
    for model, capacity in CAPACITY.items():
        weights = [proposal.quotas[(d, model)].guaranteed_gpus + 1e-9 for d in DEPARTMENTS]
        for department, guaranteed in zip(DEPARTMENTS, split(capacity, weights), strict=True):
            quotas[(department, model)] = QueuePolicy(guaranteed_gpus=guaranteed)
    return Policy(key="fixed", capacity=dict(CAPACITY), quotas=quotas, borrowing=False)


def diurnal_time(rng: random.Random) -> float:
    """An arrival time in the window, twice as likely at 15:00 as at 03:00."""
    while True:
        t = rng.uniform(START_S, END_S)
        hour = (t - START_S) % DAY_S / 3600
        if rng.random() * 1.5 <= 1 + 0.5 * math.sin(2 * math.pi * (hour - 9) / 24):
            return t


def synthetic_cycle(job_count: int, policy: Policy, seed: int) -> tuple[list[BacktestJob], float]:
    """``job_count`` jobs of one cycle and the factor their run times were scaled by.

    ``policy`` is today's fixed partition: no department submits a job larger than its share
    (rounded down to a power of two), since today it could never run.
    """
    rng = random.Random(seed)
    # Demand follows the guarantees only roughly: some departments are hot, some idle.
    demand = {
        model: [
            (policy.quotas[(d, model)].guaranteed_gpus + 1) * rng.lognormvariate(0, 0.7) for d in DEPARTMENTS
        ]
        for model in CAPACITY
    }
    models = list(CAPACITY)
    model_weights = [CAPACITY[m] for m in models]
    largest = {
        lane: 2 ** max(0, quota.guaranteed_gpus.bit_length() - 1) for lane, quota in policy.quotas.items()
    }

    def size(department: str, model: str) -> int:
        return min(rng.choices(SIZES, SIZE_WEIGHTS)[0], largest[(department, model)])

    def raw_duration_s() -> float:
        return min(rng.lognormvariate(math.log(3600), 1.5), 7 * DAY_S)

    running = []
    for model in models:
        held = 0
        while held < BUSY_AT_START * CAPACITY[model]:
            started_s = START_S - rng.uniform(0, DAY_S)
            department = rng.choices(DEPARTMENTS, demand[model])[0]
            gpus = size(department, model)
            duration_s = START_S - started_s + raw_duration_s()
            running.append(
                BacktestJob(
                    department, model, gpus, started_s - 60, duration_s, started_s, rng.uniform(0.1, 0.9)
                )
            )
            held += gpus
    arriving = []
    for _ in range(max(0, job_count - len(running))):
        model = rng.choices(models, model_weights)[0]
        department = rng.choices(DEPARTMENTS, demand[model])[0]
        gpus = size(department, model)
        # One job in a hundred was already waiting at window start.
        submit_s = START_S - rng.uniform(0, 6 * 3600) if rng.random() < 0.01 else diurnal_time(rng)
        arriving.append((department, model, gpus, submit_s, raw_duration_s(), rng.uniform(0.1, 0.9)))
    offered_gpu_s = sum(gpus * duration for _, _, gpus, _, duration, _ in arriving)
    scale = OFFERED_LOAD * sum(CAPACITY.values()) * (END_S - START_S) / offered_gpu_s
    jobs = running + [
        BacktestJob(department, model, gpus, submit_s, duration * scale, None, busy)
        for department, model, gpus, submit_s, duration, busy in arriving
    ]
    rng.shuffle(jobs)
    return jobs, scale


def main() -> None:
    """Time the proposal policy at four sizes and the fixed partition at the largest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    proposal = proposal_policy(random.Random(args.seed))
    fixed = fixed_policy(proposal)
    sizes = [args.jobs // 8, args.jobs // 4, args.jobs // 2, args.jobs]
    print(
        f"cycle: 14 days, {sum(CAPACITY.values()):,} GPUs "
        f"({', '.join(f'{c:,} {m}' for m, c in CAPACITY.items())}), "
        f"{len(DEPARTMENTS)} departments, guarantees {GUARANTEED_SHARE:.0%}, offered load {OFFERED_LOAD:.0%}"
    )
    previous = None
    largest = None
    for size in sizes:
        jobs, scale = synthetic_cycle(size, fixed, args.seed)
        started = time.perf_counter()
        result = run_backtest(jobs, proposal, start_s=START_S, end_s=END_S)
        seconds = time.perf_counter() - started
        print(
            f"proposal {size:>9,} jobs in {seconds:6.2f} s = {size / seconds:>9,.0f} jobs/s   "
            f"allocation {result.allocation_rate:6.1%}  wait p50 {result.wait_p50_s / 60:7.1f} min  "
            f"p95 {result.wait_p95_s / 3600:6.1f} h  waiting at end {result.jobs_waiting_at_end:,}  "
            f"(run times x{scale:.2f})"
        )
        if previous is not None:
            print(f"    time x{seconds / previous[1]:.2f} for jobs x{size / previous[0]:.0f}")
        previous = (size, seconds)
        largest = (jobs, seconds)
    jobs, seconds = largest
    print(f"{args.jobs:,} jobs: {seconds:.2f} s = {seconds / LIMIT_S:.2f} of the {LIMIT_S:.0f} s limit")

    started = time.perf_counter()
    result = run_backtest(jobs, fixed, start_s=START_S, end_s=END_S)
    seconds = time.perf_counter() - started
    print(
        f"fixed    {args.jobs:>9,} jobs in {seconds:6.2f} s   allocation {result.allocation_rate:6.1%}  "
        f"wait p50 {result.wait_p50_s / 60:7.1f} min  p95 {result.wait_p95_s / 3600:6.1f} h  "
        f"waiting at end {result.jobs_waiting_at_end:,}"
    )


if __name__ == "__main__":
    main()
