"""embedlab.train(...): the Python call trains, names, resumes and prints as `embedlab train`."""

from __future__ import annotations

import copy
import dataclasses
import errno
import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedlab
from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.cli import main
from embedlab.errors import InputError, TrainingInterrupted
from embedlab.training.reporting import Progress
from embedlab.vectors import Vectors

from .small_runs import final_bytes, logged

FAST: dict[str, Any] = {"dim": 8, "batch_size": 32, "epochs": 2, "threads": 1,
                        "tensorboard": False, "log_every": 1, "progress": False}
EVERY_3 = {**FAST, "log_every": 3}


def as_flags(options: dict[str, Any]) -> list[str]:
    """The command-line flags for ``options``."""
    flags = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        else:
            flags += [flag, str(value)]
    return flags


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """stderr of ``embedlab train ARGS`` run in this process (which must succeed)."""
    capsys.readouterr()
    main(["train", *(str(a) for a in args)])
    return capsys.readouterr().err


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def test_one_step_smoke(corpus: Path, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", dim=8, threads=1, max_steps=1,
                            log_every=1, progress=False)
    assert (result.step, result.finished, result.run_dir) == (1, False, tmp_path / "run")
    assert result.loss is not None and np.isfinite(result.loss) and result.words_seen > 0
    assert isinstance(result.vectors, Vectors) and result.vectors.matrix.shape[1] == 8
    assert result.wv is result.vectors  # gensim's name: result.wv.most_similar(...)
    assert result.config.model.dim == 8 and result.config.max_steps == 1
    tensors, state = load_checkpoint(find_checkpoint(tmp_path / "run"))
    assert state["step"] == 1
    np.testing.assert_array_equal(result.vectors.matrix, tensors["input_embeddings"])
    err = capsys.readouterr().err
    assert err.startswith(f"embedlab: new run {tmp_path / 'run'}\n")
    assert "embedlab: stopped at max_steps=1: step 1, " in err


def test_the_call_and_the_command_give_the_same_vectors(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    options = {**FAST, "model": "cbow", "window": 3, "seed": 7}
    result = embedlab.train(corpus=str(corpus), run=tmp_path / "py", **options)
    cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(options))
    assert final_bytes(tmp_path / "py") == final_bytes(tmp_path / "cli")
    from_cli, _ = load_checkpoint(find_checkpoint(tmp_path / "cli"))
    assert sha256(result.vectors.matrix) == sha256(from_cli["input_embeddings"])
    assert (tmp_path / "py" / "config.json").read_text() == \
        (tmp_path / "cli" / "config.json").read_text().replace(str(tmp_path / "cli"),
                                                                str(tmp_path / "py"))


def test_the_call_prints_what_the_command_prints(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def normal(err: str, run: Path) -> str:
        # the same lines, but for how an option is named: max_steps=3 where --max-steps 3
        err = re.sub(r"\d+\.\d s training", "T s training", err.replace(str(run), "RUN"))
        return err.replace("max_steps=3", "--max-steps 3")

    capsys.readouterr()
    embedlab.train(corpus=corpus, run=tmp_path / "py", **FAST, max_steps=3)
    embedlab.train(corpus=corpus, run=tmp_path / "py", **FAST)
    from_python = capsys.readouterr()
    err = cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(FAST),
              "--max-steps", "3")
    err += cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(FAST))
    assert from_python.out == ""
    assert normal(from_python.err, tmp_path / "py") == normal(err, tmp_path / "cli")
    assert "resuming RUN from ckpt-00000003 (step 3)" in normal(err, tmp_path / "cli")


def test_the_call_names_its_run_as_the_command_and_resumes_it(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    cut = embedlab.train(corpus=corpus, runs_dir=runs, **FAST, lr=0.05, max_steps=5)
    assert cut.run_dir == runs / "c-sg-d8-lr0.05-b32-e2" and cut.step == 5
    whole = embedlab.train(corpus=corpus, runs_dir=runs, **FAST, lr=0.05)
    assert whole.run_dir == cut.run_dir and whole.finished
    assert "from ckpt-00000005 (step 5)" in capsys.readouterr().err
    # the command finds the same folder, finished
    err = cli(capsys, "--corpus", corpus, "--runs-dir", runs, *as_flags(FAST), "--lr", "0.05")
    assert f"{cut.run_dir} already finished at step {whole.step}" in err
    cli(capsys, "--corpus", corpus, "--run", tmp_path / "through", *as_flags(FAST), "--lr",
        "0.05")
    assert final_bytes(cut.run_dir) == final_bytes(tmp_path / "through")
    assert sorted(p.name for p in runs.iterdir()) == [cut.run_dir.name]


def test_restart_and_from_checkpoint(corpus: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, checkpoint_every=4, keep=10, max_steps=9)
    again = embedlab.train(corpus=corpus, run=run, **FAST, from_checkpoint="ckpt-00000004",
                           max_steps=6)
    assert again.step == 6 and "from ckpt-00000004 (step 4)" in capsys.readouterr().err
    capsys.readouterr()
    fresh = embedlab.train(corpus=corpus, run=run, **FAST, restart=True, max_steps=2)
    assert fresh.step == 2 and len(list(tmp_path.glob("run.old-*"))) == 1
    assert "embedlab: restart=True: moved the old run to " in capsys.readouterr().err
    with pytest.raises(InputError, match="restart=True and from_checkpoint= exclude each other"):
        embedlab.train(corpus=corpus, run=run, restart=True, from_checkpoint="best")


@pytest.mark.parametrize(("options", "message"), [
    ({"dimension": 8}, "embedlab.train() got an unknown option dimension=; did you mean dim=? "),
    ({"from_ckpt": "best"}, "unknown option from_ckpt=; did you mean from_checkpoint=? "),
    ({"vector_size": 8}, "unknown option vector_size=; did you mean dim=? "),  # gensim's
    ({"workers": 2}, "unknown option workers=; did you mean threads=? "),
    ({"sg": 1}, "unknown option sg=; did you mean model= (sg=1 is model='skipgram', sg=0 "
                "model='cbow')? "),
    ({"output": "v.bin"}, "embedlab.train() got an unknown option output=; the vectors stay in "
                          "the run folder run=, and embedlab.load(run).save_word2vec_format("
                          "path, binary=True) writes a file"),  # word2vec.c's, no counterpart
    ({"callbacks": []}, "embedlab.train() got an unknown option callbacks=; on_progress="
                        "FUNCTION is called with each log window's Progress"),  # gensim's
    ({"shrink_windows": False}, "unknown option shrink_windows=; windows always shrink as "
                                "word2vec's do"),  # gensim's, no counterpart
    # a ported gensim call: every unknown name at once, not one per attempt
    ({"vector_size": 8, "min_count": 1, "workers": 1, "sg": 1, "zzz": 1},
     "embedlab.train() got unknown options vector_size=, workers=, sg=, zzz=; vector_size= is "
     "dim=; workers= is threads=; sg= is model= (sg=1 is model='skipgram', sg=0 "
     "model='cbow'); zzz=: no such option; its options are the flags of 'embedlab train' with "
     "underscores: see help(embedlab.train)"),
    ({"zzz": 1}, "unknown option zzz=; its options are the flags of 'embedlab train' with "
                 "underscores (dim=, window=, epochs=, ...): see help(embedlab.train)"),
])
def test_an_unknown_option_is_one_line_naming_it(corpus: Path, tmp_path: Path,
                                                 options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", **options)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


def test_help_lists_every_option_and_vectors_is_importable_from_the_package() -> None:
    from embedlab.config import OPTIONS
    from embedlab.vectors import Vectors

    doc = embedlab.train.__doc__ or ""
    assert [o for o in OPTIONS if f"``{o}``" not in doc] == []  # the errors point to help()
    assert embedlab.Vectors is Vectors  # the type load() returns, as the docs name it
    with pytest.raises(AttributeError, match="no attribute 'Vector'"):
        embedlab.Vector  # noqa: B018


def test_a_bad_value_is_the_commands_message_naming_the_argument(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", dim=-3)
    assert str(e.value) == "dim= must be an integer > 0, got -3; pass e.g. dim=100"
    assert not (tmp_path / "run").exists()
    with pytest.raises(InputError) as e:  # a number in quotes: the str is the mistake
        embedlab.train(corpus=corpus, run=tmp_path / "run", epochs="5")
    assert str(e.value) == "epochs= must be an integer, got the str '5'; pass e.g. epochs=5"
    with pytest.raises(SystemExit):
        main(["train", "--corpus", str(corpus), "--run", str(tmp_path / "run"), "--dim", "-3"])
    assert capsys.readouterr().err == ("embedlab: error: --dim must be an integer > 0, "
                                       "got -3; pass e.g. --dim 100\n")


@pytest.mark.parametrize(("options", "python", "flags", "command"), [
    ({"threads": -1},
     "threads= must be >= 1 (or 0 for all cores), got -1; pass e.g. threads=2, or threads=0",
     ["--threads", "-1"],
     "--threads must be >= 1 (or 0 for all cores), got -1; pass e.g. --threads 2, or --threads 0"),
    ({"best_metric": "loss:up"},
     "best_metric= must be NAME[:min|max], got 'loss:up'; e.g. best_metric='loss:min' or "
     "best_metric='analogy:max'",
     ["--best-metric", "loss:up"],
     "--best-metric must be NAME[:min|max], got 'loss:up'; e.g. --best-metric loss:min or "
     "--best-metric analogy:max"),
    ({"init_from": "nosuch"},
     "init_from='nosuch': nosuch does not exist; pass a run folder, a checkpoint folder or a "
     "vectors file to copy vectors from",
     ["--init-from", "nosuch"],
     "--init-from nosuch: nosuch does not exist; pass a run folder, a checkpoint folder or a "
     "vectors file to copy vectors from"),
    ({"restart": True, "from_checkpoint": "best"},
     "restart=True and from_checkpoint= exclude each other; pass one",
     ["--restart", "--from", "best"],
     "--restart and --from exclude each other; pass one"),
])
def test_errors_name_arguments_in_python_and_flags_on_the_command_line(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        options: dict[str, Any], python: str, flags: list[str], command: str) -> None:
    run = tmp_path / "run"
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=run, **options)
    assert str(e.value) == python
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["train", "--corpus", str(corpus), "--run", str(run), *flags])
    assert capsys.readouterr().err == f"embedlab: error: {command}\n"
    assert not run.exists()


def test_python_messages_list_checkpoints_and_make_folders_in_python(
        corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = embedlab.train(corpus=corpus, run=run, **FAST, max_steps=2)
    with pytest.raises(InputError) as e:
        embedlab.train(run=run, from_checkpoint=999, **FAST)
    assert str(e.value) == (f"from_checkpoint=999: no such checkpoint ({run} has "
                            f"ckpt-00000002); pass one of them (or its step), 'best', 'latest' or "
                            f"a checkpoint folder (list them: embedlab.checkpoints({str(run)!r}))")
    with pytest.raises(InputError) as e:
        result.vectors.save_word2vec_format(tmp_path / "nodir" / "v.txt")
    assert str(e.value) == (f"folder {tmp_path / 'nodir'} does not exist; create it first "
                            f"(os.makedirs({str(tmp_path / 'nodir')!r}))")


def test_lists_take_one_value_too(corpus: Path, tmp_path: Path) -> None:
    with pytest.warns(embedlab.EmbedlabWarning, match="probe logs to TensorBoard alone"):
        result = embedlab.train(corpus=corpus, run=tmp_path / "run", **FAST, max_steps=1,
                                probe="w0")
    assert result.config.track.probe_words == ("w0",)


def test_import_embedlab_stays_cheap() -> None:
    code = ("import sys, embedlab\n"
            "assert callable(embedlab.train)\n"
            "import embedlab.training.state\n"
            "assert callable(embedlab.train) and embedlab.training.state.TrainState\n"
            "print(sorted(m for m in ('numpy', 'torch', 'embedlab.training.api')\n"
            "             if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "['numpy']"  # embedlab.training.state needs numpy; nothing else


def _lines(corpus: Path) -> list[list[str]]:
    return [line.split() for line in corpus.read_text(encoding="utf-8").splitlines()]


def tensors_sha256(run: Path) -> dict[str, str]:
    tensors, _ = load_checkpoint(find_checkpoint(run))
    return {name: sha256(array) for name, array in tensors.items()}


def test_sentences_in_memory_train_as_the_same_file(corpus: Path, tmp_path: Path) -> None:
    sentences = _lines(corpus)
    options = {**FAST, "min_count": 2, "lowercase": True}
    memory = embedlab.train(corpus=(s for s in sentences), run=tmp_path / "memory", **options)
    text = tmp_path / "same.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    from_file = embedlab.train(corpus=text, run=tmp_path / "file", **options)
    assert memory.finished and memory.step == from_file.step
    assert tensors_sha256(tmp_path / "memory") == tensors_sha256(tmp_path / "file")
    assert memory.vectors.words == from_file.vectors.words
    label = memory.config.data.corpus
    assert label.startswith("<iterable sha256:") and label.endswith(">")
    assert json.loads((tmp_path / "memory" / "config.json").read_text())["data"]["corpus"] \
        == label
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # file gone


def test_the_same_sentences_resume_other_ones_are_refused(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sentences = _lines(corpus)
    cut = embedlab.train(corpus=sentences, runs_dir=tmp_path / "runs", **FAST, max_steps=5)
    assert cut.run_dir.parent == tmp_path / "runs"
    again = embedlab.train(corpus=iter(sentences), runs_dir=tmp_path / "runs", **FAST,
                           max_steps=9)  # the same sentences: the same run, resumed
    assert again.run_dir == cut.run_dir and again.step == 9
    whole = embedlab.train(run=cut.run_dir, **FAST)  # no sentences: RUN/prepared holds them
    assert whole.finished and "from ckpt-00000009 (step 9)" in capsys.readouterr().err
    through = embedlab.train(corpus=sentences, run=tmp_path / "through", **FAST)
    assert final_bytes(cut.run_dir) == final_bytes(tmp_path / "through")
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=sentences[1:], run=cut.run_dir, **FAST)
    assert str(e.value).startswith(f"run {cut.run_dir} was trained on other sentences than "
                                   f"corpus= holds (they are {cut.config.data.corpus}, these "
                                   "<iterable sha256:")
    # a run named for other sentences: another folder
    other = embedlab.train(corpus=sentences[1:], runs_dir=tmp_path / "runs", **FAST, max_steps=1)
    assert other.run_dir != cut.run_dir and through.finished


def test_sentences_are_read_after_the_options_are_checked(tmp_path: Path) -> None:
    read: list[int] = []

    def sentences() -> Iterator[list[str]]:
        read.append(1)
        yield ["a", "b"]

    with pytest.raises(InputError, match=r"^dim= must be an integer"):
        embedlab.train(corpus=sentences(), run=tmp_path / "run", dim=0)
    assert read == [] and not (tmp_path / "run").exists()
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=[["a", "b"], ["c", 3]], runs_dir=tmp_path / "runs", **FAST)
    assert str(e.value) == ("corpus= item 1 is not a list of str: its token 1 is 3 (int); pass "
                            "words as str")
    assert list(tmp_path.iterdir()) == []  # neither the runs folder nor the sentences' file


def test_an_oserror_of_the_callers_generator_reaches_the_caller_as_itself(
        tmp_path: Path) -> None:
    """A generator that reads a missing file raises FileNotFoundError, as any other error of
    the caller's iterator propagates; it is not a failed write of the runs folder."""
    def sentences() -> Iterator[list[str]]:
        with open(tmp_path / "missing.txt") as f:
            yield from (line.split() for line in f)

    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        embedlab.train(corpus=sentences(), runs_dir=tmp_path / "runs", **FAST)
    assert list(tmp_path.iterdir()) == []

    class Lines:  # an iterable whose __iter__ opens its file at once
        def __iter__(self) -> Iterator[list[str]]:
            return (line.split() for line in open(tmp_path / "missing.txt"))

    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        embedlab.train(corpus=Lines(), runs_dir=tmp_path / "runs", **FAST)

    def shards() -> Iterator[list[str]]:
        try:
            yield ["a", "b"]
            raise KeyError("shard 3")
        except KeyError as exc:
            raise OSError("could not read shard 3") from exc

    with pytest.raises(OSError, match="could not read shard 3") as e:
        embedlab.train(corpus=shards(), runs_dir=tmp_path / "runs", **FAST)
    assert isinstance(e.value.__cause__, KeyError)  # the caller's exception as they raised it
    assert list(tmp_path.iterdir()) == []


def test_a_stop_that_falls_on_the_max_steps_step_writes_its_projector(
        corpus: Path, tmp_path: Path) -> None:
    """The step --max-steps ends at is the end of what the run trains, however it is saved: a
    callback's stop there saves it with the projector, and the same call again has nothing
    left to do."""
    def stop(progress: Any) -> None:
        if progress.step == 6 and not progress.final:
            raise RuntimeError("enough")

    run, options = tmp_path / "run", {**FAST, "tensorboard": True, "max_steps": 6}
    with pytest.raises(TrainingInterrupted):
        embedlab.train(corpus=corpus, run=run, **options, on_progress=stop)
    assert '"00006/input_embeddings/tensors.tsv"' in (run / "projector_config.pbtxt").read_text()
    result = embedlab.train(corpus=corpus, run=run, **options)
    assert result.step == 6 and not result.finished


def test_the_result_is_read_only_short_to_print_and_its_vectors_made_once(
        corpus: Path, tmp_path: Path) -> None:
    """Writing into ``w_in`` would change the answers of ``vectors`` behind their stored
    norms; a notebook that shows the result gets one line, not the vocabulary."""
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **FAST, max_steps=2)
    with pytest.raises(ValueError, match="read-only"):
        result.w_in[0] *= 10
    assert result.vectors is result.vectors
    assert np.shares_memory(result.w_in, result.vectors.matrix)
    words = len(result.vocab)
    assert repr(result) == (f"TrainResult(stopped at step 2, {result.words_seen:,} words, loss "
                            f"{result.loss:.4f}; {words} words × 8 dims in {tmp_path / 'run'})")
    assert repr(result.vocab) == (f"Vocab({words} words: {result.vocab.words[0]!r}, "
                                  f"{result.vocab.words[1]!r}, {result.vocab.words[2]!r}, ...)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.w_in = np.zeros_like(result.w_in)  # type: ignore[misc]
    for again in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        assert not again.w_in.flags.writeable and np.array_equal(again.w_in, result.w_in)
        assert np.shares_memory(again.w_in, again.vectors.matrix)
        assert again.vectors.most_similar(0, k=3) == result.vectors.most_similar(0, k=3)


def test_a_resume_refused_for_its_options_leaves_the_generator_unread(
        corpus: Path, tmp_path: Path) -> None:
    """Another dim= than the run's is refused, naming the argument, before the sentences are
    read: the same generator then resumes the run. A generator used up is named as such, with
    the resume that needs no sentences."""
    run = tmp_path / "run"
    embedlab.train(corpus=_lines(corpus), run=run, **FAST, max_steps=2)
    sentences = (s for s in _lines(corpus))
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=sentences, run=run, **{**FAST, "dim": 9})
    assert str(e.value) == (f"run {run} was trained with a different config: dim (stored 8, "
                            "requested 9). Drop those arguments to resume, pass restart=True to "
                            "start over, or use another run=")
    assert embedlab.train(corpus=sentences, run=run, **FAST).finished
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=sentences, run=run, **FAST)
    assert str(e.value).endswith(f"gives its items once); pass a new one, or a list; or "
                                 f"corpus=None to resume run {run} from the copy of its "
                                 f"sentences in {run / 'prepared'}")


def test_on_progress_gets_what_metrics_jsonl_gets(corpus: Path, tmp_path: Path) -> None:
    seen: list[Progress] = []
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **EVERY_3,
                            on_progress=seen.append)
    windows, final = seen[:-1], seen[-1]
    assert [p.step for p in windows] == list(range(3, result.step + 1, 3))
    assert [p.loss for p in windows] == [logged(tmp_path / "run")[p.step] for p in windows]
    for tag, field in [("train/lr", "lr"), ("train/words_per_sec", "words_per_sec"),
                       ("train/progress", "progress")]:
        assert [getattr(p, field) for p in windows] == \
            [logged(tmp_path / "run", tag)[p.step] for p in windows]
    assert not any(p.final for p in windows) and all(p.words_seen > 0 for p in windows)
    assert final.final and (final.step, final.words_seen, final.loss, final.progress) == \
        (result.step, result.words_seen, result.loss, 1.0)
    # and a run without the callback is the same run
    embedlab.train(corpus=corpus, run=tmp_path / "plain", **EVERY_3)
    assert final_bytes(tmp_path / "run") == final_bytes(tmp_path / "plain")
    assert logged(tmp_path / "run") == logged(tmp_path / "plain")


def test_a_missing_file_is_a_file_not_found_error_too(corpus: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`except OSError` (or FileNotFoundError) catches a missing corpus, evaluation file or run
    folder, as it catches embedlab.load's; each is an InputError still, naming the file."""
    monkeypatch.chdir(tmp_path)
    calls = [lambda: embedlab.train(corpus="nope.txt", run="a", **FAST),
             lambda: embedlab.train(corpus=corpus, run="b", **FAST, eval_analogies="nope.txt",
                                    eval_every=5),
             lambda: embedlab.train(corpus=corpus, run="c", **FAST, eval_similarity=["nope.txt"],
                                    eval_every=5),
             lambda: embedlab.checkpoints("nope.txt")]
    for call in calls:
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert isinstance(e.value, InputError) and e.value.filename == "nope.txt"
        assert "nope.txt" in str(e.value) and "[Errno" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_on_progress_gets_the_latest_evaluation(corpus: Path, tmp_path: Path) -> None:
    """A notebook stops early or plots on the evaluation: the callback has metrics.jsonl's
    eval/ values, an evaluation due at its window's step coming first."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("w0\tw1\t9\nw2\tw3\t5\nw4\tw5\t1\nw1\tw6\t3\n")
    calls: list[Progress] = []
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **{**EVERY_3, "log_every": 2}, eval_similarity=[pairs],
                   eval_every=4, on_progress=calls.append)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = {r["step"]: r["eval/similarity/pairs"] for r in rows
                 if "eval/similarity/pairs" in r}
    assert calls[0].step == 2 and calls[0].evaluation is None  # none yet
    end = calls[-1].step  # evaluated once more at the end, after the last window: the final call
    for c in calls:
        latest = max((s for s in evaluated if s <= c.step and (s < end or c.final)), default=None)
        assert c.evaluated_step == latest, (c.step, c.evaluated_step)
        if latest is not None:
            assert c.evaluation == {"similarity/pairs": evaluated[latest]}
    assert calls[-1].final and calls[-1].evaluated_step == max(evaluated)


def test_a_stop_after_from_latest_says_to_call_again_as_it_was(corpus: Path,
                                                                tmp_path: Path) -> None:
    """from_checkpoint='latest' is where a plain resume starts: no need to leave it out."""
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **EVERY_3, max_steps=3)

    def ctrl_c_at_6(progress: Progress) -> None:
        if progress.step == 6:
            raise KeyboardInterrupt

    with pytest.raises(TrainingInterrupted) as e:
        embedlab.train(corpus=corpus, run=run, **EVERY_3, from_checkpoint="latest",
                       on_progress=ctrl_c_at_6)
    assert str(e.value) == ("on_progress raised KeyboardInterrupt; saved step 6 — call "
                            "embedlab.train again with the same arguments to resume")


def test_a_stop_after_a_restart_says_to_resume_without_it(corpus: Path, tmp_path: Path) -> None:
    """restart=True typed again would start the run over a second time."""
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **EVERY_3, max_steps=3)

    def ctrl_c_at_3(progress: Progress) -> None:
        if progress.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(TrainingInterrupted) as e:
        try:  # a sweep's handler for failing configurations does not swallow a Ctrl-C
            embedlab.train(corpus=corpus, run=run, **EVERY_3, restart=True,
                           on_progress=ctrl_c_at_3)
        except Exception:
            pytest.fail("except Exception caught a Ctrl-C")
    assert str(e.value) == ("on_progress raised KeyboardInterrupt; saved step 3 — call "
                            "embedlab.train again with the same arguments but without "
                            "restart=True to resume")
    assert embedlab.train(corpus=corpus, run=run, **EVERY_3, max_steps=6).step == 6


def test_a_callback_that_raises_stops_training_as_ctrl_c_does(
        corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"

    def stop_at_6(progress: Progress) -> None:
        if progress.step == 6:
            raise ValueError("enough")

    with pytest.raises(Exception) as e:  # what the callback raised is an error, caught as one
        embedlab.train(corpus=corpus, run=run, **EVERY_3, on_progress=stop_at_6)
    assert isinstance(e.value, TrainingInterrupted)
    assert str(e.value) == ("on_progress raised ValueError: enough; saved step 6 — call "
                            "embedlab.train again with an on_progress that lets training go on "
                            "to resume")
    assert e.value.exit_code == 1 and not isinstance(e.value, KeyboardInterrupt)
    assert isinstance(e.value.__cause__, ValueError)
    assert load_checkpoint(find_checkpoint(run))[1]["step"] == 6
    assert json.loads((run / "status.json").read_text())["status"] == "interrupted"
    embedlab.train(corpus=corpus, run=run, **EVERY_3)
    embedlab.train(corpus=corpus, run=tmp_path / "whole", **EVERY_3)
    assert final_bytes(run) == final_bytes(tmp_path / "whole")
    assert logged(run) == logged(tmp_path / "whole")


def test_load_and_export_name_arguments(corpus: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **FAST, max_steps=2)
    path = result.vectors.to_word2vec(tmp_path / "v.txt")
    with pytest.raises(InputError) as e:
        result.vectors.to_word2vec(path)
    assert str(e.value) == f"{path} already exists; pass force=True to overwrite it or choose " \
                           "another path"
    with pytest.raises(InputError, match=r"^step= and best= are mutually exclusive"):
        embedlab.load(tmp_path / "run", step=2, best=True)
    with pytest.raises(InputError, match=r"^step=/best= choose a checkpoint of a run folder"):
        embedlab.load(path, best=True)
    capsys.readouterr()
    for args, message in [(["export", str(tmp_path / "run"), "--out", str(path)],
                           f"{path} already exists; pass --force to overwrite it or choose "
                           "another --out"),
                          (["neighbors", str(path), "w0", "--best"],
                           f"--step/--best choose a checkpoint of a run folder, but {path} is "
                           "a file; drop them or pass the run folder")]:
        with pytest.raises(SystemExit):
            main(args)
        assert capsys.readouterr().err == f"embedlab: error: {message}\n"


def test_a_callback_that_raises_in_the_last_window_leaves_the_run_finished(
        corpus: Path, tmp_path: Path) -> None:
    steps = embedlab.train(corpus=corpus, run=tmp_path / "whole", **FAST).step

    def stop_at_the_end(progress: Progress) -> None:
        if progress.step == steps and not progress.final:
            raise KeyboardInterrupt

    with pytest.raises(TrainingInterrupted, match=f"on_progress raised KeyboardInterrupt; "
                                                  f"saved step {steps} "):
        embedlab.train(corpus=corpus, run=tmp_path / "run", **FAST, on_progress=stop_at_the_end)
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "finished"
    assert final_bytes(tmp_path / "run") == final_bytes(tmp_path / "whole")


# ---- the modules embedlab.train reaches name its arguments, never the command's flags ---------

def refused(**call: Any) -> str:
    """The message ``embedlab.train(**call)`` is refused with; it names no flag."""
    with pytest.raises(InputError) as e:
        embedlab.train(**call)
    message = str(e.value)
    assert "--" not in message, message
    return message


def test_the_run_folders_messages_name_arguments(corpus: Path, tmp_path: Path) -> None:
    file, mine, damaged = tmp_path / "file", tmp_path / "mine", tmp_path / "damaged"
    file.write_text("x")
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    damaged.mkdir()
    (damaged / "config.json").write_text("{")
    for call, message in [
        ({"run": file}, f"run={str(file)!r} is a file, not a folder; pass a folder path"),
        ({"runs_dir": file}, f"runs_dir={str(file)!r} is a file, not a folder; pass a folder"),
        ({"run": file / "r"}, f"run={str(file / 'r')!r} lies below {file}, which is a file; "),
        ({"runs_dir": file / "r"}, f"runs_dir={str(file / 'r')!r} lies below {file}, which "),
        ({"run": mine}, f"run={str(mine)!r} is a folder holding other files, not an embedlab "),
        ({"run": damaged}, "; pass another run= or restart=True to start over"),
    ]:
        assert message in refused(corpus=corpus, **FAST, **call)


def test_too_many_runs_of_one_name_asks_for_run(corpus: Path, tmp_path: Path) -> None:
    from embedlab.config import TrainConfig
    from embedlab.run.naming import run_name
    from embedlab.training.api import explicit_options

    options = {**FAST, "corpus": str(corpus)}
    base = run_name(TrainConfig.from_dict(explicit_options(options)).resolve())
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(1, 10_000):  # files: taken names, and no run there resumes
        (runs / (base if i == 1 else f"{base}-{i}")).touch()
    assert refused(runs_dir=runs, **options) == \
        f"too many runs named {base}* in {runs}; pass run=DIR"


def test_the_corpus_checks_name_arguments(tmp_path: Path) -> None:
    for text, message in [
        # min_count=1 drops no word: lowering it is no fix
        ("hello\n", "fewer than a window needs; use a bigger corpus"),
        ("a\nb\nc\n" * 20, "put more than one word per line"),
        ("a b c\n", "subsampling (sample=0.001) keeps about 0.2 tokens of the corpus's 3 per "
                    "epoch, too few to form a pair; pass sample=0 (off) or use a bigger corpus"),
    ]:
        (tmp_path / "c.txt").write_text(text)
        assert refused(corpus=tmp_path / "c.txt", run=tmp_path / "run", **FAST,
                       min_count=1).endswith(message)


def test_a_corpus_too_small_names_the_vocabulary_options_that_drop_words(
        tmp_path: Path) -> None:
    """A lower min count or a larger max_vocab is named as a fix only where it would keep
    more words, with the value the run has."""
    (tmp_path / "lines.txt").write_text("a\nb\nc\n" * 20 + "a z\n")  # z: once
    (tmp_path / "one.txt").write_text("hello\n")
    for corpus, options, message in [
        ("one.txt", {"min_count": 1}, "fewer than a window needs; use a bigger corpus"),
        ("lines.txt", {"min_count": 2}, "put more than one word per line, or pass a lower "
                                        "min_count (it is 2)"),
        ("lines.txt", {"min_count": 1, "max_vocab": 2, "unk": None},
         "put more than one word per line, or pass a larger max_vocab (it is 2)"),
    ]:
        assert refused(corpus=tmp_path / corpus, run=tmp_path / "run", **FAST,
                       **options).endswith(message)
    (tmp_path / "ab.txt").write_text("alpha\nbeta\n" * 20)  # min count 5 and max_vocab 10
    assert refused(corpus=tmp_path / "ab.txt", run=tmp_path / "run", **FAST,  # drop no word
                   max_vocab=10).endswith("put more than one word per line")
    # a folder the user prepared: its options are prepare's to change, not the run's
    from embedlab.data.preparing import prepare

    prepare(tmp_path / "lines.txt", tmp_path / "prep", min_count=2, progress=False)
    assert refused(corpus=tmp_path / "prep", run=tmp_path / "run", **FAST).endswith(
        f"put more than one word per line, or prepare {tmp_path / 'prep'} again with a lower "
        "min_count (it is 2)")


def test_a_prepared_folders_options_are_named_as_arguments(corpus: Path, tmp_path: Path) -> None:
    prepared = tmp_path / "prepared"
    main(["prepare", str(corpus), "--out", str(prepared), "--min-count", "1", "--lowercase",
          "--no-progress"])
    for options, needles in [
        ({"min_count": 10}, ["min_count=10 (prepared with min_count=1); drop those arguments or "
                             "re-run 'embedlab prepare' into it with them and its force option"]),
        ({"lowercase": False}, ["lowercase=False (prepared with lowercase=True)"]),
        ({"preset": "cs20"}, ["max_vocab=50000 (prepared with max_vocab=None)",
                              "drop those arguments (preset='cs20' sets some of them) or "]),
    ]:
        message = refused(corpus=prepared, run=tmp_path / "run", **FAST, **options)
        assert all(n in message for n in needles), message


def test_the_set_up_and_warm_start_name_arguments(corpus: Path, tmp_path: Path) -> None:
    trained, hs, lone = tmp_path / "trained", tmp_path / "hs", tmp_path / "lone"
    embedlab.train(corpus=corpus, run=trained, **FAST, max_steps=1)
    embedlab.train(corpus=corpus, run=hs, **FAST, loss="hs", max_steps=1)
    shutil.copytree(find_checkpoint(trained), lone)  # a checkpoint without its run's vocab.tsv
    main(["ckpt", str(hs), "--export-subset", str(tmp_path / "odd"), "--names",
          "input_embeddings,hs_nodes", "--map", "output_embeddings=hs_nodes", "--map",
          "input_embeddings=input_embeddings"])  # output rows of another shape than the input's
    new = {"corpus": corpus, "run": tmp_path / "new", **FAST}
    for call, message in [
        ({"probe": ["zzzz"]}, "probe word(s) not in the vocabulary: zzzz; pick words the corpus "
                              "has (the most frequent: w0, w1, w2)"),
        ({"eval_every": 5}, "eval_every= needs eval_analogies=FILE and/or eval_similarity=FILE"),
        ({"init_from": trained, "dim": 4},
         f"init_from={str(trained)!r} has dim 8, this run 4; pass a matching dim="),
        ({"init_from": hs},
         f"init_from={str(hs)!r}: checkpoint {find_checkpoint(hs)} was trained with loss='hs', "
         "whose output vectors are Huffman-tree nodes, not words; warm-start a loss='hs' run "
         "from it (its input vectors only: the nodes are never copied), or pass a run "
         "trained with loss='neg' or 'nce'"),
        ({"init_from": lone},
         f"no vocab.tsv found next to {lone}; pass a run folder to init_from="),
        ({"init_from": tmp_path / "odd"},
         f"init_from={str(tmp_path / 'odd')!r}: checkpoint {find_checkpoint(tmp_path / 'odd')} "
         "holds output embeddings of shape (135, 8) but input embeddings of shape (136, 8); "),
    ]:
        assert refused(**{**new, **call}).startswith(message)
    main(["ckpt", str(trained), "--export-subset", str(tmp_path / "subset"), "--names",
          "input_embeddings"])
    with pytest.raises(InputError) as e:  # the fix it names is a command: its flags stay
        embedlab.train(**new, init_from=tmp_path / "subset")
    assert str(e.value).startswith(f"init_from={str(tmp_path / 'subset')!r}: checkpoint ")
    assert "(embedlab ckpt RUN --export-subset OUT --names " in str(e.value)


def test_resuming_names_arguments(corpus: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert embedlab.train(corpus=corpus, run=run, **FAST, max_steps=1).config.engine == "native"
    same = {"corpus": corpus, "run": run, **FAST}
    assert refused(**{**same, "dim": 16}).endswith(
        "Drop those arguments to resume, pass restart=True to start over, or use another run=")
    assert refused(**same, preset="cs20") == (f"run {run} was created without preset; drop "
                                              "preset='cs20' to resume, or use restart=True / "
                                              "another run=")

    def refuse(path: Path) -> Path:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("embedlab.training.restart.move_aside", refuse)
    assert refused(**same, restart=True) == (f"restart=True: cannot move {run} aside "
                                             "(Permission denied); check the permissions of "
                                             "its parent folder")

    def too_long(path: Path) -> Path:
        raise OSError(errno.ENAMETOOLONG, "File name too long")

    monkeypatch.setattr("embedlab.training.restart.move_aside", too_long)
    assert refused(**same, restart=True) == (f"restart=True: cannot move {run} aside (File "
                                             "name too long); its name with '.old-<time>' "
                                             f"added is too long: rename {run} shorter, and "
                                             "pass the new name as run=")
    monkeypatch.setattr("embedlab.engines.native.unavailable_reason", lambda: "no compiler")
    assert refused(**same).endswith("unavailable here (no compiler); install a C compiler with "
                                    "OpenMP (e.g. apt install gcc) to resume it, or pass "
                                    "restart=True")


def test_checkpoint_evaluation_and_engine_messages_name_arguments(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sims = [tmp_path / "a" / "ws.tsv", tmp_path / "b" / "ws.tsv"]
    for path in sims:
        path.parent.mkdir()
        path.write_text("the of 5\n")
    for call, message in [
        ({"best_metric": "nope"}, "best_metric='nope' is not a metric this run records"),
        ({"eval_similarity": sims}, "two eval_similarity files share a name without its suffix"),
    ]:
        text = refused(corpus=corpus, run=tmp_path / "r", **FAST, **call)
        assert message in text and "--" not in text, text
    from embedlab.engines import native

    monkeypatch.setattr(native, "unavailable_reason", lambda: "no C compiler ('cc' not found)")
    text = refused(corpus=corpus, run=tmp_path / "r", **FAST, engine="native")
    assert "engine='native' is unavailable" in text and "or pass engine='torch'" in text


def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.engines import cuda

    monkeypatch.setattr(cuda, "gpu_present", lambda: False)
    monkeypatch.setattr(cuda, "interpreted", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "no CUDA device was found")


def test_device_and_the_cuda_engine_name_arguments(corpus: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _no_gpu(monkeypatch)
    new = {"corpus": corpus, "run": tmp_path / "new", **FAST}
    assert refused(**new, device="cuda", engine="native") == (
        "device='cuda' and engine='native' contradict each other; pass one of them "
        "(device='cuda' is engine='cuda', device='cpu' is engine='native' or engine='torch')")
    assert refused(**new, device="gpu") == "device= must be auto, cpu or cuda, got 'gpu'"
    assert refused(**new, engine="cpu").startswith("engine='cpu' is not an engine; pass "
                                                   "device='cpu' ")
    assert refused(**new, device="cuda", loss="hs") == (  # its fix is no contradiction
        "loss='hs' does not train on the cuda engine, which trains negative sampling and NCE "
        "only; pass device='cpu' for it")
    assert refused(**new, engine="cuda", loss="hs") == (
        "loss='hs' does not train on the cuda engine, which trains negative sampling and NCE "
        "only; pass engine='native' or engine='torch' for it")
    for call, asked, fix in (({"engine": "cuda"}, "engine='cuda'", "engine='native'"),
                             ({"device": "cuda"}, "device='cuda'", "device='cpu'")):
        with pytest.raises(InputError) as e:
            embedlab.train(**new, **call)  # answered in the words it was asked in
        assert str(e.value) == (f"{asked} is unavailable: no CUDA device was found; train on a "
                                f"machine with an NVIDIA GPU, or pass {fix}")
    assert not (tmp_path / "new").exists()


def test_a_gpu_run_resumes_on_the_cpu_when_asked(corpus: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, max_steps=1, device="cpu")
    # the run as the cuda engine leaves it (its arrays are the same: float32, host layout)
    config = json.loads((run / "config.json").read_text())
    assert config["engine"] == "native" and "device" not in config
    (run / "config.json").write_text(json.dumps({**config, "engine": "cuda"}))
    env = json.loads((run / "env.json").read_text())
    assert env["device"] == "cpu"
    (run / "env.json").write_text(json.dumps({**env, "device": "NVIDIA H100 80GB HBM3"}))
    _no_gpu(monkeypatch)
    assert refused(corpus=corpus, run=run, **FAST) == (
        f"run {run} was trained with the cuda engine, which is unavailable here (no CUDA device "
        "was found); pass engine='native' to resume it on the CPU (results may differ in the "
        "last bits from an uninterrupted run), or restart=True to start over")
    with pytest.warns(embedlab.EmbedlabWarning) as said:
        result = embedlab.train(corpus=corpus, run=run, **FAST, max_steps=2, device="cpu")
    assert result.config.engine == "native" and result.step == 2
    assert [str(w.message) for w in said] == [
        "resuming on the CPU with the native engine (the run trained on NVIDIA H100 80GB HBM3 "
        "with the cuda engine); results may differ in the last bits from an uninterrupted run"]
    env = json.loads((run / "env.json").read_text())
    assert env["resumes"][-1]["device"] == "cpu"
    assert json.loads((run / "config.json").read_text())["engine"] == "native"


def test_the_call_limits_openmp_spinning_as_the_command_does(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.setenv(name, "x")  # recorded, so that what the call sets is undone after
        monkeypatch.delenv(name)
    embedlab.train(corpus=corpus, run=tmp_path / "r", **FAST, max_steps=1)
    assert os.environ.get("GOMP_SPINCOUNT") == "2000"


def test_from_best_without_a_best_checkpoint_names_trains_own_arguments(
        corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    quiet = {**FAST, "log_every": 100}  # no loss logged by the save at step 2: no best
    embedlab.train(corpus=corpus, run=run, **quiet, max_steps=2)
    assert not any(line.startswith("best:")
                   for line in (run / "checkpoint").read_text().splitlines())
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=run, **quiet, max_steps=4, from_checkpoint="best")
    assert str(e.value) == (f"from_checkpoint='best': {run} has no best checkpoint recorded in "
                            f"{run / 'checkpoint'}; pass one of its checkpoints, e.g. "
                            "from_checkpoint='ckpt-00000002', or leave from_checkpoint= out to "
                            "resume from the latest")


def test_the_last_line_says_which_window_its_loss_is_from(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped by max_steps between logging windows, the line says its loss is the last whole
    window's; before the first window, why there is none."""
    options = {**FAST, "log_every": 4}
    embedlab.train(corpus=corpus, run=tmp_path / "a", **options, max_steps=3)
    assert ", loss n/a (no window of log_every=4 steps closed yet), " in capsys.readouterr().err
    result = embedlab.train(corpus=corpus, run=tmp_path / "b", **options, max_steps=6)
    assert f", loss {result.loss:.4f} (the last whole logging window's), " in \
        capsys.readouterr().err
    result = embedlab.train(corpus=corpus, run=tmp_path / "c", **options, max_steps=8)
    assert f", loss {result.loss:.4f}, " in capsys.readouterr().err


def test_numpy_numbers_are_options_like_any_number(corpus: Path, tmp_path: Path) -> None:
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **{**FAST, "epochs": np.int64(1)},
                            max_steps=np.int64(2))
    assert result.step == 2 and result.config.optim.epochs == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"epochs": 2.0}, "epochs= must be an integer, got 2.0; pass e.g. epochs=5"),
    ({"min_count": 2.0}, "min_count= must be an integer, got 2.0; pass e.g. min_count=5"),
    ({"batch_size": 512.0}, "batch_size= must be an integer, got 512.0; pass e.g. "
                            "batch_size=2048"),
    ({"keep": 2.0}, "keep= must be an integer, got 2.0; pass e.g. keep=5"),
    ({"checkpoint_every": 10.0}, "checkpoint_every= must be an integer, got 10.0"),
    ({"threads": "2"}, "threads= must be an integer, got the str '2'; pass e.g. threads=2"),
    ({"dim": True}, "dim= must be an integer, got the bool True; pass e.g. dim=100"),
    ({"window": True}, "window= must be an integer, got the bool True"),
    ({"seed": False}, "seed= must be an integer, got the bool False; pass e.g. seed=1"),
    ({"lr": True}, "lr= must be a number, got the bool True; pass e.g. lr=0.025"),
    ({"lowercase": "false"}, "lowercase= must be True or False, got the str 'false'; pass e.g. "
                             "lowercase=True"),
    ({"tensorboard": "no"}, "tensorboard= must be True or False, got the str 'no'"),
    ({"restart": "no"}, "restart= must be True or False, got the str 'no'; pass e.g. "
                        "restart=True"),
    ({"from_checkpoint": 2.5}, "from_checkpoint= must be a checkpoint of the run (its step, its "
                               "folder, 'best' or 'latest'), got float 2.5"),
    ({"model": 1}, "model= must be a str, got 1; pass e.g. model='skipgram'"),
    ({"probe": 5}, "probe= takes words (a str or a list of them), got int 5; pass e.g. "
                   "probe=['king', 'queen']"),
    ({"probe": ["king", 5]}, "probe= takes words as str, got int 5 among them"),
    ({"eval_similarity": [5]}, "eval_similarity= takes files as str, got int 5 among them"),
])
def test_options_of_another_type_are_refused_before_anything_is_made(
        corpus: Path, tmp_path: Path, options: dict[str, Any], message: str) -> None:
    """A whole float, a bool, a number in quotes or a truthy string would train something
    else, or fail deep inside once the run folder is made: each is one line, and no folder."""
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", **options)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("corpus_arg", "message"), [
    (5, "corpus= must be a path (a str or os.PathLike), 'demo', 'text8' or an iterable of "
        "sentences (lists of words), got int 5"),
    (b"small.txt", "corpus= is bytes (b'small.txt'); pass a path as a str "
                   "(corpus='small.txt') or an iterable of sentences"),
])
def test_a_corpus_that_is_no_path_nor_sentences_is_one_line(
        tmp_path: Path, corpus_arg: object, message: str) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus_arg, run=tmp_path / "run")  # type: ignore[arg-type]
    assert str(e.value).startswith(message)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("arguments", "message"), [
    ({"run": 5}, "run= must be a folder's path (a str or os.PathLike), got int 5"),
    ({"run": b"runs/x"}, "run= is bytes (b'runs/x'); pass the path as a str (run='runs/x')"),
    ({"runs_dir": None}, "runs_dir= must be a folder's path (a str or os.PathLike), got "
                         "NoneType None"),
    # "$RUN" of an unset variable would make the working folder the run
    ({"run": ""}, "run is empty (an unset variable?); pass a folder, e.g. run='runs/exp1'"),
    ({"runs_dir": ""}, "runs_dir is empty (an unset variable?); pass a folder, e.g. "
                       "runs_dir='runs'"),
    ({"init_from": ""}, "init_from is empty (an unset variable?); pass the run or checkpoint to "
                        "copy from, or leave init_from out for a cold start"),
    ({"preset": ["cs20"]}, "preset= must be a preset's name (a str), got list ['cs20']; e.g. "
                           "preset='cs20'"),
])
def test_a_folder_or_preset_of_another_type_is_one_line(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        arguments: dict[str, object], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, **arguments)  # type: ignore[arg-type]
    assert str(e.value) == message
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoints_step_is_an_integer_in_python(corpus: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, checkpoint_every=4, keep=10, max_steps=9)
    assert np.array_equal(embedlab.load(run, step=np.int64(4)).matrix,
                          embedlab.load(run, step=4).matrix)
    with pytest.raises(InputError, match=r"^step= must be a checkpoint's step, an integer >= 0, "
                                         r"got the str '4'; pass e.g. step=1000"):
        embedlab.load(run, step="4")  # type: ignore[arg-type]
    with pytest.raises(InputError) as e:
        embedlab.load(run, step=-1)
    assert str(e.value).endswith(f"(list them: embedlab.checkpoints({str(run)!r}))")
    with pytest.raises(InputError, match=r"^best= must be True or False, got the str 'no'"):
        embedlab.load(run, best="no")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^run= must be the path of a run folder"):
        embedlab.checkpoints(5)  # type: ignore[arg-type]
    capsys.readouterr()
    again = embedlab.train(corpus=corpus, run=run, **FAST, from_checkpoint=4, max_steps=6)
    err = capsys.readouterr().err
    assert again.step == 6 and "from ckpt-00000004 (step 4)" in err
    assert "embedlab: from_checkpoint: moved 2 newer checkpoint(s) to " in err
    assert "embedlab: stopped at max_steps=6: step 6" in err


def test_nproc_is_the_command_lines_alone(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^embedlab.train\(\) has no nproc=: --nproc starts "):
        embedlab.train(corpus=corpus, run=tmp_path / "run", nproc=2)


def test_on_progress_hears_the_end_of_a_call_on_a_finished_run(corpus: Path,
                                                               tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = embedlab.train(corpus=corpus, run=run, **EVERY_3)
    calls: list[Progress] = []
    embedlab.train(corpus=corpus, run=run, **EVERY_3, on_progress=calls.append)
    assert [(c.step, c.final) for c in calls] == [(done.step, True)]


def test_ctrl_c_in_a_callback_is_a_keyboard_interrupt_too(corpus: Path, tmp_path: Path) -> None:
    """gensim users catch KeyboardInterrupt; the exception is also TrainingInterrupted, with
    Ctrl-C's exit status, and a SystemExit keeps its status."""
    def ctrl_c(progress: Progress) -> None:
        if progress.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "a", **EVERY_3, on_progress=ctrl_c)
    assert isinstance(e.value, TrainingInterrupted) and e.value.exit_code == 130
    assert str(e.value) == ("on_progress raised KeyboardInterrupt; saved step 3 — call "
                            "embedlab.train again with the same arguments to resume")

    def leave(progress: Progress) -> None:
        sys.exit(3)

    with pytest.raises(TrainingInterrupted) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "b", **EVERY_3, on_progress=leave)
    assert e.value.exit_code == 3 and not isinstance(e.value, KeyboardInterrupt)


def test_a_call_leaves_the_callers_process_as_it_was(corpus: Path, tmp_path: Path) -> None:
    """What docs/training.md says a call leaves as it was."""
    import logging
    import random
    import signal
    import warnings

    import torch

    def state() -> tuple[Any, ...]:
        return (list(warnings.filters), np.get_printoptions(), np.geterr(),
                torch.get_num_threads(), random.getstate(), np.random.get_state()[1].tolist(),
                torch.random.get_rng_state().tolist(), list(logging.getLogger().handlers),
                logging.getLogger().level, os.getcwd(),
                [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)])

    before = state()
    embedlab.train(corpus=corpus, run=tmp_path / "a", **{**FAST, "tensorboard": True})
    assert state() == before


def test_ctrl_c_stops_a_callback_that_hangs(corpus: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C while on_progress runs reaches it as KeyboardInterrupt (a notebook's "interrupt
    kernel" while a plot hangs); the flag the loop checks between steps would wait for it."""
    import signal
    import threading

    def hang(progress: Progress) -> None:
        if progress.step == 3:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                time.sleep(0.01)
            raise AssertionError("the Ctrl-C did not reach the callback")

    with pytest.raises(KeyboardInterrupt) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "a", **EVERY_3, on_progress=hang)
    assert str(e.value) == ("saved step 3 — call embedlab.train again with the same arguments "
                            "to resume")  # a Ctrl-C's stop, said as one
    assert "still saving" not in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def swallow(progress: Progress) -> None:  # plotting code that catches everything
        if progress.step == 3:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
            except BaseException:  # what such code does
                pass

    with pytest.raises(KeyboardInterrupt) as e:  # the flag still stops the run at the step
        embedlab.train(corpus=corpus, run=tmp_path / "b", **EVERY_3, on_progress=swallow)
    assert str(e.value) == ("saved step 3 — call embedlab.train again with the same arguments "
                            "to resume")


def test_a_callbacks_error_is_its_own_beside_a_signal(corpus: Path, tmp_path: Path) -> None:
    """A signal pending while on_progress raises an error does not hide the error: the stop is
    the callback's, caused by it."""
    import signal

    def broken(progress: Progress) -> None:
        if progress.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
            raise ValueError("bug")

    with pytest.raises(TrainingInterrupted) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "a", **EVERY_3, on_progress=broken)
    assert str(e.value).startswith("on_progress raised ValueError: bug; saved step 3")
    assert isinstance(e.value.__cause__, ValueError)


def test_a_signal_while_the_end_is_saved_stops_the_call_once_all_is_saved(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal is said to be heard, so the call does not return as if none came (a notebook
    cell must not go on): everything is saved first, and the run is finished."""
    import signal

    from embedlab.training import loop

    write = loop.status.write_status

    def signalled(*args: Any, **kwargs: Any) -> None:
        if kwargs.get("status") == "finished":  # the end's last record
            os.kill(os.getpid(), signal.SIGINT)
        write(*args, **kwargs)

    monkeypatch.setattr(loop.status, "write_status", signalled)
    calls: list[Progress] = []
    with pytest.raises(KeyboardInterrupt) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "a", **EVERY_3, on_progress=calls.append)
    assert isinstance(e.value, TrainingInterrupted) and e.value.exit_code == 130
    done = embedlab.checkpoints(tmp_path / "a")[-1].step
    assert str(e.value) == f"stopped by SIGINT as the call ended; finished at step {done}"
    assert not any(c.final for c in calls)
    monkeypatch.undo()
    again = embedlab.train(corpus=corpus, run=tmp_path / "a", **EVERY_3)
    assert again.finished and again.step == done
    # at max_steps: a larger one trains on (the same call would train nothing)
    def at_max_steps(*args: Any, **kwargs: Any) -> None:
        if kwargs.get("status") == "interrupted" and kwargs.get("step") == 4:
            os.kill(os.getpid(), signal.SIGINT)
        write(*args, **kwargs)

    monkeypatch.setattr(loop.status, "write_status", at_max_steps)
    with pytest.raises(KeyboardInterrupt) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "b", **EVERY_3, max_steps=4)
    assert str(e.value) == ("stopped by SIGINT as the call ended; saved step 4, its max_steps "
                            "(a larger one trains on)")


def test_restart_names_the_run_as_it_was_given(corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    embedlab.train(corpus=corpus, run="runs/a", **FAST, max_steps=2)
    capsys.readouterr()
    again = embedlab.train(corpus=corpus, run="runs/a", **FAST, max_steps=2, restart=True)
    assert again.run_dir == Path("runs/a")
    err = capsys.readouterr().err
    assert "moved the old run to runs/a.old-" in err and "vectors in runs/a\n" in err


def test_a_config_holding_a_bool_or_whole_float_for_an_integer_resumes_as_it_trained(
        corpus: Path, tmp_path: Path) -> None:
    """A config.json with ``window: true``, ``keep: 2.0`` or ``tensorboard: "yes"`` (values a
    Python call refuses) is read as 1, 2 and True, what such a run trains with, to the same
    bits."""
    options = {**FAST, "window": 1, "keep": 2, "tensorboard": True}
    embedlab.train(corpus=corpus, run=tmp_path / "whole", **options)
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **options, max_steps=5)
    config = json.loads((run / "config.json").read_text())
    config["model"]["window"], config["checkpoint"]["keep"] = True, 2.0
    config["track"]["tensorboard"] = "yes"
    (run / "config.json").write_text(json.dumps(config))
    embedlab.train(corpus=corpus, run=run)
    assert final_bytes(run) == final_bytes(tmp_path / "whole")


def test_the_last_partial_window_logs_its_rate_too(corpus: Path, tmp_path: Path) -> None:
    """The lr curve ends at the step where the loss curve does, at the rate of that step."""
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **{**FAST, "log_every": 7})
    assert result.step % 7  # the last window is a partial one
    loss, lr = logged(tmp_path / "run"), logged(tmp_path / "run", "train/lr")
    assert max(loss) == max(lr) == result.step
    progress = logged(tmp_path / "run", "train/progress")
    assert lr[result.step] < lr[max(s for s in lr if s < result.step)]
    assert progress[result.step] == 1.0


def test_the_bar_closes_at_the_last_step_before_the_save(corpus: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Its last line gives the rate of the training alone, without the final save's time
    (which would show a rate far below the training's, and an ETA past the end)."""
    from embedlab.training import loop, saving

    events: list[str] = []

    class Bar:
        def update(self, n: int) -> None: ...
        def set_postfix(self, **kw: Any) -> None: ...
        def close(self) -> None:
            events.append("close")

    real_save = saving.Saver.save

    def save(self: Any, *args: Any, **kwargs: Any) -> Any:
        events.append("save")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(loop, "progress_bar", lambda *a, **k: Bar())
    monkeypatch.setattr(saving.Saver, "save", save)
    embedlab.train(corpus=corpus, run=tmp_path / "a", **FAST, max_steps=3)
    assert events[:2] == ["close", "save"]
    events.clear()
    embedlab.train(corpus=corpus, run=tmp_path / "b", **FAST)
    assert events[:2] == ["close", "save"]
    events.clear()  # a stop (by a signal, or here a callback) saves as the end does

    def stop_at_2(progress: Progress) -> None:
        if progress.step == 2:
            raise ValueError("enough")

    with pytest.raises(TrainingInterrupted):
        embedlab.train(corpus=corpus, run=tmp_path / "c", **FAST, on_progress=stop_at_2)
    assert events[:2] == ["close", "save"]


def test_a_stored_value_of_the_wrong_type_names_the_file(corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, max_steps=2)
    config = json.loads((run / "config.json").read_text())
    config["optim"]["epochs"] = 2.5
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=run)
    assert str(e.value) == (f"{run / 'config.json'} holds a value embedlab cannot use (epochs= "
                            "must be an integer, got 2.5; pass e.g. epochs=5); fix that key in "
                            "the file, or pass restart=True to start over")
    config["optim"]["epochs"], config["optim"]["micro_order"] = 2, 5
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=r'\(optim.micro_order must be a str, got 5; set e.g. '
                                         r'"micro_order": "chunks" in the run\'s config.json\)'):
        embedlab.train(corpus=corpus, run=run)


def test_a_vocabulary_left_empty_is_said_in_pythons_words(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=[["the", "cat", "sat"], ["a", "dog", "ran"]], run=tmp_path / "r")
    assert str(e.value) == ("no word occurs at least min_count=5 times (the most frequent, "
                            "'the', occurs 1 time); lower min_count, e.g. min_count=1")


def test_from_a_missing_step_of_a_run_being_trained_names_the_trainer(
        corpus: Path, tmp_path: Path) -> None:
    from embedlab.run.lock import RunLock

    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, max_steps=2)
    # held as a trainer holds it; from this process, so the message names another call here
    busy = rf"^run {re.escape(str(run))} is in use by another call in this process "
    with RunLock(run), pytest.raises(InputError, match=busy):
        embedlab.train(corpus=corpus, run=run, **FAST, from_checkpoint=999)
    with pytest.raises(InputError, match=r"from_checkpoint=999: no such checkpoint"):
        embedlab.train(corpus=corpus, run=run, **FAST, from_checkpoint=999)


def test_a_divergence_names_the_python_arguments_that_fix_it(corpus: Path,
                                                             tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", **{**FAST, "max_steps": 20},
                       init_scale=1e30)
    assert str(e.value).endswith("Start over with a lower learning rate, e.g. restart=True, "
                                 "lr=0.00625, or start the vectors narrower: init_scale 1e+30 "
                                 "is wider than the default 8")


def test_the_tokenising_child_names_python_arguments(tmp_path: Path) -> None:
    """A corpus of 1 MiB or more is tokenised by a child process while torch imports: its
    refusals and warnings reach a Python caller spelled as arguments too."""
    from embedlab.data.tokenise_child import MIN_BYTES

    corpus = tmp_path / "big.txt"
    words = [f"w{i % 5000}" for i in range(MIN_BYTES // 4)]
    corpus.write_text(" ".join(words) + "\n", encoding="utf-8")
    assert corpus.stat().st_size > MIN_BYTES
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", engine="torch", min_count=10**9,
                       **{**FAST, "max_steps": 1})
    assert "min_count=1000000000" in str(e.value) and "--" not in str(e.value)
    with pytest.warns(embedlab.EmbedlabWarning, match=r"more than 100 distinct words "
                                                       r"\(max_distinct=100\): pruned rare words"):
        embedlab.train(corpus=corpus, run=tmp_path / "pruned", engine="torch", max_distinct=100,
                       min_count=1, **{**FAST, "max_steps": 1})


def test_a_stop_while_a_generator_is_read_asks_for_a_new_one(tmp_path: Path) -> None:
    """Ctrl-C while the sentences of a generator are written: the same call again would get an
    iterator already used up, so the line asks for a new one."""
    from embedlab.errors import TrainingKeyboardInterrupt

    def sentences() -> Any:
        for i in range(200):
            if i == 100:
                raise KeyboardInterrupt  # as a Ctrl-C in the middle of the reading
            yield ["the", "cat", "sat", "on", "a", "mat"]

    with pytest.raises(TrainingKeyboardInterrupt) as e:
        embedlab.train(corpus=sentences(), run=tmp_path / "run", **FAST)
    assert str(e.value).endswith("call embedlab.train again with a new iterator of the "
                                 "sentences (this one is used up) and the same other arguments")
    assert not (tmp_path / "run").exists()

    class Sentences:  # an iterable, not an iterator: the same object reads again
        def __iter__(self) -> Any:
            return sentences()

    with pytest.raises(TrainingKeyboardInterrupt) as e:
        embedlab.train(corpus=Sentences(), run=tmp_path / "run", **FAST)
    assert str(e.value).endswith("call embedlab.train again with the same arguments")


def test_a_killed_calls_sentences_file_goes_at_the_next_call_beside_it(
        corpus: Path, tmp_path: Path) -> None:
    """A call killed while it trained on sentences in memory leaves their file (a full copy of
    the corpus) beside the run; the next call there removes it, a resume without corpus= too."""
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, max_steps=2)
    dead = tmp_path / ".embedlab-sentences-999999999-abcdef.txt"  # no such process
    dead.write_text("the cat sat\n")
    embedlab.train(run=run, **FAST, max_steps=3)
    assert not dead.exists()


@pytest.mark.parametrize("call, flag", [({"eval_analogies": ""}, "eval_analogies"),
                                        ({"eval_similarity": ["ws.tsv", ""]}, "eval_similarity"),
                                        ({"from_checkpoint": ""}, "from_checkpoint")])
def test_an_empty_path_is_refused_not_taken_for_none(corpus: Path, tmp_path: Path,
                                                     call: dict[str, Any], flag: str) -> None:
    # an empty --eval-analogies evaluated nothing, silently, and an empty --from resumed from
    # the latest checkpoint
    with pytest.raises(InputError, match=re.escape(f"{flag} is empty (an unset variable?)")):
        embedlab.train(corpus=corpus, run=tmp_path / "r", **FAST, **call)
    assert not (tmp_path / "r").exists()


def test_sigterm_while_sentences_are_written_unwinds_and_leaves_nothing(tmp_path: Path) -> None:
    # the default action killed the process there, leaving runs/ with a hidden partial copy
    import os
    import signal

    def sentences() -> Iterator[list[str]]:
        for i in range(2000):
            if i == 1000:
                os.kill(os.getpid(), signal.SIGTERM)
            yield ["the", "cat", "sat", "on", "the", "mat"]

    with pytest.raises(TrainingInterrupted) as e:
        embedlab.train(corpus=sentences(), run=tmp_path / "runs" / "x", epochs=1, threads=1)
    assert e.value.exit_code == 128 + signal.SIGTERM
    assert str(e.value).startswith("stopped by SIGTERM before training began or after it ended")
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize("error", [ValueError("done"), KeyboardInterrupt("done")])
def test_what_the_final_on_progress_call_raises_reaches_the_caller_as_itself(
        corpus: Path, tmp_path: Path, error: BaseException) -> None:
    # everything is saved by then; a KeyboardInterrupt was said as "stopped by SIGINT before
    # training began or after it ended"
    def at_the_end(progress: Progress) -> None:
        if progress.final:
            raise error

    with pytest.raises(type(error)) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", **EVERY_3, on_progress=at_the_end)
    assert e.value is error and not isinstance(e.value, TrainingInterrupted)
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("same_command", [False, True], ids=["other-settings", "same-command"])
def test_two_runs_named_alike_at_once_take_two_names(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        same_command: bool) -> None:
    """Two commands of other settings started together both found the name free; the one
    that came second was refused as "in use". It takes the next name; the same command twice
    is one run, in use."""
    from embedlab.run import folder
    from embedlab.run.lock import RunLock
    from embedlab.training import api
    from embedlab.training.launched import typed_argv

    real, held = folder.choose_run_dir, []

    def chosen_then_taken(runs: Path, *args: Any, **kwargs: Any) -> Path:
        picked = real(runs, *args, **kwargs)
        if not held:  # the other command creates the run and locks it, just after
            picked.mkdir(parents=True)
            # the same command started another way (python -m embedlab): its program differs
            argv = ["/elsewhere/python", *typed_argv()[1:]] if same_command else ["other"]
            held.append(RunLock(picked, argv=argv).acquire())
        return picked

    monkeypatch.setattr(api, "choose_run_dir", chosen_then_taken)
    try:
        if same_command:
            with pytest.raises(InputError, match="is in use by"):
                embedlab.train(corpus=corpus, runs_dir=tmp_path / "runs", **FAST, max_steps=1)
        else:
            result = embedlab.train(corpus=corpus, runs_dir=tmp_path / "runs", **FAST,
                                    max_steps=1)
            assert result.run_dir.name.endswith("-2")
            assert result.run_dir.parent == tmp_path / "runs"
    finally:
        held[0].release()


def test_no_eval_and_no_probe_drop_a_resumed_runs_settings(tmp_path: Path) -> None:
    from embedlab import train
    from embedlab.errors import EmbedlabWarning, InputError

    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat and the dog sat on the log\n" * 200,
                      encoding="utf-8")
    pairs = tmp_path / "ws.tsv"
    pairs.write_text("cat\tdog\t5\nmat\tlog\t3\nthe\tcat\t1\n", encoding="utf-8")
    run = tmp_path / "run"
    options: dict[str, Any] = {"dim": 8, "threads": 1, "min_count": 1, "progress": False,
                               "tensorboard": False}
    with pytest.warns(EmbedlabWarning, match="probe logs to TensorBoard alone"):
        train(corpus, run, max_steps=1, eval_every=1, eval_similarity=[pairs], probe=["cat"],
              **options)
    with pytest.raises(InputError, match=r"^no_eval=True drops the run's evaluation, and "
                                         r"eval_similarity sets it"):
        train(run=run, max_steps=2, no_eval=True, eval_similarity=[pairs])
    result = train(run=run, max_steps=2, no_eval=True, no_probe=True, progress=False)
    assert result.config.eval.similarity == () and result.config.eval.every_steps is None
    assert result.config.track.probe_words == ()


@pytest.mark.parametrize("name", ["demo", "text8"])
def test_a_path_object_named_like_a_built_in_corpus_is_the_file_here(
        name: str, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Path("./demo") is Path("demo"): with such a file here, the file, not the built-in corpus
    monkeypatch.chdir(tmp_path)
    Path(name).write_bytes(corpus.read_bytes())
    result = embedlab.train(corpus=Path(f"./{name}"), run=tmp_path / "run", **FAST,
                            min_count=1, max_steps=1)
    assert result.config.data.corpus == os.path.join(".", name)
    assert len(result.vectors) == len(set(corpus.read_text().split()))


def test_a_path_object_named_demo_with_no_such_file_here_is_the_built_in_corpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # so runs made with Path("demo") and no such file resume with the same call
    monkeypatch.chdir(tmp_path)
    result = embedlab.train(corpus=Path("demo"), run=tmp_path / "run", **FAST, max_steps=1)
    assert result.config.data.corpus == "demo"


def test_a_numbered_run_folder_says_which_settings_the_taken_name_holds(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep run extended with more epochs: re-running the sweep's line makes NAME-2, and
    says why, where the -2 alone reads as part of the last tag."""
    runs = tmp_path / "runs"
    first = embedlab.train(corpus=corpus, runs_dir=runs, **FAST)
    embedlab.train(run=first.run_dir, **{**FAST, "epochs": 3})
    capsys.readouterr()
    again = embedlab.train(corpus=corpus, runs_dir=runs, **FAST)
    assert again.run_dir.name == first.run_dir.name + "-2"
    assert (f"embedlab: note: {first.run_dir} holds a run of other settings (epochs 3 there, 2 "
            f"here): this is a new run, {again.run_dir} (run={str(first.run_dir)!r} names that "
            "one)") in capsys.readouterr().err
