import pytest
import torch

from exactness.models import dac
from exactness.models import dac_chunks as chunks
from exactness.studies.dac_batching import study as batching


@pytest.fixture(scope="module")
def tiny():
    return dac.template("tiny", 0, "variance_preserving")


def _library_outputs(model, audio, paths):
    """Every listed module's output in the library's own encode then decode (from the encoder's codes)."""
    seen = {}
    modules = dict(model.named_modules())
    handles = [modules[p].register_forward_hook(lambda m, a, out, p=p: seen.__setitem__(p, out.detach().clone()))
               for p in paths]
    try:
        with torch.no_grad():
            encoded = model.encode(audio)
            audio_values = model.decode(audio_codes=encoded.audio_codes).audio_values
    finally:
        for handle in handles:
            handle.remove()
    return seen, encoded, audio_values


def test_one_window_is_the_librarys_forward_bit_for_bit_at_every_layer(tiny):
    model = dac.build_variant(tiny, "weight_norm")
    audio = dac.audio("tiny", 0.2, 0)
    steps = chunks.encoder_steps(model) + chunks.decoder_steps(model)
    library, encoded, audio_values = _library_outputs(model, audio, [s.path for s in steps])
    ours = {}

    def keep(step, outputs):
        ours[step.path] = outputs["m"].clone()

    whole = [chunks.Window(0, audio.shape[-1], 0, None)]
    latent = chunks.lockstep({"m": model}, {"m": audio}, chunks.encoder_steps(model), whole, keep)["m"]
    with torch.no_grad():
        quantized = model.quantizer.from_codes(model.quantizer(latent)[1])[0]
    frames = [chunks.Window(0, quantized.shape[-1], 0, None)]
    out = chunks.lockstep({"m": model}, {"m": quantized}, chunks.decoder_steps(model), frames, keep)["m"]
    assert [p for p in ours] == [s.path for s in steps]
    assert all(torch.equal(ours[p], library[p]) for p in library)
    assert torch.equal(model.decoder.tanh(out).squeeze(1), audio_values)


def test_a_clip_of_at_most_chunk_frames_runs_whole_as_the_library_runs_it(tiny):
    """`encode_latent` and `decode` on a clip of at most CHUNK_FRAMES frames: one window, the library's modules on
    the library's tensors, so its values on any CPU (a longer clip runs in windows: the next test)."""
    model = dac.build_variant(tiny, "weight_norm")
    audio = dac.audio("tiny", 0.09, 0)  # 720 samples, 90 latent frames
    with torch.no_grad():
        encoded = model.encode(audio)
        latent, decoded = model.encoder(audio), model.decode(encoded.quantized_representation).audio_values
    frames = encoded.quantized_representation.shape[-1]
    assert frames == 90 <= chunks.CHUNK_FRAMES
    assert len(chunks.encoder_windows(model, audio.shape[-1])) == len(chunks.decoder_windows(model, frames)) == 1
    assert torch.equal(chunks.encode_latent(model, audio), latent)
    assert torch.equal(chunks.decode(model, encoded.quantized_representation), decoded)


def test_windows_in_float32_are_as_close_to_float64_as_the_whole_run(tiny):
    """A clip of 200 frames runs in 3 windows (of 116, 125 and 29 frames). Their values are not the whole run's
    bit for bit on every CPU: the convolution kernels split a tensor's length into vector-wide blocks and compute
    the remainder apart, so a window's length decides which outputs round alike. Measured on this clip's decode:
    equal on an AMD EPYC (AVX2); on an Intel Xeon with AVX-512, 3 of 1,600 samples differ by up to 6.6e-7, all
    from the last convolution (im2col + MKL sgemm, whose tail of `length % 16` outputs takes its own path: the
    windows are 1,000 and 232 samples long, the whole clip 1,600); there with MKL_ENABLE_INSTRUCTIONS=AVX2 every
    convolution departs, 206 samples by up to 2.7e-5. Each time the windows' largest error against the float64
    run equals the whole run's (3.8e-5 and 5.3e-5): the windows add rounding, no error of their own. The bound
    is twice the whole run's error; two frames less context than `decoder_reach` asks makes it 5.9 times
    (2.2e-4), four frames 0.098. The encoder's windows are held to the same bound (measured: equal on
    AVX-512, up to 1.9e-6 with MKL held to AVX2)."""
    model, model64 = dac.build_variant(tiny, "weight_norm"), dac.build_variant(tiny, "float64")
    audio = dac.audio("tiny", 0.2, 0)
    with torch.no_grad():
        latent, latent64 = model.encoder(audio), model64.encoder(audio.double())
        quantized = model.encode(audio).quantized_representation
        decoded, decoded64 = model.decode(quantized).audio_values, model64.decode(quantized.double()).audio_values
    assert len(chunks.encoder_windows(model, audio.shape[-1])) == len(chunks.decoder_windows(model, 200)) == 3

    def error(x, reference):
        return float((x.double() - reference).abs().max())

    assert error(chunks.encode_latent(model, audio), latent64) <= 2 * error(latent, latent64)
    assert error(chunks.decode(model, quantized), decoded64) <= 2 * error(decoded, decoded64)


def test_the_encoders_reach_is_the_float64_gradients(tiny):
    model64 = dac.build_variant(tiny, "float64")
    left, right = chunks.encoder_reach(model64)
    hop = model64.config.hop_length
    measured = batching.measured_receptive_field(model64, 4000, 250)
    assert (measured["left_samples"], measured["right_samples"]) == (left, right)
    assert left + right == batching.receptive_field(model64.config)["span_samples"]
    assert hop == 8


@pytest.mark.parametrize("samples", [4000, 4003, 4007, 3999])
def test_encoded_frames_follow_the_library(tiny, samples):
    with torch.no_grad():
        frames = tiny.encoder(torch.zeros(1, 1, samples)).shape[-1]
    assert chunks.encoded_frames(tiny, samples) == frames


def test_windows_keep_every_position_once_and_read_their_context():
    plan = chunks.windows(1000, 100, 10, (30, 40), chunk_frames=30)
    assert [(w.keep_start, w.keep_stop) for w in plan] == [(0, 300), (300, 600), (600, 900), (900, None)]
    assert [(w.start, w.stop) for w in plan] == [(0, 340), (270, 640), (570, 940), (870, 1000)]
    assert plan[1].kept(chunks.Fraction(1, 2)) == slice(15, 165)
    assert chunks.windows(1000, 100, 10, (30, 40), chunk_frames=100) == [chunks.Window(0, 1000, 0, None)]
    with pytest.raises(ValueError, match="chunk_frames must be at least 1, got 0"):
        chunks.windows(1000, 100, 10, (30, 40), chunk_frames=0)


def _cut_context(model, audio, context):
    plan = chunks.windows(audio.shape[-1], chunks.encoded_frames(model, audio.shape[-1]), model.config.hop_length,
                          context, chunk_frames=16)
    return chunks.lockstep({"m": model}, {"m": audio}, chunks.encoder_steps(model), plan)["m"]


def test_windows_with_the_receptive_field_give_the_whole_clips_values_and_without_it_do_not(tiny):
    model64 = dac.build_variant(tiny, "float64")
    audio = dac.audio("tiny", 0.5, 1).double()
    with torch.no_grad():
        whole, decoded = model64.encoder(audio), model64.decode(model64.encoder(audio)).audio_values
    scale = float(whole.abs().max())
    chunked = chunks.encode_latent(model64, audio, chunk_frames=16)
    assert len(chunks.encoder_windows(model64, audio.shape[-1], 16)) > 20
    assert float((chunked - whole).abs().max()) < 1e-12 * scale  # float64 rounding only
    hop = model64.config.hop_length
    left, right = chunks.encoder_reach(model64)
    short = _cut_context(model64, audio, ((left // hop - 2) * hop, (right // hop - 2) * hop))
    assert float((short - whole).abs().max()) > 1e-6 * scale  # too little context: the windows' edges show
    assert float((chunks.decode(model64, whole, chunk_frames=16) - decoded).abs().max()) < 1e-12


def test_the_report_says_whether_a_clip_ran_whole_or_in_windows_and_with_what_context(tiny):
    assert "ran whole" in chunks.describe(tiny, 400) and "50 latent frames" in chunks.describe(tiny, 400)
    windowed = chunks.describe(tiny, 4000, chunk_frames=100)
    left, right = chunks.encoder_reach(tiny)
    assert "ran in 5 windows of 100 frames" in windowed and f"receptive field: {left} and {right}" in windowed
    assert "136 samples before and up to 144 after" in windowed  # whole frames of 8 samples around 133 and 140


def test_a_skeleton_describes_the_windows_as_the_template_does_without_weights(tiny):
    skeleton = dac.skeleton("tiny")
    assert all(p.is_meta for p in skeleton.parameters())
    for samples in (1000, 50000):
        assert chunks.describe(skeleton, samples) == chunks.describe(tiny, samples)
    assert chunks.encoder_reach(skeleton) == chunks.encoder_reach(tiny)
