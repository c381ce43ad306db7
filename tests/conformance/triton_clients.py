"""NVIDIA's Triton clients (`tritonclient` from PyPI, HTTP and gRPC) against a Skiff endpoint.

Four clients: `tritonclient.http` and `tritonclient.grpc` (sync), `tritonclient.http.aio` and
`tritonclient.grpc.aio` (asyncio), and gRPC streaming (`start_stream` / `async_stream_infer` on
the sync client, `stream_infer` on the asyncio one). Each checks server live and ready, server
and model metadata, model configuration, statistics (the counts a client's own inferences add),
the repository index, readiness false for an unknown model and version, inference with every
case of every model in tests/fixtures/expected (binary data on and off over HTTP; BF16 always in
binary, the only way tritonclient sends it), and errors: an unknown model, a wrong shape, an index
the model refuses (`lookup`), load of an unknown model and unload. Every inference output is
compared with ONNX Runtime's (the expected files, computed by Python's onnxruntime).

    python triton_clients.py --http 127.0.0.1:8080 --grpc 127.0.0.1:8080 \\
        [--models dtypes,iris,mlp,adder] [--error-model lookup] [--host iris.default.example.com]

`--host` sends that Host (HTTP) and :authority (gRPC), for a router that routes by host.
Prints one line per call, then "N calls passed", and exits non-zero when any call failed.
"""

import argparse
import asyncio
import functools
import json
import os
import queue
import sys
import traceback

import ml_dtypes
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "expected")
NUMPY = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
    "FP32": np.float32, "FP64": np.float64, "BF16": ml_dtypes.bfloat16, "BYTES": np.object_,
}
FLOATS = {"FP16", "FP32", "FP64", "BF16"}
EXTENSIONS = {"binary_tensor_data", "model_configuration", "statistics", "model_repository"}


class Calls:
    """Counts the client calls that passed, and remembers the ones that failed."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, condition, what):
        if condition:
            self.passed += 1
            print(f"ok   {what}", flush=True)
        else:
            self.failed.append(what)
            print(f"FAIL {what}", flush=True)
        return condition

    def raises(self, call, what, *fragments):
        """`call()` must raise InferenceServerException whose text holds every fragment."""
        try:
            call()
        except InferenceServerException as e:
            text = f"{e.status()} {e.message()}"
            return self.check(all(f in text for f in fragments), f"{what}: refused ({text})")
        return self.check(False, f"{what}: was not refused")

    async def araises(self, call, what, *fragments):
        try:
            await call()
        except InferenceServerException as e:
            text = f"{e.status()} {e.message()}"
            return self.check(all(f in text for f in fragments), f"{what}: refused ({text})")
        return self.check(False, f"{what}: was not refused")


class Case:
    """One expected case: inputs and ONNX Runtime's outputs as numpy arrays."""

    def __init__(self, model, spec):
        self.model = model
        self.name = spec["name"]
        self.inputs = {t["name"]: (t["datatype"], array(t)) for t in spec["inputs"]}
        self.outputs = {t["name"]: (t["datatype"], array(t)) for t in spec["outputs"]}
        self.rows = next(iter(self.inputs.values()))[1].shape[0]

    def http_inputs(self, binary):
        made = []
        for name, (datatype, value) in self.inputs.items():
            tensor = httpclient.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value, binary_data=binary or datatype == "BF16")
            made.append(tensor)
        return made

    def http_outputs(self, binary):
        return [httpclient.InferRequestedOutput(name, binary_data=binary or datatype == "BF16")
                for name, (datatype, _) in self.outputs.items()]

    def grpc_inputs(self):
        made = []
        for name, (datatype, value) in self.inputs.items():
            tensor = grpcclient.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value)
            made.append(tensor)
        return made

    def differences(self, result):
        """What differs between `result` (an InferResult) and ONNX Runtime's outputs."""
        wrong = []
        for name, (datatype, want) in self.outputs.items():
            got = result.as_numpy(name)
            if got is None:
                wrong.append(f"no output {name}")
            elif got.shape != want.shape:
                wrong.append(f"{name} shape {got.shape} != {want.shape}")
            elif datatype == "BYTES":
                as_bytes = [x if isinstance(x, bytes) else str(x).encode() for x in got.flatten()]
                if as_bytes != list(want.flatten()):
                    wrong.append(f"{name} {as_bytes} != {list(want.flatten())}")
            elif datatype in FLOATS:
                if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6):
                    wrong.append(f"{name} {got.flatten()} != {want.flatten()}")
            elif got.dtype != want.dtype or not np.array_equal(got, want):
                wrong.append(f"{name} {got.dtype} {got.flatten()} != {want.dtype} {want.flatten()}")
        return wrong


def array(tensor):
    datatype, shape, data = tensor["datatype"], tensor["shape"], tensor["data"]
    if datatype == "BYTES":
        return np.array([s.encode("utf-8") for s in data], dtype=np.object_).reshape(shape)
    if datatype == "BF16":
        return np.array(data, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(shape)
    return np.array(data, dtype=NUMPY[datatype]).reshape(shape)


def load_cases(models):
    cases = []
    for model in models:
        with open(os.path.join(EXPECTED, f"{model}.json"), encoding="utf-8") as f:
            cases += [Case(model, spec) for spec in json.load(f)["cases"]]
    return cases


def config_problems(config, metadata):
    """What in a configuration does not follow the model's metadata as Triton's ONNX Runtime
    backend would: platform and backend, a leading -1 on every tensor as the batch
    (max_batch_size > 0, dims without it; no dims left is [1]), TYPE_ names."""
    problems = []
    if config.get("platform") != "onnxruntime_onnx" or config.get("backend") != "onnxruntime":
        problems.append(f"platform {config.get('platform')} backend {config.get('backend')}")
    tensors = metadata["inputs"] + metadata["outputs"]
    batched = all(int(t["shape"][0]) == -1 for t in tensors if t["shape"])
    if (int(config.get("max_batch_size", 0)) > 0) != batched:
        problems.append(f"max_batch_size {config.get('max_batch_size')} for batched={batched}")
    for kind, key in (("inputs", "input"), ("outputs", "output")):
        for want, got in zip(metadata[kind], config.get(key, [])):
            shape = [int(d) for d in want["shape"]][1 if batched else 0:] or [1]
            datatype = "TYPE_STRING" if want["datatype"] == "BYTES" else f"TYPE_{want['datatype']}"
            if got["name"] != want["name"] or [int(d) for d in got["dims"]] != shape or got["data_type"] != datatype:
                problems.append(f"{key} {got['name']} {got['dims']} {got['data_type']}")
        if len(config.get(key, [])) != len(metadata[kind]):
            problems.append(f"{len(config.get(key, []))} {key}s")
    return problems


def fresh(headers):
    """A copy of `headers` for one call: tritonclient's HTTP `infer` adds its binary header
    (Inference-Header-Content-Length) to the dict it is given, which would then go with the next
    JSON request."""
    return dict(headers) if headers else None


def stats_of(stats, model):
    found = [s for s in stats["model_stats"] if s["name"] == model]
    return found[0] if found else {}


def counts(model_stats):
    inference = model_stats.get("inference_stats", {})
    return (int(model_stats.get("inference_count", 0)), int(inference.get("success", {}).get("count", 0)),
            int(inference.get("fail", {}).get("count", 0)))


def grew(before, after, inferences, succeeded, failed):
    b, a = counts(before), counts(after)
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2]) == (inferences, succeeded, failed)


# --------------------------------------------------------------------------- sync clients


def http_checks(calls, args, cases):
    client = httpclient.InferenceServerClient(url=args.http, connection_timeout=30, network_timeout=30)
    h = {"Host": args.host} if args.host else None
    calls.check(client.is_server_live(headers=fresh(h)), "HTTP server live")
    calls.check(client.is_server_ready(headers=fresh(h)), "HTTP server ready")
    meta = client.get_server_metadata(headers=fresh(h))
    calls.check(meta["name"] == "skiff-server" and EXTENSIONS <= set(meta["extensions"]),
                f"HTTP server metadata: {meta['name']} {meta['extensions']}")
    for model in args.models:
        calls.check(client.is_model_ready(model, headers=fresh(h)), f"HTTP model ready {model}")
        metadata = client.get_model_metadata(model, headers=fresh(h))
        calls.check(metadata["name"] == model and metadata["platform"] == "onnxruntime_onnx",
                    f"HTTP model metadata {model}")
        problems = config_problems(client.get_model_config(model, headers=fresh(h)), metadata)
        calls.check(not problems, f"HTTP model config {model} {problems or 'follows the graph'}")
    calls.check(not client.is_model_ready("no-such-model", headers=fresh(h)),
                "HTTP model ready: unknown model is false")
    calls.check(not client.is_model_ready(args.models[0], "7", headers=fresh(h)),
                "HTTP model ready: unknown version is false")
    before = {m: stats_of(client.get_inference_statistics(m, headers=fresh(h)), m) for m in args.models}
    calls.check(all(before.values()), "HTTP statistics before: one entry per model")
    for case in cases:
        for binary in (True, False):
            kind = "binary" if binary else "JSON"
            result = client.infer(case.model, case.http_inputs(binary), outputs=case.http_outputs(binary),
                                  request_id=f"{case.model}-{case.name}-{kind}", headers=fresh(h))
            wrong = case.differences(result)
            calls.check(not wrong and result.get_response()["id"] == f"{case.model}-{case.name}-{kind}",
                        f"HTTP infer {case.model}/{case.name} ({kind}): {wrong or 'matches ONNX Runtime'}")
    every = client.get_inference_statistics(headers=fresh(h))
    for model in args.models:
        rows = sum(c.rows for c in cases if c.model == model) * 2
        made = len([c for c in cases if c.model == model]) * 2
        calls.check(grew(before[model], stats_of(every, model), rows, made, 0),
                    f"HTTP statistics {model}: +{rows} inferences, +{made} successes")
    index = client.get_model_repository_index(headers=fresh(h))
    served = {m["name"]: m.get("state") for m in index}
    calls.check(all(served.get(m) == "READY" for m in args.models), f"HTTP repository index {served}")
    http_errors(calls, client, args, cases, h)
    client.close()


def http_errors(calls, client, args, cases, h):
    case = cases[0]
    calls.raises(lambda: client.infer("no-such-model", case.http_inputs(True), headers=fresh(h)),
                 "HTTP infer unknown model", "404", "no-such-model")
    name, (datatype, value) = next(iter(case.inputs.items()))
    wrong = httpclient.InferInput(name, [1, 1], datatype)
    wrong.set_data_from_numpy(value.reshape(-1)[:1].reshape(1, 1), binary_data=False)
    calls.raises(lambda: client.infer(case.model, [wrong], headers=fresh(h)), "HTTP infer wrong shape",
                 "400", f"'{name}'")
    if args.error_model:
        index = httpclient.InferInput("index", [1, 1], "INT64")
        index.set_data_from_numpy(np.array([[9]], dtype=np.int64))
        before = stats_of(client.get_inference_statistics(args.error_model, headers=fresh(h)), args.error_model)
        calls.raises(lambda: client.infer(args.error_model, [index], headers=fresh(h)),
                     "HTTP infer index past the table", "400", "the model refused the input")
        after = stats_of(client.get_inference_statistics(args.error_model, headers=fresh(h)), args.error_model)
        calls.check(grew(before, after, 0, 0, 1), f"HTTP statistics {args.error_model}: +1 failure")
    calls.raises(lambda: client.get_model_config("no-such-model", headers=fresh(h)), "HTTP config unknown model", "404")
    client.load_model(args.models[0], headers=fresh(h))
    calls.check(True, f"HTTP load {args.models[0]} (served already)")
    calls.raises(lambda: client.load_model("no-such-model", headers=fresh(h)), "HTTP load unknown model",
                 "load/unload is not supported")
    calls.raises(lambda: client.unload_model(args.models[0], headers=fresh(h)), "HTTP unload",
                 "load/unload is not supported")


def grpc_client(args):
    options = [("grpc.default_authority", args.host)] if args.host else None
    return grpcclient.InferenceServerClient(url=args.grpc, channel_args=options)


def grpc_checks(calls, args, cases):
    client = grpc_client(args)
    calls.check(client.is_server_live(client_timeout=30), "gRPC server live")
    calls.check(client.is_server_ready(client_timeout=30), "gRPC server ready")
    meta = client.get_server_metadata(as_json=True)
    calls.check(meta["name"] == "skiff-server" and EXTENSIONS <= set(meta["extensions"]),
                f"gRPC server metadata: {meta['name']} {meta['extensions']}")
    for model in args.models:
        calls.check(client.is_model_ready(model), f"gRPC model ready {model}")
        metadata = client.get_model_metadata(model, as_json=True)
        calls.check(metadata["name"] == model and metadata["platform"] == "onnxruntime_onnx",
                    f"gRPC model metadata {model}")
        problems = config_problems(client.get_model_config(model, as_json=True)["config"], metadata)
        calls.check(not problems, f"gRPC model config {model} {problems or 'follows the graph'}")
    calls.check(client.is_model_ready("no-such-model") is False, "gRPC model ready: unknown model is false")
    calls.check(client.is_model_ready(args.models[0], "7") is False, "gRPC model ready: unknown version is false")
    before = {m: stats_of(client.get_inference_statistics(m, as_json=True), m) for m in args.models}
    calls.check(all(before.values()), "gRPC statistics before: one entry per model")
    for case in cases:
        result = client.infer(case.model, case.grpc_inputs(), request_id=f"{case.model}-{case.name}")
        wrong = case.differences(result)
        calls.check(not wrong and result.get_response().id == f"{case.model}-{case.name}",
                    f"gRPC infer {case.model}/{case.name}: {wrong or 'matches ONNX Runtime'}")
    for model in args.models:
        after = stats_of(client.get_inference_statistics(model, as_json=True), model)
        rows = sum(c.rows for c in cases if c.model == model)
        made = len([c for c in cases if c.model == model])
        calls.check(grew(before[model], after, rows, made, 0),
                    f"gRPC statistics {model}: +{rows} inferences, +{made} successes")
    index = client.get_model_repository_index(as_json=True)
    served = {m["name"]: m.get("state") for m in index.get("models", [])}
    calls.check(all(served.get(m) == "READY" for m in args.models), f"gRPC repository index {served}")
    case = cases[0]
    calls.raises(lambda: client.infer("no-such-model", case.grpc_inputs()), "gRPC infer unknown model",
                 "NOT_FOUND", "no-such-model")
    calls.raises(lambda: client.get_model_config("no-such-model"), "gRPC config unknown model", "NOT_FOUND")
    if args.error_model:
        index = grpcclient.InferInput("index", [1, 1], "INT64")
        index.set_data_from_numpy(np.array([[-6]], dtype=np.int64))
        calls.raises(lambda: client.infer(args.error_model, [index]), "gRPC infer index past the table",
                     "INVALID_ARGUMENT", "the model refused the input")
    calls.raises(lambda: client.load_model("no-such-model"), "gRPC load unknown model",
                 "FAILED_PRECONDITION", "load/unload is not supported")
    calls.raises(lambda: client.unload_model(args.models[0]), "gRPC unload", "FAILED_PRECONDITION")
    stream_checks(calls, client, args, cases)
    client.close()


def stream_checks(calls, client, args, cases):
    """Every case on one stream, with an unknown model in the middle: one answer each, in order."""
    answers = queue.Queue()
    client.start_stream(callback=functools.partial(lambda q, result, error: q.put((result, error)), answers))
    sent = [(c, f"stream-{i}") for i, c in enumerate(cases)]
    middle = len(sent) // 2
    sent.insert(middle, (None, "stream-unknown"))
    for case, request_id in sent:
        if case is None:
            client.async_stream_infer("no-such-model", cases[0].grpc_inputs(), request_id=request_id)
        else:
            client.async_stream_infer(case.model, case.grpc_inputs(), request_id=request_id)
    for case, request_id in sent:
        result, error = answers.get(timeout=30)
        if case is None:
            calls.check(result is None and error is not None and "no-such-model" in error.message(),
                        f"gRPC stream: unknown model answered in band ({error})")
        else:
            wrong = ["no answer: " + str(error)] if result is None else case.differences(result)
            calls.check(not wrong and result.get_response().id == request_id,
                        f"gRPC stream {case.model}/{case.name} in order: {wrong or 'matches ONNX Runtime'}")
    client.stop_stream()


# --------------------------------------------------------------------------- asyncio clients


async def http_aio_checks(calls, args, cases):
    client = httpaio.InferenceServerClient(url=args.http, conn_timeout=30)
    h = {"Host": args.host} if args.host else None
    calls.check(await client.is_server_live(headers=fresh(h)), "HTTP aio server live")
    calls.check(await client.is_server_ready(headers=fresh(h)), "HTTP aio server ready")
    calls.check(not await client.is_model_ready("no-such-model", headers=fresh(h)),
                "HTTP aio model ready: unknown is false")
    for model in args.models:
        metadata = await client.get_model_metadata(model, headers=fresh(h))
        problems = config_problems(await client.get_model_config(model, headers=fresh(h)), metadata)
        calls.check(not problems, f"HTTP aio model config {model} {problems or 'follows the graph'}")
    for case in cases:
        result = await client.infer(case.model, case.http_inputs(True), outputs=case.http_outputs(True),
                                    headers=fresh(h))
        wrong = case.differences(result)
        calls.check(not wrong, f"HTTP aio infer {case.model}/{case.name}: {wrong or 'matches ONNX Runtime'}")
    stats = await client.get_inference_statistics(headers=fresh(h))
    calls.check(all(counts(stats_of(stats, m))[1] > 0 for m in args.models), "HTTP aio statistics: every model served")
    index = await client.get_model_repository_index(headers=fresh(h))
    calls.check(set(args.models) <= {m["name"] for m in index}, "HTTP aio repository index")
    await calls.araises(lambda: client.unload_model(args.models[0], headers=fresh(h)), "HTTP aio unload",
                        "load/unload is not supported")
    await client.close()


async def grpc_aio_checks(calls, args, cases):
    options = [("grpc.default_authority", args.host)] if args.host else None
    client = grpcaio.InferenceServerClient(url=args.grpc, channel_args=options)
    calls.check(await client.is_server_live(), "gRPC aio server live")
    calls.check(await client.is_server_ready(), "gRPC aio server ready")
    calls.check(await client.is_model_ready("no-such-model") is False, "gRPC aio model ready: unknown is false")
    for model in args.models:
        metadata = await client.get_model_metadata(model, as_json=True)
        config = (await client.get_model_config(model, as_json=True))["config"]
        problems = config_problems(config, metadata)
        calls.check(not problems, f"gRPC aio model config {model} {problems or 'follows the graph'}")
    for case in cases:
        result = await client.infer(case.model, case.grpc_inputs())
        wrong = case.differences(result)
        calls.check(not wrong, f"gRPC aio infer {case.model}/{case.name}: {wrong or 'matches ONNX Runtime'}")
    stats = await client.get_inference_statistics(as_json=True)
    calls.check(all(counts(stats_of(stats, m))[1] > 0 for m in args.models), "gRPC aio statistics: every model served")
    index = await client.get_model_repository_index(as_json=True)
    calls.check(set(args.models) <= {m["name"] for m in index["models"]}, "gRPC aio repository index")

    sent = [(c, f"aio-{i}") for i, c in enumerate(cases)] + [(None, "aio-unknown"), (cases[0], "aio-last")]

    async def requests():
        for case, request_id in sent:
            model, source = ("no-such-model", cases[0]) if case is None else (case.model, case)
            yield {"model_name": model, "inputs": source.grpc_inputs(), "request_id": request_id}

    answers = client.stream_infer(requests(), stream_timeout=60)
    got = 0
    async for (result, error), (case, request_id) in aiozip(answers, sent):
        got += 1
        if case is None:
            calls.check(result is None and "no-such-model" in str(error),
                        f"gRPC aio stream: unknown model in band ({error})")
        else:
            wrong = ["no answer: " + str(error)] if result is None else case.differences(result)
            calls.check(not wrong and result.get_response().id == request_id,
                        f"gRPC aio stream {case.model}/{case.name} in order: {wrong or 'matches ONNX Runtime'}")
    calls.check(got == len(sent), f"gRPC aio stream: {got} answers to {len(sent)} requests")
    await client.close()


async def aiozip(answers, sent):
    pending = list(sent)
    async for answer in answers:
        yield answer, pending.pop(0)
        if not pending:
            answers.cancel()
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", required=True, help="HTTP host:port")
    parser.add_argument("--grpc", required=True, help="gRPC host:port")
    parser.add_argument("--models", default="dtypes,iris,mlp,adder", help="models with expected files, served")
    parser.add_argument("--error-model", default="lookup", help="the lookup model (empty: none served)")
    parser.add_argument("--host", help="Host / :authority to send (routing through the router)")
    args = parser.parse_args()
    args.models = args.models.split(",")
    cases = load_cases(args.models)
    calls = Calls()
    for name, run in (("HTTP", lambda: http_checks(calls, args, cases)),
                      ("gRPC", lambda: grpc_checks(calls, args, cases)),
                      ("HTTP aio", lambda: asyncio.run(http_aio_checks(calls, args, cases))),
                      ("gRPC aio", lambda: asyncio.run(grpc_aio_checks(calls, args, cases)))):
        try:
            run()
        except Exception:  # noqa: BLE001 - a client that raises fails its section, not the count
            calls.failed.append(f"{name}: {traceback.format_exc()}")
            print(f"FAIL {name} raised:\n{traceback.format_exc()}", flush=True)
    print(f"{calls.passed} calls passed", flush=True)
    if calls.failed:
        print(f"{len(calls.failed)} calls failed", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
