"""`make bench`: every speed claim of the workbook as a ratio measured side by side in one run.

Timings never go into tests; they go here. Each case runs `repeats` times and the table holds the median
(long cases, the paper preset and the DAC study, run once and say so). Results go to
outputs/benchmarks/<stamp>/: the table (parquet and CSV), a plot, the machine they were measured on, and
the measured study runs themselves (runs/, with their reports).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from exactness.bench.timing import median_seconds as _median_seconds
from exactness.bench.timing import ratio as _ratio
from exactness.bench.timing import row as _row
from exactness.bench.timing import study_run
from exactness.workbook.process_memory import TreeMemory
from exactness.workbook.project import Project
from exactness.workbook.study_rules import registration

CONFORMER = "Wav2Vec2ConformerForPreTraining"


def screen_paths(repeats: int, plain_seeds: int = 20, fast_seeds: int = 200) -> list[dict]:
    """Seeds per second on one thread: build the whole model and run its forward, or the fast screen."""
    import torch

    from exactness.models.quantizer_logits import FastLogits, plain_logits

    torch.set_num_threads(1)
    fast = FastLogits(CONFORMER)
    plain_s, plain_t = _median_seconds(lambda: [plain_logits(CONFORMER, s) for s in range(plain_seeds)], repeats)
    fast_s, fast_t = _median_seconds(lambda: [fast(s) for s in range(fast_seeds)], repeats)
    rows = [_row("screen", "plain (build + full forward)", plain_s, plain_t, plain_seeds, "seeds/s"),
            _row("screen", "fast (replayed draws, argmax inputs only)", fast_s, fast_t, fast_seeds, "seeds/s")]
    _ratio(rows, 10.0, rows[1]["case"], rows[0]["case"])
    return rows


def check_paths(repeats: int, swapped_checks: int = 10) -> list[dict]:
    """One candidate check with a fresh export against one with the seed's weights swapped into a graph
    exported once and fed to one session (learnt and verified beforehand), both as the study runs most
    checks: the graph exposing what a check reads, the model rebuilt by replaying its draws, the named
    tensors only; and the fed session against a session built per seed on the same pool and seeds."""
    import torch

    from exactness.models import wav2vec2_family as family
    from exactness.models.seed_rebuild import Rebuilder
    from exactness.runtimes.graph_pool import GraphPool, Learnt
    from exactness.studies.near_tie import study as near_tie
    from exactness.studies.near_tie.check import check_seed

    torch.set_num_threads(1)
    exposed = family.check_exposed(CONFORMER)
    pool = near_tie.check_pool(CONFORMER, "dynamic")
    one_thread = {"intra_op_threads": 1}  # as the study's workers run ORT (and what one fed session is verified for)
    for seed in (0, 1):  # the template export, then the export the swap is verified on
        check_seed(pool, seed, what_if=False, session_options=one_thread)
    rebuild = Rebuilder(CONFORMER)
    seeds = iter(range(100, 100 + repeats))
    fresh_s, fresh_t = _median_seconds(lambda: check_seed(GraphPool(CONFORMER, "dynamic", swap=False, exposed=exposed),
                                                          next(seeds), what_if=False, all_tensors=False,
                                                          session_options=one_thread), repeats)
    swapped_s, swapped_t = _median_seconds(
        lambda: [check_seed(pool, s, built=rebuild(s), what_if=False, all_tensors=False, session_options=one_thread)
                 for s in range(200, 200 + swapped_checks)], repeats)
    # the fed session's own worth (ARCHITECTURE.md: a speed-up must save 10% of its study's default run): the
    # same pool and seeds with a session built per seed; the gathered lookup goes with it (it runs only fed)
    if pool.fed_state is not Learnt.VERIFIED:  # else both cases would time the same path
        raise RuntimeError(f"the fed session was not learnt ({pool.fed_status}): nothing to measure it against")
    per_seed = copy.copy(pool)
    per_seed.fed_state, per_seed.fed, per_seed.fed_reason = Learnt.REFUSED, None, "off for the benchmark"
    session_s, session_t = _median_seconds(
        lambda: [check_seed(per_seed, s, built=rebuild(s), what_if=False, all_tensors=False,
                            session_options=one_thread) for s in range(200, 200 + swapped_checks)], repeats)
    rows = [_row("check", "fresh export per seed", fresh_s, fresh_t, 1, "checks/s"),
            _row("check", "one export, weights fed to one session", swapped_s, swapped_t, swapped_checks,
                 "checks/s"),
            _row("fed session", "weights fed to one session", swapped_s, swapped_t, swapped_checks, "checks/s"),
            _row("fed session", "a session per seed", session_s, session_t, swapped_checks, "checks/s")]
    _ratio(rows[:2], 50.0, rows[1]["case"], rows[0]["case"])
    # 1.3: where a check's saving reaches 10% of the last default run (4,871 checks of 81 ms on 2 workers, 537 s)
    _ratio(rows[2:], 1.3, rows[2]["case"], rows[3]["case"])
    return rows


def scaling(sizes=(1000, 5000, 20000), workers=(1, 2)) -> list[dict]:
    """The screen's wall time for growing seed counts and worker counts (one run each)."""
    from exactness.studies.near_tie.screen import screen

    rows = []
    for n in sizes:
        for w in workers:
            began = time.perf_counter()
            screen([CONFORMER], 0, n, workers=w, progress_every=1e9)
            seconds = time.perf_counter() - began
            rows.append(_row("scaling", f"{n} seeds, {w} worker(s)", seconds, [seconds], n, "seeds/s", seeds=n,
                             workers=w))
    base = {(r["seeds"], r["workers"]): r["median_s"] for r in rows}
    for r in rows:
        r["seconds_per_1k_seeds"] = r["median_s"] / r["seeds"] * 1000
        r["speedup_over_1_worker"] = base[(r["seeds"], 1)] / r["median_s"]
    return rows


DAC_SECONDS = (1.0, 10.0, 60.0)
DAC_TIME_TARGET = 2.0  # the study's wall time over the plain encode + decode passes it needs, at most
DAC_MEMORY_TARGET = 2.0  # peak memory at 10 s (and beyond) over the peak at 1 s, at most
DAC_MEMORY_LIMIT_MB = 2048  # peak memory at 10 s, under
WINDOWED_FROM_S = 30.0  # from here the plain forwards run in the study's windows: whole, they would not fit
# The time target is judged where the clip's length dominates: from 10 s, and per added second of audio between
# two lengths. A 1 s run is mostly fixed cost (the command, two kernel starts, the environment study, imports,
# template builds, the weight table, the report: about 20 s whatever the length); its ratio is printed, not judged.
DAC_TIME_JUDGED_FROM_S = 10.0
# The propagation study at 60 s runs one initialisation on both sides (the ratio is per init; two would double
# both sides, about 1.5 hours on 2 cores); `paper.yaml`, also in `make bench`, runs both.
DAC_LONG_INITS = {60.0: ("variance_preserving",)}


def _dac_arguments(study: str, seconds: float, inits: tuple[str, ...] | None = None,
                   variant: str = "44khz") -> list[str]:
    """A study's default parameters at `seconds` of audio (the batching study: that clip and one 0.6 as long);
    `inits`: the propagation study's initialisations, when not its default two; `variant`: when not 44khz."""
    chosen = ["-p", "variant", variant] if variant != "44khz" else []
    if study == "dac_propagation":
        return ["-p", "seconds", f"{seconds:g}"] + (["-p", "inits", f"[{', '.join(inits)}]"] if inits else []) + chosen
    return ["-p", "clip_seconds", f"[{seconds:g}, {0.6 * seconds:g}]"] + chosen


def plain_dac_passes(study: str, seconds: float, windowed: bool = False, variant: str = "44khz",
                     inits: tuple[str, ...] = ("default", "variance_preserving")) -> dict[str, float]:
    """The forward passes a DAC study's default run at `seconds` needs, run plainly (each run's weights stored,
    no hooks, no statistics, one model at a time): seconds spent in `encode_decode` (every run's encode and its
    decode; the batching study's are those of `compare`, `hop_drop`, `repair` and the float64 decodes of
    `float64_audio`) and in `more_decodes` (the propagation study's second decode, from each run's own
    quantized representation, for the codec table).
    `windowed`: through `dac_chunks` (whole up to CHUNK_FRAMES)."""
    import torch

    from exactness.models import dac, dac_chunks
    from exactness.studies.dac_batching.study import repair_span

    def encode(model, audio):
        if windowed:
            return model.quantizer(dac_chunks.encode_latent(model, audio))[:2]
        encoded = model.encode(audio)
        return encoded.quantized_representation, encoded.audio_codes

    def decode(model, quantized):
        return dac_chunks.decode(model, quantized) if windowed else model.decode(quantized).audio_values

    spent = {"encode_decode": 0.0, "more_decodes": 0.0}

    def timed(kind, work, *arguments):
        began = time.perf_counter()
        result = work(*arguments)
        spent[kind] += time.perf_counter() - began
        return result

    with torch.no_grad():
        if study == "dac_propagation":
            for init in inits:
                plain = dac.template(variant, 0, init)
                audio = dac.audio(variant, seconds, 0)
                for run_kind in dac.VARIANTS:
                    model = dac.build_variant(plain, run_kind, shared=False)
                    x = audio.to(next(model.parameters()).dtype)
                    quantized, codes = timed("encode_decode", encode, model, x)
                    timed("encode_decode", lambda m, c: decode(m, m.quantizer.from_codes(c)[0]), model, codes)
                    timed("more_decodes", decode, model, quantized)
                    del model
        else:
            model = dac.build_variant(dac.template(variant, 0, "variance_preserving"), "folded_fp32", shared=False)
            clips = [dac.audio(variant, s, k + 1) for k, s in enumerate((seconds, 0.6 * seconds))]
            longest = max(c.shape[-1] for c in clips)
            padded = [torch.nn.functional.pad(c, (0, longest - c.shape[-1])) for c in clips]
            hop = model.config.hop_length
            rate = model.config.sampling_rate
            odd = [torch.zeros(1, 1, int(seconds * rate) // hop * hop + extra) for extra in (0, 1, 7)]
            shortest = min(range(len(clips)), key=lambda k: clips[k].shape[-1])
            _, start = repair_span(model, dac_chunks.encoded_frames(model, clips[shortest].shape[-1]))
            # repair() runs the shortest clip again from `start`
            latents = []
            for audio in [torch.cat(padded), *clips, *padded, *odd, clips[shortest][..., start:]]:  # as compare(),
                quantized, _ = timed("encode_decode", encode, model, audio)  # hop_drop(), repair()
                timed("encode_decode", decode, model, quantized)
                latents.append(quantized)
            model64 = dac.build_variant(dac.template(variant, 0, "variance_preserving"), "float64", shared=False)
            for quantized in (latents[1 + shortest], latents[1 + len(clips) + shortest]):  # float64_audio()'s
                timed("encode_decode", decode, model64, quantized.double())
    return spent


def dac_rows(study: str, seconds_list=DAC_SECONDS, outputs: Path | None = None,
             inits: tuple[str, ...] | None = None, variant: str = "44khz") -> list[dict]:
    """Per clip length: the study's default run (`exactness run`, wall time and the peak memory of its process
    tree) beside the plain forward passes it needs (in a process of their own, measured the same way), and the
    ratios the targets are set on. `inits`: the propagation study on these initialisations only (both sides)."""
    rows = []
    for seconds in seconds_list:
        long_inits = DAC_LONG_INITS.get(seconds) if study == "dac_propagation" else None
        rows += _dac_length_rows(study, seconds, outputs, inits or long_inits, variant)
    _memory_growth(rows, min(seconds_list))
    return rows + per_audio_second(rows)


def _dac_length_rows(study: str, seconds: float, outputs: Path | None, inits: tuple[str, ...] | None,
                     variant: str) -> list[dict]:
    """The study's run at one length and its plain passes: two rows."""
    label = f"{seconds:g} s" + (f" ({', '.join(inits)})" if inits and study == "dac_propagation" else "")
    study_row = study_run(study, _dac_arguments(study, seconds, inits, variant), f"{label}: study", outputs)
    windowed = seconds >= WINDOWED_FROM_S
    chosen = f", inits={tuple(inits)!r}" if inits and study == "dac_propagation" else ""
    code = ("import json, sys; from exactness.bench.run import plain_dac_passes; "
            f"print(json.dumps(plain_dac_passes({study!r}, {seconds!r}, {windowed!r}, {variant!r}{chosen})))")
    began = time.perf_counter()
    # the plain passes run with the environment the study's kernel gets (huge pages): a like-for-like floor
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **registration(study).kernel_environment})
    with TreeMemory(process.pid) as memory:
        output, errors = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"plain forwards of {study} at {seconds:g} s failed:\n{errors[-2000:]}")
    wall = time.perf_counter() - began
    spent = json.loads(output.strip().splitlines()[-1])
    passes = spent["encode_decode"] + spent["more_decodes"]
    plain_label = f"{label}: plain forwards" + (" (in the study's windows)" if windowed else "")
    plain_row = _row(study, plain_label, wall, [wall], 1, "runs/s", peak_memory_mb=memory.peak_mb,
                     encode_decode_s=spent["encode_decode"], passes_s=passes, seconds_of_audio=seconds)
    ratio = study_row["median_s"] / spent["encode_decode"]
    judged = seconds >= DAC_TIME_JUDGED_FROM_S
    study_row.update(seconds_of_audio=seconds, inits=",".join(inits) if inits else "as the parameters", ratio=ratio,
                     ratio_of="study / (encode + decode)", target=DAC_TIME_TARGET if judged else None,
                     meets=ratio <= DAC_TIME_TARGET if judged else None,
                     time_over_passes=study_row["median_s"] / passes,
                     seconds_per_audio_second=study_row["median_s"] / seconds,
                     mb_per_audio_second=study_row["peak_memory_mb"] / seconds)
    plain_row.update(inits=study_row["inits"])
    return [study_row, plain_row]


def _memory_growth(rows: list[dict], shortest: float) -> None:
    """Each longer run's peak over the shortest run's, against the memory targets (written on its row)."""
    # a study row's case ends ": study" (a plain row's may say "in the study's windows")
    first = next((r for r in rows if r.get("seconds_of_audio") == shortest and r["case"].endswith(": study")), None)
    for row in rows:
        if row["case"].endswith(": study") and first is not None and row is not first:
            growth = row["peak_memory_mb"] / first["peak_memory_mb"]
            row.update(memory_over_shortest=growth,
                       memory_meets=growth <= DAC_MEMORY_TARGET and row["peak_memory_mb"] < DAC_MEMORY_LIMIT_MB
                       if row["seconds_of_audio"] <= 10 else growth <= DAC_MEMORY_TARGET)


def per_audio_second(rows: list[dict]) -> list[dict]:
    """Between consecutive lengths run on the same initialisations: the study's added wall time per added second
    of audio over the plain encode + decode passes' (the fixed costs cancel: what "linear in the clip's length"
    and "near the floor" mean once the clip is long), judged against the time target."""
    studies = [r for r in rows if r["case"].endswith(": study")]
    plains = {(r["benchmark"], r["seconds_of_audio"], r["inits"]): r for r in rows if "plain forwards" in r["case"]}
    added = []
    for short, long in ((a, b) for a, b in itertools.pairwise(studies)
                        if (a["benchmark"], a["inits"]) == (b["benchmark"], b["inits"])):
        span = long["seconds_of_audio"] - short["seconds_of_audio"]
        study_slope = (long["median_s"] - short["median_s"]) / span
        plain_slope = (plains[(long["benchmark"], long["seconds_of_audio"], long["inits"])]["encode_decode_s"]
                       - plains[(short["benchmark"], short["seconds_of_audio"], short["inits"])]["encode_decode_s"]
                       ) / span
        ratio = study_slope / plain_slope
        added.append({"benchmark": long["benchmark"], "repeats": 1, "unit": "s per audio s", "inits": long["inits"],
                      "case": f"{short['seconds_of_audio']:g} -> {long['seconds_of_audio']:g} s: per added second",
                      "median_s": study_slope, "plain_encode_decode_per_s": plain_slope, "ratio": ratio,
                      # from the shortest run: what a line through both gives at no audio, the cost that does not
                      # grow with the clip (between two long runs the line's intercept says nothing of it)
                      "fixed_s": short["median_s"] - study_slope * short["seconds_of_audio"]
                      if short is studies[0] else None,
                      "ratio_of": "study / (encode + decode), per added second", "target": DAC_TIME_TARGET,
                      "meets": ratio <= DAC_TIME_TARGET})
    return added


# `--only`: the near-tie speed-ups; the discrete-ops screen and runs; the DAC rows; the paper presets; `make run`
# from a fresh clone
PARTS = ("near_tie", "discrete_ops", "dac", "paper", "make_run")
MAKE_RUN_TARGET_S = 720.0  # the whole `make run` from a fresh clone, install included, on 2 cores


def fresh_make_run(project: Project, outputs: Path) -> dict:
    """`make run` in a fresh clone of this checkout (its own venv, its own outputs), as a new user runs it."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-clone-") as folder:
        clone = Path(folder) / "exactness"
        subprocess.run(["git", "clone", "-q", str(project.root), str(clone)], check=True)
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("EXACTNESS_", "VIRTUAL_ENV"))}
        began = time.perf_counter()
        done = subprocess.run(["make", "run"], cwd=clone, env=environment, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"make run failed in a fresh clone:\n{(done.stdout + done.stderr)[-2000:]}")
        (outputs / "make_run.log").write_text(done.stdout + done.stderr)
    found = _row("make run", "fresh clone, install included", seconds, [seconds], 1, "runs/s")
    found.update(target_s=MAKE_RUN_TARGET_S, meets=seconds <= MAKE_RUN_TARGET_S)
    return found


def run(quick: bool = False, repeats: int = 3, out: Path | None = None, parts: tuple[str, ...] = PARTS
        ) -> pd.DataFrame:
    from exactness.workbook.machine import run_facts

    project = Project.at()
    folder = out or project.outputs / "benchmarks" / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "machine.json").write_text(json.dumps(run_facts(project.root), indent=2, default=str) + "\n")
    rows = []
    if "near_tie" in parts:
        rows += screen_paths(repeats) + check_paths(repeats)
        rows += scaling((1000, 5000) if quick else (1000, 5000, 20000))
    runs = folder / "runs"  # the measured runs stay, with their reports, apart from outputs/index.html
    if "dac" in parts:
        for study in ("dac_propagation", "dac_batching"):
            rows += dac_rows(study, (1.0,) if quick else DAC_SECONDS, runs)
    if "discrete_ops" in parts:
        from exactness.bench import discrete_ops

        rows += discrete_ops.screen_against_checks()
        rows += discrete_ops.shape_modes_shared()
        rows += discrete_ops.study_runs(runs, paper="paper" in parts and not quick)
    if "paper" in parts and not quick:
        for study in ("near_tie", "dac_propagation", "dac_batching"):  # the paper presets as a user runs them
            rows.append(study_run(study, ["-f", "paper"], "paper.yaml", runs))
    if "make_run" in parts and not quick:
        rows.append(fresh_make_run(project, folder))
    table = pd.DataFrame(rows)
    table.to_parquet(folder / "benchmarks.parquet", index=False)
    table.to_csv(folder / "benchmarks.csv", index=False)
    from exactness.bench.figures import overview
    from exactness.bench.markdown import write_benchmarks

    overview(table).savefig(folder / "benchmarks.png", dpi=110, bbox_inches="tight")
    measured = tuple(p for p in parts if not (quick and p in ("paper", "make_run")))
    write_benchmarks(table, project.root / "BENCHMARKS.md", json.loads((folder / "machine.json").read_text()),
                     folder, measured, tuple(p for p in PARTS if p not in measured))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactness.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="skip the paper presets, 10 and 60 s of DAC audio, 20k seeds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                        help="these parts only: near_tie (screen, check, scaling), discrete_ops (the screen against "
                             "whole checks, both shape modes screened at once against each alone, "
                             "the default run cold and warm), dac (the DAC studies at 1, 10 and 60 s "
                             "beside their plain passes), paper (the paper presets), make_run (from a fresh clone)")
    args = parser.parse_args(argv)
    table = run(args.quick, args.repeats, parts=tuple(args.only))
    return print_table(table)


def print_table(table: pd.DataFrame) -> int:
    """The table on stdout, every missed target on stderr; 1 when any target was missed."""
    columns = [c for c in ("benchmark", "case", "repeats", "median_s", "rate", "unit", "ratio", "target", "target_s",
                           "meets",
                           "speedup_over_1_worker", "peak_memory_mb", "encode_decode_s", "time_over_passes",
                           "plain_encode_decode_per_s", "fixed_s", "memory_over_shortest", "memory_meets")
               if c in table]
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60,
                           "display.float_format", "{:.4g}".format):
        print(table[columns].to_string(index=False))
    missed = table[table["meets"].eq(False)] if "meets" in table else table.iloc[:0]
    for row in missed.itertuples():
        if "target_s" in table and row.target_s == row.target_s:  # a wall-time target
            print(f"MISSED TARGET: {row.benchmark} {row.case}: {row.median_s:.0f} s, target {row.target_s:.0f} s",
                  file=sys.stderr)
            continue
        print(f"MISSED TARGET: {row.benchmark} {row.case}: {row.ratio_of} = {row.ratio:.2f}, target {row.target:g}",
              file=sys.stderr)
    memory = table[table["memory_meets"].eq(False)] if "memory_meets" in table else table.iloc[:0]
    for row in memory.itertuples():
        print(f"MISSED TARGET: {row.benchmark} {row.case}: peak {row.peak_memory_mb:.0f} MB, "
              f"{row.memory_over_shortest:.2f}x the shortest clip's", file=sys.stderr)
    return 1 if len(missed) or len(memory) else 0


if __name__ == "__main__":
    sys.exit(main())
