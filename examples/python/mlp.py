#!/usr/bin/env python3
"""The flagship perceptron (examples/mlp_tensor.hasm, 64 -> 128 -> 10) from
Python: the logits of the built-in input, the same as
`hali run examples/mlp_tensor.hasm --parameters=model=examples/mlp.safetensors`,
then of a numpy input (passed without a copy), synchronously and chained
asynchronously behind a fence.  doc/python.md walks through it.

    PYTHONPATH=python /usr/bin/python3 examples/python/mlp.py   (build tree)
"""
import os
import sys

import numpy as np

import hali

here = os.path.dirname(os.path.abspath(__file__))
examples = os.path.dirname(here)
weights = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    examples, "mlp.safetensors")

module = hali.load(os.path.join(examples, "mlp_tensor.hasm"))
print(module.functions["mlp"])          # @mlp(%x: tensor<64xf32>) -> ...
ctx = hali.Context(module, device=hali.Device("local-task", workers=2),
                   parameters={"model": weights})

print("main:", ctx.main())              # the built-in input's logits

x = np.linspace(-1, 1, 64, dtype=np.float32)
print("mlp(x):", ctx.mlp(x))            # x is read in place

go = hali.Fence()
results, done = ctx.mlp.async_(x, wait=go)   # queued behind |go|
go.signal()
done.wait(timeout=10)
print("async:", np.asarray(results[0]))
