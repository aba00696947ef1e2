import re
import tomllib

import yaml

from conftest import REPO


def _normalise(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower()


def pyproject_requirements() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {_normalise(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}


def environment_requirements() -> set[str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_normalise(r) for r in pip if not r.startswith("-e")}


def test_environment_yml_and_pyproject_pin_the_same_packages():
    only_pyproject = pyproject_requirements() - environment_requirements()
    only_environment = environment_requirements() - pyproject_requirements()
    assert not only_pyproject and not only_environment, (
        f"pins differ: only in pyproject.toml {sorted(only_pyproject)}, "
        f"only in environment.yml {sorted(only_environment)}"
    )


def test_torch_is_pinned_to_the_local_cpu_wheel():
    # A plain `torch` or a newer pin pulls a multi-GB CUDA build on this machine.
    torch_pins = [r for r in pyproject_requirements() if re.match(r"torch\b", r)]
    assert torch_pins == ["torch==2.13.0"]


def test_environment_yml_uses_the_same_python_as_pyproject():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"].startswith(">=3.11")
