"""KServe peer for the Skiff benchmark: an ONNX model served by kserve's own
Python ModelServer (V1 + V2 REST), with onnxruntime on the CPU.

    python kserve_onnx.py --model_name iris --model_dir examples/models/iris \
        --http_port 8080 [--enable_grpc false | --grpc_port 8081]

Every kserve ModelServer flag (--workers, --max_asyncio_workers, ...) is
accepted and keeps kserve's default, so this is kserve as users run it.

One deviation: kserve hard-codes its REST listener to 0.0.0.0 and its gRPC
listener to [::]. Benchmarks here must only listen on loopback, so the uvicorn
config and the gRPC server's listen address are re-pointed to $SKIFF_PEER_HOST
(default 127.0.0.1) before the servers bind. Nothing else about request
handling changes. (run_kserve.sh disables gRPC unless asked for it.)
"""

import argparse
import os
import sys
import uuid

import numpy as np
import onnxruntime as ort

import kserve
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.errors import InvalidInput
from kserve.protocol.grpc import server as _grpc_server
from kserve.protocol.rest import server as _rest_server

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


def _bind_loopback():
    host = os.environ.get("SKIFF_PEER_HOST", "127.0.0.1")
    original_init = _rest_server.RESTServer.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.config.host = host

    _rest_server.RESTServer.__init__ = init

    # GRPCServer.start calls aio.server(...) then add_insecure_port("[::]:PORT").
    original_server = _grpc_server.aio.server

    def server(*args, **kwargs):
        grpc_server = original_server(*args, **kwargs)
        original_add = grpc_server.add_insecure_port

        def add_insecure_port(address):
            return original_add(address.replace("[::]", host, 1))

        grpc_server.add_insecure_port = add_insecure_port
        return grpc_server

    _grpc_server.aio.server = server


def _find_onnx(model_dir: str) -> str:
    if os.path.isfile(model_dir):
        return model_dir
    preferred = os.path.join(model_dir, "model.onnx")
    if os.path.isfile(preferred):
        return preferred
    found = sorted(f for f in os.listdir(model_dir) if f.endswith(".onnx"))
    if len(found) != 1:
        raise RuntimeError(f"expected one .onnx file in {model_dir}, found {found}")
    return os.path.join(model_dir, found[0])


class OnnxModel(Model):
    def __init__(self, name: str, model_dir: str):
        super().__init__(name)
        self.model_dir = model_dir
        self.session = None
        self.input_dtypes = {}
        self.output_names = []

    def load(self) -> bool:
        path = _find_onnx(self.model_dir)
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.input_dtypes = {
            i.name: _ONNX_NUMPY.get(i.type) for i in self.session.get_inputs()
        }
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.ready = True
        return self.ready

    def predict(self, payload: InferRequest, headers=None) -> InferResponse:
        if not isinstance(payload, InferRequest):
            raise InvalidInput("this peer only serves the V2 (Open Inference) protocol")
        feeds = {}
        for infer_input in payload.inputs:
            if infer_input.name not in self.input_dtypes:
                raise InvalidInput(f"unknown input '{infer_input.name}'")
            array = infer_input.as_numpy()
            want = self.input_dtypes[infer_input.name]
            if want is not None and array.dtype != want:
                array = array.astype(want)
            feeds[infer_input.name] = array
        try:
            results = self.session.run(None, feeds)
        except Exception as e:  # onnxruntime raises its own types for bad feeds
            raise InvalidInput(f"onnxruntime: {e}")

        outputs = []
        for name, array in zip(self.output_names, results):
            array = np.asarray(array)
            datatype = _V2_DATATYPE.get(array.dtype)
            if datatype is None:
                raise InvalidInput(f"output '{name}' has unsupported dtype {array.dtype}")
            out = InferOutput(name=name, shape=list(array.shape), datatype=datatype)
            out.set_data_from_numpy(array, binary_data=False)
            outputs.append(out)
        return InferResponse(
            response_id=payload.id or str(uuid.uuid4()),
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=payload.use_binary_outputs,
            requested_outputs=payload.request_outputs,
        )


def main():
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument(
        "--model_dir", required=True, help="folder holding model.onnx, or the .onnx file"
    )
    args, _ = parser.parse_known_args()

    _bind_loopback()
    model = OnnxModel(args.model_name, args.model_dir)
    model.load()
    ModelServer().start([model])


if __name__ == "__main__":
    sys.exit(main())
