#!/usr/bin/env python3
"""The GPT decoder of examples/gpt (doc/tutorial-gpt.md) from Python:
greedy generation with @prefill on the prompt, then one @decode call per
token, each reading the previous call's argmax; then the same with
@generate (all steps on the device) for comparison.  With --check, the
tokens and logits are compared with examples/gpt/reference.py's numpy
model.

    PYTHONPATH=python LD_LIBRARY_PATH=.libs /usr/bin/python3 examples/python/gpt.py \
        [--weights=examples/gpt/gpt.safetensors] [--kernels=examples/gpt] \
        [--prompt=Hello] [--steps=15] [--check]
"""
import argparse
import os
import sys
import time

import numpy as np

import hali

here = os.path.dirname(os.path.abspath(__file__))
gpt_dir = os.path.join(os.path.dirname(here), "gpt")

ap = argparse.ArgumentParser()
ap.add_argument("--weights", default=os.path.join(gpt_dir, "gpt.safetensors"))
ap.add_argument("--kernels", default=gpt_dir,
                help="the directory of kernels.so (a build tree's examples/gpt)")
ap.add_argument("--prompt", default="Hello")
ap.add_argument("--steps", type=int, default=15)
ap.add_argument("--check", action="store_true")
opts = ap.parse_args()

instance = hali.Instance(executable_paths=[opts.kernels])
module = hali.load(os.path.join(gpt_dir, "gpt.hasm"), instance=instance)
print(module.functions["decode"])
ctx = hali.Context(module, instance=instance,
                   device=hali.Device("local-task", workers=2),
                   parameters={"model": opts.weights})

prompt = np.frombuffer(opts.prompt.encode(), dtype=np.uint8).astype(np.int32)
t0 = time.perf_counter()
logits, token = ctx.prefill(prompt)
tokens, rows = [int(token[0])], [logits.copy()]
for i in range(opts.steps):
    logits, token = ctx.decode(tokens[-1], len(prompt) + i)
    tokens.append(int(token[0]))
    rows.append(logits.copy())
dt = time.perf_counter() - t0
print("prefill + %d decode calls: %s (%.0f tokens/s)" % (
    opts.steps, tokens, (opts.steps + 1) / dt))
print("text:", repr(bytes(tokens)))

if opts.steps + 1 == module.functions["generate"].results[0].shape[0]:
    on_device = ctx.generate(prompt)
    print("@generate:", on_device.tolist())
    if on_device.tolist() != tokens:
        sys.exit("@generate disagrees with prefill + decode")

if opts.check:
    sys.path.insert(0, gpt_dir)
    import reference
    cfg, w = reference.load(opts.weights)
    ref = reference.generate(cfg, w, prompt.tolist(), opts.steps)
    for i, ((tok, lg), got_tok, got) in enumerate(zip(ref, tokens, rows)):
        tol = 1e-4 * np.abs(lg).max()
        if tok != got_tok or np.abs(lg - got).max() > tol:
            sys.exit("row %d: numpy says token %d, hali %d (max diff %g)" % (
                i, tok, got_tok, np.abs(lg - got).max()))
    print("matches the numpy reference (%d rows)" % len(ref))
