"""One subject interface, three sources: the registry, a transformers checkout's own testers (a small checkout
of this project's own in transformers' layout, tests/fixtures/transformers_checkout), and your own builder."""

import io
import random
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel
from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test

from exactness.models import class_registry, sources

CHECKOUT = str(Path(__file__).resolve().parents[1] / "fixtures" / "transformers_checkout")


def test_a_checkout_class_is_built_by_its_own_tester_seeded_as_the_export_test_is():
    subject = sources.resolve("BertModel", CHECKOUT)
    assert subject.source is sources.Source.CHECKOUT and "tests/models/tiny/test_modeling_tiny.py" in subject.tester
    made = subject.make(3)
    # by hand: the testers' global_rng seeded, the tester's draws in its order, weights from torch.manual_seed
    rng = random.Random(3)
    ids = torch.tensor([rng.randint(0, 98) for _ in range(91)]).view(13, 7)
    mask = torch.tensor([rng.randint(0, 1) for _ in range(91)]).view(13, 7)
    mask[:, 0] = 1
    types = torch.tensor([rng.randint(0, 15) for _ in range(91)]).view(13, 7)
    assert set(made.inputs) == {"input_ids", "attention_mask", "token_type_ids"}  # labels dropped, as the test does
    assert torch.equal(made.inputs["input_ids"], ids) and torch.equal(made.inputs["attention_mask"], mask)
    assert torch.equal(made.inputs["token_type_ids"], types)
    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, type_vocab_size=16)
    set_config_for_less_flaky_test(config)
    torch.manual_seed(3)
    expected = BertModel(config).eval()
    set_model_for_less_flaky_test(expected)
    assert not made.model.training and made.model.config.layer_norm_eps == 1.0
    assert all(torch.equal(a, b) for a, b in zip(made.model.state_dict().values(), expected.state_dict().values(),
                                                 strict=True))
    again, other = subject.make(3), subject.make(4)
    assert all(torch.equal(again.inputs[k], made.inputs[k]) for k in made.inputs)
    assert not torch.equal(other.inputs["input_ids"], made.inputs["input_ids"])


def test_only_the_checkouts_tests_package_is_served_from_it():
    sources.resolve("BertModel", CHECKOUT).make(0)
    assert sys.modules["tests"].__file__.startswith(CHECKOUT)
    assert CHECKOUT not in sys.path  # nothing else of the checkout shadows an installed module


def test_a_tester_loading_its_checkouts_src_transformers_leaves_the_installed_one_in_place(tmp_path):
    # transformers' tests/test_pipeline_mixin.py loads `src/transformers` of its own tree as `transformers`; here that
    # tree's copy would put a module holding no class at all in the installed package's place
    import shutil

    import transformers

    root = tmp_path / "transformers"
    shutil.copytree(CHECKOUT, root)
    (root / "src" / "transformers").mkdir(parents=True)
    (root / "src" / "transformers" / "__init__.py").write_text(
        "import sys, types\nsys.modules[__name__] = types.ModuleType(__name__, 'the checkout copy')\n")
    (root / "tests" / "test_pipeline_mixin.py").write_text(
        "from pathlib import Path\n\nfrom transformers.utils import direct_transformers_import\n\n"
        "transformers_module = direct_transformers_import(str(Path(__file__).parents[1] / 'src' / 'transformers'))\n")
    tester = root / "tests" / "models" / "tiny" / "test_modeling_tiny.py"
    tester.write_text("from ...test_pipeline_mixin import transformers_module  # noqa: F401\n" + tester.read_text())
    made = sources.resolve("BertModel", str(root)).make(0)
    assert sys.modules["transformers"] is transformers and transformers.BertModel is BertModel
    assert type(made.model) is BertModel
    assert sys.modules["tests.test_pipeline_mixin"].transformers_module is transformers


def test_the_skip_reason_is_quoted_from_the_checkouts_export_test():
    stated = sources.resolve("BertModel", CHECKOUT).stated
    assert stated.scope == "onnx.exactness" and stated.reason.startswith("The tiny config's pooler ties")
    assert sources.stated("GhostModel", CHECKOUT).scope == "onnx.exactness"  # read without any tester
    assert sources.stated("BertForMaskedLM", CHECKOUT).reason == ""  # openvino's comparison, not ORT's


@pytest.mark.parametrize("name, says", [
    ("BertForTokenClassification", "tests/models/broken/test_modeling_broken.py does not import: no module "
                                   "'a_package_nobody_installed'"),
    ("BertForSequenceClassification", "GpuOnlyTest is skipped here: test requires CUDA"),
    ("GhostModel", "GhostModel: no tester of the checkout lists it in all_model_classes"),
])
def test_a_class_the_checkout_cannot_build_is_one_line_saying_why(name, says):
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve(name, CHECKOUT)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_module_of_the_repositorys_utils_a_checkout_lacks_is_named_with_where_it_comes_from(tmp_path):
    # transformers' tests/test_processing_common.py imports fetch_hub_objects_for_ci from the repository's utils/,
    # which a source distribution leaves out
    import shutil

    root = tmp_path / "transformers"
    shutil.copytree(CHECKOUT, root)
    tester = root / "tests" / "models" / "tiny" / "test_modeling_tiny.py"
    tester.write_text("from fetch_hub_objects_for_ci import url_to_local_path  # noqa: F401\n" + tester.read_text())
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve("BertModel", str(root))
    assert "no module 'fetch_hub_objects_for_ci'" in str(error.value) and "copy utils/ from" in str(error.value)
    (root / "utils").mkdir()
    sources.resolve.cache_clear()
    sources._import_tester.cache_clear()
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve("BertModel", str(root))
    assert "no module 'fetch_hub_objects_for_ci'" in str(error.value) and "utils/" not in str(error.value)


def _builder_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_your_builder_by_file_and_by_module_gives_an_eval_model_and_its_inputs(tmp_path, monkeypatch):
    path = _builder_file(tmp_path, """
        import torch

        def build(seed):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.5))
            return model, {"input": torch.randn(2, 4)}
        """)
    by_file = sources.resolve(f"{path}:build")
    made = by_file.make(5)
    assert by_file.source is sources.Source.BUILDER and not made.model.training
    assert set(made.inputs) == {"input"} and torch.equal(made.inputs["input"], by_file.make(5).inputs["input"])
    monkeypatch.syspath_prepend(str(tmp_path))
    by_module = sources.resolve("my_model:build")
    assert torch.equal(by_module.make(5).inputs["input"], made.inputs["input"])


@pytest.mark.parametrize("body, says", [
    ("def build(seed):\n    raise RuntimeError('no weights for seed %d' % seed)\n",
     "your builder raised RuntimeError for seed 2: no weights for seed 2"),
    ("import torch\ndef build(seed):\n    return torch.nn.Linear(2, 2)\n", "must return (model, inputs) for seed 2"),
    ("import torch\ndef build(seed):\n    return torch.nn.Linear(2, 2), {'x': [1.0, 2.0]}\n",
     "the inputs for seed 2 hold 'x' (list)"),
    ("def build(seed):\n    return 'model', {}\n", "returned a str as the model for seed 2"),
])
def test_a_builder_that_raises_or_returns_the_wrong_type_is_one_line(tmp_path, body, says):
    path = _builder_file(tmp_path, body)
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve(f"{path}:build").make(2)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_the_registry_is_a_source_like_the_others():
    subject = sources.resolve("BertModel")
    assert subject.source is sources.Source.REGISTRY and subject.rebuildable
    made = subject.make(1)
    assert all(torch.equal(made.inputs[k], class_registry.inputs("BertModel", 1)[k]) for k in made.inputs)
    assert sources.resolve("BitModel").stated.claim is not None  # the registry quotes exactness.published


def test_with_a_checkout_its_reason_is_quoted_whichever_source_builds_the_class(tmp_path):
    import shutil

    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    export_test = copy / "tests" / "exporters" / "test_export.py"
    export_test.write_text(export_test.read_text().replace(
        '"onnx.exactness": {', '"onnx.exactness": {\n        "BitModel": "Drifts in this checkout.",'))
    stated = sources.stated("BitModel", str(copy))  # built by the registry: this checkout has no Bit tester
    assert stated.reason == "Drifts in this checkout." and stated.scope == "onnx.exactness"
    assert str(stated.claim) == "float noise"  # labelled once for the class in exactness.published
    assert sources.stated("BitModel").reason != stated.reason  # without a checkout: the registry's quote


def test_a_builder_returning_non_finite_inputs_is_one_line_naming_them(tmp_path):
    path = _builder_file(tmp_path, """
        import torch

        def build(seed):
            values = torch.randn(2, 8)
            values[0, :3] = float("nan")
            values[1, 0] = float("inf")
            return torch.nn.Linear(8, 2), {"x": values, "ids": torch.arange(4), "mask": torch.ones(2, 8)}
        """)
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve(f"{path}:build").make(3)
    message = str(error.value)
    assert "returned non-finite inputs for seed 3: x (3 NaN and 1 inf of 16 values);" in message
    assert "mask" not in message and "ids" not in message and "\n" not in message


def test_a_builder_that_does_not_return_is_named_with_its_seed_on_stderr_while_it_runs(tmp_path, monkeypatch,
                                                                                       capsys):
    from exactness.workbook.run_progress import RunProgress

    monkeypatch.setattr(sources, "SLOW_BUILD_S", 0.2)
    path = _builder_file(tmp_path, """
        import time

        import torch

        def build(seed):
            time.sleep(0.7)
            return torch.nn.Linear(2, 2), {"input": torch.zeros(1, 2)}
        """)
    sources.resolve(f"{path}:build").make(4)
    said = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(said) >= 2 and all(line.startswith(f"still building {path}:build for seed 4: ") and
                                  line.endswith(" s so far (your builder has not returned)") for line in said), said
    terminal = io.StringIO()
    RunProgress(terminal).write(said[0] + "\n")  # what a run's terminal shows of it
    assert terminal.getvalue().strip() == said[0]
    time.sleep(0.6)
    assert capsys.readouterr().err == ""  # nothing once the build has returned


def test_with_a_checkout_a_registered_class_it_cannot_build_is_never_silently_the_registrys():
    with pytest.raises(sources.SubjectError) as error:
        sources.resolve("BitModel", CHECKOUT)  # registered, but no tester of this checkout lists it
    said = str(error.value)
    assert "no tester of the checkout lists it" in said and "-p fallback registry" in said and "\n" not in said
    assert sources.source_of("BitModel", CHECKOUT) == "not built: no tester of the checkout lists it"
    asked = sources.resolve("BitModel", sources.Checkout(CHECKOUT, "registry"))
    assert asked.source is sources.Source.REGISTRY and asked.tester.startswith("the built-in registry")
    assert "fallback: BitModel: no tester of the checkout lists it" in asked.tester
    assert "fallback" in sources.source_of("BitModel", sources.Checkout(CHECKOUT, "registry"))


def test_a_registered_class_whose_checkout_tester_fails_falls_back_only_when_asked(tmp_path):
    import shutil

    copy = tmp_path / "checkout"
    shutil.copytree(CHECKOUT, copy)
    broken = copy / "tests" / "models" / "broken" / "test_modeling_broken.py"
    broken.write_text(broken.read_text().replace("(BertForTokenClassification,)", "(BertForTokenClassification, "
                                                                                    "BitModel)"))
    with pytest.raises(sources.SubjectError, match="does not import: no module 'a_package_nobody_installed'"):
        sources.resolve("BitModel", str(copy))
    tester = "the checkout's tester tests/models/broken/test_modeling_broken.py"
    assert sources.source_of("BitModel", str(copy)) == tester
    asked = sources.resolve("BitModel", sources.Checkout(str(copy), "registry"))
    assert asked.source is sources.Source.REGISTRY and "a_package_nobody_installed" in asked.tester


def test_every_source_is_named_in_words():
    assert sources.source_of("BertModel", CHECKOUT) == "the checkout's tester tests/models/tiny/test_modeling_tiny.py"
    assert sources.source_of("BertModel").startswith(
        "the built-in registry, huggingface/transformers tests/models/bert")
    assert sources.source_of("UniSpeechForPreTraining").startswith(
        "the built-in registry, huggingface/transformers tests/models/unispeech/test_modeling_unispeech.py@")
    assert sources.source_of("my_package.models:build") == "your builder my_package.models:build"


def test_a_checkout_subject_still_seeds_its_own_tester_after_another_checkout_was_served(tmp_path):
    """Serving a second checkout drops the first one's `tests` modules from sys.modules; a subject of the first,
    resolved before, must still seed the generator its tester draws from (not fail, not seed a fresh copy)."""
    import shutil

    import torch

    first = sources.resolve("BertModel", CHECKOUT)
    before = first.make(3)
    other = tmp_path / "other"
    shutil.copytree(CHECKOUT, other)
    sources.resolve("BertModel", str(other)).make(0)  # the other checkout's tests package is served now
    after = first.make(3)
    assert set(after.inputs) == set(before.inputs)
    assert all(torch.equal(after.inputs[k], before.inputs[k]) for k in before.inputs)
    changed = first.make(4)
    assert any(not torch.equal(changed.inputs[k], before.inputs[k]) for k in before.inputs)
