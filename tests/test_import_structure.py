"""The library's shape, checked on its source: no import circle, and every import points down the layers.

Layers, top to bottom: `bench` (measures studies), `studies.<study>` (one package each, never importing another
study), `engine` (the one discrete-choice engine every model study calls: it imports no study), the workbook
machinery (`workbook`: it finds a study's rules by name and imports none of it), and the
science every study shares (`models`, `runtimes`, `compare`, `reference`, `compat`), which imports neither the
studies nor the machinery. Imports inside functions count: a lazy import is still an arrow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

LIB = REPO / "lib"
SHARED = ("exactness.models", "exactness.runtimes", "exactness.compare", "exactness.published", "exactness.compat",
          "exactness.causes")


def _modules() -> dict[str, Path]:
    found = {}
    for path in (LIB / "exactness").rglob("*.py"):
        name = ".".join(path.relative_to(LIB).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The library modules `name` imports: `from a.b import c` names a.b, and a.b.c where c is a module."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules}
    # a module's own packages load before it whatever it imports: that is not an arrow of its own
    return {m for m in out if m in modules and m != name and not name.startswith(m + ".")}


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each a circle of imports."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _study(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


def wrong_way(edges: dict[str, set[str]]) -> list[str]:
    arrows = []
    for source, targets in edges.items():
        for target in targets:
            if source.startswith("exactness.workbook") and target.startswith(("exactness.studies", "exactness.bench")):
                arrows.append(f"the machinery imports up: {source} -> {target}")
            if source.startswith("exactness.engine") and target.startswith(("exactness.studies", "exactness.bench")):
                arrows.append(f"the engine imports up: {source} -> {target}")
            if source.startswith("exactness.workbook") and target.startswith("exactness.engine"):
                arrows.append(f"the machinery imports up: {source} -> {target}")
            if source.startswith(SHARED) and target.startswith(
                    ("exactness.studies", "exactness.bench", "exactness.workbook", "exactness.engine")):
                arrows.append(f"shared science imports up: {source} -> {target}")
            if _study(source) and _study(target) and _study(source) != _study(target):
                arrows.append(f"one study imports another: {source} -> {target}")
    return sorted(arrows)


def test_no_import_circle_anywhere_in_lib():
    assert circles(graph()) == []


def test_every_import_points_down_the_layers():
    assert wrong_way(graph()) == []


def test_the_checks_find_a_circle_and_an_upward_arrow():
    planted = {"exactness.studies.a.x": {"exactness.studies.a.y"}, "exactness.studies.a.y": {"exactness.studies.a.x"},
               "exactness.workbook.cli": {"exactness.studies.a.x"}, "exactness.studies.b.z": {"exactness.studies.a.y"}}
    assert circles(planted) == [["exactness.studies.a.x", "exactness.studies.a.y"]]
    assert wrong_way(planted) == ["one study imports another: exactness.studies.b.z -> exactness.studies.a.y",
                                  "the machinery imports up: exactness.workbook.cli -> exactness.studies.a.x"]


def test_every_study_is_a_package_with_its_rules():
    notebooks = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    packages = {p.parent.name for p in (LIB / "exactness" / "studies").glob("*/__init__.py")}
    assert packages == notebooks
    assert all((LIB / "exactness" / "studies" / study / "rules.py").exists() for study in notebooks)


# A study's words live in three modules, named alike in every study: the notebook's sentences and captions
# (`sentences`), the findings set beside the investigations (`findings`) and the answer table (`answers`).
WORD_MODULES = ("sentences", "findings", "answers")
WORDS = re.compile(r"(sentence|_words|caption)s?$")


ENGINE_WORD_MODULES = ("verdict_words", "place_words", "answers")


def words_outside_word_modules(sources: dict[str, str], word_modules: tuple[str, ...] = WORD_MODULES) -> list[str]:
    """`module: function` for each function named as words (`*_sentence`, `*_words`, `*_caption`), or method so
    named or called `words`, defined in a study module that is not one of its word modules (`sentences`,
    `findings`, `answers`; a figure's labels stay with its figure)."""
    found = []
    for name, source in sources.items():
        stem = name.rsplit(".", 1)[-1]
        if stem in word_modules or stem == "figures":
            continue
        body = ast.parse(source).body
        methods = [(f"{c.name}.", m) for c in body if isinstance(c, ast.ClassDef) for m in c.body]
        found += [f"{name}: {owner}{node.name}" for owner, node in [("", n) for n in body] + methods
                  if isinstance(node, ast.FunctionDef)
                  and (WORDS.search(node.name.removeprefix("_")) or (owner and node.name == "words"))]
    return sorted(found)


def _study_sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in _modules().items() if _study(name)}


def test_every_study_keeps_its_words_in_the_same_three_modules():
    studies = {p.parent.name for p in (LIB / "exactness" / "studies").glob("*/__init__.py")}
    missing = [f"{study}/{module}.py" for study in sorted(studies) for module in WORD_MODULES
               if not (LIB / "exactness" / "studies" / study / f"{module}.py").exists()]
    assert missing == []
    assert words_outside_word_modules(_study_sources()) == []


def test_the_engine_keeps_its_words_in_its_word_modules():
    engine = {name: path.read_text() for name, path in _modules().items() if name.startswith("exactness.engine.")}
    assert len(engine) > 5 and words_outside_word_modules(engine, ENGINE_WORD_MODULES) == []


def test_the_check_finds_a_sentence_written_in_a_computation_module():
    planted = {"exactness.studies.a.scale": "def ratio(x):\n    return x\n\ndef ratio_sentence(x):\n    return ''\n",
               "exactness.studies.a.sentences": "def ratio_sentence(x):\n    return ''\n",
               "exactness.studies.a.planted": "def _size_words(x):\n    return ''\n",
               "exactness.studies.a.stages": "class Proof:\n    def words(self):\n        return ''\n"}
    assert words_outside_word_modules(planted) == ["exactness.studies.a.planted: _size_words",
                                                   "exactness.studies.a.scale: ratio_sentence",
                                                   "exactness.studies.a.stages: Proof.words"]


# What people read is worded from typed results by the word layer; one computation writes words into something kept
# as written, its import named with its reason (an import not named here fails the check, in these modules too).
WORDS_READ_BY = {
    "exactness.studies.discrete_ops.export_test_change: exactness.engine.verdict_words":
        "the patch is a test file: its comment is the class's proof (the edit is decided without it)",
}
WORKBOOK_WORD_MODULES = ("wording", "presentation")


def _computation(name: str) -> bool:
    """A study's or the engine's module that is not one of its word modules (a figure's labels stay with it)."""
    stem = name.rsplit(".", 1)[-1]
    if _study(name):
        return stem not in (*WORD_MODULES, "figures")
    return name.startswith("exactness.engine.") and stem not in ENGINE_WORD_MODULES


def words_read_by_computations(sources: dict[str, str]) -> list[str]:
    """`module: what` for each computation module (`_computation`) that imports a word module (a study's, the
    engine's, or the workbook's `wording` and `presentation`), imports a function named as words from anywhere, or
    reaches an attribute so named through any name (`gpu_folder.machine_words(...)`, `self.tie_words`)."""
    word_modules = {*WORD_MODULES, *ENGINE_WORD_MODULES, *WORKBOOK_WORD_MODULES}
    found = []
    for name, source in sources.items():
        if not _computation(name):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                found += [f"{name}: {module}{'.' if node.module else ''}{a.name}" for a in node.names
                          if {module.rsplit(".", 1)[-1], a.name} & word_modules or WORDS.search(a.name)]
            elif isinstance(node, ast.Import):
                found += [f"{name}: {a.name}" for a in node.names if a.name.rsplit(".", 1)[-1] in word_modules]
            elif isinstance(node, ast.Attribute) and WORDS.search(node.attr):
                found.append(f"{name}: .{node.attr}")
    return sorted(set(found))


def test_no_computation_reads_the_word_layer():
    """Decisions and tables are computed without words; the word layer reads them (`verdict_words.table` writes the
    verdicts table people see from the typed verdicts), never the other way round."""
    sources = {name: path.read_text() for name, path in _modules().items()}
    assert len([name for name in sources if _computation(name)]) > 40
    assert words_read_by_computations(sources) == sorted(WORDS_READ_BY)


def test_the_check_finds_a_computation_that_reads_words():
    planted = {"exactness.studies.a.study": "from exactness.engine import verdict_words\n",
               "exactness.engine.verdicts": "from exactness.engine.answers import rate_words\n",
               "exactness.studies.a.rate": "import exactness.studies.a.sentences\nfrom x import tie_sentence\n",
               "exactness.studies.a.sentences": "from exactness.engine import place_words\n",
               "exactness.studies.a.scale": "from exactness.studies.a import study\n",
               "exactness.studies.a.pairs": "from exactness.workbook import sweep, wording\n",
               "exactness.studies.a.gpu": "from . import sentences\nfrom ..b import gpu_folder\n"
                                          "gpu_folder.machine_words(f)\n",
               "exactness.studies.a.wording": "from exactness.engine.place_words import where\n"}
    assert words_read_by_computations(planted) == [
        "exactness.engine.verdicts: exactness.engine.answers.rate_words",
        "exactness.studies.a.gpu: .machine_words", "exactness.studies.a.gpu: .sentences",
        "exactness.studies.a.pairs: exactness.workbook.wording",
        "exactness.studies.a.rate: exactness.studies.a.sentences", "exactness.studies.a.rate: x.tie_sentence",
        "exactness.studies.a.study: exactness.engine.verdict_words",
        "exactness.studies.a.wording: exactness.engine.place_words.where"]


def test_every_study_computes_its_summary_figures_in_one_place_by_one_name():
    """summary.json's figures are a computation: `study.summary_values` in every study, in no word module."""
    studies = sorted(p.parent.name for p in (LIB / "exactness" / "studies").glob("*/__init__.py"))

    def defined(study: str, module: str) -> set[str]:
        path = LIB / "exactness" / "studies" / study / f"{module}.py"
        return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}

    assert [s for s in studies if "summary_values" not in defined(s, "study")] == []
    assert [f"{s}.{m}" for s in studies for m in WORD_MODULES if {"summary", "summary_values"} & defined(s, m)] == []
