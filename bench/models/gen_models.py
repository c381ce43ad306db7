#!/usr/bin/env python3
"""Generate the size-ladder ONNX models for the cold-start benchmark (issue 22).

Each model is `y = MatMul(x, W)`: input `x` FP32 [batch, N], a random FP32 initializer
`W` [N, M] sized to hit the target, output `y` FP32 [batch, M]. The weights are the file:
a model of "100M" is 100 MiB of W plus a few hundred bytes of graph. Fixed seed, so a rerun
writes the same bytes. Models stay under protobuf's 2 GB limit (one file, no external data).

Writes `OUT/<size>/model.onnx` for each size: the folder layout skiff-server and KServe's
ONNX runtime serve (a model folder holding `model.onnx`). With `--check` (the default) each
model is loaded in onnxruntime and run on one row, and its output compared with numpy's.

Usage (a venv with onnx, numpy and onnxruntime, e.g. the kserve-storage peer's):
    python3 bench/models/gen_models.py --sizes 1M,100M,1G --out /tmp/skiff-models
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 22
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
LIMIT = 2_000_000_000  # protobuf's limit on one serialized message, with room for the graph


def parse_size(text: str) -> int:
    """Parses `1M`, `100M`, `1G` (binary units) or a plain byte count."""
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def shape_for(target: int) -> tuple[int, int]:
    """A near-square [N, M] whose FP32 weights take about `target` bytes."""
    floats = max(1, target // 4)
    n = max(1, math.isqrt(floats))
    return n, max(1, floats // n)


def build(n: int, m: int, seed: int) -> tuple[onnx.ModelProto, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = rng.random((n, m), dtype=np.float32)
    w -= 0.5
    w *= 1.0 / math.sqrt(n)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        f"matmul_{n}x{m}",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", m])],
        initializer=[numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="skiff-bench")
    model.ir_version = 8
    return model, w


def check(path: Path, w: np.ndarray) -> None:
    """Loads the model in onnxruntime and compares one row's output with numpy's."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.linspace(-1.0, 1.0, w.shape[0], dtype=np.float32)[None, :]
    (y,) = session.run(["y"], {"x": x})
    assert y.shape == (1, w.shape[1]), f"{path}: output shape {y.shape}, want (1, {w.shape[1]})"
    want = x @ w
    assert np.allclose(y, want, rtol=1e-3, atol=1e-3), f"{path}: output differs from numpy's"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,100M,1G", help="comma-separated sizes (binary K/M/G units)")
    parser.add_argument("--out", required=True, type=Path, help="output folder (OUT/<size>/model.onnx)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--no-check", dest="check", action="store_false", help="skip the onnxruntime check")
    args = parser.parse_args()
    for label in (s.strip() for s in args.sizes.split(",") if s.strip()):
        target = parse_size(label)
        if target >= LIMIT:
            parser.error(f"size {label} is over protobuf's 2 GB limit for one model file")
        start = time.monotonic()
        n, m = shape_for(target)
        model, w = build(n, m, args.seed)
        path = args.out / label / "model.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".onnx.tmp")
        tmp.write_bytes(model.SerializeToString(deterministic=True))
        del model
        onnx.checker.check_model(str(tmp))
        tmp.replace(path)
        built = time.monotonic() - start
        if args.check:
            check(path, w)
        size = path.stat().st_size
        print(
            f"{label}: {path} {size} bytes ({size / (1 << 20):.1f} MiB), W [{n}, {m}], "
            f"built in {built:.1f}s, total {time.monotonic() - start:.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
