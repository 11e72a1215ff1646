"""The engine registry and interface: engines built by name or for a config, their state as
host arrays under the checkpoint's names, and the two CPU engines' agreement (the cuda engine's
place in the registry: test_registry_cuda.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embedlab.config import TrainConfig
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, BatchStream, Cursor
from embedlab.engines import (
    CPU_ENGINES,
    auto_choice,
    build_engine,
    engine_for_config,
    engine_module,
    unavailable_reason,
)
from embedlab.engines.base import Engine
from embedlab.engines.huffman import build_tree
from embedlab.engines.params import fresh_params, init_params
from embedlab.engines.step import StepConfig, step_config
from embedlab.errors import InputError
from embedlab.seeding import mt19937_rng

V, ROWS = 60, 32


def _batches(cfg: TrainConfig) -> list[Batch]:
    rng = np.random.default_rng(3)
    ids = rng.integers(0, V, size=1200).astype(np.uint32)
    counts = np.bincount(ids, minlength=V) + 1
    plan = step_config(cfg)
    stream = BatchStream(ids, np.array([400, 401, 1200]), None, NoiseDistribution(counts),
                         window=cfg.model.window, batch_size=cfg.optim.batch_size,
                         group=plan.step.group, noise_per_group=plan.noise_per_group, seed=5,
                         epochs=1, chunk_tokens=600, pad_to=plan.pad_to)
    return list(stream.iterate(Cursor()))


def _cfg(engine: str, loss: str = "neg", model: str = "skipgram") -> TrainConfig:
    return TrainConfig.from_dict({"engine": engine, "threads": 1, "model": {
        "dim": 8, "window": 3, "loss": loss, "model": model}, "optim": {"batch_size": ROWS}})


COUNTS = np.arange(V, 0, -1)


def _noise() -> NoiseDistribution:
    return NoiseDistribution(COUNTS)


def _rows(cfg: TrainConfig) -> int:
    return _batches(cfg)[0].centers.shape[0]


@pytest.mark.parametrize("name", CPU_ENGINES)
def test_an_engine_is_built_by_name(name: str) -> None:
    params = init_params(V, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    engine: Engine = build_engine(name, StepConfig("skipgram", "neg", 3, 5, 16), params, None,
                                  ROWS)
    assert engine.name == name and engine.input_vectors is params.w_in
    assert engine.output_vectors is params.w_out
    state = engine.state_dict()
    assert list(state) == ["input_embeddings", "output_embeddings"]
    assert state["input_embeddings"] is params.w_in  # host arrays: no copy


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="engine must be one of"):
        engine_module("tpu")


@pytest.mark.parametrize("name", CPU_ENGINES)
@pytest.mark.parametrize("loss", ["neg", "nce", "hs"])
def test_a_state_loaded_into_a_fresh_engine_trains_on_identically(name: str, loss: str) -> None:
    cfg = _cfg(name, loss)
    batches = _batches(cfg)
    a = engine_for_config(cfg, _noise(), batches[0].centers.shape[0], counts=COUNTS)
    for batch in batches[:3]:
        a.step(batch, 0.05)
    saved = {k: v.copy() for k, v in a.state_dict().items()}
    other = TrainConfig.from_dict({**cfg.to_dict(), "seed": 9})  # another start
    b = engine_for_config(other, _noise(), batches[0].centers.shape[0], counts=COUNTS)
    assert not np.array_equal(b.input_vectors, a.input_vectors)
    b.load_state_dict(saved)
    for key, value in b.state_dict().items():
        assert value.tobytes() == saved[key].tobytes()
    losses = [(a.step(batch, 0.04), b.step(batch, 0.04)) for batch in batches[3:6]]
    assert all(x == y for x, y in losses)
    assert a.input_vectors.tobytes() == b.input_vectors.tobytes()


def test_load_state_dict_refuses_another_shape_or_a_missing_tensor() -> None:
    cfg = _cfg("native")
    engine = engine_for_config(cfg, _noise(), _rows(cfg))
    state = {k: v.copy() for k, v in engine.state_dict().items()}
    with pytest.raises(ValueError, match="input_embeddings has shape"):
        engine.load_state_dict({**state, "input_embeddings": state["input_embeddings"][:-1]})
    del state["output_embeddings"]
    with pytest.raises(ValueError, match="the state has no output_embeddings"):
        engine.load_state_dict(state)


def test_an_engine_for_a_config_starts_fresh_or_takes_a_checkpoints_arrays() -> None:
    cfg = _cfg("native", "nce")
    fresh = engine_for_config(cfg, _noise(), _rows(cfg))
    want = fresh_params(cfg.model, V, cfg.seed)
    assert fresh.input_vectors.tobytes() == want.w_in.tobytes()
    assert list(fresh.state_dict()) == ["input_embeddings", "output_embeddings", "output_bias"]
    tensors = want.tensors()
    resumed = engine_for_config(cfg, _noise(), _rows(cfg), tensors=tensors)
    assert all(resumed.state_dict()[k] is v for k, v in tensors.items())  # no second copy


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
@pytest.mark.parametrize("loss", ["neg", "nce", "hs"])
def test_the_engines_agree_to_float32_rounding(model: str, loss: str) -> None:
    engines = {name: engine_for_config(_cfg(name, loss, model), _noise(),
                                       _rows(_cfg(name, loss, model)), counts=COUNTS)
               for name in CPU_ENGINES}
    batches = _batches(_cfg("native", loss, model))
    losses = {name: [e.step(b, 0.05) for b in batches] for name, e in engines.items()}
    np.testing.assert_allclose(losses["native"], losses["torch"], rtol=2e-5)
    native, torch = engines["native"].state_dict(), engines["torch"].state_dict()
    for key in native:
        np.testing.assert_allclose(native[key], torch[key], rtol=1e-4, atol=1e-5)


def test_auto_picks_native_where_its_kernel_builds() -> None:
    assert unavailable_reason("native") is None and auto_choice() == "native"
    assert unavailable_reason("torch") is None


def test_the_torch_engine_without_torch_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as where it is missing
    with pytest.raises(InputError, match=r"--engine torch needs PyTorch, which is not installed; "
                                         r"install it with pip install 'embedlab\[torch\]'"):
        engine_module("torch")


def test_choosing_the_native_engine_imports_no_torch() -> None:
    code = ("import sys\n"
            "import numpy as np\n"
            "from embedlab.config import TrainConfig\n"
            "from embedlab.data.noise import NoiseDistribution\n"
            "from embedlab.engines import engine_for_config\n"
            "cfg = TrainConfig(engine='native').resolve()\n"
            "engine = engine_for_config(cfg, NoiseDistribution(np.arange(9, 0, -1)), 32)\n"
            "print(engine.name, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["native", "False"]


def _imports(path: Path) -> set[str]:
    """The embedlab modules a source file imports when it runs (anywhere in it: at the top or
    in a function), not those it names for type checking only."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.add(child.module)
                found.update(f"{child.module}.{a.name}" for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m.startswith("embedlab.")}


def test_no_import_cycles_among_the_engines_the_trainer_and_the_config() -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    files = [src / "embedlab" / "config.py", *(src / "embedlab" / "engines").glob("*.py"),
             *(src / "embedlab" / "training").glob("*.py")]
    names = {".".join(f.relative_to(src).with_suffix("").parts).removesuffix(".__init__"): f
             for f in files}
    graph = {name: _imports(f) & set(names) - {name} for name, f in names.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n}))
                   for n in graph[start])

    cycles = [name for name in graph if reaches(name, name, {name})]
    assert cycles == []
    assert "embedlab.engines.native" in graph["embedlab.engines"]  # the registry imports them


@pytest.mark.parametrize("name", CPU_ENGINES)
def test_hierarchical_softmax_builds_its_tree_from_the_counts(name: str) -> None:
    cfg = _cfg(name, "hs")
    engine = engine_for_config(cfg, _noise(), _rows(cfg), counts=COUNTS)
    state = engine.state_dict()
    assert list(state) == ["input_embeddings", "hs_nodes"]
    assert state["hs_nodes"].shape == (V - 1, 8) and engine.output_vectors is state["hs_nodes"]
    with pytest.raises(ValueError, match="needs the vocabulary's counts"):
        engine_for_config(cfg, _noise(), _rows(cfg))
    with pytest.raises(ValueError, match="only it, takes a Huffman tree"):
        build_engine(name, StepConfig("skipgram", "neg", 3, 5, 16), fresh_params(
            cfg.model, V, 1), None, ROWS, tree=build_tree(COUNTS))
