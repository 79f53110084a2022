#!/usr/bin/env python3
"""bench/gpt_variants.py LOWERED.hasm OUTDIR -- hand-edited decode steps.

LOWERED.hasm is the GPT module after stream-to-hal, as `hali dis` prints it:

    HALI_EXECUTABLE_PATH=examples/gpt tools/hali dis examples/gpt/gpt.hasm \\
        --no_locs --after=all | sed -n '/after pass 3 of 3/,$p' | tail -n +2

Each variant rewrites @decode$async only, the way stream-to-hal could emit
it, so that what the emission costs can be measured before the pass is
changed (doc/design-notes.md, "GPT decode: what hali costs per token"):

  decode_lowered.hasm   the module as lowered (the baseline)
  decode_checks.hasm    the workload checks folded: every dispatch of a
                        decode step has a constant grid (T is 1)
  decode_exec.hasm      ... and the step's one execute signals the caller's
                        fence, which becomes the caches' ready fence (no
                        fence of its own, no second, empty execute)
  decode_join.hasm      ... and the caches' four ready fences (always one
                        fence: they are stored together) joined once
  decode_floor.hasm     ... and the command buffer recorded on the first
                        step only and replayed after (a reusable one in a
                        global, the slab and results kept): a floor for
                        "record once", NOT a correct program -- the token
                        and the position recorded first are replayed, so
                        the tokens differ; compare instructions outside
                        the kernels only.

Run one with examples/gpt/generate --module=OUTDIR/decode_X.hasm.

The variants edit the per-call lowering: since @decode and @step carry
"record_once" (doc/passes.md, "Commands recorded once"), strip the
attribute from examples/gpt/gpt.hasm before lowering it for them
(sed 's/ attributes \["record_once"\]//').  decode_floor is what
record_once now does, correctly (the token and position bound per call).
"""
import re
import sys


def fold_checks(lines):
    """Drops the workload checks; the grid counts become constants."""
    value = {}
    for line in lines:
        m = re.match(r'\s*%(workgroups\d)\.i64(\.\d+)? = add\.i64 %(\w+),', line)
        if m:  # ceil(1 / size) is 1; attention's grid is the 4 heads
            value[m.group(1) + (m.group(2) or '')] = (
                '%c4' if m.group(3) == 'H' else '%c1')
    out = []
    for line in lines:
        s = line.strip()
        if re.match(r'(cond_fail )?%(workload|workgroups)', s):
            continue
        if 'hal.command_buffer.dispatch' in s:
            line = re.sub(r'%(workgroups\d(?:\.\d+)?)\b',
                          lambda m: value[m.group(1)], line)
        out.append(line)
    return out


def one_execute(lines):
    """The command buffer's execute signals %signal directly."""
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith('%timepoint = hal.fence.create'):
            continue
        if s == 'hal.device.queue.execute %device, %timepoint, %signal, []':
            continue
        line = line.replace('%join.3, %timepoint, [%cmd]',
                            '%join.3, %signal, [%cmd]')
        line = re.sub(r'(global\.store\.ref @kv\d\$ready, )%timepoint',
                      r'\1%signal', line)
        out.append(line)
    return out


def one_join(lines):
    """One join with the first cache's ready fence (all four are one)."""
    out = []
    for line in lines:
        s = line.strip()
        if re.match(r'%join(\.[12])? = hal\.fence\.join', s) or re.match(
                r'%kv[123]\.ready = ', s):
            continue
        if s.startswith('%join.3 = hal.fence.join'):
            line = '  %join.3 = hal.fence.join %wait, %kv0.ready'
        out.append(line)
    return out


def record_once(lines):
    """Records on the first call only; replays the stored one after."""
    first = lambda text: next(i for i, l in enumerate(lines) if text in l)
    i_alloc = first('hal.allocator.allocate')
    i_join = first('hal.fence.join')
    i_cmd = first('hal.command_buffer.create')
    i_fin = first('hal.command_buffer.finalize')
    prologue = lines[:i_alloc]
    prologue[0] = prologue[0].replace('locals(', 'locals(%done: i32, ', 1)
    record = (lines[i_alloc:i_join] +
              [lines[i_cmd].replace('%c1, %c3', '%c0, %c3')] +  # reusable
              lines[i_cmd + 1:i_fin + 1])
    return (prologue + [
        '  %done = global.load.i32 @rec_done',
        '  cond_br %done, ^go, ^record', '^record:'] + record + [
        '  global.store.ref @rec_cmd, %cmd',
        '  global.store.ref @rec_logits, %logits',
        '  global.store.ref @rec_next, %next', '  %done = const.i32 1',
        '  global.store.i32 @rec_done, %done', '  br ^go', '^go:',
        '  %cmd = global.load.ref @rec_cmd',
        '  %logits = global.load.ref @rec_logits',
        '  %next = global.load.ref @rec_next'] + lines[i_join:i_cmd] +
        lines[i_fin + 1:])


REC_GLOBALS = ('global @rec_done : i32 mutable = 0\n'
               'global @rec_cmd : !hal.command_buffer mutable\n'
               'global @rec_logits : !hal.buffer mutable\n'
               'global @rec_next : !hal.buffer mutable\n\n')


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src = open(sys.argv[1]).read()
    start = src.index('func @decode$async(')
    end = src.index('\n}\n', start) + 3
    lines = src[start:end].split('\n')
    checks = fold_checks(lines)
    variants = {
        'lowered': lines,
        'checks': checks,
        'exec': one_execute(checks),
        'join': one_join(one_execute(checks)),
        'floor': one_join(one_execute(record_once(checks))),
    }
    for name, body in variants.items():
        text = src[:start] + '\n'.join(body) + src[end:]
        if name == 'floor':
            text = text.replace('\nfunc ', '\n' + REC_GLOBALS + 'func ', 1)
        with open('%s/decode_%s.hasm' % (sys.argv[2], name), 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main()
