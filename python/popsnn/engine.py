"""Old home of the engine backend; it lives in `popsnn.backends.engine` now."""
from .backends.engine import (EngineBackend, NetworkDoesNotFit, SpikeBufferOverflow,  # noqa: F401
                              codelets_path, ipu_available)

__all__ = ["EngineBackend", "SpikeBufferOverflow", "NetworkDoesNotFit", "ipu_available",
           "codelets_path"]
