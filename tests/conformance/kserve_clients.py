"""KServe's own Python clients (the `kserve` package from PyPI) against a Skiff endpoint.

Checks, over gRPC with `InferenceGRPCClient` (and the service stub KServe ships with it):
ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer with typed
contents and with raw contents; over REST with `InferenceRESTClient`, an inference with
`binary_data=True` inputs and outputs, and one in JSON. Every output is compared with ONNX
Runtime's in Python on the same model file. Errors: an unknown model is NOT_FOUND over gRPC and
404 over REST, an unknown version 404, a malformed tensor INVALID_ARGUMENT.

    python kserve_clients.py --rest http://127.0.0.1:8080 --grpc 127.0.0.1:8080 \
        --models examples/models [--host iris.default.example.com]

`--host` sends that Host (REST) and :authority (gRPC), for a router that routes by host;
`--served-as iris=flower` checks the iris model served under the name `flower` (an
InferenceService's model is named after it).
Prints one line per check and exits non-zero at the first failure.
"""

import argparse
import asyncio
import os
import sys


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest", help="REST base URL")
    parser.add_argument("--grpc", help="gRPC host:port")
    parser.add_argument("--models", required=True, help="folder holding <model>/model.onnx")
    parser.add_argument("--host", help="Host / :authority to send (routing through the router)")
    parser.add_argument("--only", default="iris,mlp,adder", help="comma-separated models to check")
    parser.add_argument("--served-as", default="", help="MODEL=NAME,...: the name a model is served under")
    args = parser.parse_args()
    args.only = args.only.split(",")
    args.served = dict(pair.split("=", 1) for pair in args.served_as.split(",") if pair)
    return args


# `kserve` parses the command line when it is imported (its model server's flags): parse ours
# first and hide them from it.
ARGS = parse_args()
sys.argv = sys.argv[:1]

import grpc  # noqa: E402
import httpx  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig  # noqa: E402
from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb  # noqa: E402
from kserve.protocol.infer_type import RequestedOutput  # noqa: E402

MODELS = {
    # name: inputs as numpy arrays
    "iris": {"input": np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)},
    "mlp": {"input": np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(1, 8)},
    "adder": {
        "a": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": np.array([[10, -20, 30], [-40, 50, -60]], dtype=np.int64),
    },
}
DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def reference(models_dir, name, inputs):
    session = ort.InferenceSession(os.path.join(models_dir, name, "model.onnx"))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def request_inputs(inputs, binary):
    made = []
    for name, array in inputs.items():
        tensor = InferInput(name, list(array.shape), DATATYPES[array.dtype])
        tensor.set_data_from_numpy(array, binary_data=binary)
        made.append(tensor)
    return made


def same(outputs, expected, what):
    check(sorted(outputs) == sorted(expected), f"{what}: outputs {sorted(outputs)}")
    for name, want in expected.items():
        got = outputs[name]
        check(got.shape == want.shape, f"{what}: {name} shape {got.shape}")
        if np.issubdtype(want.dtype, np.floating):
            check(np.allclose(got, want, rtol=1e-6, atol=1e-6), f"{what}: {name} matches ONNX Runtime")
        else:
            check(np.array_equal(got, want), f"{what}: {name} matches ONNX Runtime")


def as_arrays(response):
    return {o.name: o.as_numpy() for o in response.outputs}


async def grpc_checks(args, metadata):
    options = [("grpc.default_authority", args.host)] if args.host else []
    client = InferenceGRPCClient(args.grpc, channel_args=options, retries=2, timeout=30)
    stub = client._client_stub
    check(await client.is_server_live(headers=metadata), "gRPC ServerLive")
    check(await client.is_server_ready(headers=metadata), "gRPC ServerReady")
    for name, inputs in MODELS.items():
        if name not in args.only:
            continue
        served = args.served.get(name, name)
        check(await client.is_model_ready(served, headers=metadata), f"gRPC ModelReady {name}")
        meta = await stub.ModelMetadata(pb.ModelMetadataRequest(name=served), metadata=metadata)
        check(meta.name == served and sorted(i.name for i in meta.inputs) == sorted(inputs),
              f"gRPC ModelMetadata {name}: inputs {[i.name for i in meta.inputs]}")
        expected = reference(args.models, name, inputs)
        for binary, kind in [(False, "typed contents"), (True, "raw contents")]:
            request = InferRequest(model_name=served, infer_inputs=request_inputs(inputs, binary), request_id=f"{name}-{kind}")
            message = request.to_grpc()
            check(bool(message.raw_input_contents) == binary, f"gRPC {name}: the client sent {kind}")
            response = await client.infer(request, headers=metadata)
            check(response.id == f"{name}-{kind}", f"gRPC ModelInfer {name} ({kind}): id echoed")
            same(as_arrays(response), expected, f"gRPC ModelInfer {name} ({kind})")
    server = await stub.ServerMetadata(pb.ServerMetadataRequest(), metadata=metadata)
    check(server.name == "skiff-server" and "binary_tensor_data" in server.extensions,
          f"gRPC ServerMetadata: {server.name} {list(server.extensions)}")
    await grpc_errors(client, stub, metadata, args.served.get("iris", "iris"))
    await client.close()


async def grpc_errors(client, stub, metadata, iris):
    def code_of(error):
        return error.code() if isinstance(error, grpc.aio.AioRpcError) else None

    try:
        await stub.ModelMetadata(pb.ModelMetadataRequest(name="no-such-model"), metadata=metadata)
        check(False, "gRPC unknown model is refused")
    except grpc.aio.AioRpcError as e:
        check(code_of(e) == grpc.StatusCode.NOT_FOUND, f"gRPC unknown model: {e.code()} {e.details()}")
    bad = pb.ModelInferRequest(model_name=iris, inputs=[
        pb.ModelInferRequest.InferInputTensor(name="input", datatype="FP32", shape=[1, 4],
                                              contents=pb.InferTensorContents(fp32_contents=[1.0]))])
    try:
        await stub.ModelInfer(bad, metadata=metadata)
        check(False, "gRPC malformed tensor is refused")
    except grpc.aio.AioRpcError as e:
        check(code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "input 'input'" in e.details(),
              f"gRPC malformed tensor: {e.code()} {e.details()}")


async def rest_checks(args):
    headers = {"host": args.host} if args.host else {}
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=30))
    check(await client.is_server_live(args.rest, headers=headers), "REST server live")
    check(await client.is_server_ready(args.rest, headers=headers), "REST server ready")
    for name, inputs in MODELS.items():
        if name not in args.only:
            continue
        expected = reference(args.models, name, inputs)
        served = args.served.get(name, name)
        check(await client.is_model_ready(args.rest, served, headers=headers), f"REST model ready {name}")
        for binary in (True, False):
            kind = "binary_data=True" if binary else "JSON"
            outputs = [RequestedOutput(o, parameters={"binary_data": binary}) for o in expected]
            request = InferRequest(model_name=served, infer_inputs=request_inputs(inputs, binary),
                                   request_outputs=outputs, request_id=f"{name}-rest")
            response_headers = {}
            response = await client.infer(args.rest, request, model_name=served, headers=dict(headers),
                                          response_headers=response_headers)
            check(("inference-header-content-length" in response_headers) == binary,
                  f"REST {name} ({kind}): answered {'in binary' if binary else 'in JSON'}")
            same(as_arrays(response), expected, f"REST {name} ({kind})")
    await client.close()
    iris = args.served.get("iris", "iris")
    async with httpx.AsyncClient(base_url=args.rest, headers=headers, timeout=30) as http:
        wrong = await http.post(f"/v2/models/{iris}/versions/7/infer", json={"inputs": []})
        check(wrong.status_code == 404 and "version '7'" in wrong.json()["error"],
              f"REST unknown version: {wrong.status_code} {wrong.text}")
        right = await http.get(f"/v2/models/{iris}/versions/1")
        check(right.status_code == 200 and right.json()["versions"] == ["1"], f"REST version 1: {right.status_code}")


async def main(args):
    metadata = (("x-skiff-conformance", "1"),)
    if args.grpc:
        await grpc_checks(args, metadata)
    if args.rest:
        await rest_checks(args)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(ARGS))
