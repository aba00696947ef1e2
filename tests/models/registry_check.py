"""The registry checked against the real testers: each entry built both ways, from the registry and from a
transformers checkout's own tester (`exactness.models.sources`), and its config, inputs and weights compared.

Where they differ, the tester is right and the registry entry is corrected. `CHECKED` records every entry's check
(the tester file and commit the entry cites, what the comparison found, what the entry had to change, and what the
stored tester needed to import under the pinned release), and `citation_problems` names an entry without one. A
checkout is needed for the comparison (none exists in this project's CI): `tests/models/test_registry_check.py` runs
every entry on the checkout named by `EXACTNESS_TRANSFORMERS_TESTS`, and the mechanism on a small tester of its own
in transformers' layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from exactness.models import class_registry

# What a check found when the entry builds what its tester builds: config (every key, nested configs too), every
# input and every weight bit-equal on every seed checked.
EQUAL = "config, inputs and weights equal"
# How a result says the tester could not be checked: its import failed even with a minimal adaptation.
DOES_NOT_IMPORT = "does not import under transformers {}: "
CITED = re.compile(r"huggingface/transformers tests/models/\S+\.py@[0-9a-f]{40}")


@dataclass(frozen=True)
class Checked:
    """One registry entry checked against a tester that imports under the pinned transformers: the tester file
    and commit (as the entry cites it), what the check found, what the registry had to change to get there, what
    had to be adapted for the tester to import (with the error the stored file raises), and what was compared."""

    model: str
    tester: str  # class_registry.TESTS form: "huggingface/transformers tests/models/<file>@<commit>"
    result: str  # EQUAL, or DOES_NOT_IMPORT with the error
    corrected: str = ""  # what the registry entry had to change to reach the result ("" when it already did)
    adapted: str = ""  # "" when the file imports as stored
    seeds: tuple[int, ...] = (0, 1, 2)
    transformers: str = "5.23.0"


def _tests(path: str, commit: str) -> str:
    return class_registry.TESTS.format(path, commit)


_CACHED_PROPERTY = ("`from transformers.utils import cached_property` (ImportError: cannot import name "
                    "'cached_property' from 'transformers.utils') taken from functools")
_FROM_CONFIGS = "`{0}.{1}(...)` (AttributeError: type object '{0}' has no attribute '{1}') called as `{0}({2})`"
_UTILS = ("imports as stored once the checkout has the repository's utils/fetch_hub_objects_for_ci.py (its "
          "tests/test_processing_common.py imports it from there; the source distribution has no utils/: "
          "ModuleNotFoundError: No module named 'fetch_hub_objects_for_ci')")

# Every registry entry's check: its tester, from transformers' repository at the commit named, placed in transformers
# 5.23.0's source distribution (its tests/ with the common testers) in transformers' layout; each entry built both
# ways on seeds 0-2 and compared by `compare`.
CHECKED = (
    Checked("BertModel", _tests("bert/test_modeling_bert.py", "b45351d3f3159db0a941c5c5c98ef44e1abaea91"), EQUAL,
            adapted="`from transformers.models.bert.modeling_bert import BERT_PRETRAINED_MODEL_ARCHIVE_LIST` removed "
                    "(ImportError: cannot import name 'BERT_PRETRAINED_MODEL_ARCHIVE_LIST' from "
                    "'transformers.models.bert.modeling_bert'; only test_model_from_pretrained reads it)"),
    Checked("Wav2Vec2ForPreTraining",
            _tests("wav2vec2/test_modeling_wav2vec2.py", "c5dac3ddcd3c71eed9e0e9269102611ee054e8c3"), EQUAL,
            adapted="is_pt_flax_cross_test removed from the transformers.testing_utils import (ImportError: cannot "
                    "import name 'is_pt_flax_cross_test' from 'transformers.testing_utils'), is_torch_fx_available and "
                    "the symbolic_trace import it guards removed (ImportError: cannot import name "
                    "'is_torch_fx_available' from 'transformers.utils'), Wav2Vec2ForMaskedLM removed from the imports "
                    "and all_model_classes (ImportError: cannot import name 'Wav2Vec2ForMaskedLM' from "
                    "'transformers')"),
    Checked("Wav2Vec2ConformerForPreTraining",
            _tests("wav2vec2_conformer/test_modeling_wav2vec2_conformer.py",
                   "2b6c089d5a0b18d59a08c36b91404ece60915cf3"), EQUAL),
    Checked("UniSpeechForPreTraining",
            _tests("unispeech/test_modeling_unispeech.py", "040e1a7e4bb4f48ff62dfbbb1f6f8eff23e894ac"), EQUAL,
            corrected="do_stable_layer_norm True -> False: UniSpeechRobustModelTest passes True to its tester, whose "
                      "get_config() never forwards it"),
    Checked("UniSpeechSatForPreTraining",
            _tests("unispeech_sat/test_modeling_unispeech_sat.py", "488ecb9bfae86dd51ce484cd992241c910c559c5"),
            EQUAL),
    Checked("XLMForQuestionAnswering", _tests("xlm/test_modeling_xlm.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443"),
            EQUAL),
    Checked("RTDetrForObjectDetection",
            _tests("rt_detr/test_modeling_rt_detr.py", "080c858c90241a5049212969a9aacf310a002a0c"), EQUAL),
    Checked("FlaubertForQuestionAnswering",
            _tests("flaubert/test_modeling_flaubert.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443"), EQUAL),
    Checked("RTDetrV2ForObjectDetection",
            _tests("rt_detr_v2/test_modeling_rt_detr_v2.py", "c8ce42389ca65de245e437b3a7b1d0878af7466e"), EQUAL,
            adapted=_CACHED_PROPERTY + "; " + _FROM_CONFIGS.format("RTDetrV2Config", "from_backbone_configs",
                                                                   "backbone_config=..., ...")),
    Checked("DFineForObjectDetection",
            _tests("d_fine/test_modeling_d_fine.py", "231653db225a955184eea5a02710014fb5b79686"), EQUAL,
            adapted=_CACHED_PROPERTY + "; " + _FROM_CONFIGS.format("DFineConfig", "from_backbone_configs",
                                                                   "backbone_config=..., ...")),
    Checked("LwDetrForObjectDetection",
            _tests("lw_detr/test_modeling_lw_detr.py", "ed6cf9fb8f84a7492e2ffe588bc29dc43097ca79"), EQUAL),
    Checked("TapasForQuestionAnswering",
            _tests("tapas/test_modeling_tapas.py", "270755d62e31c34d8d4454b0c0646178ffee25cc"), EQUAL,
            adapted="require_scatter and require_tensorflow_probability removed from the transformers.testing_utils "
                    "import and @require_scatter from TapasModelTest (ImportError: cannot import name "
                    "'require_scatter' from 'transformers.testing_utils'); " + _CACHED_PROPERTY.replace(
                        " taken from functools", " removed")),
    Checked("Deimv2ForObjectDetection",
            _tests("deimv2/test_modeling_deimv2.py", "0035bc830562d529c6ffe88260b9d76ce07d9560"), EQUAL,
            adapted=_UTILS),
    Checked("PPDocLayoutV2ForObjectDetection",
            _tests("pp_doclayout_v2/test_modeling_pp_doclayout_v2.py", "0b1d8f3c1fad970c1a9d2dc7a753aa1dc382fc1f"),
            EQUAL, adapted=_UTILS),
    Checked("MMGroundingDinoForObjectDetection",
            _tests("mm_grounding_dino/test_modeling_mm_grounding_dino.py", "0572371cbdf8babc2828123baadb3cf7bd3022fd"),
            EQUAL),
    Checked("BitModel", _tests("bit/test_modeling_bit.py", "0e97420c9957149b80ff57632148e8ce80203b48"), EQUAL,
            adapted=_CACHED_PROPERTY),
    Checked("CLIPSegForImageSegmentation",
            _tests("clipseg/test_modeling_clipseg.py", "0ef39c917eb5bcb48ec8f761ed7554c74578fdd3"), EQUAL,
            adapted="is_flax_available, is_pt_flax_cross_test and the Flax imports they guard removed (ImportError: "
                    "cannot import name 'is_flax_available' from 'transformers.testing_utils'); "
                    + _FROM_CONFIGS.format("CLIPSegConfig", "from_text_vision_configs",
                                           "text_config=text.to_dict(), vision_config=vision.to_dict(), ...")),
    Checked("ClapModel", _tests("clap/test_modeling_clap.py", "0338784947f97f62a188b0e5c148b7615beb1cbc"), EQUAL,
            adapted="`from transformers.models.clap.modeling_clap import CLAP_PRETRAINED_MODEL_ARCHIVE_LIST` removed "
                    "(ImportError: cannot import name 'CLAP_PRETRAINED_MODEL_ARCHIVE_LIST' from "
                    "'transformers.models.clap.modeling_clap'); "
                    + _FROM_CONFIGS.format("ClapConfig", "from_text_audio_configs",
                                           "text_config=text.to_dict(), audio_config=audio.to_dict(), ...")),
    Checked("FlavaForPreTraining", _tests("flava/test_modeling_flava.py", "1d2fe0d87b712f479707c7518c7a31a0b9b62443"),
            EQUAL,
            corrected="mlm_labels, mim_labels and itm_labels added: FlavaForPreTrainingTester passes them and the "
                      "export test keeps them; they pick the positions mmm_text_logits and mmm_image_logits hold",
            adapted=_FROM_CONFIGS.format("FlavaConfig", "from_configs",
                                         "image_config=image.to_dict(), text_config=..., multimodal_config=..., "
                                         "image_codebook_config=..., ...")),
    Checked("OneFormerForUniversalSegmentation",
            _tests("oneformer/test_modeling_oneformer.py", "01080c629600d4ff3121446bb4f4a2e240c2cf41"), EQUAL,
            adapted=_CACHED_PROPERTY),
    Checked("DepthProForDepthEstimation",
            _tests("depth_pro/test_modeling_depth_pro.py", "01247f8e29e83be11a5d7e92aa37673a205ae1fe"), EQUAL),
)


def citation_problems(subjects=None, checked=CHECKED) -> list[str]:
    """Each registry entry that cites no checked tester (file and commit) or whose check says no result, in
    words; empty when every entry cites the tester it was checked against and what that check found."""
    subjects = class_registry.SUBJECTS if subjects is None else subjects
    by_model: dict[str, list[Checked]] = {}
    for check in checked:
        by_model.setdefault(check.model, []).append(check)
    problems = [f"{model}: checked {len(found)} times ({', '.join(c.tester for c in found)}): keep one check"
                for model, found in by_model.items() if len(found) > 1]
    problems += [f"{model}: a check of a class the registry does not have" for model in by_model
                 if model not in subjects]
    for name, entry in subjects.items():
        found = by_model.get(name, [])
        if not found:
            problems.append(f"{name}: no check recorded (add a Checked to registry_check.CHECKED naming the tester "
                            "file@commit it was compared with and what the comparison found)")
            continue
        check = found[0]
        if not CITED.fullmatch(check.tester):
            problems.append(f"{name}: the check names {check.tester!r}, not a tester file and its 40-digit commit")
        elif check.tester not in entry.source:
            problems.append(f"{name}: the entry cites {entry.source!r}, not the tester it was checked against "
                            f"({check.tester})")
        if check.result != EQUAL and not check.result.startswith(DOES_NOT_IMPORT.format(check.transformers)):
            problems.append(f"{name}: the check of {check.tester} says no result ({check.result!r}): say "
                            f"{EQUAL!r}, or {DOES_NOT_IMPORT.format(check.transformers)!r} and the error")
    return problems


# Config keys that say how and where a config was made, not what it builds.
PROVENANCE = frozenset({"transformers_version", "_name_or_path", "_commit_hash"})


class Part(Enum):
    CONFIG = "config"
    INPUTS = "inputs"
    WEIGHTS = "weights"


@dataclass(frozen=True)
class Difference:
    model: str
    seed: int
    part: Part
    key: str  # a config key (dotted into nested configs), an input's name, or a parameter's
    detail: str  # registry against tester, in words

    def __str__(self) -> str:
        return f"{self.model} seed {self.seed}: {self.part.value} {self.key}: {self.detail}"


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key not in PROVENANCE:
                out |= _flat(item, f"{prefix}{key}.")
        return out
    return {prefix[:-1]: value}


def _config_differences(name: str, seed: int, ours, theirs) -> list[Difference]:
    mine, real = _flat(ours.to_dict()), _flat(theirs.to_dict())
    return [Difference(name, seed, Part.CONFIG, key, f"registry {mine.get(key, 'absent')!r}, tester "
                                                     f"{real.get(key, 'absent')!r}")
            for key in sorted(set(mine) | set(real)) if mine.get(key, "absent") != real.get(key, "absent")]


def _tensor_differences(name: str, seed: int, part: Part, ours: dict, theirs: dict) -> list[Difference]:
    import torch

    found = []
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs or key not in ours:
            found.append(Difference(name, seed, part, key, "registry only" if key in ours else "tester only"))
            continue
        a, b = ours[key].detach(), theirs[key].detach()
        if a.shape != b.shape or a.dtype != b.dtype:
            found.append(Difference(name, seed, part, key, f"registry {a.dtype} {tuple(a.shape)}, tester {b.dtype} "
                                                           f"{tuple(b.shape)}"))
        elif not torch.equal(a, b):
            differ = int((a != b).sum()) if a.dtype != torch.bool else int((a ^ b).sum())
            found.append(Difference(name, seed, part, key, f"{differ:,} of {a.numel():,} elements differ"))
    return found


def compare(name: str, transformers_tests: str, seeds=(0, 1, 2)) -> list[Difference]:
    """Every difference between the registry's build of `name` and its checkout tester's, on each seed."""
    from exactness.models import sources

    ours, theirs = sources.from_registry(name), sources.from_checkout(name, transformers_tests)
    found = []
    for seed in seeds:
        a, b = ours.make(seed), theirs.make(seed)
        found += _config_differences(name, seed, a.model.config, b.model.config)
        found += _tensor_differences(name, seed, Part.INPUTS, a.inputs, b.inputs)
        found += _tensor_differences(name, seed, Part.WEIGHTS, dict(a.model.state_dict()), dict(b.model.state_dict()))
    return found
