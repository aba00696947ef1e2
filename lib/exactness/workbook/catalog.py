"""The studies a project offers: one notebook each, with named parameter sets in params/<study>/."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exactness.workbook import study_rules
from exactness.workbook.project import Project


class UnknownStudyError(LookupError):
    pass


@dataclass(frozen=True)
class Study:
    name: str
    notebook: Path
    params_dir: Path

    @property
    def kernel_environment(self) -> dict[str, str]:
        return dict(study_rules.registration(self.name).kernel_environment)

    @property
    def runs_first(self) -> bool:
        return study_rules.registration(self.name).runs_first

    @property
    def runs_before(self) -> tuple[str, ...]:
        return tuple(study_rules.registration(self.name).runs_before)

    @property
    def param_sets(self) -> list[str]:
        return sorted(p.stem for p in self.params_dir.glob("*.yaml"))

    def param_file(self, name_or_path: str) -> Path:
        """A parameter set by name (`smoke`) or a path to a YAML file."""
        if any(len(part) > 255 for part in Path(name_or_path).parts) or len(name_or_path) > 4096:
            raise FileNotFoundError(f"no parameter set {name_or_path[:60]!r}... for study {self.name!r}: the name is "
                                    f"{len(name_or_path):,} characters, longer than a file name can be")
        candidate = Path(name_or_path)
        if candidate.suffix in (".yaml", ".yml") and candidate.exists():
            return candidate
        named = self.params_dir / f"{name_or_path}.yaml"
        if named.exists():
            return named
        raise FileNotFoundError(
            f"no parameter set {name_or_path!r} for study {self.name!r}: "
            f"give a YAML path or one of {self.param_sets or 'none (params/' + self.name + '/ is empty)'}"
        )


def discover(project: Project) -> dict[str, Study]:
    studies = {
        nb.stem: Study(nb.stem, nb, project.params / nb.stem) for nb in sorted(project.notebooks.glob("*.ipynb"))
    }
    # The studies that run first (the environment), then the rest alphabetically, except that a study runs before
    # those it names in `runs_before` (its answers settle theirs): the order of `exactness run all`.
    first = sorted(name for name in studies if studies[name].runs_first)
    before = {name: set() for name in studies}  # name: the studies that must run before it
    for name in studies:
        for later in studies[name].runs_before:
            if later in studies and later not in first:
                before[later].add(name)
    order = list(first)
    while len(order) < len(studies):
        ready = sorted(n for n in studies if n not in order and before[n] <= set(order))
        if not ready:
            raise ValueError("the studies' runs_before form a circle: "
                             + ", ".join(sorted(n for n in studies if n not in order)))
        order.append(ready[0])
    return {name: studies[name] for name in order}


def first_studies(available: dict[str, Study]) -> list[str]:
    """The studies every batch starts with, so that every report can link them (the environment study)."""
    return [name for name, study in available.items() if study.runs_first]


def get(project: Project, name: str) -> Study:
    studies = discover(project)
    if name not in studies:
        raise UnknownStudyError(f"unknown study {name!r}; studies: {', '.join(studies) or 'none'}")
    return studies[name]
