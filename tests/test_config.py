"""Typed config: JSON round trips, validation messages, presets, run names, resume rules."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import PurePath
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from embedlab.config import (
    MUTABLE_ON_RESUME,
    CheckpointConfig,
    DataConfig,
    EvalConfig,
    ModelConfig,
    OptimConfig,
    TrackConfig,
    TrainConfig,
    apply_preset,
    check_best_metric,
    check_new_run,
    diff_for_resume,
    flatten,
)
from embedlab.errors import InputError, messages_for

pos_float = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False, allow_infinity=False)
word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@st.composite
def configs(draw: st.DrawFn) -> TrainConfig:
    data = DataConfig(corpus=draw(st.sampled_from(["demo", "text8", "/data/c.txt.gz"])),
                      lowercase=draw(st.booleans()), min_count=draw(st.integers(1, 50)),
                      max_vocab=draw(st.none() | st.integers(2, 10**6)),
                      unk=draw(st.none() | word), max_distinct=draw(st.integers(1, 10**8)))
    model = ModelConfig(model=draw(st.sampled_from(["skipgram", "cbow"])),
                        loss=draw(st.sampled_from(["neg", "nce"])),
                        dim=draw(st.integers(1, 1024)), window=draw(st.integers(1, 20)),
                        negative=draw(st.integers(1, 64)),
                        shared_negatives=draw(st.integers(0, 64)),
                        negative_group=draw(st.integers(1, 256)),
                        noise_exponent=draw(st.floats(0, 2)), sample=draw(st.floats(0, 0.1)),
                        init=draw(st.sampled_from(["centered", "uniform"])),
                        init_scale=draw(st.floats(0, 16)))
    optim = OptimConfig(lr=draw(pos_float), min_lr_ratio=draw(st.floats(1e-6, 1.0)),
                        epochs=draw(st.integers(1, 100)), batch_size=draw(st.integers(1, 8192)))
    ev = EvalConfig(every_steps=draw(st.none() | st.integers(1, 10**6)),
                    similarity=tuple(draw(st.lists(word, max_size=2))),
                    analogies=draw(st.none() | word),
                    restrict_vocab=draw(st.integers(1, 10**6)))
    # a metric the run records (others are refused: test_best_metric_must_be_recorded)
    recorded = ["loss:min", *(["analogy:max"] if ev.analogies else []),
                *(f"similarity/{PurePath(p).stem}" for p in ev.similarity)]
    ckpt = CheckpointConfig(every_steps=draw(st.none() | st.integers(1, 10**6)),
                            every_secs=draw(pos_float), keep=draw(st.integers(1, 20)),
                            keep_every=draw(st.none() | st.integers(1, 10**6)),
                            best_metric=draw(st.sampled_from(recorded)))
    track = TrackConfig(log_every=draw(st.integers(1, 1000)), tensorboard=draw(st.booleans()),
                        probe_words=tuple(draw(st.lists(word, max_size=3))),
                        projector_words=draw(st.integers(1, 10**5)),
                        projector_each_checkpoint=draw(st.booleans()),
                        progress=draw(st.booleans()))
    engines = ["auto", "torch", "native"]
    return TrainConfig(data=data, model=model, optim=optim, checkpoint=ckpt, track=track,
                       eval=ev, seed=draw(st.integers(0, 2**31)),
                       threads=draw(st.integers(0, 64)),
                       engine=draw(st.sampled_from(engines)),
                       max_steps=draw(st.none() | st.integers(1, 10**7)),
                       init_from=draw(st.none() | word),
                       preset=draw(st.sampled_from([None, "cs20"])))


@given(configs())
def test_round_trip_through_json(cfg: TrainConfig) -> None:
    # config.json is the run's truth on resume: dumping and reading it must give the same config.
    text = json.dumps(cfg.to_dict())
    back = TrainConfig.from_dict(json.loads(text))
    assert back == cfg
    assert json.dumps(back.to_dict()) == text


def test_to_dict_spells_out_every_default() -> None:
    flat = flatten(TrainConfig().to_dict())
    expected = {f"{s}.{f.name}" for s, sub in (("data", DataConfig), ("model", ModelConfig),
                                                ("optim", OptimConfig),
                                                ("checkpoint", CheckpointConfig),
                                                ("track", TrackConfig), ("eval", EvalConfig))
                for f in dataclasses.fields(sub)}
    assert expected <= set(flat)
    assert flat["model.dim"] == 100 and flat["optim.lr"] == 0.025 and flat["seed"] == 1


def test_unknown_keys_are_ignored_and_missing_ones_defaulted() -> None:
    cfg = TrainConfig.from_dict({"model": {"dim": 7, "future_key": 1}, "extra": True})
    assert cfg.model.dim == 7 and cfg.model.window == 5 and cfg.optim == OptimConfig()


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: OptimConfig(lr=0), "--lr must be a finite number > 0"),
    (lambda: OptimConfig(lr=-1), "--lr must be"),
    (lambda: OptimConfig(lr=math.nan), "--lr must be"),
    (lambda: OptimConfig(lr=math.inf), "--lr must be"),
    (lambda: OptimConfig(min_lr_ratio=2), "--min-lr-ratio must be <= 1"),
    (lambda: OptimConfig(batch_size=0), "--batch-size must be"),
    (lambda: OptimConfig(epochs=0), "--epochs must be"),
    (lambda: OptimConfig(interleave=0), "--interleave must be an integer > 0"),
    (lambda: OptimConfig(interleave=1.5), "--interleave must be an integer"),  # type: ignore[arg-type]
    (lambda: OptimConfig(interleave=True), "--interleave must be an integer"),
    (lambda: OptimConfig(micro_order="random"),
     "optim.micro_order must be one of chunks, consecutive, got 'random'"),
    (lambda: ModelConfig(dim=0), "--dim must be"),
    (lambda: ModelConfig(dim=2.5), "--dim must be an integer"),  # type: ignore[arg-type]
    (lambda: ModelConfig(window=0), "--window must be"),
    (lambda: ModelConfig(negative=-3), "--negative must be"),
    (lambda: ModelConfig(sample=-0.1), "--sample must be a finite number >= 0"),
    (lambda: ModelConfig(sample=math.inf), "--sample must be"),
    (lambda: ModelConfig(loss="hinge"), "--loss must be neg or nce"),  # type: ignore[arg-type]
    (lambda: ModelConfig(init_scale=-1.0), "--init-scale must be a finite number >= 0"),
    (lambda: ModelConfig(init_scale=math.nan), "--init-scale must be"),
    (lambda: DataConfig(corpus=""), "--corpus is empty"),
    (lambda: DataConfig(min_count=0), "--min-count must be"),
    (lambda: DataConfig(max_vocab=1, unk="UNK"), "--max-vocab must be >= 2"),
    (lambda: DataConfig(unk="a b"), "--unk must be a non-empty token without spaces, got "
                                    "'a b'; pass e.g. --unk UNK, or leave it out to drop "
                                    "unknown words"),
    # bytes that are not UTF-8 (Python's surrogate escapes): vocab.tsv could not be written
    (lambda: DataConfig(unk="a\udcffb"), "--unk must be UTF-8 text, got 'a\\udcffb'; pass e.g. "
                                         "--unk UNK"),
    (lambda: CheckpointConfig(keep=0), "--keep must be"),
    (lambda: CheckpointConfig(best_metric="loss:up"), "--best-metric must be NAME[:min|max]"),
    (lambda: TrackConfig(log_every=0), "--log-every must be"),
    (lambda: TrainConfig(seed=-1), "--seed must be an integer from 0 to 9223372036854775807, "
                                   "got -1; pass e.g. --seed 1"),
    # a seed is hashed as a signed 64-bit integer: bigger ones crashed in struct.pack
    (lambda: TrainConfig(seed=2**63), "--seed must be an integer from 0 to"),
    (lambda: ModelConfig(dim=10**20), "--dim 100000000000000000000 is too large (at most "
                                      "9223372036854775807); pass e.g. --dim 100"),
    (lambda: OptimConfig(batch_size=2**63), "--batch-size 9223372036854775808 is too large"),
    (lambda: TrainConfig(threads=-2), "--threads must be >= 1"),
    # OpenMP cannot start 100,000 threads: refused before the kernel tries
    (lambda: TrainConfig(threads=100_000), "--threads must be at most 1024, got 100000; pass "
                                           "the number of cores, e.g. --threads 0 for all"),
    (lambda: TrainConfig(max_steps=0), "--max-steps must be"),
    (lambda: TrainConfig(engine="gpu"), "--engine must be auto, native, torch or cuda, got 'gpu'"),
])
def test_validation_names_the_flag_and_the_fix(build: object, needle: str) -> None:
    with pytest.raises(InputError) as e:
        build()  # type: ignore[operator]
    message = str(e.value)
    assert needle in message and "\n" not in message


def test_max_vocab_with_unk_message() -> None:
    with pytest.raises(InputError) as e:
        DataConfig(max_vocab=1, unk="UNK")
    assert str(e.value) == ("--max-vocab must be >= 2 when --unk is set (UNK takes one slot); "
                            "pass e.g. --max-vocab 50000")
    assert DataConfig(max_vocab=50000, unk="UNK").max_vocab == 50000  # the fix works


def test_positive_message_suggests_an_example() -> None:
    with pytest.raises(InputError, match=r"pass e\.g\. --lr 0\.025"):
        OptimConfig(lr=0)


def test_best_metric_must_be_recorded() -> None:
    for metric, needle in [("x", "use loss, analogy"), ("analogy", "pass --eval-analogies"),
                           ("similarity/ws", "--eval-similarity ws.tsv")]:
        cfg = TrainConfig(checkpoint=CheckpointConfig(best_metric=metric))  # loads (stored)
        with pytest.raises(InputError, match=f"--best-metric {metric} is not a metric"):
            check_best_metric(cfg)
        with pytest.raises(InputError, match=re.escape(needle)):
            check_best_metric(cfg)
    ev = EvalConfig(analogies="q.txt", similarity=("data/ws.tsv", "data/simlex.txt.gz"))
    for metric in ("loss", "analogy:max", "similarity/ws", "similarity/simlex"):
        check_best_metric(TrainConfig(checkpoint=CheckpointConfig(best_metric=metric), eval=ev))


def test_best_mode_defaults_from_the_metric_name() -> None:
    assert CheckpointConfig(best_metric="loss").best_mode == "min"
    assert CheckpointConfig(best_metric="analogy").best_mode == "max"
    assert CheckpointConfig(best_metric="analogy:min").best_mode == "min"
    assert CheckpointConfig(best_metric="analogy:max").best_name == "analogy"
    # an evaluation is maximised whatever its file is called (glossary.tsv held "loss")
    assert CheckpointConfig(best_metric="similarity/glossary").best_mode == "max"
    assert CheckpointConfig(best_metric="similarity/loss").best_mode == "max"  # loss.tsv
    # a file stem with a colon: the mode is split off the last one
    assert (CheckpointConfig(best_metric="similarity/a:b").best_name,
            CheckpointConfig(best_metric="similarity/a:b").best_mode) == ("similarity/a:b", "max")
    assert (CheckpointConfig(best_metric="similarity/a:b:min").best_name,
            CheckpointConfig(best_metric="similarity/a:b:min").best_mode) == (
        "similarity/a:b", "min")
    with pytest.raises(InputError, match="must be NAME"):
        CheckpointConfig(best_metric="loss:up")


def test_a_similarity_file_given_whole_is_told_its_metric_name() -> None:
    ev = EvalConfig(similarity=("data/ws.tsv",))
    cfg = TrainConfig(checkpoint=CheckpointConfig(best_metric="similarity/ws.tsv"), eval=ev)
    with pytest.raises(InputError, match=re.escape(
            "the name is the file's without its suffix: pass --best-metric similarity/ws")):
        check_best_metric(cfg)


def test_resolve_spells_out_threads() -> None:
    assert TrainConfig(threads=0).resolve().threads >= 1
    assert TrainConfig(threads=3).resolve().threads == 3


def test_preset_is_merged_under_explicit_flags() -> None:
    # the CLI passes top-level flags (seed, threads) in the same dict as the sections
    flags: dict[str, Any] = {"model": {"dim": 64}, "seed": 9}
    cfg = TrainConfig.from_dict(apply_preset("cs20", flags))
    assert cfg.preset == "cs20" and cfg.model.loss == "nce" and cfg.model.window == 1
    assert cfg.model.dim == 64 and cfg.seed == 9 and cfg.max_steps == 100_000
    # the preset keeps word2vec's initial scale, the one its documented numbers were measured at
    assert cfg.model.init == "centered" and cfg.model.init_scale == 1.0
    # the lecture's GradientDescentOptimizer(1.0): a constant learning rate
    assert cfg.optim.lr == 1.0 and cfg.optim.min_lr_ratio == 1.0
    assert cfg.optim.interleave == 1  # the lecture's generator reads the corpus in order
    with pytest.raises(InputError, match="unknown --preset 'nope'; available: cs20"):
        apply_preset("nope", {})


def _with(cfg: TrainConfig, **changes: dict[str, object] | object) -> TrainConfig:
    d = cfg.to_dict()
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            d[section][name] = value
        else:
            d[section] = value
    return TrainConfig.from_dict(d)


@pytest.mark.parametrize("change", [
    {"max_steps": 50}, {"threads": 8}, {"checkpoint__keep": 1}, {"checkpoint__every_steps": 3},
    {"track__log_every": 1}, {"track__tensorboard": False}, {"eval__every_steps": 10},
    {"optim__epochs": 9},
])
def test_resume_allows_flags_that_do_not_change_the_result(change: dict[str, object]) -> None:
    stored = TrainConfig(optim=OptimConfig(epochs=3), threads=2)
    assert diff_for_resume(stored, _with(stored, **change)) == []


# The resume rule, spelled out here rather than imported: keys read from MUTABLE_ON_RESUME
# would shrink with it, so a result-changing key slipped into that tuple would silently drop
# out of the refusal test below.
MUTABLE = ("max_steps", "threads", "checkpoint.", "track.", "eval.", "preset")
LEAF_KEYS = sorted(flatten(TrainConfig().to_dict()))
# Taken from the config itself: a key added later is refused on resume unless listed above.
REFUSED_KEYS = [k for k in LEAF_KEYS if not k.startswith(MUTABLE)]
MUTABLE_KEYS = [k for k in LEAF_KEYS if k.startswith(MUTABLE)]

# Keys that are not numbers, flags or lists: valid values, the first that differs is taken.
_CHOICES: dict[str, list[Any]] = {
    "data.corpus": ["demo", "text8"], "data.max_vocab": [1000], "data.unk": ["UNK", None],
    "model.model": ["skipgram", "cbow"], "model.loss": ["neg", "nce"],
    "model.init": ["centered", "uniform"], "engine": ["auto", "torch", "native"],
    "init_from": [None, "other"], "preset": [None, "cs20"], "max_steps": [50],
    "checkpoint.every_steps": [3], "checkpoint.keep_every": [10],
    "checkpoint.best_metric": ["loss:min", "loss:max"], "eval.every_steps": [10],
    "eval.analogies": [None, "q.txt"], "optim.micro_order": ["chunks", "consecutive"],
}


def _other_value(key: str, value: Any) -> Any:
    """A valid value for config key ``key`` that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if key == "optim.epochs":  # lowered where it can be: raising it is allowed on resume
        return value - 1 if value > 1 else value + 1
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value else 0.5
    if isinstance(value, list):
        return [*value, "zz"]
    if key not in _CHOICES:
        pytest.fail(f"no other value known for config key {key} ({value!r}); add it to _CHOICES")
    return next(c for c in _CHOICES[key] if c != value)


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    *sections, name = key.split(".")
    for section in sections:
        d = d[section]
    d[name] = value


def _changed(cfg: TrainConfig, key: str, value: Any) -> TrainConfig:
    d = cfg.to_dict()
    _set(d, key, value)
    return TrainConfig.from_dict(d)  # validates: the other value must be a valid one


@pytest.mark.parametrize("key", REFUSED_KEYS)
def test_resume_refuses_every_result_changing_key(key: str) -> None:
    # Everything outside MUTABLE (data, model, optimiser, seed, engine, warm start) changes the
    # vectors: a resume with another value would splice two different runs into one, so the
    # check must name that key, and only it, with both values (the CLI prints this line).
    stored = TrainConfig(optim=OptimConfig(epochs=3), threads=2)
    old = flatten(stored.to_dict())[key]
    new = _other_value(key, old)
    requested = _changed(stored, key, new)
    lowered = ": it may be raised to train on, not lowered" if key == "optim.epochs" else ""
    assert diff_for_resume(stored, requested) == [
        f"{key} (stored {old!r}, requested {new!r}{lowered})"]
    if key != "optim.epochs":  # the other direction too (optim.epochs may be raised)
        assert diff_for_resume(requested, stored) == [
            f"{key} (stored {new!r}, requested {old!r})"]


def test_resume_refuses_lowering_epochs_only() -> None:
    stored = TrainConfig(optim=OptimConfig(epochs=3))
    assert diff_for_resume(stored, _changed(stored, "optim.epochs", 4)) == []
    assert diff_for_resume(stored, _changed(stored, "optim.epochs", 2)) == [
        "optim.epochs (stored 3, requested 2: it may be raised to train on, not lowered)"]


def test_hierarchical_softmax_on_the_cuda_engine_is_refused() -> None:
    with pytest.raises(InputError) as e:
        TrainConfig(engine="cuda", model=ModelConfig(loss="hs"))
    assert str(e.value) == ("--loss hs does not train on the cuda engine, which trains negative "
                            "sampling and NCE only; pass --engine native or --engine torch for "
                            "it")
    with messages_for("python"), pytest.raises(InputError) as e:
        TrainConfig(engine="cuda", model=ModelConfig(loss="hs"))
    assert str(e.value).startswith("loss='hs' does not train on the cuda engine")
    assert str(e.value).endswith("pass engine='native' or engine='torch' for it")
    for loss in ("neg", "nce"):
        assert TrainConfig(engine="cuda", model=ModelConfig(loss=loss)).engine == "cuda"


@pytest.mark.parametrize(("stored", "requested"), [("cuda", "native"), ("native", "cuda"),
                                                   ("cuda", "torch"), ("torch", "cuda")])
def test_resume_may_move_between_the_gpu_and_the_cpu(stored: str, requested: str) -> None:
    # allowed, with a warning that bits may differ (run.folder); between the two CPU engines
    # the change stays refused (test_resume_refuses_every_result_changing_key)
    old = TrainConfig(engine=stored)
    assert diff_for_resume(old, dataclasses.replace(old, engine=requested)) == []
    assert diff_for_resume(old, dataclasses.replace(old, engine=requested, seed=2)) == [
        "seed (stored 1, requested 2)"]
    assert diff_for_resume(TrainConfig(engine="native"), TrainConfig(engine="torch")) == [
        "engine (stored 'native', requested 'torch')"]


@pytest.mark.parametrize("key", MUTABLE_KEYS)
def test_resume_accepts_every_mutable_key(key: str) -> None:
    # stop point, threads, checkpointing, logging and evaluation do not change the vectors
    stored = TrainConfig(optim=OptimConfig(epochs=3), threads=2)
    requested = _changed(stored, key, _other_value(key, flatten(stored.to_dict())[key]))
    assert diff_for_resume(stored, requested) == []
    assert diff_for_resume(requested, stored) == []


def test_every_mutable_on_resume_entry_is_accepted_and_names_keys() -> None:
    # config.py's tuple is what resume obeys: each entry must match keys (a renamed section
    # would leave a dead prefix and refuse its keys) that the rule above lets change.
    for prefix in MUTABLE_ON_RESUME:
        covered = [k for k in LEAF_KEYS if k.startswith(prefix)]
        assert covered, f"MUTABLE_ON_RESUME entry {prefix!r} matches no config key"
        assert set(covered) <= set(MUTABLE_KEYS)
        stored = TrainConfig(threads=2)
        requested = stored
        for key in covered:
            requested = _changed(requested, key,
                                 _other_value(key, flatten(stored.to_dict())[key]))
        assert diff_for_resume(stored, requested) == []


@given(configs(), st.sets(st.sampled_from(LEAF_KEYS), max_size=6))
def test_resume_diff_names_exactly_the_changed_result_keys(cfg: TrainConfig,
                                                           keys: set[str]) -> None:
    # From any config (the stored one read back from its JSON, as on resume), changing some keys
    # is refused with exactly the changed keys outside MUTABLE, in key order, minus a raised
    # optim.epochs; changing none (or only mutable ones) resumes.
    stored = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    old = flatten(cfg.to_dict())
    d = cfg.to_dict()
    new = {key: _other_value(key, old[key]) for key in keys}
    for key, value in new.items():
        _set(d, key, value)
    try:
        requested = TrainConfig.from_dict(d)
    except InputError:  # a changed value that makes the config invalid across fields
        assume(False)
        raise
    lowered = ": it may be raised to train on, not lowered"
    expected = [f"{k} (stored {old[k]!r}, requested {v!r}{lowered if k == 'optim.epochs' else ''})"
                for k, v in sorted(new.items())
                if not k.startswith(MUTABLE) and not (k == "optim.epochs" and v > old[k])]
    assert diff_for_resume(stored, requested) == expected


def test_resume_diff_names_each_differing_key() -> None:
    stored = TrainConfig()
    bad = diff_for_resume(stored, _with(stored, model__dim=8, optim__lr=1.0, seed=4))
    assert [b.split(" ")[0] for b in bad] == ["model.dim", "optim.lr", "seed"]
    assert "model.dim (stored 100, requested 8)" in bad


def test_noise_settings_are_no_difference_between_hierarchical_softmax_runs() -> None:
    """--loss hs draws no noise words (the same bits for any --negative, measured): resuming an
    hs run with gensim's negative=0 is that run; for negative sampling it is another."""
    hs = TrainConfig.from_dict({"model": {"loss": "hs"}})
    assert diff_for_resume(hs, _with(hs, model__negative=0, model__noise_exponent=0.5)) == []
    neg = TrainConfig()
    assert diff_for_resume(neg, _with(neg, model__negative=0 + 3)) == [
        "model.negative (stored 5, requested 3)"]


def test_an_init_scale_for_the_uniform_start_is_refused() -> None:
    # ignored: two runs named by two scales (init-uniform-is3, -is5) gave the same bits
    cfg = TrainConfig(model=ModelConfig(init="uniform", init_scale=3.0))
    with pytest.raises(InputError, match=re.escape(
            "--init-scale sets the width of --init centered (the default); --init uniform has "
            "none: drop --init-scale, or drop --init uniform")):
        check_new_run(cfg, {"model": {"init": "uniform", "init_scale": 3.0}})
    check_new_run(TrainConfig(model=ModelConfig(init="uniform")))
    check_new_run(TrainConfig(model=ModelConfig(init_scale=3.0)), {"model": {"init_scale": 3.0}})
    # a scale the user did not type (the cs20 preset's 1.0, a stored one) is not refused
    preset = TrainConfig.from_dict(apply_preset("cs20", {"model": {"init": "uniform"}}))
    assert preset.model.init_scale != 0
    check_new_run(preset, {"model": {"init": "uniform"}})


def test_keep_every_zero_archives_none() -> None:
    # a run's --keep-every could not be turned off: 0 was refused and leaving it out kept it
    assert CheckpointConfig(keep_every=0).keep_every == 0
    with pytest.raises(InputError, match="--keep-every must be"):
        CheckpointConfig(keep_every=-1)
