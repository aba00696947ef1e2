"""Does keeping freed memory (`workbook.allocator`) still pay for itself on the near-tie checks?

The setting was added when a UniSpeech check allocated a 150 MB one-hot product per forward; the gathered
codevector lookup removed that product. This benchmark runs the same swapped-weight checks in fresh
processes with glibc's defaults and with freed memory kept, alternating, and reports the ratio: the
setting stays only while it saves at least `TARGET` of a check. A process of its own per measurement,
because the setting is process-wide and cannot be undone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TARGET = 1.10  # checks with freed memory kept at least 10% faster, or the trick goes
MODELS = ("UniSpeechForPreTraining", "Wav2Vec2ConformerForPreTraining")


def probe(model: str, keep: bool, checks: int) -> float:
    """Seconds for `checks` candidate checks of `model` (weights swapped into one exported graph, one
    thread), after the pool is prepared and warmed; glibc's defaults unless `keep`."""
    import torch

    if keep:
        from exactness.workbook.allocator import keep_freed_memory

        keep_freed_memory()
    from exactness.models.seed_rebuild import Rebuilder
    from exactness.studies import near_tie
    from exactness.studies.near_tie_check import check_seed

    torch.set_num_threads(1)
    one_thread = {"intra_op_threads": 1}
    pool = near_tie.check_pool(model, "dynamic")
    for seed in (0, 1):  # the template export, then the export the swap is verified on
        check_seed(pool, seed, what_if=False, session_options=one_thread)
    rebuild = Rebuilder(model)
    start = time.perf_counter()
    for seed in range(200, 200 + checks):
        check_seed(pool, seed, built=rebuild(seed), what_if=False, all_tensors=False, session_options=one_thread)
    return time.perf_counter() - start


def _measure(model: str, keep: bool, checks: int) -> float:
    command = [sys.executable, "-m", "exactness.workbook.benchmark_allocator", "--probe", model,
               "--keep" if keep else "--default", "--checks", str(checks)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def allocator_rows(repeats: int = 3, checks: int = 20, models=MODELS) -> list[dict]:
    """Per model: median seconds per check with glibc's defaults and with freed memory kept, measured in
    alternation, and the ratio default / kept (above 1: keeping is faster)."""
    rows = []
    for model in models:
        times = {False: [], True: []}
        for _ in range(repeats):
            for keep in (False, True):
                times[keep].append(_measure(model, keep, checks) / checks)
        default, kept = statistics.median(times[False]), statistics.median(times[True])
        for keep, seconds in ((False, default), (True, kept)):
            case = f"{model}: {'freed memory kept' if keep else 'glibc default'}"
            rows.append({"benchmark": "allocator", "case": case,
                         "repeats": repeats, "median_s": seconds, "rate": 1 / seconds, "unit": "checks/s",
                         "times": times[keep]})
        rows[-1].update(ratio=default / kept, ratio_of="glibc default / kept", target=TARGET,
                        meets=bool(default / kept >= TARGET))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactness.workbook.benchmark_allocator", description=__doc__)
    parser.add_argument("--probe", metavar="MODEL", help="run one measurement in this process and print it")
    parser.add_argument("--keep", dest="keep", action="store_true")
    parser.add_argument("--default", dest="keep", action="store_false")
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps({"seconds": probe(args.probe, args.keep, args.checks)}))
        return 0
    for row in allocator_rows(args.repeats, args.checks):
        extra = f"  ratio {row['ratio']:.3f} (target {row['target']:g}: {'met' if row['meets'] else 'MISSED'})" \
            if "ratio" in row else ""
        print(f"{row['case']:<60} {row['median_s'] * 1000:8.1f} ms/check{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
