"""Where a project's notebooks, parameter sets and outputs live, and keeping tool state inside it."""

from __future__ import annotations

import contextlib
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


PROJECT_VARIABLE = "EXACTNESS_PROJECT"


class ProjectError(ValueError):
    """No project to use: the folder named is not one, or the package is installed outside a checkout."""


@dataclass(frozen=True)
class Project:
    root: Path
    outputs: Path

    @classmethod
    def at(cls, root: str | os.PathLike | None = None, outputs: str | os.PathLike | None = None) -> Project:
        """The project at `root`; else the one $EXACTNESS_PROJECT names (refused unless it is one); else the
        checkout this package is installed from. Never the working directory's: a folder that happens to
        hold notebooks/ and params/ would silently run (or list) nothing of this project."""
        if root is None and os.environ.get(PROJECT_VARIABLE):
            root = Path(os.environ[PROJECT_VARIABLE])
            if not is_project(root):
                raise ProjectError(f"{PROJECT_VARIABLE}={root} is not an exactness project (it needs notebooks/ "
                                   "and params/ folders)")
        root = Path(root or find_root()).resolve()
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


def is_project(folder: Path) -> bool:
    return (folder / "notebooks").is_dir() and (folder / "params").is_dir()


def find_root() -> Path:
    """The checkout this package is installed from (editable): the folder holding lib/exactness/, with
    notebooks/ and params/ beside it."""
    package = Path(__file__).resolve().parents[1]
    root = package.parents[1]
    if package.parent.name == "lib" and is_project(root):
        return root
    raise ProjectError(f"exactness is installed at {package}, not inside a project checkout (a folder with "
                       f"lib/exactness/, notebooks/ and params/); set {PROJECT_VARIABLE} to the project to use")


def keep_state_inside(project: Project) -> None:
    """Point every tool-state variable into the project's .state/ (unless the user already chose)."""
    for variable, relative in _STATE_VARIABLES.items():
        path = project.state / relative
        os.environ.setdefault(variable, str(path))
        Path(os.environ[variable]).mkdir(parents=True, exist_ok=True)
    private_runtime(Path(os.environ["JUPYTER_RUNTIME_DIR"]))
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")


def private_runtime(folder: Path) -> None:
    """Jupyter's runtime folder holds the server's token and the kernels' connection keys: 0700, Jupyter's own
    default, also when an earlier version (or a umask) made it readable by others. Another user's folder is
    left as it is."""
    with contextlib.suppress(OSError):
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o700)
