"""Run folder names from the hyperparameters that differ from the defaults (``demo-sg``,
``text8-cbow-nce-d128``), so that re-running a command finds its run."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from embedlab.config import TrainConfig, apply_preset, flatten
from embedlab.data.sentences import LABEL_START, is_label

# (config key, short tag) in the order they appear in a run name.
_NAME_KEYS = (
    ("model.loss", ""), ("model.dim", "d"), ("model.window", "w"), ("model.negative", "n"),
    ("model.shared_negatives", "sn"), ("model.negative_group", "ng"), ("model.sample", "t"),
    ("optim.lr", "lr"), ("optim.min_lr_ratio", "mlr"), ("optim.batch_size", "b"),
    ("optim.epochs", "e"), ("optim.interleave", "il"), ("optim.micro_batches", "mb"),
    ("data.min_count", "mc"), ("data.max_vocab", "v"), ("model.init", "init-"),
    ("model.init_scale", "is"),
    ("model.noise_exponent", "alpha"), ("seed", "s"),
)


def corpus_tag(corpus: str, *, ascii_only: bool = False) -> str:
    """The corpus's part of a run name: its file or folder name without the suffixes it is read
    by, letters (of any script, with their combining marks), digits, ``_`` and ``.`` kept, runs
    of anything else ``_``. ``ascii_only``: ASCII letters alone, as earlier versions named runs
    (``Корпус.txt`` was ``_``)."""
    if corpus in ("demo", "text8"):
        return corpus
    if is_label(corpus):  # sentences given in memory: "<iterable sha256:0123...>"
        return f"iterable-{corpus.removeprefix(LABEL_START).removesuffix('>')}"
    p = Path(corpus.rstrip("/"))
    stem = p.name
    for suffix in (".gz", ".bz2", ".xz", ".txt"):
        stem = stem.removesuffix(suffix)
    if ascii_only:
        return re.sub(r"[^A-Za-z0-9_.]+", "_", stem) or "corpus"
    kept = "".join(c if c.isalnum() or c in "_." or unicodedata.category(c).startswith("M")
                   else "\0" for c in stem)
    return re.sub("\0+", "_", kept) or "corpus"


# tags added to run names later: runs named before them are looked up under the old name too
_LATER_NAME_KEYS = frozenset({"optim.min_lr_ratio", "optim.interleave", "optim.micro_batches"})


#: defaults of earlier versions, whose run names left those values out (--batch-size 1024
#: made no b1024 tag before the default became 2048)
_EARLIER_DEFAULTS = {"optim.batch_size": 1024}


def earlier_run_names(cfg: TrainConfig) -> list[str]:
    """The names earlier versions gave a run of ``cfg``, other than :func:`run_name`'s: without
    the tags of ``_LATER_NAME_KEYS``, with the defaults they had (``_EARLIER_DEFAULTS``), and
    with the corpus's tag in ASCII, so that re-running an old command still finds its run."""
    names = [run_name(cfg, legacy=legacy, earlier_defaults=earlier, ascii_corpus=ascii_only)
             for ascii_only in (False, True) for legacy in (True, False)
             for earlier in (False, True)]
    today = run_name(cfg)
    return [n for i, n in enumerate(names) if n != today and n not in names[:i]]


def run_name(cfg: TrainConfig, *, legacy: bool = False, earlier_defaults: bool = False,
             ascii_corpus: bool = False) -> str:
    """A readable name from the hyperparameters that differ from the defaults.

    e.g. ``demo-sg``, ``text8-sg-lr0.5``, ``text8-cbow-nce-d128``. Uniqueness against existing
    folders is handled by the caller (it appends ``-2``, ``-3``... when a different config holds
    the name). ``legacy``: without the tags of ``_LATER_NAME_KEYS``; ``earlier_defaults``: the
    defaults of ``_EARLIER_DEFAULTS``; ``ascii_corpus``: the corpus's tag in ASCII letters
    alone (see :func:`earlier_run_names`).
    """
    flat = flatten(cfg.to_dict())
    base_cfg = TrainConfig()
    if cfg.preset is not None:
        base_cfg = TrainConfig.from_dict(apply_preset(cfg.preset, {}))
    base = flatten(base_cfg.to_dict())
    if earlier_defaults and cfg.preset is None:  # a preset's values are its own
        base.update(_EARLIER_DEFAULTS)
    parts = [corpus_tag(cfg.data.corpus, ascii_only=ascii_corpus),
             "sg" if cfg.model.model == "skipgram" else "cbow"]
    if cfg.preset:
        parts.append(cfg.preset)
    for key, tag in _NAME_KEYS:
        if legacy and key in _LATER_NAME_KEYS:
            continue
        if flat[key] != base[key]:
            value = flat[key]
            if isinstance(value, float):
                value = f"{value:g}"
            parts.append(f"{tag}{value}")
    if cfg.data.lowercase:
        parts.append("lc")
    return "-".join(str(p) for p in parts)
