"""The four `*ForPreTraining` classes that share the Gumbel quantizer's argmax, built exactly as the
transformers export test builds them.

A seed means one thing everywhere: inputs from `random.Random(seed)` drawn as the model tester draws them
(`floats_tensor` then `random_attention_mask`, row-major), weights from `torch.manual_seed(seed)` right
before `model_class(config)`, then eval mode and the "less flaky" settings (every norm eps 1.0). The plain
recipe, which any user can run with transformers alone:

    config = family.tester_config("Wav2Vec2ConformerForPreTraining")
    inputs = family.tester_inputs("Wav2Vec2ConformerForPreTraining", seed)
    torch.manual_seed(seed)
    model = family.build_model("Wav2Vec2ConformerForPreTraining", seed)   # == the three lines above + eval
"""
# Split by concern: specs (what each class is and how a model is built), inputs (the tester's draws for a
# seed), recipe (the same in plain transformers code, and its check). Callers use this package's names.

from exactness.models.wav2vec2_family.inputs import (
    quantizer_is_called,
    tester_input_values,
    tester_inputs,
    tester_inputs_plain,
)
from exactness.models.wav2vec2_family.recipe import plain_recipe, plain_recipe_matches
from exactness.models.wav2vec2_family.specs import (
    CODE_OUTPUTS,
    MODELS,
    NAMED_TENSORS,
    SPECS,
    TesterSpec,
    UnknownModelError,
    argmax_inputs,
    argmax_rows,
    base_model,
    build_model,
    check_exposed,
    construct,
    named_tensors,
    spec,
    tester_config,
)

__all__ = ["CODE_OUTPUTS", "MODELS", "NAMED_TENSORS",
           "SPECS", "TesterSpec", "UnknownModelError", "argmax_inputs", "argmax_rows",
           "base_model", "build_model", "check_exposed", "construct", "named_tensors", "plain_recipe",
           "plain_recipe_matches", "quantizer_is_called", "spec", "tester_config", "tester_input_values",
           "tester_inputs", "tester_inputs_plain"]
