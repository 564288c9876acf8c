"""Backtest of quota scheduling policies: one cycle's real job demand replayed through a quota scheduler.

Each policy gives every GPU model a capacity and every (department queue, GPU model) a guaranteed
number of GPUs and, optionally, a limit on what it may borrow. The simulation replays the same jobs
(arrival, GPUs, run time, department, model) under each policy, so the figures differ only by policy.

What is simulated, and so what the numbers mean:

1. The shared pool of a GPU model is its capacity minus the guarantees of that model. A policy that
   guarantees more than the capacity is rejected (``ValueError``).
2. Each (queue, GPU model) is its own FIFO, ordered by submit time (ties: input order). The order is
   strict, as Kueue's StrictFIFO: only the head may start, and a head that cannot start blocks the
   jobs behind it in the same queue, never those of another queue.
3. A head asking for g GPUs starts when the queue's usage U plus g stays within its guarantee G. When
   the policy allows borrowing it may also start when the GPUs it adds above the guarantee,
   max(0, U + g - G) - max(0, U - G), fit in the free shared pool and the queue's borrowed GPUs,
   max(0, U + g - G), stay within its borrowing limit (no limit: the whole shared pool).
4. Guaranteed GPUs are never lent to other queues, so no preemption is needed and none is simulated:
   a job runs to completion once started. Lending idle guarantees and reclaiming them by preemption
   would raise allocation further; that is not modelled.
5. When several queues' heads compete for the shared pool at one instant, the oldest head (submit
   time, then input order) goes first; a head that does not fit does not stop a younger head of
   another queue from borrowing what is left.
6. At one instant, completions are processed first, then arrivals, then give-ups (below), and all
   before scheduling.
7. GPUs are counted, not placed on nodes: there is no fragmentation, so waits are a lower bound, the
   same way for every policy.
8. Jobs already running at window start (``started_s`` before it) hold their GPUs from the window
   start to ``started_s + duration_s`` under every policy, whatever the quota. They count in their
   queue's usage and may exceed its guarantee (counted as borrowed) and even the shared pool, in
   which case nothing borrows that model until enough of them finish. Jobs submitted before the
   window and not running then are waiting at its start, and their wait counts from the start.
   Jobs submitted at or after the window end, or that finished before it started, are outside it.
   Jobs of a GPU model the policy has no capacity for, or asking for no GPUs, are skipped and
   counted. A job larger than its queue could ever get simply waits: it is unmet demand.
9. The simulation stops at the window end; jobs still waiting then count as waiting at end, and
   their wait up to the end is included in the wait percentiles (censored), so that a starved queue
   does not look good.
10. A job whose user cancelled it before it started (in reality) has a ``patience_s``: how long it
   was left waiting. In the replay it leaves its queue at ``submit_s + patience_s`` unless it has
   started by then — under a policy that starts it sooner, it runs. One that leaves counts as
   cancelled, with its wait (its patience) in the wait percentiles and unmet demand; one whose
   patience ran out before the window start is outside the window.

Allocation rate = allocated / capacity GPU-seconds inside the window; utilization = busy / capacity,
busy being allocated times the job's measured activity share. Times are epoch seconds.
"""

import heapq
import math
import statistics
from bisect import insort
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from efficiency.analysis.stats import percentile_sorted

HOUR_S = 3600.0
# GPU counts are whole or a share in thousandths (GPU sharing): sums of shares are rounded to this
# many decimals, so that 0.1 + 0.2 GPUs fit where 0.3 are free. Whole counts stay ints.
_GPU_DIGITS = 6


@dataclass(frozen=True, slots=True)
class BacktestJob:
    """One job of the cycle as the backtest replays it."""

    queue: str  # department code
    gpu_model: str
    gpus: float  # whole GPUs, or a share of one (0.5: half of a shared GPU)
    submit_s: float  # epoch seconds; before window start means it was already waiting (or running)
    duration_s: float  # run time once started
    # Actual start, used only when before the window start: such a job was already running and
    # keeps its GPUs from window start until started_s + duration_s under every policy.
    started_s: float | None = None
    busy_fraction: float | None = None  # measured activity share (0-1) of its allocated time
    # How long its user let it wait before cancelling it; None: it was never cancelled waiting.
    patience_s: float | None = None


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    guaranteed_gpus: int
    borrowing_limit_gpus: int | None = None  # None: may borrow up to the whole shared pool


@dataclass(frozen=True)
class Policy:
    """Capacity per GPU model and quota per (queue, GPU model); an absent quota guarantees 0."""

    key: str  # "fixed", "current", "proposal"
    capacity: dict[str, int]
    quotas: dict[tuple[str, str], QueuePolicy]
    borrowing: bool = True


@dataclass(frozen=True, slots=True)
class QueueResult:
    """One department's figures, over all its GPU models.

    ``jobs`` = ``running_at_start`` + ``started`` + ``waiting_at_end`` + ``cancelled``.
    """

    queue: str
    jobs: int
    started: int
    waiting_at_end: int
    wait_p50_s: float | None
    wait_p95_s: float | None
    allocated_gpu_hours: float
    borrowed_gpu_hours: float  # GPU-time above the guarantee, summed over the queue's models
    unmet_gpu_hours: float
    running_at_start: int = 0
    cancelled: int = 0  # left the queue when their user's patience ran out


@dataclass(frozen=True)
class BacktestResult:
    """One policy's figures over the window.

    ``jobs_total`` = ``jobs_running_at_start`` + ``jobs_started`` + ``jobs_waiting_at_end`` +
    ``jobs_cancelled``;
    skipped jobs and jobs outside the window are counted apart. ``starts`` (only when asked for)
    holds, per input job in input order, its start in epoch seconds: the simulated one, or
    ``started_s`` for a job already running at window start; ``None`` for a job that did not
    start, was skipped or lies outside the window.
    """

    key: str
    capacity_gpu_s: float
    allocated_gpu_s: float
    busy_gpu_s: float
    allocation_rate: float
    utilization: float
    wait_p50_s: float | None
    wait_p95_s: float | None
    unmet_gpu_hours: float
    jobs_total: int
    jobs_started: int
    jobs_waiting_at_end: int
    skipped_jobs: int
    queues: dict[str, QueueResult]
    hourly_allocated_gpus: list[float]
    jobs_running_at_start: int = 0
    jobs_outside_window: int = 0
    shared_pool_gpus: dict[str, int] | None = None
    starts: tuple[float | None, ...] | None = None
    jobs_cancelled: int = 0


class JobHistory(Protocol):
    """One job of the window as the scheduler recorded it (``selectors.quotas.JobRow`` is one)."""

    department: str
    gpu_model: str
    gpus: float
    submit_s: float
    start_s: float | None
    end_s: float | None
    busy_fraction: float | None


def shared_pools(policy: Policy) -> dict[str, int]:
    """GPUs of each model left for borrowing once every guarantee of that model is set aside."""
    guaranteed: dict[str, int] = {}
    for (queue, model), quota in policy.quotas.items():
        if quota.guaranteed_gpus < 0:
            raise ValueError(f"{policy.key}: negative guarantee for {queue}/{model}")
        if quota.borrowing_limit_gpus is not None and quota.borrowing_limit_gpus < 0:
            raise ValueError(f"{policy.key}: negative borrowing limit for {queue}/{model}")
        guaranteed[model] = guaranteed.get(model, 0) + quota.guaranteed_gpus
    pools = dict(policy.capacity)
    for model, total in guaranteed.items():
        capacity = policy.capacity.get(model, 0)
        if total > capacity:
            raise ValueError(
                f"{policy.key}: guarantees for {model} add up to {total} GPUs, "
                f"more than its capacity of {capacity}"
            )
        if model in pools:
            pools[model] = capacity - total
    return pools


class _Lane:
    """The FIFO and usage of one (queue, GPU model)."""

    __slots__ = (
        "borrowed_gpu_s",
        "fifo",
        "guaranteed",
        "last_s",
        "limit",
        "model",
        "queue",
        "used",
        "version",
    )

    def __init__(self, queue: str, model: str, guaranteed: int, limit: float) -> None:
        self.queue = queue
        self.model = model
        self.guaranteed = guaranteed
        self.limit = limit
        self.used = 0
        self.fifo: deque[int] = deque()  # ranks of waiting jobs, oldest first
        # Bumped whenever the head or the usage changes: heap entries carrying an older version
        # are stale and skipped when popped.
        self.version = 0
        self.borrowed_gpu_s = 0.0
        self.last_s = 0.0


class _Model:
    """Scheduling state of one GPU model: free shared pool, heads waiting for it, heads to try."""

    __slots__ = ("buckets", "candidates", "needs", "pool_free", "pool_grew")

    def __init__(self, pool_free: int) -> None:
        self.pool_free = pool_free
        self.pool_grew = False
        # Heads to evaluate at this instant: (rank, version, lane).
        self.candidates: list[tuple[int, int, _Lane]] = []
        # Heads that fit their limit but not the free pool, by the pool GPUs they need, each a heap
        # by rank; ``needs`` lists the keys ascending so one instant looks only at needs <= free.
        self.buckets: dict[int, list[tuple[int, int, _Lane]]] = {}
        self.needs: list[int] = []


class _Tally:
    __slots__ = (
        "allocated_gpu_s",
        "cancelled",
        "jobs",
        "running_at_start",
        "started",
        "unmet_gpu_s",
        "waiting",
        "waits",
    )

    def __init__(self) -> None:
        self.cancelled = 0
        self.jobs = 0
        self.running_at_start = 0
        self.started = 0
        self.waiting = 0
        self.waits: list[float] = []
        self.allocated_gpu_s = 0.0
        self.unmet_gpu_s = 0.0


class _Replay:
    """One policy's replay of the jobs over the window: the scheduler's state and one method per step.

    ``run`` admits the jobs (running at the start, queued, skipped or outside the window), then
    advances from one event instant to the next: jobs finish, jobs arrive, users give up, and each
    GPU model starts what fits (guarantee first, then borrowing from the shared pool). GPU-seconds
    are accounted per hour as jobs start, and ``summarise`` turns the state into the result.
    The methods that run once per job or per instant bind what they use to locals first: attribute
    lookups in their loops would slow the replay of a large cycle down measurably.
    """

    __slots__ = (
        "allocated_gpu_s",
        "arrival_of",
        "borrowing",
        "busy_gpu_s",
        "cancelled_count",
        "capacity",
        "completions",
        "count",
        "default_busy_fraction",
        "duration_of",
        "end_s",
        "give_ups",
        "gpus_of",
        "hour_count",
        "hour_gpu_s",
        "hour_steps",
        "jobs",
        "key",
        "lane_of",
        "lanes",
        "model_states",
        "models",
        "outside",
        "pools",
        "queued",
        "quotas",
        "running_count",
        "skipped",
        "start_s",
        "started_count",
        "started_ranks",
        "starts",
        "tallies",
        "tally_of",
        "unmet_gpu_s",
        "waits",
        "window_s",
    )

    def __init__(
        self,
        jobs: Sequence[BacktestJob],
        policy: Policy,
        *,
        start_s: float,
        end_s: float,
        default_busy_fraction: float,
        record_starts: bool,
    ) -> None:
        if not end_s > start_s:
            raise ValueError(f"window end {end_s} must be after its start {start_s}")
        self.pools = shared_pools(policy)
        self.key = policy.key
        self.capacity = policy.capacity
        self.borrowing = policy.borrowing
        self.quotas = policy.quotas
        self.jobs = jobs
        self.start_s = start_s
        self.end_s = end_s
        self.default_busy_fraction = default_busy_fraction
        self.models = {model: _Model(pool) for model, pool in self.pools.items()}
        self.model_states = list(self.models.values())
        self.lanes: dict[tuple[str, str], _Lane] = {}
        self.tallies: dict[str, _Tally] = {queue: _Tally() for queue, _ in policy.quotas}
        self.window_s = end_s - start_s
        self.hour_count = math.ceil(self.window_s / HOUR_S)
        self.hour_gpu_s = [0.0] * self.hour_count  # partial-hour pieces
        self.hour_steps = [0] * (self.hour_count + 1)  # difference array of GPUs held over whole hours
        self.allocated_gpu_s = 0.0
        self.busy_gpu_s = 0.0
        self.starts: list[float | None] | None = [None] * len(jobs) if record_starts else None
        # (finish, tie-break, lane, GPUs) of every running job, soonest first.
        self.completions: list[tuple[float, int, _Lane, int]] = []
        self.skipped = self.outside = self.running_count = 0
        self.started_count = self.cancelled_count = 0
        self.waits: list[float] = []
        self.unmet_gpu_s = 0.0
        # Set by ``admit``: the queued jobs by rank (position in submit order).
        self.queued: list[int] = []
        self.count = 0
        self.gpus_of: list[int] = []
        self.duration_of: list[float] = []
        self.arrival_of: list[float] = []
        self.give_ups: list[tuple[float, int]] = []
        self.started_ranks = bytearray()
        self.lane_of: list[_Lane] = []
        self.tally_of: list[_Tally] = []

    def run(self) -> BacktestResult:
        """Admit the jobs, replay the window and summarise it."""
        self.admit()
        self.replay()
        return self.summarise()

    def lane(self, queue: str, model: str) -> _Lane:
        lane = self.lanes.get((queue, model))
        if lane is None:
            quota = self.quotas.get((queue, model))
            guaranteed = quota.guaranteed_gpus if quota else 0
            limit = quota.borrowing_limit_gpus if quota else None
            lane = _Lane(queue, model, guaranteed, math.inf if limit is None else limit)
            self.lanes[(queue, model)] = lane
            lane.last_s = self.start_s
        return lane

    def tally(self, queue: str) -> _Tally:
        tally = self.tallies.get(queue)
        if tally is None:
            tally = self.tallies[queue] = _Tally()
        return tally

    def account(self, gpus: int, begin: float, finish: float, busy_fraction: float, tally: _Tally) -> None:
        """GPU-seconds of one job inside the window, into the totals and the hourly series."""
        start_s = self.start_s
        begin = max(begin, start_s)
        finish = min(finish, self.end_s)
        if finish <= begin:
            return
        gpu_s = gpus * (finish - begin)
        self.allocated_gpu_s += gpu_s
        self.busy_gpu_s += gpu_s * busy_fraction
        tally.allocated_gpu_s += gpu_s
        hour_count = self.hour_count
        hour_gpu_s = self.hour_gpu_s
        first_s = begin - start_s
        last_s = finish - start_s
        first = int(first_s // HOUR_S)
        last = min(int(last_s // HOUR_S), hour_count)
        if first == last:
            hour_gpu_s[first] += gpus * (last_s - first_s)
            return
        hour_gpu_s[first] += gpus * ((first + 1) * HOUR_S - first_s)
        if last < hour_count:
            hour_gpu_s[last] += gpus * (last_s - last * HOUR_S)
        if last > first + 1:
            self.hour_steps[first + 1] += gpus
            self.hour_steps[last] -= gpus

    def admit(self) -> None:
        """Sort the jobs: skipped, outside the window, running at its start (they hold their GPUs
        at once), or queued; the queued ones are ranked by submit time for the replay."""
        jobs = self.jobs
        capacity = self.capacity
        start_s = self.start_s
        end_s = self.end_s
        starts = self.starts
        queued = self.queued
        for index, job in enumerate(jobs):
            if job.gpu_model not in capacity or job.gpus <= 0:
                self.skipped += 1
                continue
            if job.started_s is not None and job.started_s < start_s:
                finish = job.started_s + job.duration_s
                if finish <= start_s:
                    self.outside += 1
                    continue
                lane = self.lane(job.queue, job.gpu_model)
                lane.used = round(lane.used + job.gpus, _GPU_DIGITS)
                self.running_count += 1
                tally = self.tally(job.queue)
                tally.jobs += 1
                tally.running_at_start += 1
                fraction = job.busy_fraction if job.busy_fraction is not None else self.default_busy_fraction
                self.account(job.gpus, start_s, finish, fraction, tally)
                heapq.heappush(self.completions, (finish, -1 - index, lane, job.gpus))
                if starts is not None:
                    starts[index] = job.started_s
                continue
            if job.submit_s >= end_s or (
                job.patience_s is not None and job.submit_s + job.patience_s <= start_s
            ):
                self.outside += 1
                continue
            queued.append(index)
        for lane in self.lanes.values():
            if lane.used > lane.guaranteed:
                state = self.models[lane.model]
                state.pool_free = round(state.pool_free - (lane.used - lane.guaranteed), _GPU_DIGITS)

        queued.sort(key=lambda index: jobs[index].submit_s)  # stable: ties keep input order
        # Everything below works on ranks (position in submit order): the FIFO and head-age order.
        self.count = len(queued)
        self.gpus_of = [jobs[index].gpus for index in queued]
        self.duration_of = [jobs[index].duration_s for index in queued]
        self.arrival_of = [max(jobs[index].submit_s, start_s) for index in queued]
        # (when its user gives up, rank) of each job that was cancelled while waiting, soonest first.
        self.give_ups = [
            (jobs[index].submit_s + jobs[index].patience_s, rank)
            for rank, index in enumerate(queued)
            if jobs[index].patience_s is not None
        ]
        heapq.heapify(self.give_ups)
        self.started_ranks = bytearray(self.count)
        self.lane_of = [self.lane(jobs[index].queue, jobs[index].gpu_model) for index in queued]
        tally_of = self.tally_of
        for index in queued:
            tally = self.tally(jobs[index].queue)
            tally.jobs += 1
            tally_of.append(tally)

    def replay(self) -> None:
        """Advance from one event instant to the next until the window ends."""
        arrival_of = self.arrival_of
        completions = self.completions
        give_ups = self.give_ups
        model_states = self.model_states
        borrowing = self.borrowing
        count = self.count
        end_s = self.end_s
        finish = self.finish
        arrive = self.arrive
        give_up = self.give_up
        schedule = self.schedule
        inf = math.inf
        next_rank = 0
        while True:
            next_arrival = arrival_of[next_rank] if next_rank < count else inf
            next_completion = completions[0][0] if completions else inf
            next_give_up = give_ups[0][0] if give_ups else inf
            now = min(next_arrival, next_completion, next_give_up)
            if now >= end_s:
                break
            if next_completion <= now:
                finish(now)
            if next_arrival <= now:
                next_rank = arrive(now, next_rank)
            if next_give_up <= now:
                give_up(now)
            for state in model_states:
                if state.candidates or (
                    state.pool_grew and borrowing and state.needs and state.needs[0] <= state.pool_free
                ):
                    schedule(state, now)
                else:
                    state.pool_grew = False

    def finish(self, now: float) -> None:
        """Jobs ending at ``now`` release their GPUs: borrowed ones go back to the shared pool."""
        completions = self.completions
        models = self.models
        heappop = heapq.heappop
        heappush = heapq.heappush
        while completions and completions[0][0] <= now:
            _, _, lane, gpus = heappop(completions)
            used = lane.used
            guaranteed = lane.guaranteed
            if used > guaranteed:
                lane.borrowed_gpu_s += (used - guaranteed) * (now - lane.last_s)
                released = used - guaranteed - max(0, used - gpus - guaranteed)
                if released:
                    state = models[lane.model]
                    state.pool_free = round(state.pool_free + released, _GPU_DIGITS)
                    state.pool_grew = True
            lane.last_s = now
            lane.used = round(used - gpus, _GPU_DIGITS)
            lane.version += 1
            if lane.fifo:
                heappush(models[lane.model].candidates, (lane.fifo[0], lane.version, lane))

    def arrive(self, now: float, next_rank: int) -> int:
        """Jobs submitted by ``now`` join their queues; returns the rank of the next to arrive."""
        arrival_of = self.arrival_of
        lane_of = self.lane_of
        models = self.models
        count = self.count
        while next_rank < count and arrival_of[next_rank] <= now:
            lane = lane_of[next_rank]
            lane.fifo.append(next_rank)
            if len(lane.fifo) == 1:
                lane.version += 1
                heapq.heappush(models[lane.model].candidates, (next_rank, lane.version, lane))
            next_rank += 1
        return next_rank

    def give_up(self, now: float) -> None:
        """Jobs whose users gave up by ``now`` leave their queues unstarted; a head leaving lets the
        next one be tried."""
        give_ups = self.give_ups
        started_ranks = self.started_ranks
        arrival_of = self.arrival_of
        gpus_of = self.gpus_of
        while give_ups and give_ups[0][0] <= now:
            _, rank = heapq.heappop(give_ups)
            if started_ranks[rank]:
                continue
            lane = self.lane_of[rank]
            if lane.fifo[0] == rank:
                lane.fifo.popleft()
                lane.version += 1
                if lane.fifo:
                    heapq.heappush(self.models[lane.model].candidates, (lane.fifo[0], lane.version, lane))
            else:
                lane.fifo.remove(rank)
            wait = now - arrival_of[rank]
            self.waits.append(wait)
            self.unmet_gpu_s += gpus_of[rank] * wait
            tally = self.tally_of[rank]
            tally.cancelled += 1
            tally.waits.append(wait)
            tally.unmet_gpu_s += gpus_of[rank] * wait
            self.cancelled_count += 1

    def schedule(self, state: _Model, now: float) -> None:
        """Start what fits of one GPU model at ``now``: heads within their guarantee, then heads
        borrowing from the shared pool, oldest first.

        Heads in age order: candidates (heads whose queue changed) merged with pool-blocked heads
        that now fit the free pool. Starting a job only shrinks what is free, so a head that fails
        here cannot succeed later in the same instant and is not retried.
        """
        candidates = state.candidates
        buckets = state.buckets
        needs = state.needs
        free = state.pool_free
        count = self.count
        gpus_of = self.gpus_of
        borrowing = self.borrowing
        start = self.start
        heappop = heapq.heappop
        heappush = heapq.heappush
        while True:
            best_bucket = None
            best_rank = count
            if needs and needs[0] <= free:
                emptied = []
                for need in needs:
                    if need > free:
                        break
                    bucket = buckets[need]
                    while bucket and bucket[0][2].version != bucket[0][1]:
                        heappop(bucket)
                    if not bucket:
                        emptied.append(need)
                    elif bucket[0][0] < best_rank:
                        best_rank = bucket[0][0]
                        best_bucket = bucket
                for need in emptied:
                    needs.remove(need)
                    del buckets[need]
            while candidates and candidates[0][2].version != candidates[0][1]:
                heappop(candidates)
            if candidates and candidates[0][0] < best_rank:
                rank, version, lane = heappop(candidates)
                used = lane.used
                guaranteed = lane.guaranteed
                wanted = round(used + gpus_of[rank], _GPU_DIGITS)
                if wanted <= guaranteed:
                    start(rank, lane, candidates, now)
                    continue
                if not borrowing or wanted - guaranteed > lane.limit:
                    continue  # only its own queue freeing GPUs can unblock it
                extra = round(
                    wanted - guaranteed - (used - guaranteed if used > guaranteed else 0), _GPU_DIGITS
                )
                if extra <= free:
                    free = round(free - extra, _GPU_DIGITS)
                    start(rank, lane, candidates, now)
                    continue
                bucket = buckets.get(extra)
                if bucket is None:
                    bucket = buckets[extra] = []
                    insort(needs, extra)
                heappush(bucket, (rank, version, lane))
                continue
            if best_bucket is None:
                break
            rank, _, lane = heappop(best_bucket)
            used = lane.used
            extra = used + gpus_of[rank] - lane.guaranteed - max(0, used - lane.guaranteed)
            free = round(free - extra, _GPU_DIGITS)
            start(rank, lane, candidates, now)
        state.pool_free = free
        state.pool_grew = False

    def start(self, rank: int, lane: _Lane, candidates: list, now: float) -> None:
        """Start the head ``rank`` of ``lane`` at ``now``; its successor becomes a candidate.

        Runs once per started job: it reads each attribute once and does ``account``'s arithmetic
        inline (a job starts inside the window, so only its end can fall outside it).
        """
        gpus = self.gpus_of[rank]
        used = lane.used
        borrowed = used - lane.guaranteed
        if borrowed > 0:
            lane.borrowed_gpu_s += borrowed * (now - lane.last_s)
        lane.last_s = now
        lane.used = round(used + gpus, _GPU_DIGITS)
        lane.version += 1
        lane.fifo.popleft()
        self.started_ranks[rank] = 1
        finish = now + self.duration_of[rank]
        heapq.heappush(self.completions, (finish, rank, lane, gpus))
        wait = now - self.arrival_of[rank]
        self.waits.append(wait)
        unmet = gpus * wait
        self.unmet_gpu_s += unmet
        tally = self.tally_of[rank]
        tally.started += 1
        tally.waits.append(wait)
        tally.unmet_gpu_s += unmet
        self.started_count += 1
        index = self.queued[rank]
        fraction = self.jobs[index].busy_fraction
        if fraction is None:
            fraction = self.default_busy_fraction
        if self.starts is not None:
            self.starts[index] = now
        if lane.fifo:
            heapq.heappush(candidates, (lane.fifo[0], lane.version, lane))
        # account(gpus, now, finish, fraction, tally), inline.
        end_s = self.end_s
        stop = finish if finish < end_s else end_s
        if stop <= now:
            return
        gpu_s = gpus * (stop - now)
        self.allocated_gpu_s += gpu_s
        self.busy_gpu_s += gpu_s * fraction
        tally.allocated_gpu_s += gpu_s
        start_s = self.start_s
        hour_count = self.hour_count
        hour_gpu_s = self.hour_gpu_s
        first_s = now - start_s
        last_s = stop - start_s
        first = int(first_s // HOUR_S)
        last = int(last_s // HOUR_S)
        if last > hour_count:
            last = hour_count
        if first == last:
            hour_gpu_s[first] += gpus * (last_s - first_s)
            return
        hour_gpu_s[first] += gpus * ((first + 1) * HOUR_S - first_s)
        if last < hour_count:
            hour_gpu_s[last] += gpus * (last_s - last * HOUR_S)
        if last > first + 1:
            hour_steps = self.hour_steps
            hour_steps[first + 1] += gpus
            hour_steps[last] -= gpus

    def summarise(self) -> BacktestResult:
        """The window's figures: jobs still waiting at its end count with their wait up to it."""
        end_s = self.end_s
        arrival_of = self.arrival_of
        gpus_of = self.gpus_of
        tally_of = self.tally_of
        waits = self.waits
        unmet_gpu_s = self.unmet_gpu_s
        waiting_count = 0
        for lane in self.lanes.values():
            borrowed = lane.used - lane.guaranteed
            if borrowed > 0:
                lane.borrowed_gpu_s += borrowed * (end_s - lane.last_s)
            for rank in lane.fifo:
                wait = end_s - arrival_of[rank]
                waits.append(wait)
                unmet_gpu_s += gpus_of[rank] * wait
                tally = tally_of[rank]
                tally.waiting += 1
                tally.waits.append(wait)
                tally.unmet_gpu_s += gpus_of[rank] * wait
                waiting_count += 1

        borrowed_by_queue: dict[str, float] = {}
        for lane in self.lanes.values():
            borrowed_by_queue[lane.queue] = borrowed_by_queue.get(lane.queue, 0.0) + lane.borrowed_gpu_s
        queues = {}
        for queue, tally in sorted(self.tallies.items()):
            ordered = sorted(tally.waits)
            queues[queue] = QueueResult(
                queue=queue,
                jobs=tally.jobs,
                started=tally.started,
                waiting_at_end=tally.waiting,
                wait_p50_s=percentile_sorted(ordered, 50),
                wait_p95_s=percentile_sorted(ordered, 95),
                allocated_gpu_hours=tally.allocated_gpu_s / HOUR_S,
                borrowed_gpu_hours=borrowed_by_queue.get(queue, 0.0) / HOUR_S,
                unmet_gpu_hours=tally.unmet_gpu_s / HOUR_S,
                running_at_start=tally.running_at_start,
                cancelled=tally.cancelled,
            )

        hourly = []
        whole_hour_gpus = 0
        for hour in range(self.hour_count):
            whole_hour_gpus += self.hour_steps[hour]
            length_s = min(HOUR_S, self.window_s - hour * HOUR_S)
            hourly.append((self.hour_gpu_s[hour] + whole_hour_gpus * HOUR_S) / length_s)

        waits.sort()
        capacity_gpu_s = sum(self.capacity.values()) * self.window_s
        allocated_gpu_s = self.allocated_gpu_s
        busy_gpu_s = self.busy_gpu_s
        return BacktestResult(
            key=self.key,
            capacity_gpu_s=capacity_gpu_s,
            allocated_gpu_s=allocated_gpu_s,
            busy_gpu_s=busy_gpu_s,
            allocation_rate=allocated_gpu_s / capacity_gpu_s if capacity_gpu_s else 0.0,
            utilization=busy_gpu_s / capacity_gpu_s if capacity_gpu_s else 0.0,
            wait_p50_s=percentile_sorted(waits, 50),
            wait_p95_s=percentile_sorted(waits, 95),
            unmet_gpu_hours=unmet_gpu_s / HOUR_S,
            jobs_total=self.running_count + self.started_count + waiting_count + self.cancelled_count,
            jobs_started=self.started_count,
            jobs_waiting_at_end=waiting_count,
            skipped_jobs=self.skipped,
            queues=queues,
            hourly_allocated_gpus=hourly,
            jobs_running_at_start=self.running_count,
            jobs_outside_window=self.outside,
            shared_pool_gpus=self.pools,
            starts=tuple(self.starts) if self.starts is not None else None,
            jobs_cancelled=self.cancelled_count,
        )


def run_backtest(
    jobs: Sequence[BacktestJob],
    policy: Policy,
    *,
    start_s: float,
    end_s: float,
    default_busy_fraction: float = 0.0,
    record_starts: bool = False,
) -> BacktestResult:
    """Replay ``jobs`` through the quota scheduler of ``policy`` over ``[start_s, end_s)``.

    The scheduling rules are those of the module docstring. ``default_busy_fraction`` stands in
    for jobs without a measured ``busy_fraction``. ``record_starts`` fills ``starts`` (off by
    default: it costs a list as long as ``jobs``).
    """
    replay = _Replay(
        jobs,
        policy,
        start_s=start_s,
        end_s=end_s,
        default_busy_fraction=default_busy_fraction,
        record_starts=record_starts,
    )
    return replay.run()


def backtest_jobs(rows: Sequence[JobHistory], *, start_s: float, end_s: float) -> list[BacktestJob]:
    """Jobs as the backtest replays them, from the scheduler's history of the window.

    A job still waiting gets the median run time of its department's jobs; one still running, its
    run time so far. A job its user cancelled before it started gets that median too, and its wait
    as its patience: the replay drops it again unless the policy starts it by then.
    """
    runtimes: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.start_s is not None and row.end_s is not None:
            runtimes[row.department].append(row.end_s - row.start_s)
    everyone = [value for values in runtimes.values() for value in values]
    fallback = statistics.median(everyone) if everyone else HOUR_S
    medians = {queue: statistics.median(values) for queue, values in runtimes.items()}
    jobs = []
    for row in rows:
        patience = None
        if row.start_s is None:
            duration = medians.get(row.department, fallback)
            if row.end_s is not None:
                patience = max(row.end_s - row.submit_s, 0.0)
        else:
            duration = (row.end_s if row.end_s is not None else end_s) - row.start_s
        jobs.append(
            BacktestJob(
                queue=row.department,
                gpu_model=row.gpu_model,
                gpus=row.gpus,
                submit_s=row.submit_s,
                duration_s=max(duration, 1.0),
                started_s=row.start_s if row.start_s is not None and row.start_s < start_s else None,
                busy_fraction=row.busy_fraction,
                patience_s=patience,
            )
        )
    return jobs


def compare_policies(
    jobs: Sequence[BacktestJob],
    policies: Sequence[Policy],
    *,
    start_s: float,
    end_s: float,
    default_busy_fraction: float = 0.0,
    record_starts: bool = False,
) -> list[BacktestResult]:
    """``run_backtest`` of the same jobs and window under each policy, in the order given."""
    return [
        run_backtest(
            jobs,
            policy,
            start_s=start_s,
            end_s=end_s,
            default_busy_fraction=default_busy_fraction,
            record_starts=record_starts,
        )
        for policy in policies
    ]
