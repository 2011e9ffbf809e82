"""Old home of the engine backend; it lives in `popsnn.backends.engine` now."""

from .backends.engine import (  # noqa: F401
    EngineBackend,
    NetworkDoesNotFit,
    SpikeBufferOverflow,
    codelets_path,
    ipu_available,
)

__all__ = [
    "EngineBackend",
    "SpikeBufferOverflow",
    "NetworkDoesNotFit",
    "ipu_available",
    "codelets_path",
]
