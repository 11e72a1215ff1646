"""The run's corpus: the prepared folder it trains on, and the checks that it can train at all.

A run trains on the folder named by --corpus when that is a prepared corpus, else on
``RUN/prepared``, made once from the raw corpus. Its vocabulary options must be the run's: a
corpus prepared with others is refused (a new run) or kept (a trained run's own folder).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.data.prepared import SPECIAL_CORPORA, VOCAB_OPTIONS, PreparedCorpus, is_prepared
from embedlab.data.preparing import prepare
from embedlab.data.sentences import is_label
from embedlab.errors import InputError, python_caller, rerun, spell, spell_name

if TYPE_CHECKING:
    from embedlab.config import TrainConfig
    from embedlab.data.tokenise_child import PrepareAhead

PREPARED_DIR = "prepared"


def open_corpus(cfg: TrainConfig, run_dir: Path, *, progress: bool,
                ahead: PrepareAhead | None = None, fresh: bool = True) -> PreparedCorpus:
    """The run's prepared corpus: the folder named by --corpus, or RUN/prepared (made once).

    ``ahead``: a child already tokenising the corpus (see :mod:`embedlab.data.tokenise_child`);
    its folder is adopted when the run has none yet, else it is discarded. ``fresh``: the run
    has no checkpoint, so a RUN/prepared made for other data flags is a leftover to rebuild (a
    trained run always keeps its own, whatever the current directory makes of a relative
    --corpus).
    """
    corpus = cfg.data.corpus
    check_ids = not _ids_checked_while_training(cfg, fresh=fresh)
    if corpus not in SPECIAL_CORPORA and is_prepared(corpus):
        prepared = PreparedCorpus.open(corpus, check_ids=check_ids)
        _check_prepared_matches(cfg, prepared, fresh=fresh)
        return prepared
    local = run_dir / PREPARED_DIR
    if is_prepared(local):
        prepared = PreparedCorpus.open(local, check_ids=check_ids)
        if not fresh:
            _note_if_changed(corpus, prepared)
        if not fresh or _made_for(prepared, cfg):
            return prepared
        # Left by an attempt with other data flags that never trained (a run that did has a
        # config.json pinning them, and resolve_config refuses other flags): it is derived
        # data of this run folder, so it is rebuilt, never reused for the wrong corpus.
        if local.is_symlink():  # another folder's prepared corpus: not this run's to delete
            raise InputError(f"{local} is a symbolic link to another prepared corpus (made with "
                             "other data flags), and this run would prepare its own there; "
                             f"remove the link (rm {shlex.quote(str(local))}) and {rerun()}")
        shutil.rmtree(local)
    if not fresh and corpus not in SPECIAL_CORPORA and not is_label(corpus) and \
            not Path(corpus).exists():
        # a trained run whose prepared copy is gone, its corpus not found from here: "pass an
        # existing file, 'text8' or 'demo'" would be refused as another corpus
        from embedlab.run.folder import (
            corpus_not_found,
            creation_folder,
            holds_corpus_fingerprints,
        )

        fix = f"pass {spell('--corpus')} with its path"
        if not holds_corpus_fingerprints(run_dir):  # another path: refused as another config
            made_in = creation_folder(run_dir)
            where = made_in / corpus if made_in is not None else Path(corpus)
            fix = (f"move it back to {where}: the run's checkpoints, made by an earlier "
                   "version, hold no fingerprint of their corpus by which another path could "
                   "stand for it")
        raise InputError(f"{corpus_not_found(run_dir, corpus)}, and the run keeps no "
                         f"prepared copy of it ({local}); {fix}")
    if ahead is not None and ahead.data == cfg.data:
        _warm_up(cfg)  # imports the final summaries need, while the child still works
        if ahead.take(local):
            return PreparedCorpus.open(local, check_ids=check_ids)
    d = cfg.data
    return prepare(corpus, local, lowercase=d.lowercase, min_count=d.min_count,
                   max_vocab=d.max_vocab, unk=d.unk, max_distinct=d.max_distinct,
                   progress=progress, run_dir=run_dir)


def _note_if_changed(corpus: str, prepared: PreparedCorpus) -> None:
    """A trained run goes on with its copy of the corpus whatever became of the text; where the
    text's files are there and differ from those the copy was made from (sizes, times, names),
    that is said, with how to train on the new text."""
    from embedlab.data.corpus import list_files
    from embedlab.errors import note

    recorded, source = prepared.meta.get("source_files"), prepared.meta.get("source")
    if corpus in SPECIAL_CORPORA or is_label(corpus) or not isinstance(recorded, list) or \
            not recorded or not isinstance(source, str) or not Path(corpus).exists():
        return
    root = Path(corpus).resolve()
    if root.is_file() and Path(source).name != root.name:
        return  # the copy was made from another file: the corpus's fingerprint judges that
    # the files by their names within the corpus: a copy of the project (cp -a) elsewhere
    # holds the same corpus under other absolute paths; a file a link in the folder points to
    # outside it, by its own path
    def named(path: Path, base: str | Path) -> str:
        if not root.is_dir():
            return ""
        return path.relative_to(base).as_posix() if path.is_relative_to(base) else \
            path.as_posix()

    try:
        now = [(named(p.resolve(), root), p.stat().st_size, p.stat().st_mtime)
               for p in list_files(Path(corpus))]
        then = [(named(Path(r["path"]), source), r["size"], r["mtime"]) for r in recorded]
    except (InputError, OSError, KeyError, TypeError, ValueError):
        return  # unreadable now, or an odd record: nothing certain to say
    if now == then:
        return
    if root != Path(source):  # not the text the copy was made from (a resume from elsewhere)
        note(f"{corpus} ({root}) differs from {source}, which the run prepared its copy "
             f"({prepared.root}) from; the run goes on training on that copy — pass "
             f"{spell('--restart', True)} to start over on {root}")
        return
    if [f[:2] for f in now] == [f[:2] for f in then]:  # touched, copied without -p: maybe
        note(f"{corpus} has another modification time than when the run prepared its copy of "
             f"it ({prepared.root}), with the same size; the run goes on training on that copy "
             f"— if the text changed, pass {spell('--restart', True)} to start over on it")
        return
    note(f"{corpus} changed since the run prepared its copy of it ({prepared.root}); the run "
         f"goes on training on that copy — pass {spell('--restart', True)} to start over on "
         "the new text")


def _ids_checked_while_training(cfg: TrainConfig, *, fresh: bool) -> bool:
    """Whether the run's batches come from the native generator, which checks every id as it
    reads it (:func:`embedlab.data.prepared.unknown_id`), so that opening the corpus need not
    read all of it first: a new run on the native engine (a resumed one may keep batches drawn
    in Python, see ``training.setup._legacy_batches``). Other engines read ids unchecked."""
    return fresh and cfg.engine == "native"


def check_enough_tokens(prepared: PreparedCorpus, cfg: TrainConfig) -> None:
    """Refuse a corpus of fewer in-vocabulary tokens than a window needs."""
    if len(prepared.ids) <= 1:
        raise InputError(f"corpus {cfg.data.corpus} has {len(prepared.ids)} in-vocabulary "
                         "token(s), fewer than a window needs; use a bigger corpus"
                         f"{_wider_vocabulary(prepared, cfg, ' or')}")


def _wider_vocabulary(prepared: PreparedCorpus, cfg: TrainConfig, joiner: str) -> str:
    """The vocabulary options that would keep more of the corpus's words, as the end of a fix
    (``joiner`` first): a lower min count where it dropped words, a larger --max-vocab where
    the vocabulary fills it; nothing where neither drops one. For a folder the user prepared,
    the options are prepare's: a run on it takes its vocabulary as it is."""
    meta = prepared.meta
    raw, kept = meta.get("raw_tokens"), meta.get("tokens")
    dropped = isinstance(raw, int) and isinstance(kept, int) and raw > kept
    fixes = []
    if isinstance(meta.get("min_count"), int) and meta["min_count"] > 1 and dropped:
        fixes.append(f"a lower {spell_name('--min-count')} (it is {meta['min_count']})")
    if isinstance(meta.get("max_vocab"), int) and len(prepared.vocab) >= meta["max_vocab"]:
        fixes.append(f"a larger {spell_name('--max-vocab')} (it is {meta['max_vocab']})")
    if not fixes:
        return ""
    if cfg.data.corpus not in SPECIAL_CORPORA and is_prepared(cfg.data.corpus):
        return f"{joiner} prepare {cfg.data.corpus} again with {' or '.join(fixes)}"
    return f"{joiner} pass {' or '.join(fixes)}"


def check_pairs_possible(prepared: PreparedCorpus, cfg: TrainConfig,
                         keep: np.ndarray | None) -> None:
    """Refuse a corpus that cannot give a single (centre, context) pair: the run would
    "finish" with its vectors at their random start and the loss n/a. ``keep``: the words'
    subsampling keep probabilities (None: no subsampling)."""
    if prepared.longest_sentence() < 2:
        raise InputError(f"corpus {cfg.data.corpus} has no sentence (line) with two "
                         "in-vocabulary words, and contexts never cross a line end; put more "
                         f"than one word per line{_wider_vocabulary(prepared, cfg, ', or')}")
    if keep is not None:
        kept = float(np.dot(np.asarray(prepared.vocab.counts, dtype=np.float64), keep))
        if kept < 2:
            # the command shows the value as %g, a call as the user wrote it (repr)
            given = spell("--sample", cfg.model.sample) if python_caller() else \
                f"--sample {cfg.model.sample:g}"
            raise InputError(f"subsampling ({given}) keeps about {kept:.1f} tokens of the "
                             f"corpus's {len(prepared.ids):,} per epoch, too few to form a pair; "
                             f"pass {spell('--sample', 0)} (off) or use a bigger corpus")


def _made_for(prepared: PreparedCorpus, cfg: TrainConfig) -> bool:
    """True when ``prepared`` was built from ``cfg``'s corpus with its vocabulary options (a key
    missing from an older meta.json is taken to agree)."""
    d = cfg.data
    source = d.corpus if d.corpus in SPECIAL_CORPORA else str(Path(d.corpus).resolve())
    return not _differences(prepared, {"source": source, "max_distinct": d.max_distinct,
                                       **_vocab_options(cfg)})


def _vocab_options(cfg: TrainConfig) -> dict[str, Any]:
    return {key: getattr(cfg.data, key) for key in VOCAB_OPTIONS}


def _differences(prepared: PreparedCorpus, wanted: dict[str, Any]) -> dict[str, Any]:
    """The wanted options ``prepared`` was built otherwise (keys its meta.json lacks, written by
    an older embedlab, are taken to agree)."""
    meta = prepared.meta
    return {key: value for key, value in wanted.items() if key in meta and meta[key] != value}


def _warm_up(cfg: TrainConfig) -> None:
    """Import now what the run imports later anyway (the PCA figure needs matplotlib)."""
    if cfg.track.tensorboard:
        import importlib

        for module in ("embedlab.track.tracker", "embedlab.track.plots"):
            importlib.import_module(module)


def _as_flag(key: str, value: Any) -> str:
    """``value`` of vocabulary option ``key`` as the user would type it: a flag
    (``--no-lowercase``, ``no --max-vocab``) or an argument (``lowercase=False``,
    ``max_vocab=None``)."""
    flag = f"--{key.replace('_', '-')}"
    if python_caller():
        return spell(flag, value)
    if isinstance(value, bool):
        return flag if value else f"--no-{flag[2:]}"
    return f"{flag} {value}" if value is not None else f"no {flag}"


def _check_prepared_matches(cfg: TrainConfig, prepared: PreparedCorpus, *,
                            fresh: bool = True) -> None:
    wanted = _vocab_options(cfg)
    # The limit decided the counts only if it pruned. Only a new run is held to it: runs made
    # before the run took the folder's --max-distinct recorded the default, and stay resumable.
    if fresh and prepared.meta.get("pruned"):
        wanted["max_distinct"] = cfg.data.max_distinct
    differ = [f"{_as_flag(k, v)} (prepared with {_as_flag(k, prepared.meta[k])})"
              for k, v in _differences(prepared, wanted).items()]
    if differ and not fresh:
        # the run's config holds the options it trained with; the folder changed under it
        raise InputError(f"prepared corpus {prepared.root} was prepared again since this run "
                         f"trained on it, with other vocabulary options: the run's "
                         f"{', '.join(differ)}; re-run 'embedlab prepare' into it with the "
                         f"run's options and --force, or pass {spell('--restart', True)} to "
                         "start over on it as it is")
    if differ:
        source = f" ({spell('--preset', cfg.preset)} sets some of them)" if cfg.preset else ""
        given = "arguments" if python_caller() else "flags"
        # the command's own flag, which a Python caller does not type as one
        force = "its force option" if python_caller() else "--force"
        raise InputError(f"prepared corpus {prepared.root} was built with other vocabulary "
                         f"options: {', '.join(differ)}; drop those {given}{source} or re-run "
                         f"'embedlab prepare' into it with them and {force}")
