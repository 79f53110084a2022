"""hali for Python: load modules, call functions on numpy arrays, chain
asynchronous calls through fences.  A layer over the C extension _hali,
which wraps the public C API (include/hali/hali.h); doc/python.md is the
tutorial.

    import numpy as np, hali
    ctx = hali.Context([hali.load("examples/mlp_tensor.hasm")],
                       parameters={"model": "examples/mlp.safetensors"})
    logits = ctx.mlp(np.ones(64, np.float32))
"""

import asyncio
import json
import threading

import numpy as np

from . import _hali
from ._hali import Error  # noqa: F401  (hali.Error, the base class)

__all__ = ["Instance", "Device", "Module", "Context", "Function", "Fence",
           "Tensor", "Signature", "TensorType", "load", "Error",
           "errors_by_code", "version"]

version = _hali.version
#: {code: exception class}; hali.InvalidArgumentError etc. are the same.
errors_by_code = dict(_hali.errors_by_code)
for _cls in errors_by_code.values():
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)

ELEMENT_TYPES = _hali.element_types()  # {"f32": code, ...}
# numpy's dtype for each element type (bf16, which numpy lacks: uint16).
_DTYPES = {
    "i1": np.bool_, "bool": np.bool_, "i8": np.int8, "si8": np.int8,
    "u8": np.uint8, "i16": np.int16, "si16": np.int16, "u16": np.uint16,
    "bf16": np.uint16, "i32": np.int32, "si32": np.int32, "u32": np.uint32,
    "i64": np.int64, "si64": np.int64, "u64": np.uint64, "f16": np.float16,
    "f32": np.float32, "f64": np.float64,
}
# The element type of a numpy array passed where no tensor type is written.
_FROM_DTYPE = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "si8",
    np.dtype(np.uint8): "u8", np.dtype(np.int16): "si16",
    np.dtype(np.uint16): "u16", np.dtype(np.int32): "i32",
    np.dtype(np.uint32): "u32", np.dtype(np.int64): "i64",
    np.dtype(np.uint64): "u64", np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}
_TRACE_BITS = {"none": 0, "vm": 1, "hal": 2, "all": 3}
_default_instance = None


def _instance(instance):
    global _default_instance
    if instance is not None:
        return instance
    if _default_instance is None:
        _default_instance = Instance()
    return _default_instance


class Instance:
    """Registries: kernel search paths, host import modules, ffi libraries.
    Registrations must come before the first context is created from it."""

    def __init__(self, executable_paths=None):
        self._c = _hali.Instance([str(p) for p in executable_paths or []])

    def register_imports(self, module_name, functions):
        """functions: {name: callable} or {name: (signature, callable)}.
        The callable gets ints, floats, numpy arrays (copies) and Fences and
        returns None, one value or a tuple; arrays returned are copied."""
        entries = []
        for name, f in functions.items():
            sig, fn = (f if isinstance(f, tuple) else (None, f))
            entries.append((name, sig, _import_wrapper(fn)))
        self._c.register_imports(module_name, entries)

    def register_ffi_library(self, module_name, library_path):
        self._c.register_ffi_library(module_name, str(library_path))


def _import_wrapper(fn):
    def call(*args):
        conv = []
        for a in args:
            if isinstance(a, _hali.BufferView):
                conv.append(np.array(a, copy=True))
            elif isinstance(a, _hali.Fence):
                conv.append(Fence._wrap(a))
            else:
                conv.append(a)
        r = fn(*conv)
        if r is None:
            r = ()
        elif not isinstance(r, tuple):
            r = (r,)
        out = []
        for v in r:
            if isinstance(v, np.ndarray):
                a = np.array(v, copy=True, order="C")
                out.append(_hali.import_view(
                    a, ELEMENT_TYPES[_FROM_DTYPE[a.dtype]], a.shape, True))
            elif isinstance(v, Fence):
                out.append(v._c)
            elif isinstance(v, Tensor):
                out.append(v._view)
            else:
                out.append(v)
        return tuple(out)
    return call


class Device:
    """Device("local-sync") or Device("local-task", workers=N)."""

    def __init__(self, kind="local-sync", workers=0, max_memory=0,
                 instance=None):
        self.instance = _instance(instance)
        self.kind = kind
        self._c = _hali.Device(self.instance._c, kind, int(workers),
                               int(max_memory))

    def abandon(self):
        self._c.abandon()


# --------------------------------------------------------------------------
# Signatures
# --------------------------------------------------------------------------

def _split_top(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class TensorType:
    """tensor<4x?xf32>: .shape (None for ?), .element_type, .dtype,
    .mutable."""

    def __init__(self, text):
        self.text = text
        self.mutable = text.startswith("mutable ")
        body = text[len("mutable "):] if self.mutable else text
        inner = body[len("tensor<"):-1]
        parts = inner.split("x")
        self.element_type = parts[-1]
        self.shape = tuple(None if d == "?" else int(d) for d in parts[:-1])
        self.dtype = np.dtype(_DTYPES.get(self.element_type, np.uint8))

    def __repr__(self):
        return self.text


def _check_shape(where, ttype, shape, element_type):
    shape = tuple(shape)
    if len(shape) != len(ttype.shape) or any(
            w is not None and w != d for w, d in zip(ttype.shape, shape)):
        raise ValueError("%s: expected shape %s (%s), got %s" % (
            where, "x".join("?" if d is None else str(d)
                            for d in ttype.shape) or "()",
            ttype.text, "x".join(str(d) for d in shape) or "()"))
    if element_type != ttype.element_type:
        raise TypeError("%s: expected element type %s, got %s" % (
            where, ttype.element_type, element_type))


def _parse_type(text):
    t = text.strip()
    if t.startswith("tensor<") or t.startswith("mutable tensor<"):
        return TensorType(t)
    return t


class Signature:
    """A function's signature as written: .params [(name, type)] and
    .results [type]; a type is a TensorType or a string ("i32",
    "!hal.fence", ...)."""

    def __init__(self, name, text):
        self.name = name
        self.text = text
        args, _, res = text.partition("->")
        args = args.strip()[1:-1]
        self.params = []
        for i, a in enumerate(_split_top(args)):
            if a.startswith("%") and ":" in a:
                n, _, t = a.partition(":")
                self.params.append((n.strip()[1:], _parse_type(t)))
            else:
                self.params.append(("arg%d" % i, _parse_type(a)))
        res = res.strip()
        if res.startswith("(") and res.endswith(")"):
            res = res[1:-1]
        self.results = [_parse_type(r) for r in _split_top(res)]

    def __repr__(self):
        return "@%s%s" % (self.name, self.text)


# --------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------

class Module:
    """A loaded module: .name, .functions {name: Signature} (as written,
    tensor types included), .lowered {name: Signature} (after the passes,
    f$async included), .info (hali_module_describe's JSON)."""

    def __init__(self, c, instance):
        self._c = c
        self.instance = instance
        self.name = c.name
        self.info = json.loads(c.describe(True))
        self.functions = {f["name"]: Signature(f["name"], f["signature"])
                          for f in self.info["functions_as_written"]}
        self.lowered = {f["name"]: Signature(f["name"], f["signature"])
                        for f in self.info["functions"]}

    def describe(self):
        """The text hali dump prints."""
        return self._c.describe(False)

    def to_bytes(self, strip=False):
        """The module as .hbc bytes (as written, before the passes)."""
        return self._c.write_binary(strip)

    def __repr__(self):
        return "<hali.Module @%s: %s>" % (
            self.name, ", ".join(str(s) for s in self.functions.values()))


def load(source, instance=None, passes=None, no_passes=False, name=None):
    """Loads a module from a path (str or os.PathLike) or from bytes
    (.hasm text or .hbc binary)."""
    inst = _instance(instance)
    if isinstance(source, (bytes, bytearray, memoryview)):
        c = _hali.load_bytes(inst._c, bytes(source), name or "<bytes>")
    else:
        c = _hali.load_file(inst._c, str(source), passes, no_passes)
    return Module(c, inst)


# --------------------------------------------------------------------------
# Fences and tensors
# --------------------------------------------------------------------------

class Fence:
    """A one-shot event: signalled by the host, the device or a program.
    wait(timeout) blocks with the GIL released; `await fence` does not block
    the event loop."""

    def __init__(self, signaled=False):
        self._c = _hali.Fence()
        if signaled:
            self._c.signal()

    @classmethod
    def _wrap(cls, c):
        f = cls.__new__(cls)
        f._c = c
        return f

    def signal(self):
        self._c.signal()

    def fail(self, message="failed by the host", code=2):
        """Fails it with a hali status (code: an int, default UNKNOWN)."""
        self._c.fail(message, int(code))

    @property
    def ready(self):
        """Whether it is signalled; raises the failure of a failed one."""
        return self._c.query()

    def wait(self, timeout=None):
        """True once signalled, False when |timeout| seconds pass first;
        raises the failure (a hali.Error) of a failed fence."""
        ns = -1 if timeout is None else max(0, int(timeout * 1e9))
        return self._c.wait_ns(ns)

    @staticmethod
    def join(*fences):
        """A fence signalled once every one of |fences| is (failed with the
        first failure)."""
        out = Fence()
        fences = [f for f in fences if f is not None]

        def waiter():
            try:
                for f in fences:
                    f.wait()
            except Error as e:
                out.fail(str(e), getattr(e, "code", 2))
                return
            out.signal()
        if not fences:
            out.signal()
        else:
            threading.Thread(target=waiter, daemon=True).start()
        return out

    def __await__(self):
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(err):
            if future.done():
                return
            if err is None:
                future.set_result(None)
            else:
                future.set_exception(err)

        def waiter():
            err = None
            try:
                self.wait()
            except Error as e:
                err = e
            try:
                loop.call_soon_threadsafe(settle, err)
            except RuntimeError:
                pass  # the loop closed meanwhile
        threading.Thread(target=waiter, daemon=True).start()
        return future.__await__()

    def __repr__(self):
        try:
            state = "signalled" if self.ready else "pending"
        except Error:
            state = "failed"
        return "<hali.Fence %s>" % state


class Tensor:
    """A buffer view a call returned: np.asarray(t) (or t.numpy()) waits for
    its fence, then views hali's storage without copying; passing it to
    another call hands the view over as it is."""

    def __init__(self, view, fence=None):
        self._view = view
        self.fence = fence

    @property
    def shape(self):
        return self._view.shape

    @property
    def element_type(self):
        return self._view.element_type_name()

    @property
    def dtype(self):
        return np.dtype(_DTYPES.get(self.element_type, np.uint8))

    @property
    def view(self):
        """The _hali.BufferView (buffer protocol, .address, .read())."""
        return self._view

    def numpy(self, copy=False):
        if self.fence is not None:
            self.fence.wait()
        a = np.asarray(self._view)
        if self.element_type == "bf16":
            a = a.view(np.uint16)
        return a.copy() if copy else a

    def __array__(self, dtype=None, copy=None):
        a = self.numpy(copy=bool(copy))
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return "<hali.Tensor %s %s>" % (
            "x".join(str(d) for d in self.shape), self.element_type)


class inout:
    """Marks an array a program may write (for !hal.buffer_view parameters,
    which are otherwise imported read-only)."""

    def __init__(self, array):
        self.array = array


# --------------------------------------------------------------------------
# Contexts and calls
# --------------------------------------------------------------------------

class Context:
    """Modules linked on a device.

    Context(modules, device=None, instance=None, imports=None,
            parameters=None, fuel=0, deadline=None, max_memory=0,
            max_call_depth=0, trace=None, trace_filter=None,
            fiber_threads=0)

    imports: {"env": {"name": callable or (signature, callable)}} registered
    on the instance first.  parameters: {"scope": path or [paths]} (or a
    _hali.Parameters).  deadline: seconds per invocation.  trace: a path
    (".json" writes a Chrome trace) or (path, "vm"|"hal"|"all")."""

    def __init__(self, modules, device=None, instance=None, imports=None,
                 parameters=None, fuel=0, deadline=None, max_memory=0,
                 max_call_depth=0, trace=None, trace_filter=None,
                 fiber_threads=0):
        if isinstance(modules, Module):
            modules = [modules]
        modules = list(modules)
        if not modules:
            raise ValueError("Context: no modules")
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError("Context: modules[%d] is %s, not a "
                                "hali.Module" % (i, type(m).__name__))
        self.instance = instance or modules[0].instance
        self.device = device or Device(instance=self.instance)
        self.modules = modules
        for mod_name, fns in (imports or {}).items():
            self.instance.register_imports(mod_name, fns)
        params = None
        if isinstance(parameters, _hali.Parameters):
            params = parameters
        elif parameters:
            params = _hali.Parameters()
            for scope, paths in parameters.items():
                if isinstance(paths, (str, bytes)) or hasattr(
                        paths, "__fspath__"):
                    paths = [paths]
                for p in paths:
                    params.add_file(scope, str(p))
        trace_path, bits, chrome = None, 0, False
        if trace is not None:
            if isinstance(trace, tuple):
                trace_path, what = trace
            else:
                trace_path, what = trace, "all"
            if what not in _TRACE_BITS:
                raise ValueError("trace: %r is not one of %s" % (
                    what, ", ".join(_TRACE_BITS)))
            bits = _TRACE_BITS[what]
            trace_path = str(trace_path)
            chrome = trace_path.endswith(".json")
        deadline_ns = 0 if deadline is None else max(1, int(deadline * 1e9))
        self._c = _hali.Context(
            self.instance._c, self.device._c, [m._c for m in modules],
            max_memory=int(max_memory), max_call_depth=int(max_call_depth),
            fuel=int(fuel), deadline_ns=deadline_ns, parameters=params,
            trace_path=trace_path, trace_bits=bits, trace_chrome=chrome,
            trace_filter=trace_filter, fiber_threads=int(fiber_threads))
        self._functions = {}

    def function(self, name):
        """The function |name| ("main", "module.main", "main$async")."""
        f = self._functions.get(name)
        if f is None:
            f = Function(self, name)
            self._functions[name] = f
        return f

    __getitem__ = function

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.function(name)
        except NotFoundError as e:  # noqa: F821 (made above)
            raise AttributeError(str(e)) from e

    def cancel(self):
        """Cancels every running or pending invocation (any thread)."""
        self._c.cancel()

    def run(self):
        """Runs ready invocations until each is done or waits."""
        self._c.run()

    def wait_idle(self, timeout=None):
        self._c.wait_idle(-1 if timeout is None else int(timeout * 1e9))

    def close(self):
        """Drops the context (its results stay valid)."""
        self._c = None
        self._functions = {}


def _signature_for(ctx, name):
    """The as-written and lowered signatures of |name| in |ctx|."""
    mod_name, _, fname = name.rpartition(".")
    for m in ctx.modules:
        if mod_name and m.name != mod_name:
            continue
        if fname in m.lowered:
            return m.functions.get(fname), m.lowered[fname]
    return None, None


class Function:
    """ctx.f(*args) runs it; ctx.f.async_(*args, wait=fence) chains it."""

    def __init__(self, ctx, name):
        self.context = ctx
        self.name = name
        self._c = ctx._c.lookup(name)
        self.signature, self.lowered = _signature_for(ctx, name)
        self._async = None
        self._async_sig = None
        if self.signature is not None and self.lowered is not None:
            base = name + "$async"
            _, low = _signature_for(ctx, base)
            if low is not None:
                self._async = ctx._c.lookup(base)
                self._async_sig = low

    def __repr__(self):
        return "<hali.Function %r>" % (self.signature or self.lowered)

    # Arguments -----------------------------------------------------------

    def _convert(self, args, keep):
        types = self._c.argument_types
        sig = self.signature
        params = sig.params if sig is not None and len(sig.params) == len(
            types) else [("arg%d" % i, t) for i, t in enumerate(types)]
        if len(args) != len(types):
            raise TypeError("@%s takes %d argument%s (%s), got %d" % (
                self.name, len(types), "" if len(types) == 1 else "s",
                ", ".join("%" + n for n, _ in params), len(args)))
        out = []
        for (pname, ptype), low, a in zip(params, types, args):
            out.append(self._convert_one(pname, ptype, low, a, keep))
        return out

    def _convert_one(self, pname, ptype, low, a, keep):
        where = "@%s parameter %%%s" % (self.name, pname)
        if isinstance(a, Tensor):
            if low != "!hal.buffer_view":
                raise TypeError("%s: expected %s, got a hali.Tensor" % (
                    where, low))
            if isinstance(ptype, TensorType):
                _check_shape(where, ptype, a.shape, a.element_type)
            if a.fence is not None:
                keep.append(a.fence)  # the call must come after its writer
            return a._view
        if isinstance(a, Fence):
            return a._c
        if low in ("i32", "i64"):
            if isinstance(a, (bool, np.bool_)) or not isinstance(
                    a, (int, np.integer)):
                raise TypeError("%s: expected an int (%s), got %s" % (
                    where, low, type(a).__name__))
            bits = 31 if low == "i32" else 63
            if not -(1 << bits) <= int(a) < (1 << bits):
                raise ValueError("%s: %d does not fit %s" % (where, a, low))
            return int(a)
        if low in ("f32", "f64"):
            if not isinstance(a, (int, float, np.integer, np.floating)) or \
                    isinstance(a, bool):
                raise TypeError("%s: expected a float (%s), got %s" % (
                    where, low, type(a).__name__))
            return float(a)
        if low == "!hal.buffer_view":
            writable = False
            if isinstance(a, inout):
                a, writable = a.array, True
            if not isinstance(a, np.ndarray):
                if isinstance(a, (int, float, bool, list, tuple)) and \
                        isinstance(ptype, TensorType):
                    a = np.asarray(a, dtype=ptype.dtype)
                else:
                    raise TypeError("%s: expected a numpy array, got %s" % (
                        where, type(a).__name__))
            if isinstance(ptype, TensorType):
                if a.dtype != ptype.dtype:
                    raise TypeError("%s: expected dtype %s (%s), got %s" % (
                        where, ptype.dtype, ptype.element_type, a.dtype))
                _check_shape(where, ptype, a.shape, ptype.element_type)
                et = ptype.element_type
                # A writable array is imported read-write: immutable tensor
                # parameters are never written (copy-on-write copies first)
                # and mutable ones are written in place.  (The signature
                # text hali_module_describe gives does not say "mutable".)
                writable = ptype.mutable or a.flags.writeable
            else:
                et = _FROM_DTYPE.get(a.dtype)
                if et is None:
                    raise TypeError("%s: no hali element type for dtype %s"
                                    % (where, a.dtype))
            if writable and not a.flags.writeable:
                raise ValueError("%s is mutable (the function writes its "
                                 "result into it): pass a writable array"
                                 % where)
            if not (a.flags.c_contiguous and a.flags.aligned):
                if isinstance(ptype, TensorType) and ptype.mutable:
                    raise ValueError("%s is mutable: pass a C-contiguous, "
                                     "aligned array (it is written in place)"
                                     % where)
                a = np.ascontiguousarray(a)  # the one copy
            view = _hali.import_view(a, ELEMENT_TYPES[et], a.shape, writable)
            keep.append(a)
            return view
        raise TypeError("%s: expected %s, got %s" % (where, low,
                                                     type(a).__name__))

    # Calls ---------------------------------------------------------------

    def _results(self, values, fence, copy):
        out = []
        for v in values:
            if isinstance(v, _hali.BufferView):
                t = Tensor(v, fence)
                out.append(t.numpy(copy=copy) if fence is None else t)
            elif isinstance(v, _hali.Fence):
                out.append(Fence._wrap(v))
            else:
                out.append(v)
        return out

    def __call__(self, *args, copy=False):
        """Runs it to completion (GIL released).  Tensor results come back
        as numpy arrays over hali's storage (copies with copy=True); one
        result is returned as is, several as a tuple, none as None."""
        keep = []
        conv = self._convert(args, keep)
        for f in keep:
            if isinstance(f, Fence):
                f.wait()  # a Tensor an async call is still writing
        res = self._results(self._c.invoke(conv), None, copy)
        if not res:
            return None
        return res[0] if len(res) == 1 else tuple(res)

    def invoke_async(self, *args):
        """Starts it without running it: an Invocation."""
        keep = []
        conv = self._convert(args, keep)
        return Invocation(self, self._c.invoke_async(conv), keep)

    def async_(self, *args, wait=None):
        """Starts the function's f$async form after |wait| (a Fence, a list
        of them, or None) and returns (results, fence): the fence is
        signalled when the results' contents are ready.  results is a
        list of Tensors (np.asarray waits for the fence) and scalars; it
        can be passed on to the next async_ call with wait=fence."""
        if self._async is None:
            raise TypeError("@%s has no f$async form (it is not a "
                            "tensor-level function)" % self.name)
        keep = []
        conv = self._convert(args, keep)
        # Tensors other async calls are still writing: wait for them too.
        waits = list(wait) if isinstance(wait, (list, tuple)) else [wait]
        for f in keep:
            if isinstance(f, Fence) and all(f is not w for w in waits) and \
                    not f.ready:
                waits.append(f)
        waits = [w for w in waits if w is not None]
        if not waits:
            wait = Fence(signaled=True)
        elif len(waits) == 1:
            wait = waits[0]
        else:
            wait = Fence.join(*waits)
        signal = Fence()
        inv = self._async.invoke_async(conv + [wait._c, signal._c])
        invocation = Invocation(self, inv, keep)
        self.context._c.run()
        return AsyncResults(invocation, signal), signal


class Invocation:
    """A started call: wait(timeout), done, results(), fence, cancel()."""

    def __init__(self, function, c, keep):
        self.function = function
        self._c = c
        self._keep = keep  # the arrays imported, alive as long as it is

    def wait(self, timeout=None):
        """True when it finished (False on timeout); does not raise its
        failure (results() and status() do)."""
        return self._c.wait_ns(-1 if timeout is None
                               else max(0, int(timeout * 1e9)))

    @property
    def done(self):
        return self._c.done()

    def status(self):
        self._c.status()

    def results(self, fence=None):
        self.wait()
        return self.function._results(self._c.results(), fence, False)

    @property
    def fence(self):
        return Fence._wrap(self._c.fence())

    def cancel(self):
        self._c.cancel()


class AsyncResults:
    """The results of an async_ call: a sequence resolved when first used
    (waiting for the invocation to return, not for its device work)."""

    def __init__(self, invocation, fence):
        self.invocation = invocation
        self.fence = fence
        self._values = None

    def _resolve(self):
        if self._values is None:
            self._values = self.invocation.results(self.fence)
        return self._values

    def __len__(self):
        return len(self._resolve())

    def __getitem__(self, i):
        return self._resolve()[i]

    def __iter__(self):
        return iter(self._resolve())

    def __repr__(self):
        return "<hali.AsyncResults %s>" % (
            self._values if self._values is not None else "pending")
