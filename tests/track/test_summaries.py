"""The tracker: what lands in the event files and metrics.jsonl, resume, null TensorBoard."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from embedlab.track.summaries import (
    METRICS_FILE,
    EventWriter,
    JsonlSink,
    default_probes,
    event_files,
    float64_moments,
    histogram_summary,
    hparam_values,
    hparams_summaries,
    nearest_neighbours,
    neighbours_markdown,
    read_metrics,
    scalar_summary,
    text_summary,
    truncate_metrics,
)

from .fakerun import (
    CLUSTERS,
    add_old_experiment_summary,
    embeddings_at,
    fake_vocab,
    make_config,
    simulate,
)

TRAIN_TAGS = ["train/loss", "train/lr", "train/words_per_sec", "train/pairs_per_sec",
              "train/progress"]


def load_events(run: Path) -> EventAccumulator:
    ea = EventAccumulator(str(run), size_guidance={"images": 0, "histograms": 0, "tensors": 0,
                                                   "scalars": 0})
    ea.Reload()
    return ea


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fake run (50 steps, checkpoints at 25 and 50) shared by the read-only tests."""
    run = tmp_path_factory.mktemp("fresh") / "run"
    simulate(run, steps=50, ckpt_every=25)
    return run


def test_fresh_run_writes_every_kind_of_summary(fresh_run: Path) -> None:
    run = fresh_run
    ea = load_events(run)
    tags = ea.Tags()
    assert set(TRAIN_TAGS) | {"eval/analogy", "final/loss", "final/eval/analogy"} \
        <= set(tags["scalars"])
    assert [e.step for e in ea.Scalars("train/loss")] == list(range(5, 51, 5))
    assert sorted(tags["histograms"]) == ["embeddings/input", "embeddings/input_norm",
                                         "embeddings/output", "embeddings/output_norm"]
    assert [e.step for e in ea.Histograms("embeddings/input_norm")] == [25, 50]
    assert [e.step for e in ea.Images("embeddings/pca")] == [25, 50]
    png = ea.Images("embeddings/pca")[-1]
    assert png.width >= 600 and png.encoded_image_string[:4] == b"\x89PNG"
    # the summary's size is the encoded image's (IHDR: width, height at bytes 16-24)
    ihdr = png.encoded_image_string[16:24]
    assert (png.width, png.height) == (int.from_bytes(ihdr[:4], "big"),
                                       int.from_bytes(ihdr[4:], "big"))
    text = ea.Tensors("neighbours/text_summary")
    assert [e.step for e in text] == [25, 50]
    # no sub-folders (add_hparams' pitfall): the only folder is the projector's step folder
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == ["00050"]


def test_every_scalar_is_in_metrics_jsonl(fresh_run: Path) -> None:
    run = fresh_run
    ea = load_events(run)
    rows = read_metrics(run / METRICS_FILE)
    for tag in ea.Tags()["scalars"]:
        from_tb = [(e.step, e.value) for e in ea.Scalars(tag)]
        from_json = [(r["step"], r[tag]) for r in rows if tag in r]
        assert [s for s, _ in from_tb] == [s for s, _ in from_json], tag
        np.testing.assert_allclose([v for _, v in from_tb], [v for _, v in from_json],
                                   rtol=1e-6)


def test_hparams_are_in_the_runs_own_event_file(fresh_run: Path) -> None:
    from tensorboard.plugins.hparams import plugin_data_pb2

    run = fresh_run
    content = load_events(run).PluginTagToContent("hparams")
    # No "_hparams_/experiment": TensorBoard takes the first run's as the whole logdir's, which
    # hid the metrics and differing hyperparameters of every other run from the table.
    assert set(content) == {"_hparams_/session_start_info", "_hparams_/session_end_info"}
    data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hp = data.session_start_info.hparams
    assert hp["optim.lr"].number_value == pytest.approx(0.025)
    assert hp["model.loss"].string_value == "neg"
    assert {"final/loss", "final/eval/analogy"} <= set(load_events(run).Tags()["scalars"])
    assert len(list(run.glob("events.out.tfevents.*"))) == 1


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


def test_resume_continues_curves_without_duplicates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = make_config(projector_each_checkpoint=True)
    # first process: logs up to 35 but its last checkpoint is at 20, then it is killed
    simulate(run, steps=35, ckpt_every=20, cfg=cfg, final=False)
    assert max(r["step"] for r in read_metrics(run / METRICS_FILE)) == 35
    # second process resumes from the checkpoint at step 20 and runs to the end
    simulate(run, steps=50, ckpt_every=20, start=20, cfg=cfg)
    ea = load_events(run)
    assert [e.step for e in ea.Scalars("train/loss")] == list(range(5, 51, 5))
    assert [e.step for e in ea.Scalars("eval/analogy")] == [20, 40]
    assert [e.step for e in ea.Histograms("embeddings/input")] == [20, 40]
    steps = [r["step"] for r in read_metrics(run / METRICS_FILE) if "train/loss" in r]
    assert steps == list(range(5, 51, 5))
    pbtxt = (run / "projector_config.pbtxt").read_text()
    for step in (20, 40, 50):
        assert pbtxt.count(f'tensor_path: "{step:05d}/input_embeddings/tensors.tsv"') == 1


def test_disabled_tensorboard_still_writes_metrics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    simulate(run, steps=20, ckpt_every=10, cfg=make_config(tensorboard=False))
    assert not list(run.glob("events.out.tfevents.*"))
    assert not (run / "projector_config.pbtxt").exists()
    rows = read_metrics(run / METRICS_FILE)
    assert [r["step"] for r in rows if "train/loss" in r] == [5, 10, 15, 20]
    assert rows[-1] == {"step": 20, "final/loss": 0.6, "final/eval/analogy": 0.5}


def test_neighbours_show_the_planted_clusters() -> None:
    vocab = fake_vocab()
    w = embeddings_at(vocab, 50, 50)
    text = neighbours_markdown(vocab.words, w, ["cat", "france"], k=5)
    rows = text.splitlines()
    assert rows[0].startswith("| word |") and len(rows) == 4
    for row, cluster in ((rows[2], CLUSTERS["animal"]), (rows[3], CLUSTERS["country"])):
        names = [cell.split(" (")[0] for cell in row.split("|")[2].strip().split(", ")]
        assert set(names) <= set(cluster), row


def test_nearest_neighbours_are_cosine_neighbours_with_zero_rows() -> None:
    # computed without a normalised copy of the matrix: same result as normalising first,
    # and a zero row (a word never trained) is similarity 0 to everything, not NaN
    w = np.random.default_rng(3).standard_normal((300, 8), dtype=np.float32)
    w[7] = 0.0
    before = w.copy()
    ids = [0, 7, 42]
    got = nearest_neighbours(w, ids, k=5)
    unit = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)
    sims = unit[ids] @ unit.T
    for row, i in enumerate(ids):
        sims[row, i] = -math.inf
        want = np.argsort(-sims[row], kind="stable")[:5]
        assert [j for j, _ in got[row]] == want.tolist() or i == 7
        assert [s for _, s in got[row]] == pytest.approx(sims[row, want].tolist(), abs=1e-6)
    assert all(math.isfinite(s) for row in got for _, s in row)
    assert [s for _, s in got[1]] == [0.0] * 5
    np.testing.assert_array_equal(w, before)  # the trainer's matrix is only read


def test_nearest_neighbours_of_a_tiny_vocabulary() -> None:
    w = np.eye(3, dtype=np.float32)
    assert [[j for j, _ in row] for row in nearest_neighbours(w, [0, 2], k=8)] == [[1, 2],
                                                                                  [0, 1]]
    assert nearest_neighbours(w, [0], k=0) == [[]]


def test_neighbours_without_known_probe_words() -> None:
    vocab = fake_vocab()
    assert "no probe words" in neighbours_markdown(vocab.words,
                                                   np.zeros((len(vocab), 4), np.float32),
                                                   ["zebra"])


@given(st.integers(1, 3000), st.integers(1, 12))
def test_default_probes_are_distinct_frequent_words(v: int, n: int) -> None:
    words = [f"w{i}" for i in range(v)]
    probes = default_probes(words, "w0", n)
    assert len(probes) == min(n, v - 1)
    assert len(set(probes)) == len(probes) and "w0" not in probes
    assert all(int(p[1:]) <= max(11 * 2 ** n, n + 1) for p in probes)


def test_hparam_values_flattens_to_plain_types() -> None:
    out = hparam_values({"a": {"b": None, "c": [1, 2]}, "d": 1.5, "e": True})
    assert out == {"a.b": "none", "a.c": "1,2", "d": 1.5, "e": True}


def test_hparams_of_a_path_that_is_not_utf8_can_be_written() -> None:
    # a --corpus folder named with the byte 0xfe: the hparams summary raised UnicodeEncodeError
    # in the final summaries, after the run had trained
    corpus = os.fsdecode(b"/data/d\xfe")
    out = hparam_values({"data": {"corpus": corpus}, "dim": 8})
    assert out == {"data.corpus": "/data/d\\xfe", "dim": 8}
    for summary in hparams_summaries(out):
        summary.SerializeToString()


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.dictionaries(
    st.sampled_from(TRAIN_TAGS), finite, min_size=1)), max_size=20), st.integers(0, 10_000))
def test_jsonl_round_trip_and_truncate(tmp_path_factory: pytest.TempPathFactory,
                                       rows: list[tuple[int, dict[str, float]]],
                                       resume: int) -> None:
    run = tmp_path_factory.mktemp("run")
    sink = JsonlSink(run)
    for step, values in rows:
        sink.log_scalars(step, values)
    sink.close()
    path = run / METRICS_FILE
    expected = [{"step": s, **v} for s, v in rows]
    assert read_metrics(path) == expected
    truncate_metrics(path, resume)
    assert read_metrics(path) == [r for r in expected if r["step"] <= resume]


def test_jsonl_keeps_non_finite_values_as_strings_and_skips_torn_lines(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    sink.log_scalars(1, {"train/loss": math.nan, "train/lr": math.inf})
    sink.close()
    with (tmp_path / METRICS_FILE).open("a") as f:
        f.write('{"step": 2, "train/lo')  # a SIGKILL in the middle of a write
    assert read_metrics(tmp_path / METRICS_FILE) == [
        {"step": 1, "train/loss": "nan", "train/lr": "inf"}]
    lines = (tmp_path / METRICS_FILE).read_text().splitlines()
    json.loads(lines[0])  # still strict JSON


def test_tracker_counts_its_own_time(tmp_path: Path) -> None:
    from embedlab.track.summaries import open_tracker

    vocab = fake_vocab()
    with open_tracker(tmp_path, make_config(tensorboard=False), vocab=vocab,
                      resume_step=None) as tracker:
        assert tracker.seconds == 0.0
        tracker.log_scalars(1, {"train/loss": 1.0})
        assert tracker.seconds > 0.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=0, max_size=300), st.integers(1, 64))
def test_float64_moments_are_exact_sums_of_the_float32_values(values: list[float],
                                                              chunk: int) -> None:
    a = np.array(values, dtype=np.float32)
    total, squares = float64_moments(a, chunk=chunk)
    exact = [float(v) for v in a]  # float32 values, summed exactly in Python floats
    assert total == pytest.approx(math.fsum(exact), rel=1e-12, abs=1e-9)
    assert squares == pytest.approx(math.fsum(v * v for v in exact), rel=1e-12, abs=1e-9)


# ---- the projector after a resume from an older checkpoint, at any kill point ---------------


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
    from embedlab.track.summaries import open_tracker

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

    from embedlab.track.summaries import open_tracker

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


def _summary_events(run: Path) -> list[tuple[int, str]]:
    """(step, tag) of every summary value in the run's event files, as written."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(run.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            out += [(event.step, v.tag) for v in event.summary.value]
    return out


def test_more_epochs_after_the_end_replace_the_final_metrics_and_hparams(tmp_path: Path) -> None:
    # A finished run given more --epochs resumes from its final checkpoint. Its final/* rows and
    # hparams session stayed, and TensorBoard's HParams tab showed the first session: the old
    # epoch count.
    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25)
    simulate(run, steps=80, ckpt_every=25, start=50)
    events = _summary_events(run)
    assert [s for s, tag in events if tag == "_hparams_/session_start_info"] == [80]
    assert [s for s, tag in events if tag == "final/loss"] == [80]
    assert (50, "embeddings/input") in events  # the checkpoint's own summaries stay
    finals = [r["step"] for r in read_metrics(run / METRICS_FILE) if "final/loss" in r]
    assert finals == [80]
    assert 50 in [r["step"] for r in read_metrics(run / METRICS_FILE) if "eval/analogy" in r]


@pytest.mark.parametrize("leftover", ["events.out.tfevents.1.host.0.tmp", ".events-rewrite-1"])
def test_a_rewrite_killed_midway_does_not_break_the_next_resume(tmp_path: Path,
                                                                 leftover: str) -> None:
    # A SIGKILL while a resume rewrote the event files left NAME.tmp, which the next resume
    # took for an event file and crashed on (a traceback, status "failed").
    run = tmp_path / "run"
    simulate(run, steps=35, ckpt_every=20, final=False)
    (run / leftover).write_bytes(b"half a record")
    simulate(run, steps=50, ckpt_every=20, start=20)
    assert not (run / leftover).exists()
    assert [e.step for e in load_events(run).Scalars("train/loss")] == list(range(5, 51, 5))


def test_a_resume_without_tensorboard_still_drops_the_abandoned_steps(tmp_path: Path) -> None:
    # `--from` an older checkpoint with --no-tensorboard left the abandoned branch's curves
    # (and projector entries) on show beside the new ones
    run = tmp_path / "run"
    simulate(run, steps=35, ckpt_every=10, cfg=make_config(projector_each_checkpoint=True),
             final=False)
    simulate(run, steps=50, ckpt_every=10, start=20, cfg=make_config(tensorboard=False))
    assert max(step for step, _ in _summary_events(run)) == 20
    pbtxt = (run / "projector_config.pbtxt").read_text()
    assert "00030/" not in pbtxt and "00020/" in pbtxt
    assert not (run / "00030").exists()


def test_an_older_runs_experiment_summary_is_removed(tmp_path: Path) -> None:
    # TensorBoard took an old run's experiment summary for the whole logdir's HParams table
    from embedlab.track.summaries import drop_experiment_summaries

    run = tmp_path / "run"
    simulate(run, steps=50, ckpt_every=25)
    add_old_experiment_summary(run, 50)
    before = _summary_events(run)
    assert (50, "_hparams_/experiment") in before
    assert drop_experiment_summaries(run) is True
    after = _summary_events(run)
    assert after == [e for e in before if e[1] != "_hparams_/experiment"]
    assert drop_experiment_summaries(run) is False  # nothing left to do: no rewrite


# ---- no torch: what the summaries write, compared with torch.utils.tensorboard's --------------


def test_the_tracker_and_plots_never_import_torch(tmp_path: Path) -> None:
    # `import torch` alone is ~270 MiB of the training process's resident memory; the tracker
    # writes every kind of summary here, so a lazy import inside a method fails this too
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
import embedlab.track.plots, embedlab.track.summaries
from fakerun import make_config, simulate
run = Path({str(tmp_path / "run")!r})
simulate(run, steps=20, ckpt_every=10, cfg=make_config(projector_each_checkpoint=True))
simulate(run, steps=30, ckpt_every=10, start=10)
assert "torch" not in sys.modules, [m for m in sys.modules if m.startswith("torch")][:5]
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert load_events(tmp_path / "run").Tags()["histograms"]


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


def test_scalar_text_and_hparams_summaries_are_torchs_bytes() -> None:
    ts = pytest.importorskip("torch.utils.tensorboard.summary")
    assert scalar_summary("train/lr", 0.025) == ts.scalar("train/lr", 0.025)
    text = "| word | nearest |\n|---|---|\n| **king** | queen (0.91) — é |"
    assert text_summary("neighbours", text).SerializeToString() == \
        ts.text("neighbours", text).SerializeToString()
    values = hparam_values({**make_config().to_dict(), "flag": True, "missing": None})
    _, start, end = ts.hparams(values, {"final/loss": 1.0})
    assert [_hparams_content(s) for s in hparams_summaries(values)] == \
        [_hparams_content(start), _hparams_content(end)]


def _hparams_content(summary: Any) -> tuple[str, Any, Any]:
    """Tag, metadata and parsed plugin data: the bytes of a map's entries come in no set order."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    (value,) = summary.value
    content = value.metadata.plugin_data.content
    value.metadata.plugin_data.content = b""
    return value.tag, value.metadata, plugin_data_pb2.HParamsPluginData.FromString(content)


def test_histogram_has_torchs_layout_and_buckets() -> None:
    torch = pytest.importorskip("torch")
    ts = pytest.importorskip("torch.utils.tensorboard.summary")
    w = np.random.default_rng(5).standard_normal((3000, 16), dtype=np.float32)
    (got,) = histogram_summary("embeddings/input", w).value
    t = torch.from_numpy(w).reshape(-1)
    lo, hi = float(t.min()), float(t.max())
    total, squares = float64_moments(w)
    (want,) = ts.histogram_raw("embeddings/input", lo, hi, t.numel(), total, squares,
                               torch.linspace(lo, hi, 61)[1:].tolist(),
                               torch.histc(t, bins=60, min=lo, max=hi).tolist()).value
    assert got.tag == want.tag
    g, h = got.histo, want.histo
    assert (g.min, g.max, g.num, g.sum, g.sum_squares) == (h.min, h.max, h.num, h.sum,
                                                           h.sum_squares)
    assert len(g.bucket) == len(h.bucket) == 60 and sum(g.bucket) == g.num
    assert g.bucket_limit[-1] == pytest.approx(hi, rel=1e-6)
    np.testing.assert_allclose(g.bucket_limit, h.bucket_limit, rtol=1e-6, atol=1e-6)
    # values at a bucket edge may land on either side of it, float32 rounding apart
    assert np.abs(np.subtract(g.bucket, h.bucket)).max() <= 1


@pytest.mark.parametrize("value", [0.0, -3.5, 100.0])
def test_histogram_of_one_value_everywhere(value: float) -> None:
    # an untouched matrix (output embeddings start at zero) has max == min
    w = np.full((50, 4), value, dtype=np.float32)
    (got,) = histogram_summary("embeddings/output", w).value
    h = got.histo
    assert (h.min, h.num, h.sum) == (value, 200, 200 * value)
    assert h.max > h.min and sum(h.bucket) == 200 and max(h.bucket) == 200
    assert list(h.bucket_limit) == sorted(h.bucket_limit)


def test_summaries_use_one_blas_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenBLAS's threads fought the training kernel's OpenMP threads for the cores: a 2 ms PCA
    # took up to seconds (see summaries.one_blas_thread)
    from threadpoolctl import threadpool_info

    from embedlab.track import plots

    seen: list[int] = []
    real = plots.project_2d

    def recording(x: np.ndarray, method: plots.Method) -> np.ndarray:
        seen.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
        return real(x, method)

    monkeypatch.setattr(plots, "project_2d", recording)
    simulate(tmp_path / "run", steps=10, ckpt_every=10)
    assert seen and set(seen) == {1}
