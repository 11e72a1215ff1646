"""Typed, validated configuration: one frozen dataclass per component.

A run is ``(config, run_dir)``. The resolved config (every default spelled out) is written to
``RUN/config.json``; on resume the stored config is the truth and only keys in
:data:`MUTABLE_ON_RESUME` may differ (see :func:`diff_for_resume`).

Validation happens in ``__post_init__`` and raises :class:`~embedlab.errors.InputError` with a
message that names the flag and the fix, so the CLI can print it as one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from embedlab.engines import CPU_REQUEST, CUDA_LOSSES, REQUESTS
from embedlab.errors import (
    InputError,
    numpy_bool,
    python_caller,
    spell,
    spell_metavar,
    spell_name,
    warn,
)
from embedlab.fsutil import bare_stem

ModelKind = Literal["skipgram", "cbow"]
LossKind = Literal["neg", "nce", "hs"]
InitKind = Literal["centered", "uniform"]


def _is_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: the largest integer embedlab stores: flags, counters, seeds and word counts are int64
MAX_INT = 2**63 - 1
#: the most threads a process trains with: OpenMP cannot start tens of thousands (the
#: native engine then crashes); this is far beyond today's machines' cores
MAX_THREADS = 1024


def _flag(name: str, *value: Any) -> str:
    """Option ``name`` (``"batch_size"``) as the caller spells it: ``--batch-size`` or
    ``batch_size=``, with ``value`` if given (see :func:`embedlab.errors.spell`)."""
    return spell(f"--{name.replace('_', '-')}", *value)


def _positive(name: str, value: float | int, *, allow_zero: bool = False) -> None:
    bad = not isinstance(value, (int, float)) or not math.isfinite(value)
    bad = bad or (value < 0 if allow_zero else value <= 0)
    if not bad and isinstance(value, int) and value > MAX_INT:
        raise InputError(f"{_flag(name, value)} is too large (at most {MAX_INT}); "
                         f"pass e.g. {_flag(name, _EXAMPLES.get(name, 1))}")
    if bad:
        kind = "a finite number" if name in _FLOAT_OPTIONS else "an integer"
        need = f"{kind} >= 0" if allow_zero else f"{kind} > 0"
        # a number in quotes ('5'): say it is a str, which is the mistake
        got = (f"the {type(value).__name__} {value!r}"
               if not isinstance(value, (int, float)) else repr(value))
        raise InputError(f"{_flag(name)} must be {need}, got {got}; pass e.g. "
                         f"{_flag(name, _EXAMPLES.get(name, 1))}{_zero_hints().get(name, '')}")


#: the options _positive checks that take fractions; the others take integers
_FLOAT_OPTIONS = frozenset({"lr", "min_lr_ratio", "noise_exponent", "sample", "init_scale",
                            "checkpoint_secs"})


def _zero_hints() -> dict[str, str]:
    """What a gensim or word2vec.c user means by 0 where embedlab takes no 0."""
    return {"min_count": f" ({_flag('min_count', 1)} keeps every word, as gensim's "
                         "min_count=0 does)",
            "negative": f" (word2vec.c's -hs 1 -negative 0 is {_flag('loss', 'hs')}, which "
                        f"takes {_flag('negative', 0)})"}


def _option_name(obj: Any, field_name: str) -> str:
    """The option (flag with underscores) a config field is set by, from :data:`OPTIONS`
    (``checkpoint.every_steps`` is ``checkpoint_every``); the field's own name where none is."""
    section = next((s for s, c in _SECTIONS.items() if isinstance(obj, c)), None)
    return next((name for name, place in OPTIONS.items() if place == (section, field_name)),
                field_name)


def _kind(annotation: Any) -> str:
    """A field's value kind from its annotation (a string under ``from __future__ import
    annotations``): int, float, bool or str, each possibly None; other types are ``other``."""
    base = str(annotation).removesuffix(" | None")
    if base in ("ModelKind", "LossKind", "InitKind"):
        return "str"
    return base if base in ("int", "float", "bool", "str") else "other"


def _check_types(obj: Any) -> None:
    """Each field of a config section holds a value of its type, or the refusal names the
    option: ``epochs=2.0``, ``restart``-like strings for a bool (``tensorboard="no"`` is
    truthy) and bools for a number (``window=True``) would otherwise train something else or
    fail deep inside. Values of NumPy's scalar types become Python's."""
    for f in fields(obj):
        value, kind = getattr(obj, f.name), _kind(f.type)
        if (value is None and f.type.endswith("| None")) or kind == "other":
            continue
        name = _option_name(obj, f.name)
        got = (f"the {type(value).__name__} {value!r}" if isinstance(value, (str, bool))
               else repr(value))
        example = _flag(name, _EXAMPLES.get(name, 1))
        if kind == "bool":
            if numpy_bool(value):
                object.__setattr__(obj, f.name, bool(value))
            elif not isinstance(value, bool):
                raise InputError(f"{_flag(name)} must be True or False, got {got}; pass e.g. "
                                 f"{_flag(name, True)}")
        elif kind == "int":
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                object.__setattr__(obj, f.name, int(value))
            else:
                raise InputError(f"{_flag(name)} must be an integer, got {got}; pass e.g. "
                                 f"{example}")
        elif kind == "float":
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise InputError(f"{_flag(name)} must be a number, got {got}; pass e.g. "
                                 f"{example}")
            if not isinstance(value, (int, float)):  # numpy.float32(0.5): a float
                object.__setattr__(obj, f.name, float(value))
        elif isinstance(value, os.PathLike):
            object.__setattr__(obj, f.name, os.fspath(value))
        elif not isinstance(value, str):
            if name in _NO_FLAG:  # set in config.json alone
                raise InputError(f"{_NO_FLAG[name]} must be a str, got {got}; set e.g. "
                                 f"\"{name}\": {json.dumps(_EXAMPLES[name])} in the run's "
                                 "config.json")
            raise InputError(f"{_flag(name)} must be a str, got {got}; pass e.g. {example}")


def coerce_stored(raw: Any) -> Any:
    """A stored config's values as today's checks take them, in place, so that the run keeps
    resuming: an integer option held as a bool or a whole float (``"window": true``, ``"keep":
    2.0``, values a Python call refuses) becomes the integer such a run trains with, and a bool
    option held as another value (``"tensorboard": "no"``) its truth value."""
    if not isinstance(raw, dict):
        return raw
    for name, cls in [(None, TrainConfig), *_SECTIONS.items()]:
        part = raw if name is None else raw.get(name)
        if not isinstance(part, dict):
            continue
        for f in fields(cls):
            value, kind = part.get(f.name), _kind(f.type)
            if value is None:
                continue
            if kind == "int" and (isinstance(value, bool) or
                                  (isinstance(value, float) and value.is_integer())):
                part[f.name] = int(value)
            elif kind == "bool" and not isinstance(value, bool):
                part[f.name] = bool(value)  # "tensorboard": "no" is truthy: it writes events
    return raw


#: fields without a flag: their key in config.json
_NO_FLAG = {"micro_order": "optim.micro_order"}

_EXAMPLES: dict[str, Any] = {
    "lr": 0.025, "dim": 100, "window": 5, "negative": 5, "sample": 0.001, "min_count": 5,
    "epochs": 5, "batch_size": 2048, "noise_exponent": 0.75, "threads": 2, "max_vocab": 50000,
    "checkpoint_every": 5000, "negative_group": 32, "checkpoint_secs": 120, "keep": 5,
    "log_every": 100, "init_scale": 8, "min_lr_ratio": 0.0001, "max_distinct": 10_000_000,
    "shared_negatives": 40, "keep_every": 10000, "projector_words": 2000, "eval_every": 1000,
    "eval_restrict_vocab": 30000, "max_steps": 1000, "interleave": 2, "micro_batches": 4,
    "corpus": "demo", "model": "skipgram", "loss": "neg", "init": "centered", "unk": "UNK",
    "engine": "native", "init_from": "runs/other", "preset": "cs20", "best_metric": "loss:min",
    "eval_analogies": "questions-words.txt", "micro_order": "chunks",
}


@dataclass(frozen=True)
class DataConfig:
    """Where the tokens come from and how the vocabulary is built."""

    corpus: str = "demo"  # "demo", "text8", a file, a folder or a prepared folder
    lowercase: bool = False
    min_count: int = 5
    max_vocab: int | None = None  # keep the N most frequent words (the lecture's VOCAB_SIZE)
    unk: str | None = None  # map out-of-vocabulary words to this token (counts as one word)
    max_distinct: int = 10_000_000  # prune rare words while counting beyond this many types

    def __post_init__(self) -> None:
        _check_types(self)
        if not self.corpus:
            raise InputError(f"{_flag('corpus')} is empty; pass a file, a folder, 'text8' or "
                             "'demo'")
        _positive("min_count", self.min_count)
        if self.max_vocab is not None:
            _positive("max_vocab", self.max_vocab)
            if self.unk is not None and self.max_vocab < 2:
                raise InputError(f"{_flag('max_vocab')} must be >= 2 when {_flag('unk')} is "
                                 "set (UNK takes one slot); pass e.g. "
                                 f"{_flag('max_vocab', _EXAMPLES['max_vocab'])}")
        _positive("max_distinct", self.max_distinct)
        if self.unk is not None and (not self.unk or any(c.isspace() for c in self.unk)):
            raise InputError(f"{_flag('unk')} must be a non-empty token without spaces, got "
                             f"{self.unk!r}; pass e.g. {_flag('unk', 'UNK')}, or leave it out "
                             "to drop unknown words")
        if self.unk is not None and not _is_utf8(self.unk):
            # bytes that are not UTF-8 reach Python as lone surrogates ('a\udcffb'), which no
            # vocab.tsv can hold
            raise InputError(f"{_flag('unk')} must be UTF-8 text, got {self.unk!r}; pass e.g. "
                             f"{_flag('unk', 'UNK')}")


@dataclass(frozen=True)
class ModelConfig:
    """The word2vec model: architecture, loss and the sampling that defines its data."""

    model: ModelKind = "skipgram"
    loss: LossKind = "neg"
    dim: int = 100
    window: int = 5  # maximum window; each centre draws b in [1, window] (word2vec's shrinking)
    negative: int = 5  # noise words per positive pair (K)
    shared_negatives: int = 0  # noise words shared by a group of centres; 0 = ⌈4/3·K·(window+1)⌉
    negative_group: int = 32  # centres sharing one set of noise words (smaller: closer to word2vec)
    noise_exponent: float = 0.75  # unigram^alpha noise distribution
    sample: float = 1e-3  # subsampling threshold t; 0 disables
    init: InitKind = "centered"  # U(-s/2, s/2)/dim, s = init_scale; "uniform": the lecture's U[0,1)
    # s = 1 is word2vec.c's, 2 gensim 4's; 0 = by model: 8 skip-gram, 12 CBOW (see
    # embedlab.engines.params.default_init_scale)
    init_scale: float = 0.0

    def __post_init__(self) -> None:
        _check_types(self)
        if self.model not in ("skipgram", "cbow"):
            raise InputError(f"{_flag('model')} must be skipgram or cbow, got {self.model!r}")
        if self.loss not in ("neg", "nce", "hs"):
            raise InputError(f"{_flag('loss')} must be neg or nce, or hs (hierarchical "
                             f"softmax), got {self.loss!r}")
        if self.init not in ("centered", "uniform"):
            raise InputError(f"{_flag('init')} must be centered or uniform, got {self.init!r}")
        for name in ("dim", "window", "negative"):
            # hs draws no noise words: --negative 0 is gensim's hs=1, negative=0
            _positive(name, getattr(self, name), allow_zero=name == "negative" and
                      self.loss == "hs")
        _positive("shared_negatives", self.shared_negatives, allow_zero=True)
        _positive("negative_group", self.negative_group)
        _positive("noise_exponent", self.noise_exponent, allow_zero=True)
        _positive("sample", self.sample, allow_zero=True)
        _positive("init_scale", self.init_scale, allow_zero=True)


MICRO_ORDERS = ("chunks", "consecutive")


@dataclass(frozen=True)
class OptimConfig:
    """Plain SGD with word2vec's linear decay from ``lr`` to ``lr * min_lr_ratio``."""

    lr: float = 0.025
    min_lr_ratio: float = 1e-4
    epochs: int = 5
    batch_size: int = 2048  # centre words per step (each yields up to 2*window pairs)
    # the corpus is read as this many interleaved parts, as word2vec's threads read it (see
    # embedlab.data.pairs); 1 reads it in order. Runs of versions before the option: 1.
    interleave: int = 2
    # a step trains this many batches of --batch-size together (one rate, one synchronous
    # update; embedlab.engines.microbatch): what processes training one run split
    micro_batches: int = 1
    # where a step's micro-batches come from: "chunks" (micro-batch j of the steps of chunk
    # group g reads chunk g·M + j, so each process reads only its own chunks) or "consecutive"
    # (M consecutive batches; runs of versions before the key)
    micro_order: str = "chunks"

    def __post_init__(self) -> None:
        _check_types(self)
        _positive("lr", self.lr)
        _positive("min_lr_ratio", self.min_lr_ratio)
        if self.min_lr_ratio > 1:
            raise InputError(f"{_flag('min_lr_ratio')} must be <= 1 (the final lr is lr * "
                             f"ratio), got {self.min_lr_ratio!r}; pass e.g. "
                             f"{_flag('min_lr_ratio', 0.0001)} (word2vec's), or 1 for a constant "
                             "lr")
        _positive("epochs", self.epochs)
        _positive("batch_size", self.batch_size)
        _positive("interleave", self.interleave)
        _positive("micro_batches", self.micro_batches)
        if self.micro_order not in MICRO_ORDERS:
            raise InputError(f"optim.micro_order must be one of {', '.join(MICRO_ORDERS)}, got "
                             f"{self.micro_order!r}; set \"micro_order\": \"chunks\" in the "
                             "run's config.json")


@dataclass(frozen=True)
class CheckpointConfig:
    """When to save and what to keep (retention roles: latest-K, best, archive)."""

    every_steps: int | None = None  # --checkpoint-every
    every_secs: float = 120.0  # --checkpoint-secs; whichever of the two comes first
    keep: int = 5  # --keep: latest K (the lecture's max_to_keep)
    keep_every: int | None = None  # --keep-every: archive checkpoints never deleted (0: none)
    best_metric: str = "loss:min"  # --best-metric NAME[:min|max]

    def __post_init__(self) -> None:
        _check_types(self)
        if self.every_steps is not None:
            _positive("checkpoint_every", self.every_steps)
        _positive("checkpoint_secs", self.every_secs)
        _positive("keep", self.keep)
        if self.keep_every is not None:  # 0: archive none (a run's --keep-every turned off)
            _positive("keep_every", self.keep_every, allow_zero=True)
        name, mode = split_best_metric(self.best_metric)
        if not name or mode not in ("", "min", "max"):
            raise InputError(f"{_flag('best_metric')} must be NAME[:min|max], got "
                             f"{self.best_metric!r}; e.g. {_flag('best_metric', 'loss:min')} or "
                             f"{_flag('best_metric', 'analogy:max')}")

    @property
    def best_name(self) -> str:
        return split_best_metric(self.best_metric)[0]

    @property
    def best_mode(self) -> Literal["min", "max"]:
        name, mode = split_best_metric(self.best_metric)
        if mode in ("min", "max"):
            return mode  # type: ignore[return-value]
        return best_direction(name)


def split_best_metric(metric: str) -> tuple[str, str]:
    """``--best-metric NAME[:min|max]`` as (NAME, mode or ""). The mode is split off the last
    colon, so that a similarity file whose stem holds one (``similarity/a:b``) can be named."""
    head, sep, tail = metric.rpartition(":")
    if sep and tail in ("", "min", "max"):
        return head, tail
    if metric.startswith("similarity/"):
        return metric, ""
    name, _, mode = metric.partition(":")
    return name, mode


def best_direction(name: str) -> Literal["min", "max"]:
    """The default direction of a --best-metric: the loss is minimised, evaluations (analogy
    accuracy, similarity correlations) are maximised, whatever their file is called."""
    return "min" if name == "loss" else "max"


@dataclass(frozen=True)
class TrackConfig:
    """Logging and TensorBoard cadence."""

    log_every: int = 100  # steps per logging window (loss = mean per positive example)
    tensorboard: bool = True
    probe_words: tuple[str, ...] = ()  # empty = a few frequent words
    projector_words: int = 2000
    projector_each_checkpoint: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        _check_types(self)
        _positive("log_every", self.log_every)
        _positive("projector_words", self.projector_words)
        for word in self.probe_words:  # '' would be listed as an unknown word, shown as nothing
            if not word or any(c.isspace() for c in word):
                raise InputError(f"{_flag('probe')} words must be non-empty tokens without "
                                 f"spaces, got {word!r}; pass e.g. {_flag('probe', 'king')}")


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation during training (never perturbs training)."""

    every_steps: int | None = None
    analogies: str | None = None
    similarity: tuple[str, ...] = ()
    restrict_vocab: int = 30_000

    def __post_init__(self) -> None:
        _check_types(self)
        if self.every_steps is not None:
            _positive("eval_every", self.every_steps)
        _positive("eval_restrict_vocab", self.restrict_vocab)


def check_new_run(cfg: TrainConfig, explicit: dict[str, Any] | None = None) -> None:
    """Checks for a new run only: a stored config.json that predates them must still resume.
    ``explicit``: the options given, where a check is of what the user typed."""
    given = (explicit or {}).get("model", {})
    if cfg.model.init == "uniform" and given.get("init_scale") not in (None, 0):
        # the uniform start is the lecture's U[0, 1): no scale to set, and two runs named by
        # two scales gave the same bits (a preset's or a stored scale is not the user's to drop)
        raise InputError(f"{_flag('init_scale')} sets the width of {_flag('init', 'centered')} "
                         f"(the default); {_flag('init', 'uniform')} has none: drop "
                         f"{_flag('init_scale')}, or drop {_flag('init', 'uniform')}")
    sample = cfg.model.sample
    if sample >= 1:  # t·N >= N: no word is ever subsampled (gensim reads it as a count)
        raise InputError(f"{_flag('sample')} must be below 1, got {sample!r}: it is a "
                         "threshold on a word's share of the corpus (typically 1e-3 to "
                         "1e-5; 0 = off), not a word count as gensim reads values >= 1; "
                         f"pass e.g. {_flag('sample', 0.001)}")
    _warn_uneven_group(cfg, given, (explicit or {}).get("optim", {}))


def _warn_uneven_group(cfg: TrainConfig, model: dict[str, Any], optim: dict[str, Any]) -> None:
    """Say, when the user typed one of them, that --negative-group does not divide
    --batch-size (nor the batch it): the groups are their gcd (documented), which can be far
    smaller and slower (33 and 1024 share one noise set per centre). Not refused: a run made
    so resumes."""
    m, batch = cfg.model, cfg.optim.batch_size
    if "negative_group" not in model and "batch_size" not in optim:
        return
    if m.loss == "hs" or (m.shared_negatives and m.loss == "nce"):  # no groups of centres
        return
    group = math.gcd(m.negative_group, batch)
    if group == min(m.negative_group, batch):  # a group is at most the batch
        return
    divisors = {d for i in range(1, math.isqrt(batch) + 1) if batch % i == 0
                for d in (i, batch // i)}
    below = max(d for d in divisors if d <= m.negative_group)
    warn(f"{_flag('negative_group', m.negative_group)} does not divide "
         f"{_flag('batch_size', batch)}: groups of gcd({m.negative_group}, {batch}) = {group} "
         f"centre{'s' if group > 1 else ''} share noise words, more draws and a slower step; "
         f"pass a divisor of {_flag('batch_size')}, e.g. {_flag('negative_group', below)}")


def check_best_metric(cfg: TrainConfig) -> None:
    """--best-metric must name a metric the run records, or no best checkpoint is ever kept
    (and 'export --best' fails much later).

    Checked when a run trains, not when a config is built: a stored config.json written before
    this check must still load (to be listed, and resumed with a --best-metric that fixes it).
    """
    name, ev = cfg.checkpoint.best_name, cfg.eval
    similarity = [f"similarity/{bare_stem(p)}" for p in ev.similarity]
    if name == "loss" or (name == "analogy" and ev.analogies) or name in similarity:
        return
    analogies, similarities = spell_metavar("--eval-analogies", "FILE"), "--eval-similarity"
    if name == "analogy":
        fix = (f"pass {analogies} too (evaluated at {spell_name('--eval-every')} and at the "
               f"end), or {spell('--best-metric', 'loss')}")
    elif name.startswith("similarity/"):
        given = name.split("/", 1)[1]
        stem = f"similarity/{bare_stem(given)}" if given else ""
        known = ", ".join(similarity) or \
            f"none: no {spell_name(similarities)} file is given"
        if stem in similarity:  # the file's whole name given: the metric is named by its stem
            fix = f"the name is the file's without its suffix: pass {spell('--best-metric', stem)}"
        else:
            fix = (f"pass {spell_metavar(similarities, (given or 'NAME') + '.tsv')} (the name "
                   f"is the file's without its suffix) too; this run's similarity metrics: {known}")
    else:
        fix = (f"use loss, analogy (with {spell_name('--eval-analogies')}) or similarity/NAME "
               f"(with {spell_metavar(similarities, 'NAME.tsv')})")
    raise InputError(f"{spell('--best-metric', name)} is not a metric this run records; {fix}")


@dataclass(frozen=True)
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    track: TrackConfig = field(default_factory=TrackConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seed: int = 1
    threads: int = 0  # 0 = all cores; resolved in resolve()
    # auto | native (C kernel) | torch | cuda (GPU), or "cpu" (--device cpu: native, else
    # torch); resolved in resolve()
    engine: str = "auto"
    max_steps: int | None = None  # stop at this global step; the lr schedule is unchanged
    init_from: str | None = None  # warm start: copy rows of shared words from this run/ckpt
    preset: str | None = None

    def __post_init__(self) -> None:
        _check_types(self)
        if not 0 <= self.seed <= MAX_INT:  # an integer: _check_types
            raise InputError(f"{_flag('seed')} must be an integer from 0 to {MAX_INT}, got "
                             f"{self.seed!r}; pass e.g. {_flag('seed', 1)}")
        if self.threads < 0:
            raise InputError(f"{_flag('threads')} must be >= 1 (or 0 for all cores), got "
                             f"{self.threads}; pass e.g. {_flag('threads', 2)}, or "
                             f"{_flag('threads', 0)}")
        if self.threads > MAX_THREADS:
            raise InputError(f"{_flag('threads')} must be at most {MAX_THREADS}, got "
                             f"{self.threads}; pass the number of cores, e.g. "
                             f"{_flag('threads', 0)} for all of them")
        if self.max_steps is not None:
            _positive("max_steps", self.max_steps)
        if self.engine not in REQUESTS:
            raise InputError(f"{_flag('engine')} must be auto, native, torch or cuda, got "
                             f"{self.engine!r}")
        if self.optim.micro_batches > 1:
            self._check_micro_batches()
        if self.engine == "cuda" and self.model.loss not in CUDA_LOSSES:
            from embedlab.engines import asked_for_device

            fix = (f"{_flag('device', 'cpu')}" if asked_for_device() else
                   f"{_flag('engine', 'native')} or {_flag('engine', 'torch')}")
            raise InputError(f"{_flag('loss', self.model.loss)} does not train on the cuda "
                             f"engine, which trains negative sampling and NCE only; pass {fix} "
                             "for it")

    def _check_micro_batches(self) -> None:
        """Steps of several micro-batches: the torch and cuda engines' negative sampling and
        NCE, with the summed loss (the lecture's batch mean has no one rate for several
        batches)."""
        m = _flag("micro_batches", self.optim.micro_batches)
        if self.engine not in ("torch", "cuda", "auto", CPU_REQUEST):  # cpu: the torch engine
            raise InputError(f"{m} trains on the torch and cuda engines; pass "
                             f"{_flag('engine', 'torch')} or {_flag('engine', 'cuda')}")
        if self.model.loss == "hs":
            alone = "not under torchrun" if python_caller() else "without --nproc or torchrun"
            raise InputError(f"{m} trains negative sampling and NCE; pass "
                             f"{_flag('loss', 'neg')} or {_flag('micro_batches', 1)} "
                             f"(hierarchical softmax trains in one process: {alone})")
        if self.preset == "cs20":
            raise InputError(f"{m} trains the summed loss, and {_flag('preset', 'cs20')} the "
                             f"batch mean; drop one of them")

    def resolve(self, *, say: bool = True) -> TrainConfig:
        """Spell out machine-dependent defaults (thread count, engine).

        ``engine="auto"`` (or ``"cpu"``) becomes the engine the registry picks
        (:func:`embedlab.engines.choose_engine`: ``cuda`` on a GPU, else ``native`` when the C
        kernel builds here, else ``torch``; with micro-batches ``cuda`` on a GPU, else
        ``torch``); an explicit engine that cannot train here is an
        :class:`InputError` naming the reason. ``say``: print the note on an unexpected choice.
        """
        from embedlab.engines import choose_engine

        # all cores, shared by the processes torchrun starts on this machine
        threads = self.threads or max(1, len(os.sched_getaffinity(0)) // _local_processes())
        engine = choose_engine(self.engine, loss=self.model.loss, say=say,
                               micro=self.optim.micro_batches > 1)
        return dataclasses.replace(self, threads=threads, engine=engine)

    def engine_for(self) -> str:
        """The engine :meth:`resolve` would choose, without its note or its refusal."""
        from embedlab.engines import CPU_REQUEST, auto_choice, cpu_choice, cuda_device_found

        micro = self.optim.micro_batches > 1  # the cuda engine or, on the CPU, torch
        if self.engine == CPU_REQUEST:
            return "torch" if micro else cpu_choice()
        if self.engine == "auto" and micro:  # without building the native kernel to ask
            return "cuda" if self.model.loss in CUDA_LOSSES and cuda_device_found() else "torch"
        if self.engine != "auto":
            return self.engine
        return auto_choice(loss=self.model.loss)

    # ---- (de)serialisation -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return _to_plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        if not isinstance(d, dict):
            raise TypeError(f"a config must be a JSON object, got {type(d).__name__}")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in d:
                continue
            sub = _SECTIONS.get(f.name)
            kwargs[f.name] = _from_plain(sub, d[f.name]) if sub else d[f.name]
        return cls(**kwargs)


_SECTIONS: dict[str, type] = {
    "data": DataConfig, "model": ModelConfig, "optim": OptimConfig,
    "checkpoint": CheckpointConfig, "track": TrackConfig, "eval": EvalConfig,
}


def _to_plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _to_plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_plain(v) for v in x]
    return x


def _from_plain(cls: type, d: dict[str, Any]) -> Any:
    if not isinstance(d, dict):
        raise TypeError(f"section {cls.__name__} must be a JSON object, got {type(d).__name__}")
    names = {f.name: f for f in fields(cls)}
    kwargs = {}
    for k, v in d.items():
        if k in names:
            kwargs[k] = tuple(v) if isinstance(v, list) else v
    return cls(**kwargs)


#: option (a flag of ``embedlab train`` with underscores) -> (config section, or None for the
#: top level, and key)
OPTIONS: dict[str, tuple[str | None, str]] = {
    "corpus": ("data", "corpus"), "lowercase": ("data", "lowercase"),
    "min_count": ("data", "min_count"), "max_vocab": ("data", "max_vocab"), "unk": ("data", "unk"),
    "max_distinct": ("data", "max_distinct"),
    "model": ("model", "model"), "loss": ("model", "loss"), "dim": ("model", "dim"),
    "window": ("model", "window"), "negative": ("model", "negative"),
    "shared_negatives": ("model", "shared_negatives"),
    "negative_group": ("model", "negative_group"),
    "noise_exponent": ("model", "noise_exponent"), "sample": ("model", "sample"),
    "init": ("model", "init"), "init_scale": ("model", "init_scale"),
    "lr": ("optim", "lr"), "min_lr_ratio": ("optim", "min_lr_ratio"),
    "epochs": ("optim", "epochs"), "batch_size": ("optim", "batch_size"),
    "interleave": ("optim", "interleave"),
    "micro_batches": ("optim", "micro_batches"),
    "checkpoint_every": ("checkpoint", "every_steps"),
    "checkpoint_secs": ("checkpoint", "every_secs"), "keep": ("checkpoint", "keep"),
    "keep_every": ("checkpoint", "keep_every"), "best_metric": ("checkpoint", "best_metric"),
    "log_every": ("track", "log_every"), "tensorboard": ("track", "tensorboard"),
    "probe": ("track", "probe_words"), "projector_words": ("track", "projector_words"),
    "projector_each_checkpoint": ("track", "projector_each_checkpoint"),
    "progress": ("track", "progress"),
    "eval_every": ("eval", "every_steps"), "eval_analogies": ("eval", "analogies"),
    "eval_similarity": ("eval", "similarity"), "eval_restrict_vocab": ("eval", "restrict_vocab"),
    "seed": (None, "seed"), "threads": (None, "threads"), "engine": (None, "engine"),
    "max_steps": (None, "max_steps"),
    "init_from": (None, "init_from"),
}
#: options that take several values (flags given more than once)
LISTS = ("probe", "eval_similarity")


# ---- presets ------------------------------------------------------------------------------

# The CS20 lecture's word2vec (../shared/seeds): VOCAB_SIZE 50,000 (incl. UNK), EMBED_SIZE 128,
# SKIP_WINDOW 1, NCE with NUM_SAMPLED 64 shared by the batch, BATCH_SIZE 128, SGD lr 1.0,
# 100,000 steps, a checkpoint every 5,000 steps (SKIP_STEP), max_to_keep 5. Deviation, on purpose:
# the lecture's U[0,1) initialisation leaves the vectors nearly untrained, so the preset uses
# word2vec's centred initialisation; pass --init uniform to replicate.
PRESETS: dict[str, dict[str, dict[str, Any] | Any]] = {
    "cs20": {
        "data": {"max_vocab": 50_000, "unk": "UNK", "min_count": 1},
        "model": {"model": "skipgram", "loss": "nce", "dim": 128, "window": 1, "negative": 64,
                  "shared_negatives": 64, "sample": 0.0, "init": "centered", "init_scale": 1.0},
        # constant lr, as TensorFlow's GradientDescentOptimizer(1.0) in the lecture
        # the lecture's generator reads the corpus in order
        "optim": {"lr": 1.0, "min_lr_ratio": 1.0, "batch_size": 128, "epochs": 1,
                  "interleave": 1},
        "checkpoint": {"every_steps": 5_000, "keep": 5},
        "max_steps": 100_000,
    },
}


def overlay(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (a config as ``TrainConfig.to_dict()`` nests it) with ``overrides`` laid over
    it, section by section; ``base`` is changed and returned."""
    for k, v in overrides.items():
        if isinstance(v, dict):
            base.setdefault(k, {}).update(v)
        else:
            base[k] = v
    return base


def apply_preset(name: str | None, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Merge a preset with explicit flag values (explicit flags win)."""
    merged: dict[str, Any] = {}
    if name is not None:
        if name not in PRESETS:
            raise InputError(f"unknown {_flag('preset')} {name!r}; available: "
                             f"{', '.join(sorted(PRESETS))}")
        for k, v in PRESETS[name].items():
            merged[k] = dict(v) if isinstance(v, dict) else v
        merged["preset"] = name
    return overlay(merged, overrides)


# ---- resume rules -------------------------------------------------------------------------

# Keys later versions added, with the value every run written before them had: a stored
# config.json without the key is read with this value, not today's default.
LEGACY_VALUES: dict[str, Any] = {
    "model.init_scale": 1.0,  # word2vec's width, before the option existed
    "optim.interleave": 1,  # the corpus read in order
    "optim.micro_batches": 1,  # a step: one batch
    "optim.micro_order": "consecutive",  # a step's micro-batches: consecutive batches
}


def fill_legacy_keys(raw: Any) -> set[str]:
    """Add the keys of :data:`LEGACY_VALUES` a stored config lacks, in place, and read its
    values as :func:`coerce_stored` does; return the keys added."""
    filled: set[str] = set()
    if not isinstance(raw, dict):
        return filled
    coerce_stored(raw)
    for key, value in LEGACY_VALUES.items():
        section, name = key.split(".")
        part = raw.get(section)
        if isinstance(part, dict) and name not in part:
            part[name] = value
            filled.add(key)
    return filled


# Keys that may differ between the stored config and a resuming command. Everything else would
# change the result, so a difference is refused. optim.epochs may only be *raised*: the linear
# lr schedule is then stretched over the new total from the resumed position onwards. The engine
# may change between cuda and a CPU engine: a run trained on a GPU must be able to go on where
# there is none (the two agree to float32 rounding, and the resume says its bits may differ).
MUTABLE_ON_RESUME = (
    "max_steps", "threads", "checkpoint.", "track.", "eval.", "preset",
)


#: the keys of the noise words, which hierarchical softmax does not draw
NOISE_KEYS = ("model.negative", "model.shared_negatives", "model.negative_group",
              "model.noise_exponent")


def without_unused(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened config without the keys its training does not read (the noise words' for
    ``--loss hs``): shown beside other runs, their values would look like differences that
    changed nothing."""
    if flat.get("model.loss") != "hs":
        return flat
    return {k: v for k, v in flat.items() if k not in NOISE_KEYS}


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


#: settings a checkpoint does not record: paths, which a moved corpus (or the folder a resume
#: is typed in) changes without changing the run
_UNRECORDED = ("data.corpus", "init_from")


def recorded_settings(cfg: TrainConfig) -> str:
    """The settings that decide a run's results, as canonical JSON: what a checkpoint records,
    so that a resume can tell a config.json edited since (:func:`edited_settings`)."""
    flat = {k: v for k, v in flatten(cfg.to_dict()).items()
            if k not in _UNRECORDED and not k.startswith(MUTABLE_ON_RESUME)}
    return json.dumps(flat, sort_keys=True)


def edited_settings(recorded: str, cfg: TrainConfig) -> list[str]:
    """The settings of ``cfg`` that differ from those a checkpoint ``recorded`` in ways a resume
    may not change (:func:`changed_settings`: ``--epochs`` may grow), each as ``key (config.json
    X, checkpoint Y)``. Keys one side lacks (a setting added or dropped by an upgrade) are not
    compared; an unreadable record is no difference (its hash was checked)."""
    try:
        then = json.loads(recorded)
    except ValueError:
        return []
    if not isinstance(then, dict):
        return []
    now = {k: v for k, v in flatten(cfg.to_dict()).items() if k in then}
    then = {k: v for k, v in then.items() if k in now}
    return [f"{key} (config.json {now[key]!r}, checkpoint {then[key]!r})"
            for key in changed_settings(then, now)]


def diff_for_resume(stored: TrainConfig, requested: TrainConfig, *,
                    spelled: bool = False) -> list[str]:
    """Keys whose requested value would change the result; empty list = resume is allowed.
    ``spelled``: each named as the caller passes it (``--dim``, ``dim``), not as config.json
    holds it (``model.dim``)."""
    return diff_settings(flatten(stored.to_dict()), flatten(requested.to_dict()),
                         spelled=spelled)


def diff_settings(a: dict[str, Any], b: dict[str, Any], *, spelled: bool = False) -> list[str]:
    """:func:`diff_for_resume` of two flattened config dicts (``b`` need not be a valid
    config: settings no engine trains together are still compared)."""
    bad = []
    for key in changed_settings(a, b):
        name = option_spelled(key) if spelled else key
        if key == "optim.epochs":  # lowered: say which way it may change
            bad.append(f"{name} (stored {a.get(key)!r}, requested {b.get(key)!r}: it may be "
                       "raised to train on, not lowered)")
            continue
        bad.append(f"{name} (stored {a.get(key)!r}, requested {b.get(key)!r})")
    return bad


def changed_settings(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys of two flattened config dicts whose values a resume from ``a`` to ``b`` may not
    change, sorted: not those that change nothing of the results, nor ``--epochs`` raised."""
    # hierarchical softmax reads no noise setting: another --negative trains the same bits
    unused = NOISE_KEYS if a.get("model.loss") == b.get("model.loss") == "hs" else ()
    keys = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key) or key.startswith(MUTABLE_ON_RESUME) or key in unused:
            continue
        if key == "optim.epochs" and b.get(key, 0) >= a.get(key, 0):
            continue
        if key == "engine" and "cuda" in (a.get(key), b.get(key)):
            continue  # a GPU run may go on on the CPU and back, with a warning (run.folder)
        keys.append(key)
    return keys


def option_spelled(key: str) -> str:
    """A flattened config key (``model.dim``) as the option that sets it, in the caller's
    spelling (``--dim``, or ``dim`` in Python); the key itself where no option sets it."""
    section, _, name = key.rpartition(".")
    for option, where in OPTIONS.items():
        if where == ((section or None), name):
            return spell_name(f"--{option.replace('_', '-')}")
    return key


def _local_processes() -> int:
    """The processes torchrun started on this machine for one run (1 without torchrun)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1
