"""Reading a figure's data back in tests: Plotly sends arrays as typed arrays {"dtype", "bdata", "shape"}."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

_DTYPES = {"i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16, "i4": np.int32, "u4": np.uint32}
_DTYPES |= {"f4": np.float32, "f8": np.float64}


def decode_typed_array(value: Any) -> np.ndarray:
    """A value of a figure's JSON as an array: a Plotly typed array or a plain list."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=_DTYPES[value["dtype"]])
        shape = value.get("shape")
        if shape:
            arr = arr.reshape([int(s) for s in str(shape).split(",")])
        return arr
    return np.asarray(value)
