"""One engine answers every discrete choice: a cause is decided, a class's rate estimated and an output compared in
`exactness.engine` (and `compare.rates`) only. The studies bring their screens and checks as plug-ins that write the
engine's rows. Checked on the source, as the import structure is."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from conftest import REPO
from exactness.engine.rows import ScreenRow, frame
from exactness.studies.near_tie import engine_tables

LIB = REPO / "lib" / "exactness"
ENGINE = LIB / "engine"
# the engine's decisions and arithmetic: each defined once, in the engine (or the one rate estimate)
ONCE = {"verdict": ENGINE / "verdicts.py", "find_defect": ENGINE / "verdicts.py",
        "changed_by_flips": ENGINE / "verdicts.py", "reach_ulps": ENGINE / "verdicts.py",
        "noise_ulps": ENGINE / "verdicts.py", "verify": ENGINE / "verdicts.py",
        "pair_cause": ENGINE / "pairs.py", "pair_noise": ENGINE / "pairs.py", "pair_answer": ENGINE / "answers.py",
        "compare_output": ENGINE / "outputs.py", "compare_forced": ENGINE / "outputs.py",
        "fill_reads": ENGINE / "margins.py", "fill_flips": ENGINE / "margins.py",
        "candidates": ENGINE / "candidates.py", "in_reach": ENGINE / "candidates.py",
        "smallest_margins": ENGINE / "candidates.py",
        "estimate": LIB / "compare" / "rates.py", "wilson_interval": LIB / "compare" / "rates.py",
        # the quantizer's flip law and its one predictor (against ORT per 40,000 seeds, and a pair's held-out seeds)
        "noise_below": LIB / "studies" / "near_tie" / "rate.py",
        "forecast": LIB / "studies" / "near_tie" / "prediction.py"}


def _sources(root: Path = LIB) -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text()) for path in root.rglob("*.py")}


def definitions(sources: dict[Path, ast.Module]) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ONCE:
                found.setdefault(node.name, []).append(path)
    return found


def deciding(sources: dict[Path, ast.Module]) -> list[str]:
    """Places outside the engine that produce a cause (`Cause.X` assigned, passed or returned) rather than test one
    (`is`, `in`, a colour table's key)."""
    found = []
    for path, tree in sources.items():
        if path.is_relative_to(ENGINE) or path.name == "causes.py":
            continue
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute))
                    and (getattr(node.value, "id", None) == "Cause" or getattr(node.value, "attr", None) == "Cause")):
                continue
            up = parents.get(node)
            while isinstance(up, (ast.Tuple, ast.List, ast.Set)):
                up = parents.get(up)
            if isinstance(up, ast.Compare) or (isinstance(up, ast.Dict) and node in up.keys):
                continue
            found.append(f"{path.relative_to(LIB)}:{node.lineno} Cause.{node.attr}")
    return found


def test_the_engines_decisions_and_the_rate_estimate_are_each_defined_once():
    found = definitions(_sources())
    assert {name: paths for name, paths in found.items() if paths != [ONCE[name]]} == {}
    assert set(found) == set(ONCE)


def test_no_study_decides_a_cause_itself():
    assert deciding(_sources()) == []


def test_the_checks_find_a_second_verdict_and_a_cause_decided_outside_the_engine():
    planted = {LIB / "studies" / "x" / "answers.py": ast.parse(
        "def verdict(rows):\n    if rows.is_tie:\n        return Cause.NEAR_TIE\n    return v.Cause.DEFECT if rows.bad "
        "else None\nok = rows.cause is Cause.DEFECT or rows.cause in (Cause.EXACT_TIE,)\n"
        "COLOURS = {Cause.DEFECT: 1}\n")}
    assert definitions(planted) == {"verdict": [LIB / "studies" / "x" / "answers.py"]}
    assert deciding(planted) == ["studies/x/answers.py:3 Cause.NEAR_TIE", "studies/x/answers.py:4 Cause.DEFECT"]


def swap_learners(sources: dict[Path, ast.Module]) -> list[str]:
    """Where an export's weight swap is learnt (`weight_swap.learn(...)` called): the export set-up every study
    shares, `runtimes.graph_pool`."""
    return sorted(f"{path.relative_to(LIB)}:{node.lineno}" for path, tree in sources.items() for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "learn"
                  and getattr(node.func.value, "id", None) == "weight_swap")


def test_one_export_set_up_learns_the_weight_swap_for_every_study():
    assert [place.split(":")[0] for place in swap_learners(_sources())] == ["runtimes/graph_pool.py"]
    planted = {LIB / "studies" / "x" / "check.py": ast.parse("plan = weight_swap.learn(a, b, c, d, 1)\n")}
    assert swap_learners(planted) == ["studies/x/check.py:1"]


def test_the_quantizers_screen_is_the_engines_screen_rows():
    screen = pd.DataFrame({"model": "M", "seed": [0, 1, 2], "min_gap": [0.0, 1e-6, 1e-2],
                           "smallest_gap_ulps": [0.0, 8.0, 80_000.0]})
    rows = engine_tables.screen_rows(screen, "M", "static", threshold=1e-4)
    assert list(rows.columns) == list(frame([], ScreenRow).columns) + ["in_reach"]
    assert rows.in_reach.tolist() == [True, True, False] and rows.min_margin_ulps.tolist() == [0.0, 8.0, 80_000.0]
    assert rows.exact_ties.tolist() == [1, 0, 0]

