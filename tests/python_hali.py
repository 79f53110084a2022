"""The Python binding's test suite (run by tests/python.test: PYTHONPATH
holds the build tree's python/ and HALI_TOP_SRCDIR/HALI_TOP_BUILDDIR name
the trees).  Every method of the package; references computed with numpy
or taken from `hali run`."""

import asyncio
import gc
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import hali
from hali import _hali

SRC = os.environ.get("HALI_TOP_SRCDIR", ".")
BUILD = os.environ.get("HALI_TOP_BUILDDIR", ".")
# The tool is an ordinary program: under a sanitizer build it carries its
# own ASan runtime, so the one tests/python.test preloads for python must
# not reach it.
CLI_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
MLP = os.path.join(SRC, "examples", "mlp_tensor.hasm")
MLP_RODATA = os.path.join(SRC, "examples", "mlp_tensor_rodata.hasm")
WEIGHTS = os.path.join(BUILD, "examples", "mlp.safetensors")
if not os.path.exists(WEIGHTS):
    WEIGHTS = os.path.join(SRC, "examples", "mlp.safetensors")

SCALARS = b"""module @scalars
func @env.add(%a: i32, %b: i32) -> i32 import
func @mix(%a: i32, %b: i64, %c: f32, %d: f64) -> (i64, f64) {
  %a64 = ext.s.i32.i64 %a
  %s = add.i64 %a64, %b
  %c64 = fpext.f32.f64 %c
  %t = add.f64 %c64, %d
  return %s, %t
}
func @twice_add(%x: i32) -> i32 {
  %y = call @env.add(%x, %x)
  return %y
}
func @spin() -> i32 {
  %x = const.i32 0
  %one = const.i32 1
  br ^loop
^loop:
  %x = add.i32 %x, %one
  br ^loop
}
func @outer() -> i32 {
  %r = call @spin()
  return %r
}
"""

VIEWS = b"""module @views
func @same(%v: !hal.buffer_view) -> !hal.buffer_view {
  return %v
}
func @splat_into(%a: mutable tensor<4xi32>, %v: i32) {
  %t = tensor.splat %v : tensor<4xi32>
  tensor.overwrite %t, %a
  return
}
func @copy(%a: tensor<4xi32>) -> tensor<4xi32> {
  %c = tensor.clone %a
  return %c
}
func @copy64(%a: tensor<64xf32>) -> tensor<64xf32> {
  %c = tensor.clone %a
  return %c
}
func @big(%v: i32) -> tensor<1048576xi32> {
  %t = tensor.splat %v : tensor<1048576xi32>
  return %t
}
"""


def safetensors(path):
    """{key: array} read with numpy and json only (an independent reader)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        assert info["dtype"] == "F32"
        out[key] = np.frombuffer(data[8 + n + begin:8 + n + end],
                                 dtype=np.float32).reshape(info["shape"])
    return out


def mlp_reference(x):
    w = safetensors(WEIGHTS)
    h = np.maximum(w["w1"].reshape(128, 64) @ x + w["b1"], 0)
    return w["w2"].reshape(10, 128) @ h + w["b2"]


def mlp_context(**kw):
    return hali.Context([hali.load(MLP)],
                        parameters={"model": WEIGHTS}, **kw)


class TestBasics(unittest.TestCase):
    def test_version_and_element_types(self):
        self.assertEqual(hali.version, "0.1.0")
        self.assertEqual(len(hali.ELEMENT_TYPES), 18)
        self.assertEqual(hali.ELEMENT_TYPES["f32"], 0x21000020)
        self.assertIs(hali.errors_by_code[3], hali.InvalidArgumentError)
        self.assertTrue(issubclass(hali.DeadlineExceededError, TimeoutError))
        self.assertTrue(issubclass(hali.CancelledError, hali.Error))

    def test_load_path_and_bytes_and_signatures(self):
        m = hali.load(MLP)
        self.assertEqual(m.name, "mlp_tensor")
        sig = m.functions["mlp"]
        self.assertEqual(sig.params[0][0], "x")
        t = sig.params[0][1]
        self.assertIsInstance(t, hali.TensorType)
        self.assertEqual((t.shape, t.element_type, t.mutable),
                         ((64,), "f32", False))
        self.assertEqual(sig.results[0].shape, (10,))
        self.assertIn("mlp$async", m.lowered)
        self.assertEqual([n for n, _ in m.lowered["mlp$async"].params],
                         ["x.view", "wait", "signal"])
        self.assertIn("mlp_tensor", m.describe())
        self.assertEqual(m.info["module"], "mlp_tensor")
        # .hbc bytes load back to the same module.
        again = hali.load(m.to_bytes(), name="mlp.hbc")
        self.assertEqual(again.functions["mlp"].text, sig.text)
        self.assertEqual(hali.TensorType("mutable tensor<?x4xf32>").shape,
                         (None, 4))
        self.assertTrue(hali.TensorType("mutable tensor<4xi32>").mutable)
        self.assertEqual(hali.TensorType("tensor<i8>").shape, ())

    def test_load_errors(self):
        with self.assertRaises(hali.Error) as e:
            hali.load(b"module @m\nfunc @f( {\n", name="broken.hasm")
        self.assertIn("broken.hasm", str(e.exception))
        self.assertEqual(e.exception.code, 3)
        self.assertEqual(e.exception.code_name, "INVALID_ARGUMENT")
        with self.assertRaises(hali.NotFoundError) as e:
            hali.load("/nonexistent/x.hasm")
        self.assertIn("/nonexistent/x.hasm", str(e.exception))
        with self.assertRaises(hali.Error):
            hali.load(MLP, passes="no-such-pass")

    def test_device_kinds(self):
        hali.Device("local-task", workers=2)
        with self.assertRaises(hali.NotFoundError) as e:
            hali.Device("gpu")
        self.assertIn("local-sync", str(e.exception))


class TestFlagship(unittest.TestCase):
    def test_main_matches_cli_and_numpy(self):
        out = subprocess.run(
            [os.path.join(BUILD, "tools", "hali"), "run", MLP,
             "--parameters=model=" + WEIGHTS],
            check=True, capture_output=True, text=True,
            env=CLI_ENV).stdout
        line = [ln for ln in out.splitlines() if ln.startswith("10xf32=")][0]
        cli = np.array([float(v) for v in line[7:].split()], np.float32)
        for dev in (hali.Device("local-sync"),
                    hali.Device("local-task", workers=2)):
            ctx = hali.Context([hali.load(MLP)], device=dev,
                               parameters={"model": WEIGHTS})
            logits = ctx.main()
            self.assertEqual(logits.shape, (10,))
            self.assertEqual(logits.dtype, np.float32)
            np.testing.assert_array_equal(logits, cli)
        x = safetensors(WEIGHTS)["input"]
        np.testing.assert_allclose(logits, mlp_reference(x), rtol=1e-5,
                                   atol=1e-6)

    def test_example_script(self):
        out = subprocess.run(
            [sys.executable, os.path.join(SRC, "examples", "python",
                                          "mlp.py"), WEIGHTS],
            check=True, capture_output=True, text=True).stdout
        self.assertIn("@mlp(%x: tensor<64xf32>) -> (tensor<10xf32>)", out)
        self.assertIn("main: [ 0.00096752  0.08048268", out)
        ref = mlp_reference(np.linspace(-1, 1, 64, dtype=np.float32))
        self.assertIn("async: " + str(ref.astype(np.float32))[:20], out)

    def test_gpt_example_matches_numpy(self):
        gpt = os.path.join(BUILD, "examples", "gpt")
        weights = os.path.join(gpt, "gpt.safetensors")
        if not os.path.exists(weights) or not os.path.exists(
                os.path.join(gpt, "kernels.so")):
            self.skipTest("the GPT example's weights and kernels are not built")
        out = subprocess.run(
            [sys.executable, os.path.join(SRC, "examples", "python",
                                          "gpt.py"),
             "--weights=" + weights, "--kernels=" + gpt, "--check"],
            capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr + out.stdout)
        self.assertIn("matches the numpy reference (16 rows)", out.stdout)
        self.assertIn("@generate: [", out.stdout)

    def test_rodata_variant(self):
        ctx = hali.Context(hali.load(MLP_RODATA))
        ref = mlp_context().main()
        np.testing.assert_array_equal(ctx.main(), ref)

    def test_mlp_on_numpy_input(self):
        ctx = mlp_context(device=hali.Device("local-task", workers=2))
        x = np.random.default_rng(22).standard_normal(64).astype(np.float32)
        np.testing.assert_allclose(ctx.mlp(x), mlp_reference(x), rtol=1e-5,
                                   atol=1e-5)
        # A list is converted by the signature's tensor type.
        np.testing.assert_allclose(ctx.mlp(list(x)), ctx.mlp(x))


class TestScalarsAndArguments(unittest.TestCase):
    def setUp(self):
        inst = hali.Instance()
        self.ctx = hali.Context(
            [hali.load(SCALARS, instance=inst)], instance=inst,
            imports={"env": {"add": ("(i32, i32) -> i32",
                                     lambda a, b: a + b)}})

    def test_scalars_converted_by_signature(self):
        s, t = self.ctx.mix(3, 2 ** 40, 2.5, 0.25)
        self.assertEqual(s, 2 ** 40 + 3)
        self.assertEqual(t, 2.75)
        self.assertEqual(self.ctx.mix(-1, 1, 1, np.float64(2)), (0, 3.0))
        self.assertEqual(self.ctx.twice_add(21), 42)

    def test_bad_arguments_name_the_parameter(self):
        with self.assertRaises(TypeError) as e:
            self.ctx.mix(1, 2, 3)
        self.assertIn("@mix takes 4 arguments (%a, %b, %c, %d), got 3",
                      str(e.exception))
        with self.assertRaises(TypeError) as e:
            self.ctx.mix(1.5, 2, 3.0, 4.0)
        self.assertIn("@mix parameter %a: expected an int (i32), got float",
                      str(e.exception))
        with self.assertRaises(ValueError) as e:
            self.ctx.mix(2 ** 31, 2, 3.0, 4.0)
        self.assertIn("%a: 2147483648 does not fit i32", str(e.exception))
        with self.assertRaises(TypeError) as e:
            self.ctx.mix(1, 2, "x", 4.0)
        self.assertIn("%c: expected a float (f32), got str", str(e.exception))
        with self.assertRaises(AttributeError):
            self.ctx.nothing_here
        with self.assertRaises(hali.NotFoundError):
            self.ctx["nothing_here"]

    def test_import_exception_becomes_hali_error(self):
        inst = hali.Instance()

        def bad(a, b):
            raise ValueError("no adding today")
        ctx = hali.Context([hali.load(SCALARS, instance=inst)],
                           instance=inst, imports={"env": {"add": bad}})
        with self.assertRaises(hali.Error) as e:
            ctx.twice_add(1)
        self.assertIn("import @env.add: python ValueError: no adding today",
                      str(e.exception))
        # The Python traceback's innermost frame is one of the annotations.
        self.assertTrue(any("in bad" in f and "python_hali.py" in f
                            for f in e.exception.frames), e.exception.frames)
        self.assertTrue(any("twice_add" in f for f in e.exception.frames))

    def test_import_raising_a_hali_error_keeps_its_code(self):
        inst = hali.Instance()

        def missing(a, b):
            raise hali.NotFoundError("no such thing")
        ctx = hali.Context([hali.load(SCALARS, instance=inst)],
                           instance=inst, imports={"env": {"add": missing}})
        with self.assertRaises(hali.NotFoundError) as e:
            ctx.twice_add(1)
        self.assertIn("no such thing", e.exception.message)

    def test_import_signature_mismatch(self):
        inst = hali.Instance()
        with self.assertRaises(hali.InvalidArgumentError) as e:
            hali.Context([hali.load(SCALARS, instance=inst)], instance=inst,
                         imports={"env": {"add": ("(i32) -> i32", abs)}})
        self.assertIn("(i32) -> (i32)", str(e.exception))


IMPORT_VIEWS = b"""module @iv
func @env.make(%n: i32) -> !hal.buffer_view import
func @env.total(%v: !hal.buffer_view) -> f64 import
func @roundtrip(%n: i32) -> f64 {
  %v = call @env.make(%n)
  %s = call @env.total(%v)
  return %s
}
func @made(%n: i32) -> !hal.buffer_view {
  %v = call @env.make(%n)
  return %v
}
"""

FFI = b"""module @ffi
func @c.imp_add3(%a: i32, %b: i32, %c: i32) -> i32 import
func @c.imp_mix(%a: f64, %b: f32) -> f64 import
func @run(%x: i32, %y: f64) -> (i32, f64) {
  %r = call @c.imp_add3(%x, %x, %x)
  %f = const.f32 3.0
  %m = call @c.imp_mix(%y, %f)
  return %r, %m
}
"""


class TestHostImports(unittest.TestCase):
    def test_views_in_and_out_of_python_imports(self):
        seen = []

        def make(n):
            return np.arange(n, dtype=np.float32) * 2

        def total(a):
            seen.append(a)
            return float(a.sum())
        inst = hali.Instance()
        ctx = hali.Context(hali.load(IMPORT_VIEWS, instance=inst),
                           instance=inst,
                           imports={"env": {"make": make, "total": total}})
        self.assertEqual(ctx.roundtrip(5), 20.0)
        self.assertIsInstance(seen[0], np.ndarray)
        self.assertEqual(seen[0].tolist(), [0, 2, 4, 6, 8])
        np.testing.assert_array_equal(ctx.made(3), [0, 2, 4])

    def test_import_returning_the_wrong_type(self):
        inst = hali.Instance()
        ctx = hali.Context(hali.load(IMPORT_VIEWS, instance=inst),
                           instance=inst,
                           imports={"env": {"make": lambda n: "nope",
                                            "total": lambda a: 0.0}})
        with self.assertRaises(hali.Error) as e:
            ctx.made(1)
        self.assertIn("import @env.make: python TypeError", str(e.exception))
        self.assertIn("expected !hal.buffer_view, got str", str(e.exception))

    def test_frozen_instance(self):
        inst = hali.Instance()
        hali.Context(hali.load(VIEWS, instance=inst), instance=inst)
        with self.assertRaises(hali.Error) as e:
            inst.register_imports("late", {"f": abs})
        self.assertEqual(e.exception.code_name, "FAILED_PRECONDITION")

    def test_ffi_library(self):
        so = os.path.join(BUILD, "tests", "kernels", "test_imports.so")
        if not os.path.exists(so):
            self.skipTest("tests/kernels/test_imports.so is not built")
        inst = hali.Instance()
        inst.register_ffi_library("c", so)
        with self.assertRaises(hali.AlreadyExistsError):
            inst.register_ffi_library("c", so)
        ctx = hali.Context(hali.load(FFI, instance=inst), instance=inst)
        # ctx.run is the Context method: such names go through ctx[...].
        self.assertEqual(ctx["run"](5, 1.25), (15, 5.5))


class TestZeroCopy(unittest.TestCase):
    def setUp(self):
        self.ctx = hali.Context(hali.load(VIEWS))

    def test_import_shares_memory_both_ways(self):
        x = np.arange(16, dtype=np.float32)
        r = self.ctx.same(x)
        self.assertTrue(np.shares_memory(r, x))
        self.assertEqual(r.ctypes.data, x.ctypes.data)
        # Read-only unless asked: the result is not writable.
        self.assertFalse(r.flags.writeable)
        r2 = self.ctx.same(hali.inout(x))
        self.assertTrue(r2.flags.writeable)
        r2[0] = 42
        self.assertEqual(x[0], 42)

    def test_view_address(self):
        x = np.arange(4, dtype=np.int32)
        v = _hali.import_view(x, hali.ELEMENT_TYPES["i32"], x.shape, False)
        self.assertEqual(v.address, x.ctypes.data)
        self.assertFalse(v.writable)
        self.assertEqual(v.shape, (4,))
        self.assertEqual(v.byte_length, 16)
        self.assertEqual(v.read(), x.tobytes())

    def test_mutable_parameter_written_in_place(self):
        a = np.zeros(4, np.int32)
        self.assertIsNone(self.ctx.splat_into(a, 7))
        np.testing.assert_array_equal(a, [7, 7, 7, 7])
        # A read-only array is imported read-only: hali refuses it before
        # the function starts, naming the parameter.
        ro = np.zeros(4, np.int32)
        ro.flags.writeable = False
        with self.assertRaises(hali.PermissionDeniedError) as e:
            self.ctx.splat_into(ro, 1)
        self.assertIn("@splat_into argument 0 (%a) is a mutable parameter",
                      str(e.exception))
        self.assertEqual(ro.tolist(), [0, 0, 0, 0])
        # An immutable parameter given a writable array never writes it.
        a = np.array([1, 2, 3, 4], np.int32)
        self.ctx.copy(a)
        self.assertEqual(a.tolist(), [1, 2, 3, 4])

    def test_results_view_storage_or_copy(self):
        a = np.array([1, 2, 3, 4], np.int32)
        c = self.ctx.copy(a)
        np.testing.assert_array_equal(c, a)
        self.assertFalse(np.shares_memory(c, a))
        base = c.base.obj  # the BufferView behind the array
        self.assertIsInstance(base, _hali.BufferView)
        self.assertEqual(base.address, c.ctypes.data)
        c2 = self.ctx.copy(a, copy=True)
        self.assertTrue(c2.flags.owndata)

    def test_non_contiguous_input_is_copied(self):
        a = np.arange(8, dtype=np.int32)[::2]
        np.testing.assert_array_equal(self.ctx.copy(a), [0, 2, 4, 6])

    def test_wrong_dtype_and_shape(self):
        with self.assertRaises(TypeError) as e:
            self.ctx.copy(np.zeros(4, np.float32))
        self.assertIn("@copy parameter %a: expected dtype int32 (i32), got "
                      "float32", str(e.exception))
        with self.assertRaises(ValueError) as e:
            self.ctx.copy(np.zeros((2, 2), np.int32))
        self.assertIn("expected shape 4 (tensor<4xi32>), got 2x2",
                      str(e.exception))
        with self.assertRaises(TypeError):
            self.ctx.copy("abcd")

    def test_results_outlive_the_context(self):
        ctx = hali.Context(hali.load(VIEWS))
        c = ctx.copy(np.array([5, 6, 7, 8], np.int32))
        del ctx
        gc.collect()
        np.testing.assert_array_equal(c, [5, 6, 7, 8])

    def test_input_pinned_until_hali_lets_go(self):
        x = np.arange(4, dtype=np.int32)
        v = _hali.import_view(x, hali.ELEMENT_TYPES["i32"], x.shape, True)
        del x
        gc.collect()
        self.assertEqual(np.asarray(v).tolist(), [0, 1, 2, 3])


class TestLeaks(unittest.TestCase):
    def test_everything_released(self):
        """hali's own count of live host blocks returns to where it was once
        the binding's objects are gone: no handle leaks a reference."""
        hali.load(VIEWS)  # the default instance exists before the count
        gc.collect()
        base = _hali.host_allocations_live()

        def work():
            ctx = mlp_context(device=hali.Device("local-task", workers=2))
            x = np.ones(64, np.float32)
            y = ctx.mlp(x)
            go = hali.Fence()
            r, f = ctx.mlp.async_(x, wait=go)
            go.signal()
            f.wait()
            z = np.asarray(r[0])
            np.testing.assert_array_equal(y, z)
            inv = ctx.main.invoke_async()
            inv.wait()
            inv.results()
            with self.assertRaises(ValueError):
                ctx.mlp(np.ones(3, np.float32))
            views = hali.Context(hali.load(VIEWS))
            views.same(np.arange(4, dtype=np.int32))
            views.splat_into(np.zeros(4, np.int32), 1)
        work()
        gc.collect()
        for _ in range(100):  # a queue thread may still drop a reference
            if _hali.host_allocations_live() <= base:
                break
            time.sleep(0.01)
        self.assertLessEqual(_hali.host_allocations_live(), base)


class TestLimits(unittest.TestCase):
    def test_fuel(self):
        ctx = hali.Context(hali.load(SCALARS), fuel=10000,
                           imports=None, instance=hali.Instance(),
                           ) if False else None
        inst = hali.Instance()
        inst.register_imports("env", {"add": lambda a, b: a + b})
        ctx = hali.Context(hali.load(SCALARS, instance=inst), instance=inst,
                           fuel=10000)
        with self.assertRaises(hali.ResourceExhaustedError) as e:
            ctx.outer()
        self.assertIn("fuel", str(e.exception))
        self.assertEqual(e.exception.code_name, "RESOURCE_EXHAUSTED")
        self.assertTrue(len(e.exception.frames) >= 2, e.exception.frames)
        self.assertTrue(any("@spin" in f for f in e.exception.frames))
        self.assertTrue(any("@outer" in f for f in e.exception.frames))

    def test_deadline(self):
        inst = hali.Instance()
        inst.register_imports("env", {"add": lambda a, b: a + b})
        ctx = hali.Context(hali.load(SCALARS, instance=inst), instance=inst,
                           deadline=0.05)
        t = time.monotonic()
        with self.assertRaises(TimeoutError) as e:
            ctx.spin()
        self.assertIsInstance(e.exception, hali.DeadlineExceededError)
        self.assertLess(time.monotonic() - t, 5)

    def test_memory(self):
        ctx = hali.Context(hali.load(VIEWS), max_memory=1 << 20)
        with self.assertRaises(hali.ResourceExhaustedError):
            ctx.big(1)
        r = hali.Context(hali.load(VIEWS)).big(3)
        self.assertEqual(r.shape, (1048576,))
        self.assertTrue((r == 3).all())

    def test_device_memory_limit_and_fiber_threads(self):
        dev = hali.Device("local-task", workers=1, max_memory=1 << 20)
        with self.assertRaises(hali.ResourceExhaustedError):
            hali.Context(hali.load(VIEWS), device=dev).big(1)
        ctx = hali.Context(hali.load(VIEWS), fiber_threads=2)
        np.testing.assert_array_equal(ctx.copy(np.arange(4, dtype=np.int32)),
                                      [0, 1, 2, 3])

    def test_cancel_from_another_thread(self):
        started = threading.Event()
        inst = hali.Instance()
        inst.register_imports("env", {"add": lambda a, b: a + b})
        ctx = hali.Context(hali.load(SCALARS, instance=inst), instance=inst)

        def canceller():
            started.wait()
            time.sleep(0.05)
            ctx.cancel()
        th = threading.Thread(target=canceller)
        th.start()
        started.set()
        # The spin only stops if the other thread can run: the GIL is
        # released while hali runs.
        with self.assertRaises(hali.CancelledError):
            ctx.spin()
        th.join()


class TestThreads(unittest.TestCase):
    def test_gil_released_while_hali_runs(self):
        inst = hali.Instance()
        inst.register_imports("env", {"add": lambda a, b: a + b})
        ctx = hali.Context(hali.load(SCALARS, instance=inst), instance=inst,
                           deadline=0.3)
        ticks = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)
        th = threading.Thread(target=count)
        th.start()
        time.sleep(0.01)
        before = ticks[0]
        with self.assertRaises(hali.DeadlineExceededError):
            ctx.spin()   # 0.3 s in hali
        during = ticks[0] - before
        stop.set()
        th.join()
        self.assertGreater(during, 20)

    def test_contexts_on_threads(self):
        x = np.random.default_rng(5).standard_normal(64).astype(np.float32)
        ref = mlp_context().mlp(x)
        dev = hali.Device("local-task", workers=2)
        errors, results = [], []

        def work():
            try:
                ctx = mlp_context(device=dev)
                for _ in range(20):
                    results.append(ctx.mlp(x).copy())
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 80)
        for r in results:
            np.testing.assert_array_equal(r, ref)

    def test_one_context_shared_by_threads(self):
        ctx = mlp_context()
        x = np.ones(64, np.float32)
        ref = ctx.mlp(x).copy()
        out = []
        threads = [threading.Thread(
            target=lambda: out.extend(ctx.mlp(x).copy() for _ in range(10)))
            for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(out), 30)
        for r in out:
            np.testing.assert_array_equal(r, ref)


class TestAsync(unittest.TestCase):
    def test_fences(self):
        f = hali.Fence()
        self.assertFalse(f.ready)
        self.assertFalse(f.wait(timeout=0.01))
        f.signal()
        self.assertTrue(f.ready)
        self.assertTrue(f.wait(timeout=0))
        self.assertIn("signalled", repr(f))
        g = hali.Fence()
        g.fail("the host gave up", code=10)
        with self.assertRaises(hali.AbortedError) as e:
            g.wait()
        self.assertIn("the host gave up", str(e.exception))
        with self.assertRaises(hali.AbortedError):
            g.ready
        with self.assertRaises(ValueError):
            hali.Fence().fail("x", code=0)

    def test_join(self):
        a, b = hali.Fence(), hali.Fence()
        j = hali.Fence.join(a, b)
        a.signal()
        self.assertFalse(j.wait(timeout=0.05))
        b.signal()
        self.assertTrue(j.wait(timeout=5))
        c = hali.Fence()
        c.fail("bad", code=13)
        with self.assertRaises(hali.InternalError):
            hali.Fence.join(hali.Fence(signaled=True), c).wait(timeout=5)
        self.assertTrue(hali.Fence.join().wait(timeout=0))

    def test_async_call_waits_for_its_fence(self):
        ctx = mlp_context(device=hali.Device("local-task", workers=2))
        x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
        ref = ctx.mlp(x).copy()
        go = hali.Fence()
        results, done = ctx.mlp.async_(x, wait=go)
        self.assertFalse(done.wait(timeout=0.05))
        go.signal()
        self.assertTrue(done.wait(timeout=10))
        t = results[0]
        self.assertIsInstance(t, hali.Tensor)
        self.assertEqual(t.shape, (10,))
        np.testing.assert_array_equal(np.asarray(t), ref)
        np.testing.assert_array_equal(t.numpy(copy=True), ref)

    def test_chain_two_calls(self):
        ctx = hali.Context([hali.load(VIEWS), hali.load(MLP)],
                           parameters={"model": WEIGHTS},
                           device=hali.Device("local-task", workers=2))
        x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
        go = hali.Fence()
        r1, f1 = ctx.copy64.async_(x, wait=go)
        r2, f2 = ctx.mlp.async_(r1[0], wait=f1)
        go.signal()
        self.assertTrue(f2.wait(timeout=10))
        np.testing.assert_allclose(np.asarray(r2[0]), mlp_reference(x),
                                   rtol=1e-5, atol=1e-5)
        # A list of fences is joined.
        r3, f3 = ctx.mlp.async_(x, wait=[f1, f2])
        np.testing.assert_array_equal(np.asarray(r3[0]), np.asarray(r2[0]))

    def test_tensor_arguments_wait_for_their_writer(self):
        ctx = hali.Context([hali.load(VIEWS), hali.load(MLP)],
                           parameters={"model": WEIGHTS},
                           device=hali.Device("local-task", workers=2))
        x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
        ref = mlp_reference(x)
        go = hali.Fence()
        r1, f1 = ctx.copy64.async_(x, wait=go)
        # No wait= given: the Tensor's own fence is waited for.
        r2, f2 = ctx.mlp.async_(r1[0])
        self.assertFalse(f2.wait(timeout=0.05))
        threading.Timer(0.05, go.signal).start()
        np.testing.assert_allclose(np.asarray(r2[0]), ref, rtol=1e-5,
                                   atol=1e-5)
        # A synchronous call given a pending Tensor waits for it first.
        go2 = hali.Fence()
        r3, f3 = ctx.copy64.async_(x, wait=go2)
        threading.Timer(0.05, go2.signal).start()
        np.testing.assert_allclose(ctx.mlp(r3[0]), ref, rtol=1e-5, atol=1e-5)

    def test_array_freed_while_in_flight(self):
        ctx = mlp_context(device=hali.Device("local-task", workers=2))
        x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
        ref = mlp_reference(x)
        go = hali.Fence()
        results, done = ctx.mlp.async_(x.copy(), wait=go)
        gc.collect()
        go.signal()
        self.assertTrue(done.wait(timeout=10))
        del ctx
        gc.collect()
        np.testing.assert_allclose(np.asarray(results[0]), ref, rtol=1e-5,
                                   atol=1e-5)

    def test_no_async_form(self):
        ctx = hali.Context(hali.load(VIEWS))
        with self.assertRaises(TypeError) as e:
            ctx.same.async_(np.zeros(1))
        self.assertIn("@same has no f$async form", str(e.exception))

    def test_asyncio_does_not_block_the_loop(self):
        f = hali.Fence()
        ticks = []

        async def ticker():
            for i in range(5):
                ticks.append(i)
                await asyncio.sleep(0.01)

        async def main():
            threading.Timer(0.2, f.signal).start()
            t = asyncio.ensure_future(ticker())
            await f
            await t
            return len(ticks)
        self.assertEqual(asyncio.run(main()), 5)

        g = hali.Fence()
        g.fail("nope", code=5)

        async def failing():
            await g
        with self.assertRaises(hali.NotFoundError):
            asyncio.run(failing())

        async def timeout():
            await asyncio.wait_for(hali.Fence(), 0.05)
        with self.assertRaises(asyncio.TimeoutError):
            asyncio.run(timeout())

    def test_invocation_api(self):
        inst = hali.Instance()
        inst.register_imports("env", {"add": lambda a, b: a + b})
        ctx = hali.Context(hali.load(SCALARS, instance=inst), instance=inst)
        inv = ctx.twice_add.invoke_async(5)
        self.assertTrue(inv.wait(timeout=10))
        self.assertTrue(inv.done)
        inv.status()
        self.assertEqual(inv.results(), [10])
        self.assertTrue(inv.fence.ready)
        spin = ctx.spin.invoke_async()
        self.assertFalse(spin.wait(timeout=0.02))
        self.assertFalse(spin.done)
        spin.cancel()
        self.assertTrue(spin.wait(timeout=10))
        with self.assertRaises(hali.CancelledError):
            spin.status()
        with self.assertRaises(hali.CancelledError):
            spin.results()


class TestTracing(unittest.TestCase):
    def test_text_and_chrome_traces(self):
        if not _hali.trace_available():
            self.skipTest("configured with --disable-tracing")
        with tempfile.TemporaryDirectory() as d:
            txt = os.path.join(d, "t.txt")
            ctx = hali.Context(hali.load(VIEWS), trace=(txt, "vm"))
            ctx.copy(np.zeros(4, np.int32))
            ctx.close()
            del ctx
            gc.collect()
            with open(txt) as f:
                text = f.read()
            self.assertIn("enter @copy", text)
            # trace_filter limits VM lines to the functions it matches.
            flt = os.path.join(d, "f.txt")
            ctx = hali.Context(hali.load(VIEWS), trace=(flt, "vm"),
                               trace_filter="spl*")
            ctx.copy(np.zeros(4, np.int32))
            ctx.splat_into(np.zeros(4, np.int32), 2)
            ctx.close()
            del ctx
            gc.collect()
            with open(flt) as f:
                text = f.read()
            self.assertIn("splat_into", text)
            self.assertNotIn("enter @copy", text)
            js = os.path.join(d, "t.json")
            ctx = mlp_context(trace=js)
            ctx.main()
            ctx.close()
            del ctx
            gc.collect()
            with open(js) as f:
                trace = json.load(f)
            events = trace["traceEvents"] if isinstance(trace, dict) \
                else trace
            self.assertTrue(any("dispatch" in json.dumps(e).lower()
                                for e in events))
        with self.assertRaises(ValueError):
            hali.Context(hali.load(VIEWS), trace=("x", "everything"))
        with self.assertRaises(hali.Error) as e:
            hali.Context(hali.load(VIEWS), trace="/nonexistent/dir/t.txt")
        self.assertIn("/nonexistent/dir/t.txt", str(e.exception))


class TestParameters(unittest.TestCase):
    def test_parameters_errors(self):
        with self.assertRaises(hali.NotFoundError) as e:
            mlp = hali.load(MLP)
            hali.Context(mlp, parameters={"model": "/nonexistent.npy"})
        self.assertIn("/nonexistent.npy", str(e.exception))
        with self.assertRaises(hali.NotFoundError):
            hali.Context(hali.load(MLP))  # the weights are missing
        p = _hali.Parameters()
        p.add_file("model", WEIGHTS)
        self.assertEqual(p.file_count(), 1)
        ctx = hali.Context(hali.load(MLP), parameters=p)
        self.assertEqual(ctx.main().shape, (10,))


if __name__ == "__main__":
    unittest.main()
