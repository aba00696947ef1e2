"""This project's small transformers checkout made runnable: its export test importable, every tester's test case
inheriting it, and a `test_onnx_export_static` of its own that compares eager against a stand-in runtime moving
`pooler_output` on the seeds where the tester's first input id is even XOR the first pooler weight is positive (so
the outcome depends on the inputs' seeding and on the weights' alike)."""

import shutil
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent / "fixtures" / "transformers_checkout"

RUNNABLE = '''

from transformers.testing_utils import set_config_for_less_flaky_test, set_model_for_less_flaky_test


def _moved(inputs, model) -> bool:
    return (int(inputs["input_ids"][0, 0]) % 2 == 0) != bool(model.pooler.dense.weight[0, 0] > 0)


def _test_onnx_export_static(self):
    for model_class in self.all_model_classes:
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        inputs = {k: v for k, v in self._prepare_for_class(inputs, model_class).items() if k != "labels"}
        set_config_for_less_flaky_test(config)
        model = model_class(config).eval()
        set_model_for_less_flaky_test(model)
        with torch.no_grad():
            expected = {k: v for k, v in model(**inputs).items() if isinstance(v, torch.Tensor)}
        actual = dict(expected)
        if _moved(inputs, model):
            actual["pooler_output"] = actual["pooler_output"] + 0.01
        if any(model_class.__name__ in EXPORT_SKIPS[s] for s in ("exactness", "onnx.exactness")):
            self.assertEqual(set(actual), set(expected))
            continue
        self._check_outputs_close(actual, expected, atol=1e-3, rtol=1e-3)


ExportTesterMixin.test_onnx_export_static = _test_onnx_export_static
'''



def make(folder: Path) -> str:
    copy = folder / "transformers"
    shutil.copytree(CHECKOUT, copy)
    test = copy / "tests" / "exporters" / "test_export.py"
    test.write_text(test.read_text().replace(
        "from transformers.exporters.a_module_this_version_lacks import ExportHelper", "ExportHelper = object")
        + RUNNABLE)
    common = copy / "tests" / "test_modeling_common.py"
    common.write_text(common.read_text().replace(
        "class ModelTesterMixin:", "from .exporters.test_export import ExportTesterMixin  # noqa: E402\n\n\n"
                                   "class ModelTesterMixin(ExportTesterMixin):"))
    return str(copy)


def moved(checkout: str, seed: int) -> bool:
    """Whether the stand-in runtime moves `pooler_output` on this seed, from the workbook's own build of it."""
    from exactness.models import sources

    made = sources.make("BertModel", seed, checkout)
    return (int(made.inputs["input_ids"][0, 0]) % 2 == 0) != bool(made.model.pooler.dense.weight[0, 0] > 0)
