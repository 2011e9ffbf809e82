"""Old home of the engine backend; it lives in `popsnn.backends.engine` now."""

from .backends.engine import (  # noqa: F401
    EngineBackend,
    NetworkDoesNotFit,
    SpikeBufferOverflow,
    codelets_path,
)

__all__ = [
    "EngineBackend",
    "SpikeBufferOverflow",
    "NetworkDoesNotFit",
    "codelets_path",
]
