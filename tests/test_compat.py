import pytest

from exactness import compat


def test_a_private_api_that_is_present_is_returned():
    import torch

    assert compat.fused_weight_norm() is torch._weight_norm
    assert compat.torch_dispatch_mode().__name__ == "TorchDispatchMode"
    assert compat.weight_norm_parametrization().__name__ == "_WeightNorm"


def test_a_moved_private_api_names_the_package_both_versions_and_what_to_do():
    with pytest.raises(compat.CompatError) as raised:
        compat.private("torch", "torch.utils", "_no_such_private_thing", "pin torch")
    message = str(raised.value)
    assert message.startswith(f"torch {compat.installed('torch')} has no torch.utils._no_such_private_thing")
    assert f"verified with torch {compat.VERIFIED['torch']}" in message and message.endswith("; pin torch")


def test_a_missing_module_is_a_compat_error_too():
    with pytest.raises(compat.CompatError, match="has no no_such_module.x"):
        compat.private("torch", "no_such_module", "x", "fix")


def test_the_pinned_packages_are_the_verified_versions():
    for package in ("torch", "transformers"):  # pinned exactly in pyproject.toml
        local = compat.installed(package).split("+")[0]  # "2.13.0+cpu": the build tag is not the version
        assert local == compat.VERIFIED[package], f"re-verify exactness.compat for {package}"


def test_the_kernel_launch_hook_is_found_and_a_missing_one_is_none():
    from jupyter_client.manager import AsyncKernelManager

    assert compat.kernel_launch(AsyncKernelManager) is AsyncKernelManager._async_launch_kernel
    assert compat.kernel_launch(object) is None


def test_a_quantizer_without_its_perplexity_method_is_named():
    class Quantizer:
        pass

    with pytest.raises(compat.CompatError, match="Quantizer._compute_perplexity"):
        compat.perplexity_of(Quantizer())


def test_the_notebook_clients_output_handler_that_a_run_caps_is_found():
    from papermill.clientwrap import PapermillNotebookClient

    client = compat.papermill_client()
    assert client is PapermillNotebookClient and callable(client.output)
