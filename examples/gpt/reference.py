#!/usr/bin/env python3
"""The GPT example's model in numpy, from GPT-2's definition.

Reads the weights that examples/gpt/gpt_gen writes (safetensors, parsed
here with json and numpy alone; the configuration comes from the file's
"__metadata__"), and runs greedy decoding in float64.  Each step runs the
whole sequence through the model again, with a causal mask over the full
attention matrix and no KV cache, so nothing is shared with the way hali's
program or its C kernels compute.

    reference.py WEIGHTS --prompt=72,101,108 --steps=32
        prints the generated token ids (the first comes from the prompt)
    reference.py WEIGHTS --prompt=... --steps=32 --check=LOGITS
        compares LOGITS (what `examples/gpt/generate --dump=LOGITS` wrote:
        int32 count of rows, int32 vocab, then per row the int32 token and
        vocab float32 logits) with this model's, row by row: every logit
        within 1e-4 of the largest magnitude in its row, and the same token;
        exit status 1 and the first disagreement otherwise.
"""
import json
import struct
import sys

import numpy as np


def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop('__metadata__', {})
    base = 8 + n
    tensors = {}
    for name, e in header.items():
        if e['dtype'] != 'F32':
            raise SystemExit('%s: %s is %s, expected F32' % (path, name, e['dtype']))
        b, end = e['data_offsets']
        a = np.frombuffer(data, dtype='<f4', count=(end - b) // 4, offset=base + b)
        tensors[name] = a.reshape(e['shape']).astype(np.float64)
    cfg = {k: int(meta[k]) for k in ('vocab', 'd_model', 'heads', 'layers', 'context')}
    return cfg, tensors


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def gelu(x):  # GPT-2's tanh approximation
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def forward(cfg, w, tokens):
    """Logits of every position of |tokens| (a GPT-2 forward pass)."""
    T, D, H = len(tokens), cfg['d_model'], cfg['heads']
    hd = D // H
    x = w['wte.weight'][tokens] + w['wpe.weight'][np.arange(T)]
    mask = np.triu(np.full((T, T), -np.inf), k=1)  # j > i is masked
    for l in range(cfg['layers']):
        p = 'h.%d.' % l
        a = layer_norm(x, w[p + 'ln_1.weight'], w[p + 'ln_1.bias'])
        qkv = a @ w[p + 'attn.c_attn.weight'] + w[p + 'attn.c_attn.bias']
        q, k, v = np.split(qkv, 3, axis=-1)
        heads = []
        for h in range(H):
            s = slice(h * hd, (h + 1) * hd)
            att = softmax(q[:, s] @ k[:, s].T / np.sqrt(hd) + mask)
            heads.append(att @ v[:, s])
        y = np.concatenate(heads, axis=-1)
        x = x + y @ w[p + 'attn.c_proj.weight'] + w[p + 'attn.c_proj.bias']
        m = layer_norm(x, w[p + 'ln_2.weight'], w[p + 'ln_2.bias'])
        f = gelu(m @ w[p + 'mlp.c_fc.weight'] + w[p + 'mlp.c_fc.bias'])
        x = x + f @ w[p + 'mlp.c_proj.weight'] + w[p + 'mlp.c_proj.bias']
    x = layer_norm(x, w['ln_f.weight'], w['ln_f.bias'])
    return x @ w['wte.weight'].T


def generate(cfg, w, prompt, steps):
    """Greedy decoding: |steps| + 1 rows of (token, logits): the prompt's
    next token, then one per decode step."""
    seq, rows = list(prompt), []
    for _ in range(steps + 1):
        logits = forward(cfg, w, np.array(seq))[-1]
        tok = int(np.argmax(logits))
        rows.append((tok, logits))
        seq.append(tok)
    return rows


def read_dump(path):
    with open(path, 'rb') as f:
        data = f.read()
    count, vocab = struct.unpack('<ii', data[:8])
    rows, at = [], 8
    for _ in range(count):
        (tok,) = struct.unpack('<i', data[at:at + 4])
        logits = np.frombuffer(data, dtype='<f4', count=vocab, offset=at + 4)
        rows.append((tok, logits.astype(np.float64)))
        at += 4 + 4 * vocab
    return rows


def main(argv):
    path, prompt, steps, check = None, None, 32, None
    for a in argv[1:]:
        if a.startswith('--prompt='):
            prompt = [int(t) for t in a[9:].split(',')]
        elif a.startswith('--steps='):
            steps = int(a[8:])
        elif a.startswith('--check='):
            check = a[8:]
        elif not a.startswith('--') and path is None:
            path = a
        else:
            raise SystemExit(__doc__)
    if path is None or not prompt:
        raise SystemExit(__doc__)
    cfg, w = load(path)
    rows = generate(cfg, w, prompt, steps)
    if check is None:
        print(' '.join(str(t) for t, _ in rows))
        return 0
    got = read_dump(check)
    if len(got) != len(rows):
        print('%s has %d rows, the reference %d' % (check, len(got), len(rows)))
        return 1
    worst = 0.0
    for i, ((tok, ref), (gtok, glog)) in enumerate(zip(rows, got)):
        err = np.max(np.abs(glog - ref)) / np.max(np.abs(ref))
        worst = max(worst, err)
        if err > 1e-4:
            j = int(np.argmax(np.abs(glog - ref)))
            print('step %d: logit %d is %.9g, the reference %.9g (relative '
                  'error %.3g > 1e-4)' % (i, j, glog[j], ref[j], err))
            return 1
        if gtok != tok:
            print('step %d: token %d, the reference %d' % (i, gtok, tok))
            return 1
    print('%d steps agree: tokens %s; largest relative logit error %.3g'
          % (len(rows), ' '.join(str(t) for t, _ in rows), worst))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
