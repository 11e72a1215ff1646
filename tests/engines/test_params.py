"""Parameters and their start: the lecture's and word2vec's initialisations, the per-model
default width, and the bits of the torch draws of earlier versions."""

from __future__ import annotations

import numpy as np
import pytest

from embedlab.config import ModelConfig
from embedlab.engines.params import Word2VecParams, default_init_scale, fresh_params, init_params
from embedlab.seeding import mt19937_rng


def test_uniform_init_is_the_lectures() -> None:
    p = init_params(10, 4, init="uniform", nce=True, rng=mt19937_rng(1, "init"))
    assert (p.w_in >= 0).all() and (p.w_in < 1).all() and p.b_out is not None
    q = init_params(10, 4, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    assert np.abs(q.w_in).max() <= 0.5 / 4 and not q.w_out.any() and q.b_out is None
    assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in (*q.tensors().values(),
                                                                        p.b_out))


def test_init_scale_widens_the_centred_start_exactly() -> None:
    one = init_params(50, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    eight = init_params(50, 8, init="centered", nce=False, scale=8.0, rng=mt19937_rng(1, "init"))
    assert np.abs(one.w_in).max() <= 0.5 / 8 < np.abs(eight.w_in).max() <= 4.0 / 8
    np.testing.assert_allclose(eight.w_in, one.w_in * 8.0, rtol=1e-6)  # same draws, only wider
    assert not eight.w_out.any()
    lecture = init_params(50, 8, init="uniform", nce=False, scale=8.0,
                          rng=mt19937_rng(1, "init"))
    assert (lecture.w_in >= 0).all() and (lecture.w_in < 1).all()  # the scale is not applied


@pytest.mark.parametrize(("vocab", "dim", "scale"), [(7, 3, 1.0), (300, 100, 8.0),
                                                      (1000, 128, 12.0), (50, 13, 0.3)])
def test_init_has_the_bits_earlier_versions_drew_with_torch(vocab: int, dim: int,
                                                            scale: float) -> None:
    """Runs of embedlab 0.1.0 drew the initial vectors with torch.rand: such a run, restarted,
    starts from the same vectors."""
    torch = pytest.importorskip("torch")
    from embedlab.seeding import torch_generator

    g = torch_generator(4, "init")
    old = torch.rand(vocab, dim, generator=g, dtype=torch.float32)
    old.sub_(0.5).mul_(scale).div_(dim)
    new = init_params(vocab, dim, init="centered", nce=False, scale=scale,
                      rng=mt19937_rng(4, "init"))
    assert new.w_in.tobytes() == old.numpy().tobytes()
    uniform = torch.rand(vocab, dim, generator=torch_generator(4, "init"), dtype=torch.float32)
    lecture = init_params(vocab, dim, init="uniform", nce=False, rng=mt19937_rng(4, "init"))
    assert lecture.w_in.tobytes() == uniform.numpy().tobytes()


@pytest.mark.parametrize(("model", "given", "used"), [
    ("skipgram", 0.0, 8.0), ("cbow", 0.0, 12.0), ("cbow", 3.0, 3.0)])
def test_a_fresh_start_takes_the_models_default_scale(model: str, given: float,
                                                      used: float) -> None:
    cfg = ModelConfig(model=model, dim=8, init_scale=given)  # type: ignore[arg-type]
    assert default_init_scale(model) == (8.0 if model == "skipgram" else 12.0)
    fresh = fresh_params(cfg, 50, seed=3)
    want = init_params(50, 8, init="centered", nce=False, scale=used, rng=mt19937_rng(3, "init"))
    assert fresh.w_in.tobytes() == want.w_in.tobytes() and fresh.b_out is None
    nce = fresh_params(ModelConfig(loss="nce", dim=8), 50, seed=3)
    assert nce.b_out is not None and not nce.b_out.any()


def test_params_of_a_checkpoints_tensors_are_those_arrays() -> None:
    p = init_params(5, 4, init="centered", nce=True, rng=mt19937_rng(1, "init"))
    again = Word2VecParams.of(p.tensors(), nce=True)
    assert again.w_in is p.w_in and again.w_out is p.w_out and again.b_out is p.b_out
    assert list(p.tensors()) == ["input_embeddings", "output_embeddings", "output_bias"]
    assert Word2VecParams.of(p.tensors(), nce=False).b_out is None


def test_hierarchical_softmax_keeps_its_inner_nodes_under_their_own_name() -> None:
    # V−1 rows that are not words: under output_embeddings a warm start or an export would
    # take them for words' rows
    p = fresh_params(ModelConfig(loss="hs", dim=8), 50, seed=3)
    assert list(p.tensors()) == ["input_embeddings", "hs_nodes"]
    assert p.w_out.shape == (49, 8) and not p.w_out.any() and p.b_out is None
    neg = fresh_params(ModelConfig(dim=8), 50, seed=3)
    assert p.w_in.tobytes() == neg.w_in.tobytes()  # the same input draws
    again = Word2VecParams.of(p.tensors(), nce=False, hs=True)
    assert again.w_in is p.w_in and again.w_out is p.w_out and again.hs
    assert again.copy().tensors().keys() == p.tensors().keys()


@pytest.mark.parametrize(("vocab", "dim", "scale"), [(7, 3, 1.0), (300, 100, 8.0),
                                                      (1000, 128, 12.0), (50, 13, 0.3)])
def test_the_native_draw_has_numpys_bits(vocab: int, dim: int, scale: float,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Big vocabularies draw their input vectors in C: the same values, the generator left in
    the same state."""
    from embedlab.engines import native, params
    from embedlab.seeding import uniform_float32

    if native.unavailable_reason() is not None:
        pytest.skip("no native library here")
    for centred in (None, scale):
        numpy_rng, c_rng = mt19937_rng(4, "init"), mt19937_rng(4, "init")
        numpy_rng.randint(0, 1 << 32, size=5, dtype=np.uint32)  # mid-state: pos is not 624
        c_rng.randint(0, 1 << 32, size=5, dtype=np.uint32)
        want = uniform_float32(numpy_rng, (vocab, dim))
        if centred is not None:
            want -= np.float32(0.5)
            want *= np.float32(centred)
            want /= np.float32(dim)
        got = params.native_uniform(c_rng, (vocab, dim), centred_scale=centred)
        assert got is not None and got.tobytes() == want.tobytes()
        assert numpy_rng.randint(0, 1 << 32, size=700, dtype=np.uint32).tolist() == \
            c_rng.randint(0, 1 << 32, size=700, dtype=np.uint32).tolist()
    small = init_params(vocab, dim, init="centered", nce=False, scale=scale,
                        rng=mt19937_rng(2, "init"))
    monkeypatch.setattr(params, "NATIVE_DRAW_VALUES", 1)
    drawn = init_params(vocab, dim, init="centered", nce=False, scale=scale,
                        rng=mt19937_rng(2, "init"))
    assert drawn.w_in.tobytes() == small.w_in.tobytes()
    lecture = init_params(vocab, dim, init="uniform", nce=False, rng=mt19937_rng(2, "init"))
    assert lecture.w_in.tobytes() == uniform_float32(mt19937_rng(2, "init"),
                                                     (vocab, dim)).tobytes()
