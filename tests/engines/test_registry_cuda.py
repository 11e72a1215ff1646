"""The cuda engine's place in the registry, on machines without a GPU: what ``--engine auto``
picks and says, ``--device`` as a spelling of ``--engine``, and the refusals naming the fix. A GPU
is played by replacing the availability functions of :mod:`embedlab.engines.cuda`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from embedlab import engines
from embedlab.config import ModelConfig, OptimConfig, TrainConfig
from embedlab.engines import (
    CPU_ENGINES,
    CPU_REQUEST,
    ENGINES,
    auto_choice,
    choose_engine,
    cpu_choice,
    engine_module,
    install_hint,
    requested_engine,
    training_device,
    unavailable_reason,
)
from embedlab.engines import cuda as cuda_module
from embedlab.errors import InputError, messages_for

GPU = "NVIDIA H100 80GB HBM3"
NO_DEVICE = "no CUDA device was found"


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with a CUDA GPU the cuda engine can train on."""
    monkeypatch.setattr(cuda_module, "gpu_present", lambda: True)
    monkeypatch.setattr(cuda_module, "interpreted", lambda: False)
    monkeypatch.setattr(cuda_module, "unavailable_reason", lambda: None)
    monkeypatch.setattr(cuda_module, "device_name", lambda: GPU)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without one (also where the tests run on a GPU machine)."""
    monkeypatch.setattr(cuda_module, "gpu_present", lambda: False)
    monkeypatch.setattr(cuda_module, "interpreted", lambda: False)
    monkeypatch.setattr(cuda_module, "unavailable_reason", lambda: NO_DEVICE)


def test_the_cuda_engine_is_registered_beside_the_cpu_engines() -> None:
    assert "cuda" in ENGINES and "cuda" not in CPU_ENGINES
    assert set(CPU_ENGINES) < set(ENGINES)


def test_availability_and_its_fix_come_from_the_cuda_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_module, "unavailable_reason", lambda: "triton is not installed")
    assert unavailable_reason("cuda") == "triton is not installed"
    for reason in ("triton is not installed", "torch is not installed", NO_DEVICE):
        assert install_hint("cuda", reason) == cuda_module.install_hint(reason)


def test_the_cuda_engine_without_torch_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as where it is missing
    with pytest.raises(InputError, match=r"^--engine cuda needs PyTorch, which is not installed; "
                                         r"install it with pip install 'embedlab\[torch\]'$"):
        engine_module("cuda")


@pytest.mark.skipif(cuda_module.gpu_present(), reason="a machine without an NVIDIA driver")
def test_auto_without_a_gpu_imports_no_torch() -> None:
    code = ("import sys\n"
            "from embedlab.config import TrainConfig\n"
            "from embedlab.engines import auto_choice\n"
            "print(auto_choice(), TrainConfig(threads=1).resolve().engine, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == [cpu_choice(), cpu_choice(), "False"]
    assert out.stderr == ""


def test_auto_asks_for_the_driver_before_anything_that_imports_torch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def imports_torch() -> str | None:
        raise AssertionError("asked for the cuda engine's availability without a driver")

    monkeypatch.setattr(cuda_module, "gpu_present", lambda: False)
    monkeypatch.setattr(cuda_module, "unavailable_reason", imports_torch)
    assert auto_choice() == cpu_choice() == "native"


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("loss", ["neg", "nce"])
def test_auto_trains_on_a_gpu_and_says_so(loss: str, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = TrainConfig(threads=1, model=ModelConfig(loss=loss))
    assert auto_choice(loss=loss) == "cuda" and cfg.engine_for() == "cuda"
    assert capsys.readouterr().err == ""  # asking is silent
    assert cfg.resolve().engine == "cuda"
    assert capsys.readouterr().err == (f"embedlab: note: training on {GPU} with the cuda engine "
                                       "(--device cpu trains on the CPU)\n")
    assert cfg.resolve(say=False).engine == "cuda"
    assert capsys.readouterr().err == ""
    with messages_for("python"):
        choose_engine("auto", loss=loss)
    assert "(device='cpu' trains on the CPU)" in capsys.readouterr().err


@pytest.mark.parametrize("loss", ["neg", "nce"])
def test_auto_trains_micro_batches_on_a_gpu_and_else_with_torch(
        loss: str, gpu: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = TrainConfig(threads=1, model=ModelConfig(loss=loss), optim=OptimConfig(micro_batches=4))
    assert cfg.engine_for() == "cuda" and cfg.resolve(say=False).engine == "cuda"
    assert cfg.resolve().engine == "cuda"
    assert "with the cuda engine" in capsys.readouterr().err
    monkeypatch.setattr(cuda_module, "gpu_present", lambda: False)  # no GPU: the CPU's torch
    assert cfg.engine_for() == "torch" and cfg.resolve().engine == "torch"
    assert capsys.readouterr().err == ""
    # --device cpu: the torch engine too, whether or not the native kernel builds here (the
    # processes of a run compare the engine, and one machine may have no compiler)
    cpu = TrainConfig(threads=1, engine="cpu", model=ModelConfig(loss=loss),
                      optim=OptimConfig(micro_batches=4))
    assert cpu.engine_for() == "torch" == cpu.resolve(say=False).engine


@pytest.mark.usefixtures("gpu")
def test_auto_trains_hierarchical_softmax_on_the_cpu_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert auto_choice(loss="hs") == "native"
    assert choose_engine("auto", loss="hs") == "native"
    assert capsys.readouterr().err == ("embedlab: note: --loss hs trains on the CPU (the cuda "
                                       "engine trains negative sampling and NCE)\n")


def test_auto_never_picks_the_interpreter(gpu: None, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cuda_module, "interpreted", lambda: True)
    assert auto_choice() == "native" and choose_engine("auto", loss="neg") == "native"
    monkeypatch.setattr(cuda_module, "interpreted", lambda: False)
    monkeypatch.setattr(cuda_module, "unavailable_reason", lambda: "triton is not installed")
    assert choose_engine("auto", loss="neg") == "native"  # a GPU the engine cannot use
    assert capsys.readouterr().err == ""
    # asked for by name, the interpreter trains (the tests of the cuda engine)
    monkeypatch.setattr(cuda_module, "unavailable_reason", lambda: None)
    assert choose_engine("cuda", loss="neg") == "cuda"


@pytest.mark.parametrize(("engine", "device", "wanted"), [
    (None, None, None), ("native", None, "native"), ("cuda", None, "cuda"),
    (None, "auto", None), ("torch", "auto", "torch"), ("auto", "auto", "auto"),
    (None, "cuda", "cuda"), ("auto", "cuda", "cuda"), ("cuda", "cuda", "cuda"),
    (None, "cpu", CPU_REQUEST), ("auto", "cpu", CPU_REQUEST), ("native", "cpu", "native"),
    ("torch", "cpu", "torch"),
])
def test_device_is_a_spelling_of_engine(engine: str | None, device: str | None,
                                        wanted: str | None) -> None:
    assert requested_engine(engine, device) == wanted


@pytest.mark.parametrize(("engine", "device"), [("native", "cuda"), ("torch", "cuda"),
                                                ("cuda", "cpu")])
def test_device_and_engine_that_contradict_each_other_are_refused(engine: str,
                                                                  device: str) -> None:
    with pytest.raises(InputError) as e:
        requested_engine(engine, device)
    assert str(e.value) == (f"--device {device} and --engine {engine} contradict each other; "
                            "pass one of them (--device cuda is --engine cuda, --device cpu is "
                            "--engine native or --engine torch)")
    with messages_for("python"), pytest.raises(InputError) as e:
        requested_engine(engine, device)
    assert str(e.value).startswith(f"device={device!r} and engine={engine!r} contradict each "
                                   "other; pass one of them (device='cuda' is engine='cuda', ")


def test_an_unknown_device_and_engine_cpu_are_refused() -> None:
    with pytest.raises(InputError, match=r"^--device must be auto, cpu or cuda, got 'gpu'$"):
        requested_engine(None, "gpu")
    with messages_for("python"), pytest.raises(InputError) as e:
        requested_engine("cpu", None)
    assert str(e.value) == ("engine='cpu' is not an engine; pass device='cpu' (native where it "
                            "builds, else torch)")


@pytest.mark.usefixtures("no_gpu")
def test_the_cuda_engine_without_a_gpu_is_refused_naming_the_fix() -> None:
    fix = cuda_module.install_hint(NO_DEVICE)
    with pytest.raises(InputError) as e:
        TrainConfig(threads=1, engine=requested_engine(None, "cuda")).resolve()
    assert str(e.value) == f"--engine cuda is unavailable: {NO_DEVICE}; {fix}"
    with messages_for("python"), pytest.raises(InputError) as e:
        choose_engine("cuda", loss="neg")
    assert str(e.value).startswith(f"engine='cuda' is unavailable: {NO_DEVICE}; ")


def test_device_cpu_is_what_auto_picks_without_a_gpu(
        gpu: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert choose_engine(CPU_REQUEST, loss="neg") == "native"
    assert TrainConfig(threads=1, engine=CPU_REQUEST).engine_for() == "native"
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(engines.native, "unavailable_reason", lambda: "no C compiler")
    assert choose_engine(CPU_REQUEST, loss="neg") == "torch"
    assert capsys.readouterr().err == ("embedlab: note: the native engine is unavailable (no C "
                                       "compiler); training with the slower torch engine\n")


@pytest.mark.usefixtures("gpu")
def test_the_device_an_engine_trains_on() -> None:
    assert [training_device(name) for name in ENGINES] == [
        GPU if name == "cuda" else "cpu" for name in ENGINES]
