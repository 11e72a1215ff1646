"""TrainState: what a checkpoint's state.json holds, and that it goes in and out unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.data.pairs import Cursor
from embedlab.training.state import TRAIN_STATE, LogWindow, TrainState

from .small_runs import make_cfg, replace_clock, run_train

counts = st.integers(min_value=0, max_value=2**63 - 1)
seconds = st.floats(min_value=0.0, max_value=1e9, allow_nan=False)
sums = st.floats(allow_nan=False, allow_infinity=False)


@st.composite
def saved_states(draw: st.DrawFn) -> dict[str, Any]:
    """A state.json as the loop writes it (step and metrics as the checkpoint manager adds)."""
    cursor = {"epoch": draw(counts), "chunk": draw(counts), "batch": draw(counts)}
    return {"cursor": cursor, "words_seen": draw(counts), "epoch": cursor["epoch"],
            "window": {"loss": draw(sums), "pairs": draw(counts), "words": draw(counts)},
            "last_loss": draw(st.none() | sums), "train_seconds": draw(seconds),
            "finished": draw(st.booleans()), "window_seconds": draw(seconds),
            "wall_seconds": draw(seconds), "step": draw(counts),
            "metrics": draw(st.dictionaries(st.text(min_size=1), sums, max_size=4)),
            "corpus": draw(st.none() | st.text(alphabet="0123456789abcdef", min_size=64,
                                               max_size=64)),
            "vocabulary": draw(st.none() | st.text(alphabet="0123456789abcdef", min_size=64,
                                                   max_size=64)),
            "settings": draw(st.none() | st.dictionaries(st.text(min_size=1), sums,
                                                         max_size=4).map(json.dumps))}


@settings(deadline=None)  # timing varies on a loaded machine; the property does not
@given(saved_states())
def test_a_saved_state_loads_and_saves_unchanged(saved: dict[str, Any]) -> None:
    assert set(TRAIN_STATE) <= set(saved)
    state = TrainState.from_state_dict(saved)
    again = state.state_dict()
    assert again == saved
    assert json.dumps(again, sort_keys=True) == json.dumps(saved, sort_keys=True)
    assert list(again) == list(TrainState().state_dict())  # the same keys whatever the values


def test_a_state_of_an_older_version_loads_with_defaults() -> None:
    # state.json of versions before the window's seconds and the wall time were recorded
    state = TrainState.from_state_dict({"step": 7, "metrics": {}, "window": None,
                                        "cursor": {"epoch": 1, "chunk": 0, "batch": 3}})
    assert (state.step, state.cursor, state.words_seen) == (7, Cursor(1, 0, 3), 0)
    assert state.window.sums() == {"loss": 0.0, "pairs": 0, "words": 0}
    assert (state.window.elapsed(), state.wall_seconds, state.last_loss) == (0.0, 0.0, None)
    assert TrainState.from_state_dict({"step": 0}).cursor == Cursor()


def test_a_new_state_is_a_new_runs() -> None:
    saved = TrainState().state_dict()
    assert saved["step"] == 0 and saved["cursor"] == {"epoch": 0, "chunk": 0, "batch": 0}
    assert saved["window"] == {"loss": 0.0, "pairs": 0, "words": 0}
    assert saved["metrics"] == {} and not saved["finished"]


def test_a_resumed_window_counts_its_earlier_seconds_from_its_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    replace_clock(monkeypatch, perf_counter=lambda: now[0])
    window = LogWindow({"loss": 1.5, "pairs": 3, "words": 9}, seconds=4.0)
    assert window.elapsed() == 4.0  # not started: what the earlier process ran
    now[0] = 250.0
    window.start()
    now[0] = 252.0
    assert window.elapsed() == 6.0
    window.pause(1.0)  # a save's second is not training
    assert window.elapsed() == 5.0
    assert window.mean_loss() == 0.5
    assert LogWindow.opening_now().elapsed() == 0.0


def test_state_holds_the_data_position(corpus: Path, tmp_path: Path) -> None:
    run_train(make_cfg(corpus, max_steps=9), tmp_path / "r")
    tensors, state = load_checkpoint(find_checkpoint(tmp_path / "r"))
    assert state["step"] == 9 and state["words_seen"] > 0
    assert set(state["cursor"]) == {"epoch", "chunk", "batch"} and state["epoch"] == 0
    assert set(tensors) == {"input_embeddings", "output_embeddings"}
    assert tensors["input_embeddings"].dtype == np.float32
    assert TrainState.from_state_dict(state).state_dict() == state
