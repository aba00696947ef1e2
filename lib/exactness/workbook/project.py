"""Where a project's notebooks, parameter sets and outputs live, and keeping tool state inside it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KERNEL_NAME = "exactness"

# Jupyter, IPython, matplotlib and Chromium write into $HOME unless these point elsewhere.
_STATE_VARIABLES = {
    "JUPYTER_CONFIG_DIR": "jupyter/config",
    "JUPYTER_DATA_DIR": "jupyter/data",
    "JUPYTER_RUNTIME_DIR": "jupyter/runtime",
    "IPYTHONDIR": "ipython",
    "MPLCONFIGDIR": "matplotlib",
    "XDG_CONFIG_HOME": "xdg/config",
    "XDG_CACHE_HOME": "xdg/cache",
}


@dataclass(frozen=True)
class Project:
    root: Path
    outputs: Path

    @classmethod
    def at(cls, root: str | os.PathLike | None = None, outputs: str | os.PathLike | None = None) -> Project:
        root = Path(root or os.environ.get("EXACTNESS_PROJECT") or find_root()).resolve()
        outputs = Path(outputs).resolve() if outputs else root / "outputs"
        return cls(root=root, outputs=outputs)

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def params(self) -> Path:
        return self.root / "params"

    @property
    def state(self) -> Path:
        return self.root / ".state"


def find_root(start: Path | None = None) -> Path:
    """The nearest folder at or above `start` (default: the working directory) holding notebooks/ and
    params/; the package's own checkout when none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "notebooks").is_dir() and (folder / "params").is_dir():
            return folder
    return Path(__file__).resolve().parents[3]


def keep_state_inside(project: Project) -> None:
    """Point every tool-state variable into the project's .state/ (unless the user already chose)."""
    for variable, relative in _STATE_VARIABLES.items():
        path = project.state / relative
        os.environ.setdefault(variable, str(path))
        Path(os.environ[variable]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
