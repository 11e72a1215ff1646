"""The engine interface: what the training loop asks of an engine, whatever computes the step.

An engine owns where the parameters live and trains them one batch at a time. The loop only
calls :meth:`Engine.step`; checkpoints, warm starts and summaries see the parameters as host
NumPy arrays under the checkpoint's tensor names (``input_embeddings``, ``output_embeddings``
and, for NCE, ``output_bias``), whatever memory the engine keeps them in.

Both engines today keep them in host memory (:class:`HostEngine`): the arrays of
:class:`~embedlab.engines.params.Word2VecParams` are the model, so handing them out costs no
copy. An engine that keeps them elsewhere (a GPU) copies them in :meth:`Engine.state_dict` and
:meth:`Engine.load_state_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from embedlab.data.pairs import Batch, BatchStream
    from embedlab.engines.params import Word2VecParams
    from embedlab.engines.step import TrainStep
    from embedlab.engines.stepping import Schedule, StepRunner


class Engine(Protocol):
    """Trains word2vec's parameters one batch at a time."""

    name: ClassVar[str]  # as in --engine

    def step(self, batch: Batch, lr: float) -> float:
        """Train on ``batch`` at learning rate ``lr``; the summed loss over its positives."""
        ...

    def runner(self, stream: BatchStream, schedule: Schedule, model: str) -> StepRunner:
        """What trains this engine from a data position: many steps per call where the engine
        builds its own batches, else :meth:`step` on ``stream``'s batches one by one."""
        ...

    def state_dict(self) -> dict[str, np.ndarray]:
        """The parameters as host arrays under the checkpoint's tensor names."""
        ...

    def load_state_dict(self, tensors: Mapping[str, np.ndarray]) -> None:
        """Set the parameters to ``tensors`` (the names and shapes :meth:`state_dict` gives)."""
        ...

    @property
    def input_vectors(self) -> np.ndarray:
        """(V, D) float32 host array of the input vectors, for evaluation and summaries."""
        ...

    @property
    def output_vectors(self) -> np.ndarray:
        """(V, D) float32 host array of the output vectors, for summaries."""
        ...


class HostEngine:
    """An engine whose parameters are host NumPy arrays, updated in place by ``train_step``.

    :meth:`state_dict` returns those arrays themselves (no copy: a caller that changes them
    changes the model), and :meth:`load_state_dict` copies values into them, so that the
    pointers and tensor views a step holds stay valid.
    """

    name: ClassVar[str]

    def __init__(self, params: Word2VecParams, train_step: TrainStep) -> None:
        self.params = params
        self._step = train_step

    def step(self, batch: Batch, lr: float) -> float:
        return self._step(batch, lr)

    def runner(self, stream: BatchStream, schedule: Schedule, model: str) -> StepRunner:
        """What trains this engine on ``stream``'s batches: one :meth:`step` per batch."""
        from embedlab.engines.stepping import BatchByBatch

        return BatchByBatch(stream, self, schedule, model)

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.params.tensors()

    def load_state_dict(self, tensors: Mapping[str, np.ndarray]) -> None:
        own = self.params.tensors()
        missing = [name for name in own if name not in tensors]
        if missing:
            raise ValueError(f"the state has no {', '.join(missing)}")
        for name, array in own.items():
            source = np.asarray(tensors[name])
            if source.shape != array.shape:
                raise ValueError(f"{name} has shape {source.shape}, the engine's "
                                 f"{array.shape}")
            if source is not array:
                np.copyto(array, source)

    @property
    def input_vectors(self) -> np.ndarray:
        return self.params.w_in

    @property
    def output_vectors(self) -> np.ndarray:
        return self.params.w_out
