"""MLServer peer for the Skiff benchmark: a custom inference runtime that
runs an ONNX model with onnxruntime on the CPU (MLServer ships no ONNX
runtime of its own).

model-settings.json:  "implementation": "runtime.OnnxRuntimeModel",
                      "parameters": {"uri": "/path/to/model.onnx"}
with this folder on PYTHONPATH (run_mlserver.sh does both).
"""

import numpy as np
import onnxruntime as ort

from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput
from mlserver.utils import get_model_uri

# V2 datatype for each numpy dtype an ONNX model can return.
_V2_DATATYPE = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
}

# numpy dtype onnxruntime expects for each ONNX input element type.
_ONNX_NUMPY = {
    "tensor(bool)": np.bool_,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(float16)": np.float16,
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
}


class OnnxRuntimeModel(MLModel):
    async def load(self) -> bool:
        path = await get_model_uri(self.settings, wellknown_filenames=["model.onnx"])
        self._session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self._input_dtypes = {
            i.name: _ONNX_NUMPY.get(i.type) for i in self._session.get_inputs()
        }
        self._output_names = [o.name for o in self._session.get_outputs()]
        self.ready = True
        return self.ready

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {}
        for request_input in payload.inputs:
            if request_input.name not in self._input_dtypes:
                raise InferenceError(f"unknown input '{request_input.name}'")
            array = NumpyCodec.decode_input(request_input)
            want = self._input_dtypes[request_input.name]
            if want is not None and array.dtype != want:
                array = array.astype(want)
            feeds[request_input.name] = array
        try:
            results = self._session.run(None, feeds)
        except Exception as e:  # onnxruntime raises its own types for bad feeds
            raise InferenceError(f"onnxruntime: {e}")

        wanted = None
        if payload.outputs:
            wanted = {o.name for o in payload.outputs}
        outputs = []
        for name, array in zip(self._output_names, results):
            if wanted is not None and name not in wanted:
                continue
            array = np.asarray(array)
            datatype = _V2_DATATYPE.get(array.dtype)
            if datatype is None:
                raise InferenceError(f"output '{name}' has unsupported dtype {array.dtype}")
            outputs.append(
                ResponseOutput(
                    name=name,
                    shape=list(array.shape),
                    datatype=datatype,
                    data=array.ravel().tolist(),
                )
            )
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            outputs=outputs,
        )
