"""The ``checkpoint`` index file: its text, hand edits, and a damaged or unreadable index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from embedlab.checkpoint import CheckpointError, CheckpointManager, read_index
from embedlab.checkpoint.format import committed_folders
from embedlab.checkpoint.index import Index

from .sample import save_sample


def test_the_index_text_round_trips_and_tolerates_hand_edits() -> None:
    index = Index(latest=30, kept=(30, 20), archive=(10,), best=20, best_metric="loss",
                  best_value=0.25, best_mode="min")
    text = index.render()
    assert text.splitlines()[2:] == ["latest: ckpt-00000030", "kept: ckpt-00000030",
                                     "kept: ckpt-00000020", "best: ckpt-00000020 loss=0.25 (min)",
                                     "archive: ckpt-00000010"]
    assert Index.parse(text) == index
    edited = text + "\nkept: my-notes\nlatest:\n  # a comment\nunknown: ckpt-00000099\n"
    assert Index.parse(edited) == index
    assert index.ours() == {10, 20, 30}
    assert index.roles(20) == ("kept", "best") and index.roles(5) == ()


@pytest.mark.parametrize("metric", ["similarity/a=b", "similarity/word sim", "analogy"])
def test_a_best_metric_named_with_equals_signs_or_spaces_round_trips(metric: str) -> None:
    """The name of a similarity file's stem may hold "=" and spaces: read back as another
    metric, the index's best would be chosen anew (every kept checkpoint verified) at every
    save."""
    index = Index(latest=30, kept=(30,), best=30, best_metric=metric, best_value=0.5,
                  best_mode="max")
    assert Index.parse(index.render()) == index
    # an index written without the mode (by hand) still names its metric and value
    bare = index.render().replace(" (max)", "")
    assert Index.parse(bare) == Index(30, (30,), (), 30, metric, 0.5, None)


def test_a_garbled_index_is_refused_up_front_and_deleting_it_is_the_fix(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=2)
    save_sample(m, 1, loss=0.5)  # the best, outside the two kept
    save_sample(m, 2, loss=0.9)
    save_sample(m, 3, loss=0.8)
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe garbage \x80")
    m = CheckpointManager(tmp_path, keep=2)
    # the trainer asks before it writes anything; the fix is "delete it", not "permissions"
    with pytest.raises(CheckpointError, match=re.escape(
            f"{tmp_path / 'checkpoint'} is damaged (not UTF-8 text); delete it (it is rebuilt "
            "from the checkpoint folders at the next save)")):
        m.check_index()
    (tmp_path / "checkpoint").unlink()
    m.check_index()
    m.protect(3)
    save_sample(m, 4, loss=0.7)
    # the rebuilt index keeps the best checkpoint (from its state.json's metrics), so the
    # deletion did not cost the run its best
    index = read_index(tmp_path)
    assert index.latest == 4 and index.best == 1 and index.best_value == 0.5
    assert sorted(committed_folders(tmp_path / "checkpoints")) == [1, 3, 4]
    save_sample(m, 5, loss=0.9)
    assert sorted(committed_folders(tmp_path / "checkpoints")) == [1, 4, 5]


def test_an_unreadable_index_still_names_permissions(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.checkpoint import index as ckpt_index

    save_sample(CheckpointManager(tmp_path), 1)
    real = ckpt_index.read_record

    def denied(path: Path, *args: object, **kwargs: object) -> bytes:
        if path.name == "checkpoint":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_index, "read_record", denied)
    with pytest.raises(CheckpointError, match=r"cannot read .*checkpoint \(Permission denied\); "
                                              "fix its permissions or delete it"):
        CheckpointManager(tmp_path).check_index()
