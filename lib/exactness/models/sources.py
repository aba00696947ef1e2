"""One interface for every model a study runs, from three sources: the built-in registry, a transformers
checkout's own model testers, and your own builder.

A `Subject` has a name, where it comes from (`tester`), the export test's skip reason where there is one, and for a
seed `make(seed)`: the model in eval mode and its inputs (a dict of tensors). `resolve(name, transformers_tests)`
finds it (`exactness.models.model_names` says what a name may be); every process resolves a name itself, once,
so a worker is handed names, never built models.

**A class from a checkout** is built by that checkout's tester exactly as transformers' export test builds it
(`ExportTesterMixin._prepare_export_model_and_inputs`), with the seed convention of this workbook:
1. the tester's test case is made and `setUp()` run (it makes `model_tester`);
2. right before the tester draws: the testers' `global_rng` (`tests/test_modeling_common.py`, a
   `random.Random`) is seeded with the seed, and so are torch's global generator (`torch.manual_seed(seed)`)
   and numpy's (`np.random.seed(seed % 2**32)`), which some testers draw from (`torch.randint`, numpy's starts
   of the CLIP-like masks); the export test itself seeds none of them;
3. `prepare_config_and_inputs_for_model_class(model_class)` where the tester has it, else
   `prepare_config_and_inputs_for_common()`; then the test case's `_prepare_for_class`; then the export test's
   cleaning (None values, `labels`, `future_values` and `return_loss` dropped, `config.return_loss = False`);
4. `set_config_for_less_flaky_test(config)`; `torch.manual_seed(seed)` right before `model_class(config)`;
   `.eval()`; `set_model_for_less_flaky_test(model)`; floating inputs cast to the model's dtype.
The skip reason is quoted from that checkout's `tests/exporters/test_export.py` (`EXPORT_SKIPS`, the scopes that
drop the value comparison). Only the checkout's `tests` package is served from it (a finder for `tests` and
`tests.*` first on `sys.meta_path`): nothing else of the checkout shadows an installed module (the common tests'
load of the checkout's `src/transformers` is handed the installed package), and absolute
(`tests.test_modeling_common`) and relative imports of a tester reach the same modules, so one `global_rng`.

**Your own builder** is `package.module:function` or `/absolute/path/file.py:function`; `function(seed)` returns
`(model, inputs)`, and the workbook puts the model in eval mode. It is the code you named on the command line;
nothing found in a run's files is ever executed.

Every failure is a `SubjectError` whose text is one line: what, where, and what to do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import time
import unittest
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from exactness import published
from exactness.models import checkout_index, class_registry, model_names
from exactness.models.model_names import Kind

NUMPY_SEEDS = class_registry.NUMPY_SEEDS
# What the export test drops from a tester's inputs before it exports (`_clean_inputs_for_export`).
DROPPED_INPUTS = ("labels", "future_values", "return_loss")


class SubjectError(Exception):
    """A model that cannot be built or named; `str()` is one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


Source = Kind  # where a subject comes from: the same three kinds its name is checked as
FALLBACKS = model_names.FALLBACKS


@dataclass(frozen=True)
class Checkout:
    """A run's transformers checkout and what builds a class its testers cannot: nothing (`fallback` "none"), or
    the built-in registry (`fallback` "registry"). Stands for the checkout's root wherever a path is read."""

    root: str = ""
    fallback: str = "none"

    def __fspath__(self) -> str:
        return self.root

    def __bool__(self) -> bool:
        return bool(self.root)

    def __str__(self) -> str:
        return self.root


def _checkout(transformers_tests: str | Checkout) -> Checkout:
    return transformers_tests if isinstance(transformers_tests, Checkout) else Checkout(transformers_tests or "")


@dataclass(frozen=True)
class Made:
    """One seed's model (eval mode) and its inputs."""

    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]


@dataclass(frozen=True)
class Stated:
    """The export test's skip of a class: its reason as quoted, the scope it sits in, and what it claims (labelled
    by hand in `exactness.published` for the classes this workbook has studied; None elsewhere)."""

    reason: str = ""
    scope: str = ""
    claim: published.Claim | None = None


@dataclass(frozen=True)
class Subject:
    """A model for every seed. `rebuildable`: the registry's in-place seed rebuild (`seed_rebuild`) may replace
    `build`, where it proves itself."""

    name: str
    source: Source
    tester: str  # where its config, inputs and weights come from, in words
    stated: Stated = field(default_factory=Stated)
    rebuildable: bool = False

    def make(self, seed: int) -> Made:
        raise NotImplementedError

    def build(self, seed: int) -> torch.nn.Module:
        return self.make(seed).model

    def inputs(self, seed: int) -> dict[str, torch.Tensor]:
        return self.make(seed).inputs


@dataclass(frozen=True)
class RegistrySubject(Subject):
    def make(self, seed: int) -> Made:
        return Made(self.build(seed), self.inputs(seed))

    def build(self, seed: int) -> torch.nn.Module:
        return class_registry.build(self.name, seed)

    def inputs(self, seed: int) -> dict[str, torch.Tensor]:
        return class_registry.inputs(self.name, seed)


def _checked(name: str, where: str, seed: int, result: Any) -> Made:
    """`(model, inputs)` as a study needs it, or a SubjectError saying what came back instead."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise SubjectError(f"{name}: {where} must return (model, inputs) for seed {seed}, got "
                           f"{type(result).__name__}")
    model, inputs = result
    if not isinstance(model, torch.nn.Module):
        raise SubjectError(f"{name}: {where} returned a {type(model).__name__} as the model for seed {seed}, not a "
                           "torch.nn.Module")
    if not isinstance(inputs, Mapping) or not inputs:
        raise SubjectError(f"{name}: {where} returned {type(inputs).__name__} as the inputs for seed {seed}, not a "
                           "non-empty dict of tensors keyed by the forward's argument names")
    wrong = [f"{k!r} ({type(v).__name__})" for k, v in inputs.items()
             if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if wrong:
        raise SubjectError(f"{name}: the inputs for seed {seed} hold {', '.join(wrong)}: this study feeds ONNX "
                           "Runtime tensors only, keyed by the forward's argument names")
    nonfinite = _nonfinite(inputs)
    if nonfinite:
        raise SubjectError(f"{name}: {where} returned non-finite inputs for seed {seed}: {', '.join(nonfinite)}; "
                           "a comparison of eager and ONNX Runtime on NaN or inf inputs decides nothing: make the "
                           "builder draw finite values")
    return Made(model.eval(), dict(inputs))


def _nonfinite(inputs: Mapping[str, torch.Tensor]) -> list[str]:
    """Each floating input holding NaN or inf, with how many of its values."""
    found = []
    for key, value in inputs.items():
        if value.is_floating_point() or value.is_complex():
            bad = (~torch.isfinite(value)).sum().item()
            if bad:
                nan = torch.isnan(value).sum().item()
                found.append(f"{key} ({nan:,} NaN and {bad - nan:,} inf of {value.numel():,} values)")
    return found


# A build still running after this long says so on stderr, then again every as long: a builder that hangs
# must not look like a run that hangs. `exactness.workbook.run_progress` passes these lines to the terminal.
SLOW_BUILD_S = 30.0


@contextlib.contextmanager
def _said_while_slow(name: str, seed: int, who: str) -> Iterator[None]:
    """Lines on stderr while the block runs longer than SLOW_BUILD_S: 'still building NAME for seed S: 30 s so
    far (WHO has not returned)'."""
    done = threading.Event()
    began = time.monotonic()

    def watch():
        while not done.wait(SLOW_BUILD_S):
            print(f"still building {name} for seed {seed}: {time.monotonic() - began:.0f} s so far ({who} has not "
                  "returned)", file=sys.stderr, flush=True)

    watcher = threading.Thread(target=watch, daemon=True, name=f"slow build notice {name}")
    watcher.start()
    try:
        yield
    finally:
        done.set()


@dataclass(frozen=True)
class BuilderSubject(Subject):
    function: Any = None

    def make(self, seed: int) -> Made:
        try:
            with _said_while_slow(self.name, seed, "your builder"):
                result = self.function(seed)
        except Exception as error:  # the user's code: its failure is this class's one line, not the run's end
            raise SubjectError(f"{self.name}: your builder raised {type(error).__name__} for seed {seed}: "
                               f"{str(error)[:300]}") from error
        return _checked(self.name, self.tester, seed, result)


# -- a transformers checkout -------------------------------------------------------------------------------------


class _CheckoutTests(importlib.abc.MetaPathFinder):
    """Serves the `tests` package from one checkout, whatever else is on sys.path; its submodules are then found
    through the package's own `__path__` by the standard finder."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path, target=None):
        if fullname != "tests":
            return None
        return importlib.machinery.PathFinder.find_spec("tests", [str(self.root)])


_ACTIVE: list[_CheckoutTests] = []  # the one checkout whose tests package this process imports


def _activate(root: Path) -> None:
    """Make `tests` the checkout's. Another checkout's (or any other) `tests` modules are forgotten first: two
    checkouts' testers must not mix in one process."""
    if _ACTIVE and _ACTIVE[0].root == root:
        return
    for finder in _ACTIVE:
        sys.meta_path.remove(finder)
    _ACTIVE.clear()
    for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
        del sys.modules[name]
    finder = _CheckoutTests(root)
    sys.meta_path.insert(0, finder)
    _ACTIVE.append(finder)
    importlib.invalidate_caches()
    _import_tester.cache_clear()


def activate(root: Path) -> None:
    """Serve `tests` (and `tests.*`) from this checkout in this process (its export test, its testers)."""
    _activate(root)


def _module_name(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


@contextlib.contextmanager
def installed_transformers_kept() -> Iterator[None]:
    """transformers' common tests load their own tree's `src/transformers` as `transformers`
    (`tests/test_pipeline_mixin.py` calls `direct_transformers_import` on it at import), which would put the
    checkout's copy in place of the installed package for the rest of the process, and every class imported after it
    would come from the checkout's files. While a tester imports, that call gets the installed package instead."""
    import transformers.utils
    from transformers.utils import import_utils

    installed, original = sys.modules["transformers"], import_utils.direct_transformers_import
    homes = [home for home in (transformers.utils, import_utils)
             if getattr(home, "direct_transformers_import", None) is original]
    for home in homes:
        home.direct_transformers_import = lambda path, file="__init__.py": installed
    try:
        yield
    finally:
        for home in homes:
            home.direct_transformers_import = original
        sys.modules["transformers"] = installed


@functools.cache
def _import_tester(root: Path, path: Path):
    name = _module_name(root, path)
    try:
        with installed_transformers_kept():
            return importlib.import_module(name)
    except unittest.SkipTest as skip:
        raise SubjectError(f"{path.relative_to(root)} skips itself on import: {skip}") from None
    except ModuleNotFoundError as error:
        missing = error.name or str(error)
        if missing.split(".")[0] == "tests":
            raise SubjectError(f"{path.relative_to(root)} does not import: {error} (the checkout at {root} lacks "
                               "a file its testers import)") from None
        utils = "" if (root / "utils").is_dir() else (
            f"; or, if {missing} is a module of transformers' repository utils/ folder, which this checkout lacks "
            "(tests/test_processing_common.py imports fetch_hub_objects_for_ci from it), copy utils/ from the "
            "repository at that version")
        raise SubjectError(f"{path.relative_to(root)} does not import: no module {missing!r} (transformers' tests "
                           f"need their test dependencies; install {missing.split('.')[0]} in the workbook's "
                           f"environment{utils})") from None
    except FileNotFoundError as error:
        raise SubjectError(f"{path.relative_to(root)} does not import: it reads {error.filename}, which the checkout "
                           "lacks: a checkout needs transformers' src/ and tests/ of one version (a source "
                           "distribution leaves out tests/utils, tests/generation and tests/exporters: copy them from "
                           "transformers' repository at that version)") from None
    except ImportError as error:
        raise SubjectError(f"{path.relative_to(root)} does not import: {error} (is the checkout's version the "
                           "installed transformers'? its tests import names of their own version)") from None
    except Exception as error:  # the checkout's code: any failure of its import is this class's one line
        raise SubjectError(f"{path.relative_to(root)} does not import: {type(error).__name__}: "
                           f"{str(error)[:300]}") from None


def _test_classes(module, model: str) -> list[tuple[type, type]]:
    """(test case class, model class) for every test case of the module whose all_model_classes has `model`."""
    found = []
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, unittest.TestCase):
            for candidate in getattr(value, "all_model_classes", ()) or ():
                if getattr(candidate, "__name__", None) == model:
                    found.append((value, candidate))
    return found


def _checkout_version(root: Path) -> str:
    init = root / "src" / "transformers" / "__init__.py"
    if init.is_file():
        for line in init.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    return ""


def stated_in_checkout(root: Path, model: str) -> Stated:
    skip = checkout_index.skip_of(root, model)
    if skip is None:
        return Stated()
    return Stated(skip.reason, skip.scope, published.skip_claim(model))


def _tester_global_rng(test_case):
    """The `global_rng` the tester's draws use: the one of the `tests.test_modeling_common` it was imported with,
    found through its classes' functions (a later checkout's activation drops that module from sys.modules, and
    importing it again would make a second generator the tester never reads); else the module's, if imported."""
    for klass in getattr(test_case, "__mro__", ()):
        for value in vars(klass).values():
            namespace = getattr(value, "__globals__", None)
            if namespace is not None and "global_rng" in namespace:
                return namespace["global_rng"]
    return getattr(sys.modules.get("tests.test_modeling_common"), "global_rng", None)


@dataclass(frozen=True)
class CheckoutSubject(Subject):
    root: Path = Path()
    test_case: Any = None  # the tester's unittest.TestCase class
    model_class: Any = None

    def make(self, seed: int) -> Made:
        _activate(self.root)
        global_rng = _tester_global_rng(self.test_case)
        if global_rng is None:
            raise SubjectError(f"{self.name}: the checkout's tests/test_modeling_common.py has no global_rng; this "
                               "workbook seeds the testers' draws through it")
        try:
            with _said_while_slow(self.name, seed, "the checkout's tester"):
                return self._make(seed, global_rng)
        except unittest.SkipTest as skip:
            raise SubjectError(f"{self.name}: its tester skips it here: {skip}") from None
        except SubjectError:
            raise
        except Exception as error:  # the checkout's tester: its failure is this class's one line
            raise SubjectError(f"{self.name}: {self.tester} failed for seed {seed}: {type(error).__name__}: "
                               f"{str(error)[:300]}") from error

    def _make(self, seed: int, global_rng) -> Made:
        """The tester's steps, in the export test's order."""
        case = self.test_case("setUp")
        case.setUp()
        tester = case.model_tester
        global_rng.seed(seed)
        torch.manual_seed(seed)
        np.random.seed(seed % NUMPY_SEEDS)
        if hasattr(tester, "prepare_config_and_inputs_for_model_class"):
            config, inputs = tester.prepare_config_and_inputs_for_model_class(self.model_class)
        else:
            config, inputs = tester.prepare_config_and_inputs_for_common()
        inputs = case._prepare_for_class(inputs, self.model_class)
        inputs = {k: v for k, v in inputs.items() if v is not None and k not in DROPPED_INPUTS}
        config.return_loss = False
        from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test

        set_config_for_less_flaky_test(config)
        torch.manual_seed(seed)
        model = self.model_class(config).eval()
        set_model_for_less_flaky_test(model)
        made = _checked(self.name, self.tester, seed, (model, inputs))
        dtype = next((p.dtype for p in model.parameters()), torch.float32)
        return Made(model, {k: v.to(dtype) if v.is_floating_point() else v for k, v in made.inputs.items()})


def _multimodal(model: torch.nn.Module) -> bool:
    try:
        from transformers.exporters.utils import is_multimodal
    except ImportError:
        return False
    return bool(is_multimodal(model))


def from_checkout(name: str, checkout: str) -> CheckoutSubject:
    root = checkout_index.root_of(checkout)
    paths = checkout_index.testers_of(root, name)
    if not paths:
        raise SubjectError(f"{name} is in no all_model_classes of {root / checkout_index.MODELS}/*/test_modeling_*.py")
    _activate(root)
    errors = []
    for path in paths:
        try:
            module = _import_tester(root, path)
        except SubjectError as error:
            errors.append(str(error))
            continue
        for test_case, model_class in _test_classes(module, name):
            where = f"{path.relative_to(root)}::{test_case.__name__}"
            if getattr(test_case, "__unittest_skip__", False):
                errors.append(f"{where} is skipped here: {getattr(test_case, '__unittest_skip_why__', '')} (a GPU, a "
                              "package or a download it needs)")
                continue
            version = _checkout_version(root)
            tester = f"{where} in {root}" + (f" (transformers {version})" if version else "")
            return CheckoutSubject(name, Source.CHECKOUT, tester, stated_in_checkout(root, name), False, root,
                                   test_case, model_class)
    raise SubjectError(f"{name}: " + ("; ".join(errors) if errors else
                                      f"no test case of {', '.join(str(p.relative_to(root)) for p in paths)} lists it "
                                      "in all_model_classes once imported (is torch available to the tester?)"))


def from_builder(name: str) -> BuilderSubject:
    problem = model_names.builder_problem(name)
    if problem:
        raise SubjectError(f"models {problem}")
    spec = model_names.builder(name)
    try:
        if spec.is_file:
            # the same name in every process (a worker unpickles what the file defines under it)
            module_name = "exactness_builder_" + hashlib.sha256(spec.target.encode()).hexdigest()[:16]
            loader = importlib.util.spec_from_file_location(module_name, spec.target)
            module = importlib.util.module_from_spec(loader)
            sys.modules[module_name] = module  # a pickled model or dataclass of the file finds its module again
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(spec.target)
    except Exception as error:  # the user's module: its import failure is this name's one line
        raise SubjectError(f"{name}: importing {spec.target} raised {type(error).__name__}: {str(error)[:300]}") \
            from error
    function = getattr(module, spec.function, None)
    if not callable(function):
        raise SubjectError(f"{name}: {spec.target} has no function {spec.function!r}")
    return BuilderSubject(name, Source.BUILDER, f"{spec.function}(seed) of {spec.target}", function=function)


def from_registry(name: str) -> RegistrySubject:
    entry = class_registry.subject(name)
    reason = entry.skip_reason if entry.skip_reason is not None else published.skip_reason(name)
    claim = published.Claim(*entry.skip_claim) if entry.skip_claim else published.skip_claim(name)
    return RegistrySubject(name, Source.REGISTRY, entry.source or "the near-tie study's builders",
                           Stated(reason, published.SKIP_SCOPE if reason else "", claim), rebuildable=True)


@functools.cache
def resolve(name: str, transformers_tests: str | Checkout = "") -> Subject:
    """The subject a name names (see `exactness.models.model_names`), made once per process. With a checkout, a
    class comes from the checkout's tester; one its testers cannot build is a SubjectError saying why, unless the
    checkout's `fallback` is "registry" and the registry has the class (its tester text then says so)."""
    checkout = _checkout(transformers_tests)
    kind = model_names.kind(name, class_registry.NAMES, checkout.root)
    if kind is Kind.BUILDER:
        return from_builder(name)
    if kind is Kind.SKIPPED:
        raise SubjectError(f"{model_names.SKIPPED!r} names a list of classes, not one: expand it first "
                           "(model_names.expand)")
    if kind is Kind.CHECKOUT:
        try:
            return from_checkout(name, checkout.root)
        except SubjectError as error:
            return _fallback(name, checkout, str(error))
    if checkout and not checkout_index.checkout_problem(checkout.root):
        return _fallback(name, checkout, f"{name}: no tester of the checkout lists it in all_model_classes "
                                         f"({checkout_index.root_of(checkout.root) / checkout_index.MODELS}"
                                         "/*/test_modeling_*.py)")
    if name not in class_registry.SUBJECTS:
        where = " nor in the checkout's testers" if checkout else " (no transformers checkout given)"
        raise SubjectError(f"{name} is not registered in exactness.models.class_registry{where}")
    return from_registry(name)


def _fallback(name: str, checkout: Checkout, why: str) -> Subject:
    """The registry's class where the run asked for it (`fallback` "registry"), else the reason as the error."""
    if checkout.fallback != "registry" or name not in class_registry.SUBJECTS:
        hint = ("; -p fallback registry builds it from the built-in registry instead"
                if name in class_registry.SUBJECTS else "")
        raise SubjectError(why + hint)
    subject = from_registry(name)
    return dataclasses.replace(subject, tester=f"the built-in registry, {subject.tester} (fallback: {why})")


def source_of(name: str, transformers_tests: str | Checkout = "") -> str:
    """What builds `name` in a run, in words, read without importing anything: a checkout's tester file, your
    builder, the registry (with what it cites), or why nothing will."""
    checkout = _checkout(transformers_tests)
    kind = model_names.kind(name, class_registry.NAMES, checkout.root)
    registry = class_registry.SUBJECTS.get(name)
    cited = (registry.source or "the near-tie study's builders") if registry else ""
    if kind is Kind.BUILDER:
        return f"your builder {name}"
    if kind is Kind.CHECKOUT:
        root = checkout_index.root_of(checkout.root)
        path = checkout_index.testers_of(root, name)[0].relative_to(root)
        return f"the checkout's tester {path}"
    if checkout and not checkout_index.checkout_problem(checkout.root):
        if checkout.fallback == "registry" and registry:
            return f"the built-in registry, {cited} (fallback: no tester of the checkout lists it)"
        return "not built: no tester of the checkout lists it"
    return f"the built-in registry, {cited}" if registry else "not built: not registered"


def make(name: str, seed: int, transformers_tests: str | Checkout = "") -> Made:
    """`resolve(name).make(seed)`; a checkout's class the export test would split into components is refused
    (the test compares each component, this study a whole model's graph)."""
    subject = resolve(name, transformers_tests)
    made = subject.make(seed)
    if subject.source is Source.CHECKOUT and _multimodal(made.model):
        raise SubjectError(f"{name}: the export test splits this model into components (is_multimodal) and compares "
                           "each; this study compares a whole model's graph, so it would not see what the test sees")
    return made


def _skips_readable(root: str) -> bool:
    try:
        checkout_index.comparison_skips(checkout_index.root_of(root))
    except checkout_index.CheckoutError:
        return False
    return True


def stated(name: str, transformers_tests: str | Checkout = "") -> Stated:
    """The class's skip without building it: with a checkout whose export test's EXPORT_SKIPS can be read, the reason
    it states, none where it lists the class nowhere (whichever source builds the class: the audit judges the
    checkout's skips); else the registry's (an unknown name: none)."""
    root = _checkout(transformers_tests).root
    if root and not checkout_index.checkout_problem(root):
        found = stated_in_checkout(checkout_index.root_of(root), name)
        if found.reason or model_names.kind(name, class_registry.NAMES, root) is Kind.CHECKOUT or _skips_readable(root):
            return found  # a class the checkout's own EXPORT_SKIPS leaves out is compared by its test
    if name in class_registry.SUBJECTS and model_names.builder(name) is None:
        return from_registry(name).stated
    return Stated()
