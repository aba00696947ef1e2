"""The studies a project offers: one notebook each, with named parameter sets in params/<study>/."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exactness.workbook.project import Project

# The environment study describes the machine every other report ran on, so a batch runs it first.
ENVIRONMENT_STUDY = "environment"


# Environment variables a study's kernel starts with (they must be set before torch allocates anything).
# The DAC studies free and allocate layer outputs of tens of MB thousands of times; with glibc handing large
# blocks back at once (`dac_chunks.hand_back_large_blocks`, which keeps memory flat in the clip's length) every
# new 4 KiB page faults in. PyTorch's THP_MEM_ALLOC_ENABLE backs blocks of 2 MB and more with transparent huge
# pages: measured on the 44.1 kHz propagation at 1 s, one init, 30.3 s -> 23.2 s and 1,334 -> 1,253 MB peak. Where
# memory lives never changes the arithmetic (tables equal: tests/studies/test_dac_propagation.py).
KERNEL_ENVIRONMENT = {"dac_propagation": {"THP_MEM_ALLOC_ENABLE": "1"},
                      "dac_batching": {"THP_MEM_ALLOC_ENABLE": "1"}}


class UnknownStudyError(LookupError):
    pass


@dataclass(frozen=True)
class Study:
    name: str
    notebook: Path
    params_dir: Path

    @property
    def kernel_environment(self) -> dict[str, str]:
        return KERNEL_ENVIRONMENT.get(self.name, {})

    @property
    def param_sets(self) -> list[str]:
        return sorted(p.stem for p in self.params_dir.glob("*.yaml"))

    def param_file(self, name_or_path: str) -> Path:
        """A parameter set by name (`smoke`) or a path to a YAML file."""
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
    # Environment first, the rest alphabetically: the order of `exactness run all`.
    return dict(sorted(studies.items(), key=lambda item: (item[0] != ENVIRONMENT_STUDY, item[0])))


def get(project: Project, name: str) -> Study:
    studies = discover(project)
    if name not in studies:
        raise UnknownStudyError(f"unknown study {name!r}; studies: {', '.join(studies) or 'none'}")
    return studies[name]
