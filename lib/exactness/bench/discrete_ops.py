"""`make bench`'s discrete-ops rows: the eager screen against checking every seed, per class, in seeds per second;
and the study's default and paper runs as a user runs them, against their time targets."""

from __future__ import annotations

import os
import time
from pathlib import Path

from exactness.bench.timing import ratio, row, study_run

# Every class of the default run with an op the screen waits for (the others are never screened).
CLASSES = ("MMGroundingDinoForObjectDetection", "PPDocLayoutV2ForObjectDetection", "ClapModel",
           "DFineForObjectDetection", "Deimv2ForObjectDetection", "LwDetrForObjectDetection",
           "RTDetrForObjectDetection", "RTDetrV2ForObjectDetection", "TapasForQuestionAnswering",
           "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining", "Wav2Vec2ForPreTraining",
           "XLMForQuestionAnswering", "FlaubertForQuestionAnswering", "OneFormerForUniversalSegmentation")
# The default run's other classes: no discrete op that can flip reaches an output, so none is screened.
NEVER_SCREENED = ("DepthProForDepthEstimation", "CLIPSegForImageSegmentation", "UniSpeechSatForPreTraining",
                  "FlavaForPreTraining", "BertModel", "BitModel")
SCREEN_TARGET = 10.0  # the screen, seeds per second over a whole check's, at least
DEFAULT_WARM_S, DEFAULT_COLD_S, PAPER_S = 300.0, 600.0, 3600.0  # the targets on 2 cores
DEFAULT_SEEDS, CORES = 2000, 2  # the default run screens this many seeds per class, on this many cores


def _plain_forwards(name: str, seeds: range) -> None:
    """Each seed's model (rebuilt in place as the screen does) run forward whole, nothing recorded or tapped:
    what the screen saves by stopping after the last counted op."""
    import torch
    from transformers import set_seed

    from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED
    from exactness.studies.discrete_ops import study

    make = study._builder(name, True, "")[0]
    for seed in seeds:
        made = make(seed)
        with torch.no_grad():
            set_seed(EXPORT_TEST_FORWARD_SEED)
            made.model(**made.inputs)


def screen_against_checks(classes=CLASSES, screened: int = 40, checked: int = 6) -> list[dict]:
    """Per class, on one thread: the screen's eager forward per seed (rebuilt in place, stopped after the last
    counted op) against a whole check (eager recorded, ORT, the float64 reference), both as the study runs them;
    and a whole plain forward of the same seeds beside them. The screens' times, scaled to the default run's
    seeds and cores, are what its screen phase alone takes: a row against the warm run's whole target."""
    import torch

    from exactness.engine.rows import ClassTask
    from exactness.runtimes.export_cache import ExportCache
    from exactness.studies.discrete_ops import study
    from exactness.workbook.project import Project

    torch.set_num_threads(1)
    rows, screens_s = [], 0.0
    # the runs' own export cache (or EXACTNESS_EXPORT_CACHE): what is timed is the screen and the checks
    settings = study.Settings(cache=str(ExportCache.default(Project.at().root).folder))
    for name in classes:
        task = ClassTask(name, "static")
        cg = study.prepare(task, [0, 1], settings)
        screen = study._Screen({task: cg.ops}, settings)
        screen([(task, 2)])  # the template, the replay plan and the calls waited for: once per worker
        began = time.perf_counter()
        screen([(task, s) for s in range(100, 100 + screened)])
        screen_s = time.perf_counter() - began
        checker = study._Check(cg, settings, "candidates")
        began = time.perf_counter()
        checker(list(range(200, 200 + checked)))
        check_s = time.perf_counter() - began
        pair = [row("discrete ops screen", f"{name}: screen", screen_s, [screen_s], screened, "seeds/s"),
                row("discrete ops screen", f"{name}: whole check", check_s, [check_s], checked, "seeds/s")]
        ratio(pair, SCREEN_TARGET, pair[0]["case"], pair[1]["case"])
        began = time.perf_counter()
        _plain_forwards(name, range(100, 100 + screened))
        plain_s = time.perf_counter() - began
        pair.append(row("discrete ops screen", f"{name}: whole plain forward", plain_s, [plain_s], screened,
                        "seeds/s"))
        rows += pair
        screens_s += DEFAULT_SEEDS * screen_s / screened / CORES
    rows.append(row("discrete ops screen", f"default run's screen phase alone: {DEFAULT_SEEDS:,} seeds of each of "
                    f"{len(classes)} classes at the rates above, {CORES} cores", screens_s, [screens_s], 1, "runs/s",
                    target_s=DEFAULT_WARM_S, meets=screens_s <= DEFAULT_WARM_S))
    return rows


# Classes of the paper set (both shape modes) whose screen the bench times with its shape modes shared: RT-DETR
# and wav2vec2 wait for the same eager calls in both graphs; Tapas's dynamic graph counts fewer ops than its
# static one (its argmax alone), which the static graph's taps include.
SHARED_CLASSES = ("RTDetrForObjectDetection", "Wav2Vec2ForPreTraining", "TapasForQuestionAnswering")
SHAPE_MODES = ("static", "dynamic")


def shape_modes_shared(classes=SHARED_CLASSES, screened: int = 40) -> list[dict]:
    """Per class, on one thread: both shape modes screened as the study screens them (one forward a seed where
    the modes wait for the same calls) against each mode screened alone, as the paper set did before; the
    ratio is what sharing saves its screen. The two give the same rows (checked here and in tests)."""
    import torch

    from exactness.engine.rows import ClassTask
    from exactness.runtimes.export_cache import ExportCache
    from exactness.studies.discrete_ops import study
    from exactness.workbook.project import Project

    torch.set_num_threads(1)
    rows = []
    settings = study.Settings(cache=str(ExportCache.default(Project.at().root).folder))
    work, seeds = study._Work(settings), tuple(range(100, 100 + screened))
    for name in classes:
        tasks = [ClassTask(name, mode) for mode in SHAPE_MODES]
        graphs = {task: study.prepare(task, [0, 1], settings) for task in tasks}
        alone = [study._Unit(t, study.Phase.SCREEN, seeds, ops={t: graphs[t].ops}) for t in tasks]
        shared = [u for u in study._units(graphs, list(seeds), settings) if u.phase is study.Phase.SCREEN]
        if len(shared) != 1 or len(shared[0].tasks) != len(tasks):
            raise RuntimeError(f"{name}: not every shape mode waits for a counted op; nothing to share")
        work([study._Unit(t, study.Phase.SCREEN, (2,), ops={t: graphs[t].ops}) for t in tasks])  # learnt once
        seconds, found = {"alone": 0.0, "shared": 0.0}, {}
        for kind in ("alone", "shared", "shared", "alone"):  # each order once: neither gains from going second
            began = time.perf_counter()
            found[kind] = work(alone if kind == "alone" else shared)
            seconds[kind] += (time.perf_counter() - began) / 2
        if any(d.error for d in found["alone"] + found["shared"]) or not all(
                a.screen.equals(b.screen) for a, b in zip(found["alone"], found["shared"], strict=True)):
            raise RuntimeError(f"{name}: the shared screen's rows differ from each shape mode's screened alone")
        alone_s, shared_s = seconds["alone"], seconds["shared"]
        pair = [row("discrete ops screen", f"{name}: both shape modes, one screen", shared_s, [shared_s],
                    screened, "seeds/s"),
                row("discrete ops screen", f"{name}: both shape modes, each screened alone", alone_s, [alone_s],
                    screened, "seeds/s")]
        pair[0].update(ratio=pair[0]["rate"] / pair[1]["rate"], ratio_of=f"{pair[0]['case']} / {pair[1]['case']}")
        rows += pair
    return rows


def study_runs(outputs: Path, paper: bool) -> list[dict]:
    """The default run with a cold export cache, again warm, and (paper) the paper set, against their targets."""
    import tempfile


    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache:
        previous = os.environ.get("EXACTNESS_EXPORT_CACHE")
        os.environ["EXACTNESS_EXPORT_CACHE"] = cache
        try:
            for label, target in (("default, cold export cache", DEFAULT_COLD_S),
                                  ("default, warm export cache", DEFAULT_WARM_S)):
                found = study_run("discrete_ops", [], label, outputs)
                found.update(target_s=target, meets=found["median_s"] <= target)
                rows.append(found)
            if paper:
                found = study_run("discrete_ops", ["-f", "paper"], "paper, warm export cache", outputs)
                found.update(target_s=PAPER_S, meets=found["median_s"] <= PAPER_S)
                rows.append(found)
        finally:
            if previous is None:
                os.environ.pop("EXACTNESS_EXPORT_CACHE", None)
            else:
                os.environ["EXACTNESS_EXPORT_CACHE"] = previous
    return rows
