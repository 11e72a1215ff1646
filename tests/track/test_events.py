"""The run's event files: the writer's purge events, and the rewrites on resume."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from embedlab.track.events import EventWriter, drop_experiment_summaries, event_files
from embedlab.track.jsonl import METRICS_FILE, read_metrics
from embedlab.track.protos import scalar_summary

from .fakerun import add_old_experiment_summary, load_events, simulate, summary_events


def _events(path: Path) -> list[Any]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    events = list(EventFileLoader(str(path)).Load())
    for event in events:
        event.wall_time = 0
    return events


def test_purge_step_events_are_summary_writers(tmp_path: Path) -> None:
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    writer = EventWriter(ours, purge_step=21)
    writer.add_summary(21, scalar_summary("train/loss", 0.5))
    writer.close()
    reference = torch_tb.SummaryWriter(str(theirs), purge_step=21)
    reference.add_scalar("train/loss", 0.5, global_step=21)
    reference.close()
    (path,) = event_files(ours)  # in the folder itself, named like SummaryWriter's
    (expected,) = event_files(theirs)
    assert path.name.split(".")[:3] == ["events", "out", "tfevents"]
    got = _events(path)
    assert got == _events(expected)
    assert [(e.step, e.WhichOneof("what")) for e in got] == [
        (0, "file_version"), (21, "file_version"), (21, "session_log"), (21, "summary")]


def test_more_epochs_after_the_end_replace_the_final_metrics_and_hparams(tmp_path: Path) -> None:
    # A finished run given more --epochs resumes from its final checkpoint. Were its final/*
    # rows and hparams record kept, TensorBoard's HParams tab would show the first record:
    # the old epoch count.
    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25)
    simulate(run, steps=80, ckpt_every=25, start=50)
    events = summary_events(run)
    assert [s for s, tag in events if tag == "_hparams_/session_start_info"] == [80]
    assert [s for s, tag in events if tag == "final/loss"] == [80]
    assert (50, "embeddings/input") in events  # the checkpoint's own summaries stay
    finals = [r["step"] for r in read_metrics(run / METRICS_FILE) if "final/loss" in r]
    assert finals == [80]
    assert 50 in [r["step"] for r in read_metrics(run / METRICS_FILE) if "eval/analogy" in r]


@pytest.mark.parametrize("leftover", ["events.out.tfevents.1.host.0.tmp", ".events-rewrite-1"])
def test_a_rewrite_killed_midway_does_not_break_the_next_resume(tmp_path: Path,
                                                                 leftover: str) -> None:
    # A SIGKILL while a resume rewrites the event files leaves a scratch file, which the next
    # resume must neither take for an event file nor keep.
    run = tmp_path / "run"
    simulate(run, steps=35, ckpt_every=20, final=False)
    (run / leftover).write_bytes(b"half a record")
    simulate(run, steps=50, ckpt_every=20, start=20)
    assert not (run / leftover).exists()
    assert [e.step for e in load_events(run).Scalars("train/loss")] == list(range(5, 51, 5))


def test_an_older_runs_experiment_summary_is_removed(tmp_path: Path) -> None:
    # TensorBoard takes an old run's experiment summary for the whole logdir's HParams table
    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25)
    add_old_experiment_summary(run, 50)
    before = summary_events(run)
    assert (50, "_hparams_/experiment") in before
    assert drop_experiment_summaries(run) is True
    after = summary_events(run)
    assert after == [e for e in before if e[1] != "_hparams_/experiment"]
    assert drop_experiment_summaries(run) is False  # nothing left to do: no rewrite


@pytest.mark.parametrize("code, fix", [
    (errno.ENOSPC, "free space on the disk"),
    (errno.EROFS, "make the disk writable (it is mounted read-only)"),
    (errno.EDQUOT, "free space within your disk quota"),
    (errno.EIO, "check the disk (an input/output error: a failing disk, or a network file "
                "system that went away)")])
def test_a_failed_write_is_one_line_with_its_own_fix_and_no_thread_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        code: int, fix: str) -> None:
    """The writer's thread fails on its first write; a later call says so in one line naming
    the file and the error's own fix (not "free space" for a read-only or failing disk), with
    no "Exception in thread" traceback of the thread."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    from embedlab.errors import InputError

    def failing(self: Any, data: bytes) -> None:
        raise OSError(code, os.strerror(code))

    writer = EventWriter(tmp_path, None)
    monkeypatch.setattr(RecordWriter, "write", failing)
    with pytest.raises(InputError) as failed:
        for step in range(100):
            writer.add_summary(step, scalar_summary("train/loss", 1.0))
            writer.flush()
    path = next(iter(event_files(tmp_path)))
    assert str(failed.value) == (
        f"could not write TensorBoard events to {path} ({os.strerror(code)}); {fix} (or pass "
        "--no-tensorboard), then re-run the same command: the run resumes from its last "
        "checkpoint")
    assert "Traceback" not in capsys.readouterr().err


def test_too_many_open_files_is_not_called_a_full_disk(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from tensorboard.summary.writer.record_writer import RecordWriter

    from embedlab.errors import InputError

    def no_descriptors(self: Any, data: bytes) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    writer = EventWriter(tmp_path, None)
    monkeypatch.setattr(RecordWriter, "write", no_descriptors)
    with pytest.raises(InputError) as failed:
        for step in range(100):
            writer.add_summary(step, scalar_summary("train/loss", 1.0))
            writer.flush()
    assert "(Too many open files); raise the open-file limit (ulimit -n 1024 or more) (or pass " \
        "--no-tensorboard)" in str(failed.value)


def test_only_the_writer_threads_disk_errors_are_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from embedlab.track import events

    seen: list[type[BaseException] | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_type))
    events._quiet_writer_thread()
    events._quiet_writer_thread()  # once is enough: not a chain of hooks

    class _AsyncWriterThread(threading.Thread):  # tensorboard's writer thread, by its name
        pass

    for thread, error in ((_AsyncWriterThread(), OSError), (_AsyncWriterThread(), ValueError),
                          (threading.Thread(), OSError)):
        threading.excepthook(threading.ExceptHookArgs([error, error(), None, thread]))
    assert seen == [ValueError, OSError]


def test_a_run_folder_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    import os

    from embedlab.errors import InputError

    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xffname"))
    folder.mkdir()
    with pytest.raises(InputError, match="is not valid UTF-8, which TensorBoard's writer needs; "
                                         "rename it, or pass --no-tensorboard"):
        EventWriter(folder, None)


def test_a_run_folder_that_is_not_utf8_is_refused_before_the_run_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the "new run" line and any training, leaving no folder."""
    import os

    from embedlab.cli import main
    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=50)
    run = os.fsdecode(os.fsencode(tmp_path) + b"/bad\xffname")
    with pytest.raises(SystemExit) as info:
        main(["train", "--corpus", str(corpus), "--run", run, "--threads", "1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "new run" not in err
    assert "is not valid UTF-8, which TensorBoard's writer needs" in err
    assert not Path(run).exists()


def test_events_are_trimmed_in_a_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    # A --from resume with --no-tensorboard (the fix the refusal above names) trims the
    # events: TensorBoard's loader encodes its path as UTF-8, which raises UnicodeEncodeError
    import os
    import shutil

    from embedlab.track.events import truncate_event_files

    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25, final=False)
    moved = Path(os.fsdecode(os.fsencode(tmp_path) + b"/mv\xff"))
    shutil.move(run, moved)
    truncate_event_files(moved, 25)
    shutil.move(moved, run)
    assert [e.step for e in load_events(run).Scalars("train/loss")] == list(range(5, 26, 5))


def test_a_record_cut_short_ends_the_file_as_the_loader_reads_it(tmp_path: Path) -> None:
    from embedlab.track.events import truncate_event_files

    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25, final=False)
    (path,) = event_files(run)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:30])  # a writer killed inside its next record
    truncate_event_files(run, 40)
    assert [e.step for e in load_events(run).Scalars("train/loss")] == list(range(5, 41, 5))
    damaged = bytearray(path.read_bytes())
    damaged[-3] ^= 0xFF  # the last record's data CRC no longer matches
    path.write_bytes(bytes(damaged))
    truncate_event_files(run, 40)
    kept = [e.step for e in load_events(run).Scalars("train/loss")]
    assert kept == list(range(5, 41, 5))[: len(kept)] and len(kept) >= 7


def test_a_reader_open_during_a_resume_shows_each_step_once(tmp_path: Path) -> None:
    """TensorBoard's reader (--load_fast=false) takes a run's first SessionLog START for its
    start and purges nothing at it: each run's event file opens with one, so that the START of
    the first resume purges the abandoned steps the reader holds."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    run = tmp_path / "run"
    simulate(run, steps=45, ckpt_every=25, final=False)  # killed at 45, saved at 25
    live = EventAccumulator(str(run), size_guidance={"tensors": 0})
    live.Reload()
    assert [e.step for e in live.Tensors("train/loss")] == list(range(5, 46, 5))
    simulate(run, steps=50, ckpt_every=25, start=25)
    live.Reload()
    assert [e.step for e in live.Tensors("train/loss")] == list(range(5, 51, 5))
