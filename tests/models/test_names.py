"""The light name lists the command line checks against must equal the builders' own."""

from exactness.models import names


def test_wav2vec2_family_names_equal_the_builders():
    from exactness.models import wav2vec2_family

    assert names.WAV2VEC2_FAMILY == wav2vec2_family.MODELS


def test_dac_variants_and_inits_equal_the_builders():
    from exactness.models import dac

    assert names.DAC_VARIANTS == tuple(dac.VARIANT_CONFIGS)
    assert names.DAC_INITS == tuple(dac.INITS)


def test_noise_subjects_equal_what_the_noise_study_can_build():
    from exactness.models import tensor_subjects

    assert list(names.NOISE_SUBJECTS) == tensor_subjects.names()


def test_shape_modes_equal_the_graph_pools():
    from exactness.runtimes import graph_pool

    assert names.SHAPE_MODES == graph_pool.SHAPE_MODES


def test_the_classes_that_call_their_quantizer_are_the_ones_the_screen_takes():
    from exactness.models import wav2vec2_family

    assert names.QUANTIZER_CALLED == tuple(m for m in wav2vec2_family.MODELS if wav2vec2_family.quantizer_is_called(m))
