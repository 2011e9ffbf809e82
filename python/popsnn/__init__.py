"""popsnn: sparse spiking neural network training for Graphcore IPUs.

The network description uses snnTorch's names (Leaky, Synaptic, RLeaky, Lapicque, Alpha,
surrogate.fast_sigmoid, ...); the dense NumPy reference in `popsnn.reference`
is the oracle every engine is checked against.
"""

from . import encoders, losses, optim, precision, reference, regularizers, sparse, surrogate
from . import layers as _layers
from .conv import AvgPool2d, Conv2d, Flatten, MaxPool2d
from .layers import *  # noqa: F403  (the layer classes: layers.__all__)
from .model import Model
from .nir_interop import export_to_nir, import_from_nir

__version__ = "0.1.0"

__all__ = [
    "AvgPool2d",
    "Conv2d",
    "Flatten",
    "MaxPool2d",
    *_layers.__all__,
    "encoders",
    "losses",
    "optim",
    "precision",
    "reference",
    "regularizers",
    "sparse",
    "surrogate",
    "Model",
    "export_to_nir",
    "import_from_nir",
    "__version__",
]
