"""Evaluation during training, end to end: ``embedlab train --eval-similarity FILE --eval-every N``
and ``--best-metric similarity/NAME``.

Two small runs (a Zipf corpus of 400 lines, dim 8, about 80 steps; about a second each):

* ``first`` stops at ``--max-steps 30`` with TensorBoard on, evaluating and saving every 10
  steps, with two pairs files: random gold scores, and two pairs (Spearman 1 at every step,
  so ``--best-metric similarity/flat`` sees nothing but ties; gold scores that are all equal
  are refused, having no correlation);
* ``peaked`` trains the same configuration to the end, saving and evaluating every 5 steps,
  against a pairs file whose gold scores are the cosines of ``first``'s vectors at step 30. Runs
  are deterministic and evaluation never perturbs training, so this run's Spearman is exactly 1 at
  step 30 and lower elsewhere: the best checkpoint has a known step in the middle of the run,
  and a best checkpoint that merely tracked the latest or the first one would be caught.

Every logged value is compared with gensim's ``evaluate_word_pairs`` on the saved vectors, a
computation independent of embedlab.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from embedlab.checkpoint import find_checkpoint, load_checkpoint, read_index
from embedlab.cli import main
from embedlab.data.vocab import Vocab
from embedlab.testing import write_zipf_corpus

FAST = ["--dim", "8", "--batch-size", "32", "--epochs", "2", "--threads", "1",
        "--log-every", "1", "--no-progress"]
PEAK_STEP = 30


def rows(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def logged(run: Path, tag: str) -> dict[int, float]:
    """step -> value of ``tag`` in metrics.jsonl (a step logged twice must repeat its value)."""
    out: dict[int, float] = {}
    for r in rows(run):
        if tag in r:
            assert out.setdefault(int(r["step"]), r[tag]) == r[tag]
    return out


def saved(run: Path) -> dict[int, tuple[list[str], np.ndarray, dict[str, float]]]:
    """step -> (words, input embeddings, recorded metrics) of every checkpoint of ``run``."""
    words = list(Vocab.load_tsv(run / "vocab.tsv").words)
    out = {}
    for ckpt in sorted((run / "checkpoints").glob("ckpt-*")):
        tensors, state = load_checkpoint(ckpt, names=["input_embeddings"])
        out[int(state["step"])] = (words, tensors["input_embeddings"], state["metrics"])
    return out


def gensim_spearman(words: list[str], matrix: np.ndarray, pairs: Path) -> float:
    kv = KeyedVectors(matrix.shape[1])
    kv.add_vectors(words, matrix)
    _, spearman, _ = kv.evaluate_word_pairs(str(pairs))
    return float(spearman.statistic)


def write_pairs(path: Path, pairs: list[tuple[str, str]], gold: np.ndarray) -> Path:
    # upper-cased second words (matching is case-insensitive), a comment and a pair with an
    # unknown word (dropped) exercise the file reader as a user's file would
    lines = ["# word1\tword2\tscore", "w1\tnotaword\t5.0"]
    lines += [f"{a}\t{b.upper()}\t{float(g)!r}" for (a, b), g in zip(pairs, gold, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus and 40 pairs of frequent words (``pairs.json``), in one folder."""
    root = tmp_path_factory.mktemp("eval")
    write_zipf_corpus(root / "c.txt", lines=400)
    rng = np.random.default_rng(0)
    pairs = sorted({(f"w{a}", f"w{b}") for a, b in rng.integers(0, 50, (60, 2)) if a < b})[:40]
    (root / "pairs.json").write_text(json.dumps(pairs))
    write_pairs(root / "random.tsv", pairs, rng.uniform(0, 10, len(pairs)))
    # two pairs: Spearman is 1 or -1, the same at every step while the two cosines keep their
    # order (a tie for --best-metric similarity/flat)
    write_pairs(root / "flat.tsv", pairs[:2], np.array([1.0, 2.0]))
    return root


@pytest.fixture(scope="module")
def first(files: Path) -> Path:
    run = files / "first"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST, "--tensorboard",
          "--max-steps", str(PEAK_STEP), "--eval-similarity", str(files / "random.tsv"),
          "--eval-similarity", str(files / "flat.tsv"), "--eval-every", "10",
          "--checkpoint-every", "10", "--best-metric", "similarity/flat"])
    return run


@pytest.fixture(scope="module")
def peaked(files: Path, first: Path) -> Path:
    words, matrix, _ = saved(first)[PEAK_STEP]
    unit = matrix.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    row = {w: i for i, w in enumerate(words)}
    pairs = [tuple(p) for p in json.loads((files / "pairs.json").read_text())]
    gold = np.array([unit[row[a]] @ unit[row[b]] for a, b in pairs])
    write_pairs(files / "peak.tsv", pairs, gold)  # type: ignore[arg-type]
    run = files / "peaked"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(files / "peak.tsv"), "--eval-every", "5",
          "--checkpoint-every", "5", "--keep", "1000", "--best-metric", "similarity/peak"])
    return run


def test_logged_similarity_equals_gensim_on_the_saved_vectors(files: Path, peaked: Path) -> None:
    values = logged(peaked, "eval/similarity/peak")
    checkpoints = saved(peaked)
    last = max(checkpoints)
    assert last > 2 * PEAK_STEP
    # evaluated every 5 steps and once more at the end; a checkpoint at each of those steps
    assert sorted(values) == sorted(checkpoints) == [*range(5, last, 5), last]
    for step, (words, matrix, metrics) in checkpoints.items():
        # two implementations of Spearman on the same vectors: equal up to float rounding
        assert values[step] == pytest.approx(gensim_spearman(words, matrix, files / "peak.tsv"),
                                             abs=1e-9), step
        assert metrics["similarity/peak"] == values[step], step  # what --best-metric compares
    assert logged(peaked, "final/similarity/peak") == {last: values[last]}


def test_best_metric_similarity_keeps_the_highest_step(peaked: Path) -> None:
    values = logged(peaked, "eval/similarity/peak")
    assert values[PEAK_STEP] == pytest.approx(1.0, abs=1e-12)
    # elsewhere the ranks differ (one swapped pair of the 40 already costs 2e-4)
    assert max(v for s, v in values.items() if s != PEAK_STEP) < 1.0 - 1e-4
    # the highest value (ties: the earliest step), computed from the log
    best_step = min(values, key=lambda s: (-values[s], s))
    assert best_step == PEAK_STEP
    index = read_index(peaked)
    assert index.best == PEAK_STEP != index.latest
    assert index.best_metric == "similarity/peak" and index.best_mode == "max"  # max: default
    assert index.best_value == values[PEAK_STEP]
    assert find_checkpoint(peaked, best=True).name == f"ckpt-{PEAK_STEP:08d}"


def test_best_metric_ties_keep_the_earliest_step(first: Path) -> None:
    values = logged(first, "eval/similarity/flat")
    assert len(set(values.values())) == 1 and abs(values[10]) == pytest.approx(1.0)
    index = read_index(first)
    assert (index.best, index.latest) == (10, PEAK_STEP)
    assert index.best_metric == "similarity/flat" and index.best_value == values[10]


def test_similarity_scalars_in_tensorboard(files: Path, first: Path) -> None:
    values = logged(first, "eval/similarity/random")
    checkpoints = saved(first)
    assert sorted(values) == sorted(checkpoints) == [10, 20, PEAK_STEP]
    for step, (words, matrix, _) in checkpoints.items():
        assert values[step] == pytest.approx(
            gensim_spearman(words, matrix, files / "random.tsv"), abs=1e-9), step
    assert len(set(values.values())) == 3
    ea = EventAccumulator(str(first), size_guidance={"scalars": 0, "images": 1,
                                                     "histograms": 1, "tensors": 1})
    ea.Reload()
    for tag in ("eval/similarity/random", "eval/similarity/flat"):
        events = ea.Scalars(tag)
        assert [e.step for e in events] == [10, 20, PEAK_STEP], tag
        # TensorBoard stores float32
        np.testing.assert_allclose([e.value for e in events],
                                   [logged(first, tag)[s] for s in (10, 20, PEAK_STEP)],
                                   rtol=1e-6, err_msg=tag)


def test_a_pairs_file_that_misses_the_vocabulary_is_refused_before_training(
        files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was refused only at the first evaluation: a run with --eval-every past its first
    # checkpoint was left 'failed' with checkpoints; now nothing is trained or left behind.
    unknown = write_pairs(tmp_path / "unknown.tsv", [("zz1", "zz2"), ("zz3", "zz4")],
                          np.array([1.0, 2.0]))
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
              "--no-tensorboard", "--eval-similarity", str(unknown), "--eval-every", "50",
              "--checkpoint-every", "10"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"embedlab: error: only 0 of 3 pairs in {unknown} have both words among")
    # the whole vocabulary was looked at: no "vectors with a larger vocabulary" to use
    assert err.endswith("check the file's language/case or train on a corpus that holds its "
                        "words\n")
    assert not run.exists()


def test_a_checkpoint_between_evaluations_records_its_own_value(files: Path,
                                                                peaked: Path) -> None:
    # saved at steps the evaluation skipped, a checkpoint recorded the last evaluation's value:
    # the best by it was one nobody evaluated (ckpt-30 carried step 28's, below the peak)
    run = files / "between"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(files / "peak.tsv"), "--eval-every", "7",
          "--checkpoint-every", "3", "--keep", "1000", "--best-metric", "similarity/peak"])
    checkpoints = saved(run)
    assert PEAK_STEP in checkpoints and any(step % 7 for step in checkpoints)
    for step, (words, matrix, metrics) in checkpoints.items():
        assert metrics["similarity/peak"] == pytest.approx(
            gensim_spearman(words, matrix, files / "peak.tsv"), abs=1e-9), step
    assert read_index(run).best == PEAK_STEP
    assert read_index(run).best_value == pytest.approx(1.0, abs=1e-12)
    last = max(checkpoints)  # the log keeps --eval-every's steps (and the end), nothing more
    assert sorted(logged(run, "eval/similarity/peak")) == [*range(7, last, 7), last]


def test_a_signals_save_does_not_wait_for_an_evaluation(files: Path, peaked: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a SIGTERM's save evaluated first (seconds on a big vocabulary, while a scheduler's
    # SIGKILL may follow); it now records no evaluation rather than a stale one
    import os
    import signal

    from embedlab.training.reporting import Reporter

    real = Reporter.close_window

    def signal_at_step_10(self: Reporter, lr: float) -> None:
        real(self, lr)
        if self.run.state.step == 10:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Reporter, "close_window", signal_at_step_10)
    run = files / "stopped"
    with pytest.raises(SystemExit) as stopped:
        main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
              "--no-tensorboard", "--eval-similarity", str(files / "peak.tsv"),
              "--eval-every", "7", "--checkpoint-every", "100", "--best-metric",
              "similarity/peak"])
    assert stopped.value.code == 143
    checkpoints = saved(run)
    assert sorted(checkpoints) == [10]
    assert "similarity/peak" not in checkpoints[10][2] and "loss" in checkpoints[10][2]
    assert read_index(run).best is None  # nothing evaluated at a saved step yet


def test_checkpoints_by_the_loss_record_only_their_own_evaluations(files: Path,
                                                                   peaked: Path) -> None:
    # with --best-metric loss, a checkpoint between evaluations recorded the last evaluation's
    # value as its own, and a resume with --best-metric similarity/NAME ranked it by that value;
    # and a last step that --eval-every had evaluated was evaluated (and logged) twice
    run = files / "by-loss"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(files / "peak.tsv"), "--eval-every", "7",
          "--checkpoint-every", "3", "--keep", "1000"])
    checkpoints = saved(run)
    last = max(checkpoints)
    assert any(step % 7 for step in checkpoints if step != last)
    for step, (words, matrix, metrics) in checkpoints.items():
        if step % 7 and step != last:
            assert "similarity/peak" not in metrics and "loss" in metrics, step
        else:
            assert metrics["similarity/peak"] == pytest.approx(
                gensim_spearman(words, matrix, files / "peak.tsv"), abs=1e-9), step
    every = files / "every"  # evaluated at its last step by --eval-every: logged once
    main(["train", "--run", str(every), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(files / "peak.tsv"), "--eval-every",
          str(last)])
    evaluated = [r["step"] for r in rows(every) if "eval/similarity/peak" in r]
    assert evaluated == [last]


def test_a_similarity_file_named_like_a_loss_is_maximised(files: Path, peaked: Path) -> None:
    # the direction came from "loss" in the name: similarity/glossary kept the worst checkpoint
    glossary = files / "glossary.tsv"
    glossary.write_bytes((files / "peak.tsv").read_bytes())
    run = files / "glossary"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(glossary), "--eval-every", "5",
          "--checkpoint-every", "5", "--keep", "1000", "--best-metric", "similarity/glossary"])
    index = read_index(run)
    assert (index.best, index.best_mode) == (PEAK_STEP, "max")


def test_evaluation_time_is_not_training_time(files: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    """--eval-every's evaluations, as a checkpoint's save, are left out of train_seconds and of
    the windows' words/s (27k against 614k words/s for the same steps with --eval-every 20)."""
    import time

    from embedlab.run.status import read_status
    from embedlab.training.reporting import Reporter

    evaluate = Reporter.evaluate

    def slow(self: Reporter) -> None:
        time.sleep(0.4)
        evaluate(self)

    monkeypatch.setattr(Reporter, "evaluate", slow)
    run = files / "slow-eval"
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--eval-similarity", str(files / "random.tsv"), "--eval-every", "2",
          "--max-steps", "10", "--log-every", "10"])
    assert sorted(logged(run, "eval/similarity/random")) == [2, 4, 6, 8, 10]  # 2 s of sleep
    assert read_status(run)["train_seconds"] < 1.0
    # the window of steps 1-10 slept 1.6 s in evaluations at 2, 4, 6 and 8: under 300 words/s
    assert logged(run, "train/words_per_sec")[10] > 2000


def test_an_evaluation_that_is_nan_is_said_once(files: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # a pair and its reverse: every cosine ranks alike, Spearman is nan at every evaluation;
    # it was logged as "nan" and the run kept no best checkpoint, without a word
    pairs = tmp_path / "rev.tsv"
    pairs.write_text("w1\tw2\t5\nw2\tw1\t7\n", encoding="utf-8")
    run = tmp_path / "run"
    capsys.readouterr()
    main(["train", "--run", str(run), "--corpus", str(files / "c.txt"), *FAST,
          "--no-tensorboard", "--max-steps", "4", "--eval-similarity", str(pairs),
          "--eval-every", "2", "--checkpoint-every", "2", "--best-metric", "similarity/rev"])
    said = [line for line in capsys.readouterr().err.splitlines() if "is nan" in line]
    assert said == ["embedlab: warning: evaluation similarity/rev is nan at step 2: the vectors "
                    "rank none of its items above another (every pair the same cosine, say, or "
                    "vectors that overflow); it is logged as nan and left out of the "
                    "checkpoints, so it makes no checkpoint the best (--best-metric "
                    "similarity/rev) while it stays so"]
    assert logged(run, "eval/similarity/rev") == {2: "nan", 4: "nan"}
    assert read_index(run).best is None
