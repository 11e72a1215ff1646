"""The projector's files, and its config after a resume from an older checkpoint, at any kill
point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embedlab.track.tracker import open_tracker

from .fakerun import embeddings_at, fake_vocab, make_config, simulate


def test_projector_files_have_word_and_count_metadata(fresh_run: Path) -> None:
    run = fresh_run
    folder = run / "00050" / "input_embeddings"
    meta = (folder / "metadata.tsv").read_text().splitlines()
    vocab = fake_vocab()
    assert meta[0] == "word\tcount"
    assert meta[1:] == [f"{w}\t{c}" for w, c in zip(vocab.words[:30], vocab.counts[:30],
                                                    strict=True)]
    rows = (folder / "tensors.tsv").read_text().splitlines()
    assert len(rows) == 30 and len(rows[0].split("\t")) == 16
    assert 'tensor_path: "00050/input_embeddings/tensors.tsv"' in \
        (run / "projector_config.pbtxt").read_text()


def projector_entries(run: Path) -> list[int]:
    """Steps listed in RUN/projector_config.pbtxt, after checking TensorBoard can serve each.

    The projector plugin reads every listed tensors.tsv when asked for its runs; one missing or
    incomplete file makes /data/plugin/projector/runs answer HTTP 500 for the whole logdir.
    """
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    path = run / "projector_config.pbtxt"
    if not path.exists():
        return []
    config = text_format.Parse(path.read_text(encoding="utf-8"), ProjectorConfig())
    steps = []
    for e in config.embeddings:
        lines = (run / e.tensor_path).read_text(encoding="utf-8").splitlines()
        rows = [[float(x) for x in line.split("\t")] for line in lines if line]  # as it reads
        words = (run / e.metadata_path).read_text(encoding="utf-8").splitlines()[1:]
        assert len(rows) == len(words) and {len(r) for r in rows} == {16}, e.tensor_path
        steps.append(int(e.tensor_path.split("/", 1)[0]))
    return steps


def step_folders(run: Path) -> list[int]:
    return sorted(int(p.name) for p in run.iterdir() if p.is_dir() and p.name.isdigit())


@pytest.mark.parametrize("each_checkpoint", [False, True])
def test_resume_from_an_older_checkpoint_drops_later_projector_entries_at_once(
        tmp_path: Path, each_checkpoint: bool) -> None:

    run = tmp_path / "run"
    cfg = make_config(projector_each_checkpoint=each_checkpoint)
    simulate(run, steps=50, ckpt_every=10, cfg=cfg)
    assert projector_entries(run) == ([10, 20, 30, 40, 50] if each_checkpoint else [50])
    # `embedlab train --from ckpt-00000020`: the tracker opens, then the run is stopped (Ctrl-C,
    # --max-steps, a crash) before its next projector write
    open_tracker(run, cfg, vocab=fake_vocab(), resume_step=20).close()
    assert projector_entries(run) == ([10, 20] if each_checkpoint else [])
    assert step_folders(run) == projector_entries(run)


def test_a_kill_while_writing_the_projector_leaves_no_entry_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil


    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # stands for a SIGKILL at this point

    run = tmp_path / "run"
    vocab = fake_vocab()
    cfg = make_config(projector_each_checkpoint=True)
    simulate(run, steps=40, ckpt_every=10, cfg=cfg, final=False)
    assert projector_entries(run) == [10, 20, 30, 40]
    # killed while the abandoned steps' folders are being removed (resuming from step 20)
    with monkeypatch.context() as m:
        m.setattr(shutil, "rmtree", killed)
        with pytest.raises(KeyboardInterrupt):
            open_tracker(run, cfg, vocab=vocab, resume_step=20).close()
    assert projector_entries(run) == [10, 20]
    # killed while the values of step 30 are being written
    tracker = open_tracker(run, cfg, vocab=vocab, resume_step=20)
    try:
        w = embeddings_at(vocab, 30, 40)
        with monkeypatch.context() as m:
            m.setattr(np, "savetxt", killed)
            with pytest.raises(KeyboardInterrupt):
                tracker.log_checkpoint(30, w, w * 0.5)
    finally:
        tracker.close()
    assert projector_entries(run) == [10, 20]
    # the next resume writes step 30 once, completely
    simulate(run, steps=40, ckpt_every=10, start=20, cfg=cfg)
    assert projector_entries(run) == [10, 20, 30, 40]
