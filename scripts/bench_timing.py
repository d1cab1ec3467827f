"""Timing shared by the peers' sides of `magrpo bench` (bench_torch.py, bench_llama.py): the
warm-up and timed-call rules magrpo's worker applies to itself (src/bench/models.ts), so
every engine is timed alike."""

import time


def rule(text):
    """ "min,max,seconds" as (min, max, seconds); a plain "N" is N calls, no more."""
    if "," not in text:
        return int(text), int(text), 0.0
    lo, hi, seconds = text.split(",")
    return int(lo), int(hi), float(seconds)


def runs(fn, calls):
    """calls = (min, max, seconds): `min` calls, then more while fewer than `max` ran and less
    than `seconds` passed."""
    lo, hi, seconds = calls
    start, done = time.perf_counter(), 0
    while done < hi and (done < lo or time.perf_counter() - start < seconds):
        fn()
        done += 1


def timed(fn, reps, warmup=(1, 1, 0.0)):
    """Wall and CPU seconds (every thread of this process) of each timed call (reps, a rule),
    after untimed warm-up calls (warmup, a rule)."""
    runs(fn, warmup)
    wall, cpu = [], []

    def one():
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)

    runs(one, reps)
    return {"wall": wall, "cpu": cpu}
