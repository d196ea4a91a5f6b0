"""Derive ``turnkit/models/silero_vad_16k.onnx`` from the vendored Silero VAD.

The Silero v6 graph branches at run time (ONNX ``If`` nodes) on the sample
rate (8 or 16 kHz) and on tensor shapes (batch size, state shape). turnkit
feeds it one shape only: 16 kHz, ``input [1, 576]`` (64 samples of context
+ 512), ``state [2, 1, 128]``. For that shape every condition is a constant,
so this script replaces each ``If`` by the branch it takes (the same nodes,
weights and order; an ``Identity`` per output), leaving a graph without
control flow. onnxruntime then runs the same kernels on the same data
without the per-call cost of entering seven subgraphs (~15 % of a call);
outputs are bit-identical (``tests/test_vad.py`` checks that on real audio).

The condition values are read by running the graph (onnxruntime) on the
fixed shapes with several different inputs and states; a condition that
changed with the values (none does) would stop the script.

Needs ``onnx`` (not a turnkit dependency; any throwaway venv):

    pip install onnx onnxruntime numpy
    python scripts/silero_16k.py   # writes turnkit/models/silero_vad_16k.onnx
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "turnkit" / "models" / "silero_vad.onnx"
DST = ROOT / "turnkit" / "models" / "silero_vad_16k.onnx"


def _conditions(model: onnx.ModelProto, names: list[str]) -> dict[str, bool]:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for c in names:
        probe.graph.output.append(helper.make_tensor_value_info(c, onnx.TensorProto.BOOL, None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    seen: dict[str, set[bool]] = {}
    for trial in range(4):
        rng = np.random.default_rng(trial)
        feeds = {
            "input": (rng.standard_normal((1, 576)) * 0.1 * trial).astype(np.float32),
            "state": (rng.standard_normal((2, 1, 128)) * (trial % 2)).astype(np.float32),
            "sr": np.array(16000, dtype=np.int64),
        }
        for c, v in zip(names, sess.run(names, feeds), strict=True):
            seen.setdefault(c, set()).add(bool(np.asarray(v).item()))
    out = {}
    for c, vals in seen.items():
        if len(vals) != 1:
            raise SystemExit(f"condition {c} depends on the input values: cannot inline")
        out[c] = vals.pop()
    return out


def inline(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    while True:
        ifs = [n for n in g.node if n.op_type == "If"]
        if not ifs:
            break
        cond = _conditions(model, [n.input[0] for n in ifs])
        nodes = []
        for n in g.node:
            if n.op_type != "If":
                nodes.append(n)
                continue
            taken = "then_branch" if cond[n.input[0]] else "else_branch"
            branch = next(a.g for a in n.attribute if a.name == taken)
            nodes.extend(branch.node)
            for b_out, if_out in zip(branch.output, n.output, strict=True):
                nodes.append(helper.make_node("Identity", [b_out.name], [if_out]))
        del g.node[:]
        g.node.extend(nodes)
    # The sample-rate test is now dead code: drop nodes nothing reads. "sr"
    # stays an input (unused), so callers feed either model the same.
    while True:
        used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        live = [n for n in g.node if any(o in used for o in n.output)]
        if len(live) == len(g.node):
            break
        del g.node[:]
        g.node.extend(live)
    onnx.checker.check_model(model)
    return model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, default=SRC)
    ap.add_argument("--out", type=Path, default=DST)
    args = ap.parse_args()
    model = inline(onnx.load(str(args.src)))
    onnx.save(model, str(args.out))
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, sha256 {digest})")


if __name__ == "__main__":
    main()
