"""The `exactness` command: list studies, run them through papermill, rebuild the index, show a run."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import logging
import os
import secrets
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactness.workbook import answers, batch_time, catalog, findings, index, parameters, terminal_text
from exactness.workbook.manifest import INTERRUPTED_BY_USER, MANIFEST, OUTPUT_CLOSED, Manifest, WriteError
from exactness.workbook.project import Project, keep_state_inside

DEFAULT_SET = "default"


@dataclass(frozen=True)
class PlannedRun:
    study: catalog.Study
    params: dict[str, Any]
    param_set: str


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exactness", description=__doc__)
    out_help = "outputs folder (default: <project>/outputs)"
    parser.add_argument("--out", help=out_help)
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="studies and their parameter sets")
    listing.add_argument("--params", metavar="STUDY", help="a study's parameters: name, type, default, meaning")
    run = commands.add_parser("run", help="run a study (or all) through papermill")
    # also after the command (`exactness run near_tie --out DIR`); SUPPRESS: when not given there, the value
    # given before the command stays
    run.add_argument("--out", default=argparse.SUPPRESS, help=out_help)
    run.add_argument("study", help="a study name, or 'all'")
    run.add_argument("-f", "--file", action="append", default=[], metavar="FILE",
                     help="parameter set name or YAML file; later ones override earlier ones")
    run.add_argument("-p", "--param", action="append", nargs=2, default=[], metavar=("NAME", "VALUE"),
                     help="override one parameter; VALUE parses as YAML")
    run.add_argument("--resume", metavar="RUN",
                     help="finish a failed or interrupted run (folder or id) in place: only what is missing runs")
    run.add_argument("--resume-across-code-change", action="store_true",
                     help="resume even though the code differs from the one that computed the run's shards "
                          "(both are recorded in its manifest)")
    run.add_argument("--with-code", action="store_true", help="keep code cells in report.html")
    run.add_argument("--log-output", action="store_true", help="stream cell output to the terminal")
    commands.add_parser("index", help="rebuild outputs/index.html from the run folders").add_argument(
        "--out", default=argparse.SUPPRESS, help=out_help)
    show = commands.add_parser("show", help="a run's headline figures")
    show.add_argument("--out", default=argparse.SUPPRESS, help=out_help)
    show.add_argument("run", help="a run folder, a run id, or a study name (its newest run)")
    replay = commands.add_parser("replay", help="a class's seeds in a transformers checkout's real export test, "
                                                "seeded as the workbook seeds, beside the workbook's outcome")
    replay.add_argument("--out", default=argparse.SUPPRESS, help=out_help)
    replay.add_argument("checkout", help="the checkout's root (absolute)")
    replay.add_argument("model", help="the class, as its tester's all_model_classes names it")
    replay.add_argument("seeds", nargs="+", type=int, help="seeds, as the workbook numbers them")
    replay.add_argument("--keep", nargs="+", default=[], metavar="OUTPUT",
                        help="compare only these outputs (an answer's recommended comparison)")
    replay.add_argument("--keep-skip", action="store_true", help="leave the class's comparison skip in place")
    replay.add_argument("--run", help="a discrete_ops run (folder or id) whose pass/fail of each seed is shown beside")
    replay.add_argument("--test", default="test_onnx_export_static", help="the export test to run")
    return parser


def cmd_replay(project: Project, args) -> int:
    """One line per seed: the real test's outcome, then the workbook's where a run checked the seed."""
    import pandas as pd

    from exactness.models import real_test

    checked = {}
    if args.run:
        seeds_table = find_run(project, args.run) / "tables" / "seeds.parquet"
        if not seeds_table.is_file():
            raise FileNotFoundError(f"{seeds_table} does not exist: --run names a discrete_ops run with its tables")
        table = pd.read_parquet(seeds_table)
        mine = table[table.model == args.model]
        checked = dict(zip(mine.seed.astype(int), mine.test_rule_passed.astype(bool), strict=True))
    failed = 0
    for seed in args.seeds:
        replayed = real_test.replay(args.checkout, args.model, seed, lift=not args.keep_skip, keep=args.keep,
                                    test=args.test)
        workbook = ("the workbook: " + ("passed" if checked[seed] else "failed")) if seed in checked else (
            "the workbook: not checked in that run" if args.run else "")
        print(terminal_text.safe(f"{args.model} seed {seed}: {replayed.words()}" + (f"; {workbook}" if workbook
                                                                                      else "")))
        failed += replayed.outcome is not real_test.Outcome.PASSED
    return 1 if failed else 0


def plan(project: Project, study_name: str, files: list[str], overrides: list[tuple[str, str]]) -> list[PlannedRun]:
    """Resolve and validate every run of the batch before any of them starts."""
    available = catalog.discover(project)
    names = list(available) if study_name == "all" else [catalog.get(project, study_name).name]
    if study_name != "all":  # every report links the environment of its batch
        names = [name for name in catalog.first_studies(available) if name not in names] + names
    if study_name == "all" and overrides:
        declared = set().union(*(parameters.read_parameters(available[n].notebook) for n in names))
        unknown = [name for name, _ in overrides if name not in declared]
        if unknown:
            raise parameters.ParameterError(f"no study has parameter(s) {', '.join(map(repr, unknown))}")
    planned = []
    for name in names:
        study = available[name]
        primary = name == study_name or study_name == "all"
        chosen = files if files and (primary or all(_has_set(study, f) for f in files)) else [DEFAULT_SET]
        paths = [study.param_file(f) for f in chosen]
        spec = parameters.read_parameters(study.notebook)
        mine = [(n, v) for n, v in overrides if primary and (study_name != "all" or n in spec)]
        label = _label([Path(f).stem for f in chosen], bool(mine))
        planned.append(PlannedRun(study, parameters.resolve(study.notebook, paths, mine), label))
    return planned


def _label(stems: list[str], overridden: bool, longest: int = 40) -> str:
    """The parameter sets' names in a run id, short enough for a folder name (the manifest keeps them all)."""
    label = "+".join(stems) + ("+p" if overridden else "")
    if len(label) <= longest:
        return label
    import hashlib

    return f"{stems[0][:20]}+{len(stems) - 1}more-{hashlib.sha256(label.encode()).hexdigest()[:6]}"


def _has_set(study: catalog.Study, name: str) -> bool:
    """Whether `name` is one of the study's own parameter sets: a YAML path written for another study
    (`-f params/near_tie/paper.yaml`) is not the environment's."""
    try:
        found = study.param_file(name)
    except FileNotFoundError:
        return False
    return found.resolve().parent == study.params_dir.resolve()


def check_overrides(overrides: list[tuple[str, str]]) -> None:
    """Each `-p` value must be YAML (1.2 core, no aliases); said in one line (the parser's own message spans
    several)."""
    for name, text in overrides:
        parameters.parse_override(text, f"-p {name}")


def check_outputs(outputs: Path) -> None:
    """`--out` must be, or be creatable as, a writable folder; checked before anything is created."""
    existing = next(p for p in (outputs, *outputs.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"--out {outputs}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):  # also false on a read-only mount
        raise ValueError(f"--out {outputs}: {existing} is not writable")


def cmd_list(project: Project, study_name: str | None = None) -> int:
    if study_name:
        study = catalog.get(project, study_name)
        for name, parameter in parameters.read_parameters(study.notebook).items():
            print(f"{name:<20} {parameter.type_name:<14} {parameter.default!r:<24} {parameter.help}")
        return 0
    for name, study in catalog.discover(project).items():
        print(f"{name:<20} {' '.join(study.param_sets) or '(no parameter sets)'}")
    return 0


def cmd_resume(project: Project, args) -> int:
    from exactness.workbook import runs

    folder = find_run(project, args.resume).resolve()
    # A run folder is <outputs>/<study>/<run-id>: its index, environment link and report links belong to
    # its own outputs root, wherever --out points now.
    project = Project(root=project.root, outputs=folder.parent.parent)
    manifest = Manifest.read(folder)
    study = catalog.get(project, args.study)
    given: set[str] = set()
    if args.file or args.param:
        (planned,) = [p for p in plan(project, args.study, args.file, [tuple(p) for p in args.param])
                      if p.study.name == study.name]
        # only what the user gave now: the rest of `planned` is the default set's, not the run's
        given = {name for name, _ in args.param} | {name for f in args.file
                                                     for name in parameters.load_yaml(study.param_file(f))}
        given &= set(planned.params)
        changed = sorted(k for k in given if planned.params.get(k) != manifest.params.get(k))
        if changed:
            raise runs.ResumeError(f"a resumed run keeps its parameters; these differ from {folder.name}'s: "
                                   + ", ".join(f"{k} ({manifest.params.get(k)!r} -> {planned.params.get(k)!r})"
                                               for k in changed))
    across = args.resume_across_code_change
    runs.check_resumable(study, folder, across, given)  # refused (passed, running, naming code) before "resuming"
    runs.ensure_kernel()
    changed = runs.code_change(folder, manifest, across)
    if changed:
        print(f"{changed}; resuming anyway (--resume-across-code-change), both recorded in its manifest")
    shards = len(list((folder / "shards").glob("*.pkl")))
    print(f"resuming {folder} ({manifest.observed_status()}; {shards} finished shards kept) ...", flush=True)
    try:
        result = runs.resume(project, study, folder, with_code=args.with_code, log_output=args.log_output,
                             across_code_change=across, given=given)
    except KeyboardInterrupt as interruption:
        return _interrupted(study.name, interruption)
    _print_result(result)
    indexed = _write_index(project)
    if not result:
        print(f"FAILED: {terminal_text.safe(result.reason)}", file=sys.stderr)
    return 0 if result and indexed else 1


def _print_result(result) -> None:
    """The run's status and report, then one line for each class that did not run (its table says the same)."""
    duration = "" if result.manifest.duration_s is None else f" in {result.manifest.duration_s:.1f} s"
    print(f"    {result.manifest.status}{duration} -> {result.folder / 'report.html'}", flush=True)
    for answer in answers.not_run(answers.from_summary(index.read_summary(result.folder))):
        proof = " ".join(answer.proof.split())
        print(terminal_text.safe(f"      not run: {answer.subject}: {proof[:300]}"), flush=True)


def _write_index(project: Project) -> bool:
    """Rebuild the index; a write that fails (a full disk) is said, and the earlier index stays whole."""
    try:
        print(f"index: {index.write(project)}")
        return True
    except WriteError as error:
        print(f"index not rebuilt: {error}", file=sys.stderr)
        return False


def check_resume_argument(study: str, resume: str) -> None:
    if not resume.strip():  # an unset shell variable: never a new full run in its place
        raise parameters.ParameterError("--resume is empty; give the run to finish (its folder, or its run id "
                                        "under the outputs folder)")
    if study == "all":
        raise parameters.ParameterError(f"--resume finishes one run of one study: `exactness run STUDY --resume "
                                        f"{resume}` with the study of that run (RUN: its folder or run id)")


def cmd_run(project: Project, args) -> int:
    from exactness.workbook import runs

    check_overrides([tuple(p) for p in args.param])
    if args.resume is not None:
        check_resume_argument(args.study, args.resume)
        return cmd_resume(project, args)
    batch_plan = plan(project, args.study, args.file, [tuple(p) for p in args.param])
    runs.ensure_kernel()
    batch = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    environment_run, failures, stopped = None, [], None
    durations = batch_time.last_durations(project) if len(batch_plan) > 1 else {}
    for number, planned in enumerate(batch_plan, 1):
        try:
            estimate = (" " + batch_time.left([(p.study.name, p.param_set) for p in batch_plan[number - 1:]],
                                               durations)) if len(batch_plan) > 1 else ""
            print(f"[{number}/{len(batch_plan)}] {planned.study.name} ({planned.param_set}) ...{estimate}", flush=True)
            result = runs.execute(project, planned.study, planned.params, planned.param_set, batch,
                                  environment_run=environment_run, with_code=args.with_code,
                                  log_output=args.log_output)
        except KeyboardInterrupt as interruption:
            return _interrupted(planned.study.name, interruption)
        except BrokenPipeError:  # between runs: this one never started
            return _output_closed(planned.study.name)
        except WriteError as error:  # its run folder could not be made: nothing of it exists
            failures.append(f"{planned.study.name} did not start: {error}")
            stopped = number
            break
        if planned.study.runs_first and result:
            environment_run = str(result.folder.relative_to(project.outputs))
        try:
            _print_result(result)
        except BrokenPipeError:  # this run ended as its manifest says; the batch stops here
            return _output_closed(planned.study.name)
        if not result:
            failures.append(result.reason)
        if result.write_error is not None:  # a full disk: every later run would fail the same way
            stopped = number
            break
    if stopped is not None and stopped < len(batch_plan):
        left = [p.study.name for p in batch_plan[stopped:]]
        failures.append(f"not run: {', '.join(left)} (the batch stopped at {batch_plan[stopped - 1].study.name}'s "
                        "write error)")
    indexed = _write_index(project)
    for reason in failures:
        print(f"FAILED: {terminal_text.safe(reason)}", file=sys.stderr)
    return 1 if failures or not indexed else 0


def _interrupted(study: str | None, interruption: BaseException) -> int:
    """Ctrl-C (SIGTERM, SIGHUP, a closed output pipe): one line on stderr. The notebook client's abandoned cell
    task would otherwise report its error (a KeyboardInterrupt inside the kernel, a dead kernel, a closed
    socket) through asyncio's logger as the interpreter exits: several tracebacks of an interruption the user
    asked for and the manifest records."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    folder = getattr(interruption, "folder", None)
    why = getattr(interruption, "why", "")
    cause = "" if not why or why == INTERRUPTED_BY_USER else why.removeprefix("interrupted")
    if folder is not None:
        line = (f"interrupted{cause}; {folder} is marked interrupted (finish it with `exactness run {study} "
                f"--resume {folder}`)")
    else:
        line = f"interrupted{cause} before a run folder was created; nothing was kept"
    _quiet_stdout_if_closed(why)
    with contextlib.suppress(OSError):  # a terminal that hung up takes stderr with it
        print(line, file=sys.stderr)
    return 130


def _output_closed(study: str) -> int:
    """The output's reader went away between two runs: one line on stderr, no run marked anything."""
    _quiet_stdout_if_closed()
    with contextlib.suppress(OSError):
        print(f"interrupted: the output's reader went away; the batch stopped at {study} (each run folder's "
              "manifest says how its run ended)", file=sys.stderr)
    return 130


def _quiet_stdout_if_closed(why: str = OUTPUT_CLOSED) -> None:
    """After the output's reader went away, stdout points at /dev/null, so flushing at exit raises nothing."""
    if why == OUTPUT_CLOSED:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Signalled(KeyboardInterrupt):
    """A signal that stops a run as Ctrl-C does; `why` names it in the manifest and on the terminal."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _terminate_as_interrupt(signum, frame) -> None:
    """SIGTERM (a job scheduler, `kill`), SIGHUP (the terminal closed): stop as Ctrl-C does, so the run is
    marked interrupted and its kernel and worker processes are shut down instead of orphaned."""
    name = signal.Signals(signum).name
    raise _Signalled(f"interrupted by {name}" + (" (the terminal closed)" if signum == signal.SIGHUP else ""))


def find_run(project: Project, reference: str) -> Path:
    path = Path(reference)
    if (path / MANIFEST).exists():
        return path
    matches = list(project.outputs.glob(f"*/{glob.escape(reference)}/{MANIFEST}")) if reference.strip("/.") else []
    if matches:
        return matches[0].parent
    newest = [e.folder for e in index.collect(project) if e.manifest.study == reference]
    if newest:
        return newest[0]
    raise FileNotFoundError(f"no run {reference!r} under {project.outputs} (give a run folder, run id or study)")


def cmd_show(project: Project, reference: str) -> int:
    """A run's status, answers and findings; every text read from the run folder printed through
    `terminal_text.safe` (it may come from someone else)."""
    folder = find_run(project, reference)
    manifest = Manifest.read(folder)
    duration = "duration unknown" if manifest.duration_s is None else f"{manifest.duration_s} s"
    say = [f"{manifest.study} {manifest.run_id}: {manifest.observed_status()} ({manifest.param_set}), "
           f"{duration}, started {manifest.started}"]
    if manifest.error:
        cell = f" in cell [{manifest.failed_cell}]" if manifest.failed_cell is not None else ""
        say.append(f"  error{cell}: {manifest.error}")
    summary = index.read_summary(folder)
    found = answers.from_summary(summary)
    # the answer table first, one line per class or configuration; a line an earlier run of the batch settles
    # under that run's answer, as the report shows it
    beside = answers.settled_in_batch(found, folder, answers.Columns.from_summary(summary))
    for answer in answers.placed(found, beside):
        other = beside.get(answer.subject)
        if other is not None:
            say.append(_answer_line(other.answer) + f" [{other.study}'s answer]")
        say.append(_answer_line(answer) + (f" [this run: {other.note}]" if other is not None else ""))
    found = findings.from_summary(summary)
    say += [f"  {finding.text()}" for finding in found]
    if not found:  # a study without findings (or a run that stopped before them): its headline figures
        say += [f"  {name}: {index.short(value)}" for name, value in summary.items()]
    for line in say:
        print(terminal_text.safe(line))
    return 0


def _answer_line(answer: answers.Answer) -> str:
    return (f"  {answer.subject}: {answer.cause}; {answer.action}" + (f"; fails {answer.rate}" if answer.rate else "")
            + (f"; flips {answer.flips}" if answer.flips else ""))


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:  # the reader went away (`exactness list | head -1`): stop quietly, as `ls` does
        _quiet_stdout_if_closed()  # nor fail flushing at exit
        return 128 + signal.SIGPIPE


_TAKES_A_VALUE = ("--out", "-f", "--file", "--resume")


def split_params(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """`run`'s `-p NAME VALUE` pairs taken out before argparse reads the rest: argparse takes a VALUE that
    starts with '-' for an option unless it looks like `-1` or `-.5`, so `-p atol -1e-3` failed with
    "expected 2 arguments" instead of reaching the study's own rule. A `-p` short of two words is left to
    argparse, which says so."""
    at = 0
    while at < len(argv) and argv[at] != "run":  # up to the command: only `run` takes -p
        at += 2 if argv[at] in _TAKES_A_VALUE else 1
    rest, pairs = list(argv[:at]), []
    while at < len(argv):
        token = argv[at]
        if token == "--":
            rest += argv[at:]
            break
        if token in ("-p", "--param") and at + 2 < len(argv):
            pairs.append([argv[at + 1], argv[at + 2]])
            at += 3
        elif token in _TAKES_A_VALUE and at + 1 < len(argv):
            rest += argv[at:at + 2]
            at += 2
        else:
            rest.append(token)
            at += 1
    return rest, pairs


def _main(argv: list[str]) -> int:
    rest, pairs = split_params(argv)
    args = _parser().parse_args(rest)
    if args.command == "run":
        args.param = [*args.param, *pairs]
    if args.out is not None and not args.out.strip():
        print("exactness: error: --out is empty; give a folder (or leave --out out for <project>/outputs)",
              file=sys.stderr)
        return 2
    try:
        project = Project.at(outputs=args.out)
        if args.command in ("run", "index"):
            check_outputs(project.outputs)
    except ValueError as error:  # also ProjectError: no project to use
        print(f"exactness: error: {error}", file=sys.stderr)
        return 2
    keep_state_inside(project)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # `nohup exactness run ...` keeps running
        signal.signal(signal.SIGHUP, _terminate_as_interrupt)
    try:
        if args.command == "list":
            return cmd_list(project, args.params)
        if args.command == "run":
            return cmd_run(project, args)
        if args.command == "index":
            print(index.write(project))
            return 0
        if args.command == "replay":
            return cmd_replay(project, args)
        return cmd_show(project, args.run)
    except (parameters.ParameterError, catalog.UnknownStudyError, FileNotFoundError, ValueError) as error:
        print(f"exactness: error: {terminal_text.safe(error)}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # e.g. the kernel is not registered
        print(f"exactness: error: {terminal_text.safe(error)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise
    except OSError as error:  # an outputs folder that cannot be made or written (read-only, /sys, a file)
        print(f"exactness: error: {terminal_text.safe(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:  # before or between runs (planning, starting, the index)
        return _interrupted(None, interruption)


if __name__ == "__main__":
    sys.exit(main())
