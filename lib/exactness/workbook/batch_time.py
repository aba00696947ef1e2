"""How long the rest of a batch will take, said on the terminal before each study: the sum of the durations of
each remaining study's newest passed run with the same parameter set (on this machine's outputs folder). It
falls as the studies finish; a study never run before is named, not guessed."""

from __future__ import annotations

from exactness.workbook.project import Project


def last_durations(project: Project) -> dict[tuple[str, str], float]:
    """(study, parameter set) -> seconds its newest passed run took."""
    from exactness.workbook import index

    found = {}
    for entry in index.collect(project):  # newest first
        m = entry.manifest
        if m.status == "passed" and m.duration_s is not None and (m.study, m.param_set) not in found:
            found[(m.study, m.param_set)] = float(m.duration_s)
    return found


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def left(remaining: list[tuple[str, str]], durations: dict[tuple[str, str], float]) -> str:
    """'batch: about 12 min left (the last runs of these studies)', with the studies no run has timed named."""
    known = [durations[key] for key in remaining if key in durations]
    unknown = [study for study, param_set in remaining if (study, param_set) not in durations]
    if not known and unknown:
        return "batch: no estimate yet (no earlier run of these studies with these parameters)"
    text = f"batch: about {minutes(sum(known))} left (from the last runs of these studies)"
    return text + (f", plus {', '.join(unknown)}, never run with these parameters" if unknown else "")
