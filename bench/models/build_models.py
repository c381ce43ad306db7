"""Build the benchmark-only ONNX models under bench/models/.

Writes:
  bench/models/identity/model.onnx  hand-built: y = Identity(x), FP32 [batch, n]
                                    (any shape: bench-grpc sends [1, 262144], a 1 MiB tensor,
                                    to measure how the wire formats carry large tensors)

Deterministic. Needs only the `onnx` package (the version pinned in
tests/fixtures/requirements.txt). Run from the repository root:

    python3 -m venv /tmp/onnx-venv && /tmp/onnx-venv/bin/pip install onnx==1.23.2
    /tmp/onnx-venv/bin/python bench/models/build_models.py
"""

from pathlib import Path

import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2]


def build_identity() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="skiff-bench"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = ROOT / "bench" / "models" / "identity" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString(deterministic=True))


if __name__ == "__main__":
    build_identity()
    print("built identity")
