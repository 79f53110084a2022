/* _hali: the CPython extension under the `hali` package (python/hali/).
 *
 * A thin layer over the public C API (include/hali/hali.h) and nothing
 * else: one Python type per hali handle, statuses turned into exceptions,
 * the GIL released around every call that may run programs or wait.  The
 * conveniences (signatures, numpy conversion, asyncio) live in
 * python/hali/__init__.py; doc/python.md is the tutorial.
 *
 * Two rules keep it free of deadlocks and use-after-free:
 *  - Every hali call that may block or drop the last reference of a device,
 *    context or invocation runs with the GIL released: hali may call back
 *    into Python from its own threads (the release callback of imported
 *    memory, on a device queue thread) and those callbacks take the GIL.
 *  - Host memory imported from a Python buffer (a numpy array) is pinned by
 *    a Py_buffer that only hali's release callback gives back, so the array
 *    outlives every piece of work that reads it, whatever Python does with
 *    its own references.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static PyObject *g_error;                               /* hali.Error */
static PyObject *g_error_by_code[HALI_STATUS_CODE_COUNT]; /* its subclasses */

/* Raises the exception of |status| (consumed) and returns NULL.  The
 * exception's args are (text,) and it carries .code, .code_name, .message
 * and .frames (the annotations, innermost first). */
static PyObject *raise_status(hali_status_t status) {
  hali_status_code_t code = hali_status_code(status);
  PyObject *type = (code > 0 && code < HALI_STATUS_CODE_COUNT &&
                    g_error_by_code[code])
                       ? g_error_by_code[code]
                       : g_error;
  char *text = hali_status_to_string(status);
  PyObject *frames = PyList_New(0);
  size_t n = hali_status_annotation_count(status);
  for (size_t i = 0; frames && i < n; i++) {
    PyObject *s = PyUnicode_DecodeUTF8(
        hali_status_annotation(status, i),
        (Py_ssize_t)strlen(hali_status_annotation(status, i)), "replace");
    if (!s || PyList_Append(frames, s) < 0) Py_CLEAR(frames);
    Py_XDECREF(s);
  }
  PyObject *exc = PyObject_CallFunction(
      type, "s", text ? text : hali_status_message(status));
  if (exc && frames) {
    PyObject *c = PyLong_FromLong((long)code);
    PyObject *m = PyUnicode_DecodeUTF8(hali_status_message(status),
                                       (Py_ssize_t)strlen(
                                           hali_status_message(status)),
                                       "replace");
    PyObject *cn = PyUnicode_FromString(hali_status_code_name(code));
    if (c && m && cn && PyObject_SetAttrString(exc, "code", c) == 0 &&
        PyObject_SetAttrString(exc, "code_name", cn) == 0 &&
        PyObject_SetAttrString(exc, "message", m) == 0 &&
        PyObject_SetAttrString(exc, "frames", frames) == 0) {
      PyErr_SetObject(type, exc);
    }
    Py_XDECREF(c);
    Py_XDECREF(m);
    Py_XDECREF(cn);
  }
  Py_XDECREF(exc);
  Py_XDECREF(frames);
  hali_free(text);
  hali_status_free(status);
  if (!PyErr_Occurred()) PyErr_NoMemory();
  return NULL;
}

#define CHECK_STATUS(expr)                         \
  do {                                             \
    hali_status_t check_s_ = (expr);               \
    if (check_s_) return raise_status(check_s_);   \
  } while (0)

/* The status a Python exception raised inside a host callback becomes: a
 * hali.Error keeps its code and message, anything else is UNKNOWN
 * "python: Type: message".  Clears the Python error.  GIL held. */
static hali_status_t status_from_python_error(const char *where) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  hali_status_code_t code = HALI_STATUS_UNKNOWN;
  if (value && PyObject_IsInstance(value, g_error) == 1) {
    PyObject *c = PyObject_GetAttrString(value, "code");
    if (c && PyLong_Check(c)) {
      long v = PyLong_AsLong(c);
      if (v > 0 && v < HALI_STATUS_CODE_COUNT) code = (hali_status_code_t)v;
    }
    Py_XDECREF(c);
    PyErr_Clear();
    /* One the host made (raise hali.NotFoundError("...")): its class. */
    for (int k = 1; code == HALI_STATUS_UNKNOWN && k < HALI_STATUS_CODE_COUNT;
         k++)
      if (g_error_by_code[k] &&
          PyObject_IsInstance(value, g_error_by_code[k]) == 1)
        code = (hali_status_code_t)k;
  }
  const char *tname = type ? ((PyTypeObject *)type)->tp_name : "?";
  PyObject *s = value ? PyObject_Str(value) : NULL;
  const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
  if (!msg) {
    PyErr_Clear();
    msg = "?";
  }
  hali_status_t status =
      hali_status_make(code, "%s: python %s: %s", where, tname, msg);
  /* The innermost Python frames (up to 3), innermost first, as
   * annotations: the backtrace then reads from the Python line that raised
   * out through the VM's frames. */
  PyObject *last[3] = {NULL, NULL, NULL};
  int depth = 0;
  for (PyObject *t = tb; t && t != Py_None && depth < 1000; depth++) {
    last[depth % 3] = t;
    PyObject *next = PyObject_GetAttrString(t, "tb_next");
    if (!next) {
      PyErr_Clear();
      break;
    }
    Py_DECREF(next); /* the chain keeps it alive */
    t = next;
  }
  for (int i = 0; i < 3 && i < depth; i++) {
    PyObject *t = last[(depth - 1 - i) % 3];
    PyObject *line = PyObject_GetAttrString(t, "tb_lineno");
    PyObject *frame = PyObject_GetAttrString(t, "tb_frame");
    PyObject *code_obj = frame ? PyObject_GetAttrString(frame, "f_code")
                               : NULL;
    PyObject *file =
        code_obj ? PyObject_GetAttrString(code_obj, "co_filename") : NULL;
    PyObject *fn = code_obj ? PyObject_GetAttrString(code_obj, "co_name")
                            : NULL;
    const char *fs = file ? PyUnicode_AsUTF8(file) : NULL;
    const char *ns = fn ? PyUnicode_AsUTF8(fn) : NULL;
    long ln = line ? PyLong_AsLong(line) : -1;
    if (fs && ns)
      status = hali_status_annotate(
          status, "python: File \"%s\", line %ld, in %s", fs, ln, ns);
    PyErr_Clear();
    Py_XDECREF(line);
    Py_XDECREF(frame);
    Py_XDECREF(code_obj);
    Py_XDECREF(file);
    Py_XDECREF(fn);
  }
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return status;
}

/* ------------------------------------------------------------------------ */
/* Type declarations                                                         */
/* ------------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD hali_instance_t *instance;
  PyObject *keep; /* list: import closures, alive as long as the instance */
} InstanceObject;

typedef struct {
  PyObject_HEAD hali_device_t *device;
} DeviceObject;

typedef struct {
  PyObject_HEAD hali_module_t *module;
} ModuleObject;

typedef struct {
  PyObject_HEAD hali_parameters_t *parameters;
} ParametersObject;

typedef struct {
  PyObject_HEAD hali_context_t *context;
  PyThread_type_lock lock; /* a context is used by one thread at a time */
  PyObject *instance;      /* InstanceObject: keeps the imports alive */
  PyObject *trace_path;    /* bytes, read when the context is created */
} ContextObject;

typedef struct {
  PyObject_HEAD ContextObject *context;
  hali_function_t *function; /* borrowed from the context */
} FunctionObject;

typedef struct {
  PyObject_HEAD ContextObject *context;
  hali_invocation_t *invocation;
  size_t result_count;
  PyObject *args; /* the argument objects, kept while it may run */
} InvocationObject;

typedef struct {
  PyObject_HEAD hali_buffer_view_t *view;
  int exports; /* buffers exported and not yet released */
  char format[2]; /* the buffer protocol's struct format of an element */
} BufferViewObject;

typedef struct {
  PyObject_HEAD hali_fence_t *fence;
} FenceObject;

/* Any other reference a program returns (a device, a buffer...): passed
 * back as an argument of its type, released with the object. */
typedef struct {
  PyObject_HEAD hali_variant_t value;
} RefObject;

static PyTypeObject InstanceType, DeviceType, ModuleType, ParametersType,
    ContextType, FunctionType, InvocationType, BufferViewType, FenceType,
    RefType;

/* ------------------------------------------------------------------------ */
/* Element types and buffer formats                                          */
/* ------------------------------------------------------------------------ */

/* The struct-module format of an element type, as the buffer protocol
 * exports it; bf16 (which numpy lacks) goes out as uint16. */
static const char *element_format(hali_element_type_t t) {
  switch (t) {
    case HALI_ELEMENT_TYPE_I1:
    case HALI_ELEMENT_TYPE_BOOL: return "?";
    case HALI_ELEMENT_TYPE_I8:
    case HALI_ELEMENT_TYPE_SI8: return "b";
    case HALI_ELEMENT_TYPE_U8: return "B";
    case HALI_ELEMENT_TYPE_I16:
    case HALI_ELEMENT_TYPE_SI16: return "h";
    case HALI_ELEMENT_TYPE_U16:
    case HALI_ELEMENT_TYPE_BF16: return "H";
    case HALI_ELEMENT_TYPE_I32:
    case HALI_ELEMENT_TYPE_SI32: return "i";
    case HALI_ELEMENT_TYPE_U32: return "I";
    case HALI_ELEMENT_TYPE_I64:
    case HALI_ELEMENT_TYPE_SI64: return "q";
    case HALI_ELEMENT_TYPE_U64: return "Q";
    case HALI_ELEMENT_TYPE_F16: return "e";
    case HALI_ELEMENT_TYPE_F32: return "f";
    case HALI_ELEMENT_TYPE_F64: return "d";
    default: return NULL;
  }
}

/* Reads a shape (a sequence of ints) into |shape| (64 entries). */
static int parse_shape(PyObject *seq, int64_t *shape, size_t *out_rank) {
  PyObject *fast = PySequence_Fast(seq, "shape must be a sequence of ints");
  if (!fast) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > 64) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "shape: rank %zd is above 64", n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
    shape[i] = (int64_t)v;
  }
  *out_rank = (size_t)n;
  Py_DECREF(fast);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Instance, host imports                                                    */
/* ------------------------------------------------------------------------ */

static void Instance_dealloc(InstanceObject *self) {
  if (self->instance) {
    Py_BEGIN_ALLOW_THREADS hali_instance_release(self->instance);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(self->keep);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Instance_init(InstanceObject *self, PyObject *args,
                         PyObject *kw) {
  static char *kwlist[]  = {"executable_paths", NULL};
  PyObject *paths = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &paths)) return -1;
  if (self->instance) {
    PyErr_SetString(PyExc_RuntimeError, "Instance: already initialized");
    return -1;
  }
  hali_instance_options_t options;
  hali_instance_options_initialize(&options);
  PyObject *fast = NULL;
  const char **list = NULL;
  if (paths && paths != Py_None) {
    fast = PySequence_Fast(paths, "executable_paths: expected a list of str");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    list = calloc((size_t)n + 1, sizeof *list);
    if (!list) {
      Py_DECREF(fast);
      PyErr_NoMemory();
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      list[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i));
      if (!list[i]) {
        free(list);
        Py_DECREF(fast);
        return -1;
      }
    }
    options.executable_paths = list;
    options.executable_path_count = (size_t)n;
  }
  hali_status_t s = hali_instance_create(&options, &self->instance);
  free(list);
  Py_XDECREF(fast);
  if (s) {
    raise_status(s);
    return -1;
  }
  self->keep = PyList_New(0);
  return self->keep ? 0 : -1;
}

/* One Python host function: |callable| gets the arguments converted
 * (scalars as int/float, views and fences as objects) and returns a tuple
 * of the results, which the signature's types convert back. */
typedef struct {
  PyObject *callable;
  char *name;
} import_closure_t;

static void import_closure_destroy(PyObject *capsule) {
  import_closure_t *c = PyCapsule_GetPointer(capsule, "hali.import");
  if (!c) return;
  Py_XDECREF(c->callable);
  free(c->name);
  free(c);
}

static PyObject *wrap_variant(const hali_variant_t *v, int retain);
static int variant_from_object(PyObject *obj, hali_variant_type_t type,
                               hali_variant_t *out, const char *what);

static hali_status_t import_trampoline(void *user, const hali_variant_t *args,
                                       size_t arg_count,
                                       hali_variant_t *results,
                                       size_t result_count) {
  import_closure_t *c = user;
  PyGILState_STATE gil = PyGILState_Ensure();
  hali_status_t status = HALI_OK;
  PyObject *tuple = PyTuple_New((Py_ssize_t)arg_count);
  PyObject *ret = NULL, *fast = NULL;
  for (size_t i = 0; tuple && i < arg_count; i++) {
    PyObject *a = wrap_variant(&args[i], /*retain=*/1);
    if (!a) {
      Py_CLEAR(tuple);
      break;
    }
    PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, a);
  }
  if (tuple) ret = PyObject_CallObject(c->callable, tuple);
  if (ret) {
    fast = PySequence_Fast(ret, "a host import returns a tuple of results");
    if (fast && (size_t)PySequence_Fast_GET_SIZE(fast) != result_count) {
      PyErr_Format(PyExc_TypeError, "returned %zd results, expected %zu",
                   PySequence_Fast_GET_SIZE(fast), result_count);
      Py_CLEAR(fast);
    }
    for (size_t i = 0; fast && i < result_count; i++) {
      char what[64];
      snprintf(what, sizeof what, "result %zu", i);
      if (variant_from_object(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i),
                              results[i].type, &results[i], what) < 0) {
        for (size_t j = 0; j < i; j++) hali_variant_release(&results[j]);
        Py_CLEAR(fast);
        break;
      }
      /* Ref results are handed over owned. */
      if (results[i].type >= HALI_VARIANT_DEVICE && results[i].u.ref) {
        if (results[i].type == HALI_VARIANT_BUFFER_VIEW)
          hali_buffer_view_retain(results[i].u.view);
        else if (results[i].type == HALI_VARIANT_FENCE)
          hali_fence_retain(results[i].u.fence);
      }
    }
  }
  if (!fast) status = status_from_python_error(c->name);
  Py_XDECREF(fast);
  Py_XDECREF(ret);
  Py_XDECREF(tuple);
  PyGILState_Release(gil);
  return status;
}

/* register_imports(module_name, [(name, signature or None, callable)]) */
static PyObject *Instance_register_imports(InstanceObject *self,
                                           PyObject *args) {
  const char *module_name;
  PyObject *list;
  if (!PyArg_ParseTuple(args, "sO:register_imports", &module_name, &list))
    return NULL;
  PyObject *fast = PySequence_Fast(list, "functions: expected a list");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  hali_import_function_t *fns = calloc((size_t)n + 1, sizeof *fns);
  PyObject *capsules = PyList_New(0);
  if (!fns || !capsules) {
    free(fns);
    Py_XDECREF(capsules);
    Py_DECREF(fast);
    return PyErr_NoMemory();
  }
  PyObject *result = NULL;
  for (Py_ssize_t i = 0; i < n; i++) {
    const char *name, *sig;
    PyObject *callable;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "szO", &name,
                          &sig, &callable))
      goto done;
    if (!PyCallable_Check(callable)) {
      PyErr_Format(PyExc_TypeError, "import %s.%s: not callable",
                   module_name, name);
      goto done;
    }
    import_closure_t *c = calloc(1, sizeof *c);
    size_t len = strlen(module_name) + strlen(name) + 16;
    if (c) c->name = malloc(len);
    if (!c || !c->name) {
      free(c);
      PyErr_NoMemory();
      goto done;
    }
    snprintf(c->name, len, "import @%s.%s", module_name, name);
    Py_INCREF(callable);
    c->callable = callable;
    PyObject *cap = PyCapsule_New(c, "hali.import", import_closure_destroy);
    if (!cap) {
      Py_DECREF(callable);
      free(c->name);
      free(c);
      goto done;
    }
    PyList_Append(capsules, cap);
    Py_DECREF(cap);
    fns[i].name = name;
    fns[i].signature = sig;
    fns[i].callback = import_trampoline;
    fns[i].user = c;
  }
  hali_status_t s = hali_instance_register_import_module(
      self->instance, module_name, fns, (size_t)n);
  if (s) {
    raise_status(s);
    goto done;
  }
  /* The closures must outlive the instance: kept by it from now on. */
  for (Py_ssize_t i = 0; i < n; i++)
    PyList_Append(self->keep, PyList_GET_ITEM(capsules, i));
  result = Py_None;
  Py_INCREF(result);
done:
  free(fns);
  Py_DECREF(capsules);
  Py_DECREF(fast);
  return result;
}

static PyObject *Instance_register_ffi_library(InstanceObject *self,
                                               PyObject *args) {
  const char *module_name, *path;
  if (!PyArg_ParseTuple(args, "ss:register_ffi_library", &module_name, &path))
    return NULL;
  CHECK_STATUS(
      hali_instance_register_ffi_library(self->instance, module_name, path));
  Py_RETURN_NONE;
}

static PyMethodDef Instance_methods[] = {
    {"register_imports", (PyCFunction)Instance_register_imports, METH_VARARGS,
     "register_imports(module_name, [(name, signature, callable)])"},
    {"register_ffi_library", (PyCFunction)Instance_register_ffi_library,
     METH_VARARGS, "register_ffi_library(module_name, library_path)"},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------------ */
/* Device                                                                    */
/* ------------------------------------------------------------------------ */

static void Device_dealloc(DeviceObject *self) {
  if (self->device) {
    /* Waits for queued work, whose last references may call back. */
    Py_BEGIN_ALLOW_THREADS hali_device_release(self->device);
    Py_END_ALLOW_THREADS
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Device_init(DeviceObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[]  = {"instance", "kind", "workers", "max_memory", NULL};
  PyObject *inst;
  const char *kind = "local-sync";
  unsigned int workers = 0;
  unsigned long long max_memory = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|sIK", kwlist, &InstanceType,
                                   &inst, &kind, &workers, &max_memory))
    return -1;
  if (self->device) {
    PyErr_SetString(PyExc_RuntimeError, "Device: already initialized");
    return -1;
  }
  hali_device_params_t params;
  hali_device_params_initialize(&params);
  hali_status_t s = hali_device_kind_parse(kind, &params.kind);
  if (!s) {
    params.worker_count = workers;
    params.max_memory_bytes = max_memory;
    s = hali_device_create(((InstanceObject *)inst)->instance, &params,
                           &self->device);
  }
  if (s) {
    raise_status(s);
    return -1;
  }
  return 0;
}

static PyObject *Device_abandon(DeviceObject *self, PyObject *unused) {
  hali_device_abandon(self->device);
  Py_RETURN_NONE;
}

static PyMethodDef Device_methods[] = {
    {"abandon", (PyCFunction)Device_abandon, METH_NOARGS,
     "fail queued work that waits on fences (CANCELLED)"},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------------ */
/* Module                                                                    */
/* ------------------------------------------------------------------------ */

static void Module_dealloc(ModuleObject *self) {
  if (self->module) hali_module_release(self->module);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* load_file(instance, path, passes=None, no_passes=False) */
static PyObject *mod_load_file(PyObject *unused, PyObject *args,
                               PyObject *kw) {
  static char *kwlist[]  = {"instance", "path", "passes", "no_passes", NULL};
  PyObject *inst;
  const char *path, *passes = NULL;
  int no_passes = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|zp", kwlist, &InstanceType,
                                   &inst, &path, &passes, &no_passes))
    return NULL;
  hali_module_load_options_t options;
  hali_module_load_options_initialize(&options);
  options.passes = passes;
  options.no_passes = no_passes != 0;
  hali_module_t *module = NULL;
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s = hali_module_load_file_ex(
      ((InstanceObject *)inst)->instance, path, &options, &module);
  Py_END_ALLOW_THREADS if (s) return raise_status(s);
  ModuleObject *m = PyObject_New(ModuleObject, &ModuleType);
  if (!m) {
    hali_module_release(module);
    return NULL;
  }
  m->module = module;
  return (PyObject *)m;
}

/* load_bytes(instance, data, name) */
static PyObject *mod_load_bytes(PyObject *unused, PyObject *args) {
  PyObject *inst;
  Py_buffer data;
  const char *name;
  if (!PyArg_ParseTuple(args, "O!y*s:load_bytes", &InstanceType, &inst, &data,
                        &name))
    return NULL;
  hali_module_t *module = NULL;
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s =
      hali_module_load_bytes(((InstanceObject *)inst)->instance, data.buf,
                             (size_t)data.len, name, &module);
  Py_END_ALLOW_THREADS PyBuffer_Release(&data);
  if (s) return raise_status(s);
  ModuleObject *m = PyObject_New(ModuleObject, &ModuleType);
  if (!m) {
    hali_module_release(module);
    return NULL;
  }
  m->module = module;
  return (PyObject *)m;
}

static PyObject *Module_get_name(ModuleObject *self, void *unused) {
  return PyUnicode_FromString(hali_module_name(self->module));
}

static PyObject *Module_function_names(ModuleObject *self, PyObject *unused) {
  size_t n = hali_module_function_count(self->module);
  bool *generated = calloc(n + 1, sizeof *generated);
  if (!generated) return PyErr_NoMemory();
  hali_status_t s =
      hali_module_generated_functions(self->module, generated, n);
  if (s) {
    free(generated);
    return raise_status(s);
  }
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && i < n; i++) {
    PyObject *t = Py_BuildValue("(sO)", hali_module_function_name(
                                            self->module, i),
                                generated[i] ? Py_True : Py_False);
    if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
    Py_XDECREF(t);
  }
  free(generated);
  return list;
}

static PyObject *Module_describe(ModuleObject *self, PyObject *args) {
  int json = 1;
  if (!PyArg_ParseTuple(args, "|p:describe", &json)) return NULL;
  char *text = NULL;
  CHECK_STATUS(hali_module_describe(
      self->module, json ? HALI_DESCRIBE_JSON : HALI_DESCRIBE_TEXT, &text));
  PyObject *r = PyUnicode_FromString(text);
  hali_free(text);
  return r;
}

static PyObject *Module_write_binary(ModuleObject *self, PyObject *args) {
  int strip = 0;
  if (!PyArg_ParseTuple(args, "|p:write_binary", &strip)) return NULL;
  void *data = NULL;
  size_t size = 0;
  CHECK_STATUS(hali_module_write_binary(self->module, strip != 0, &data,
                                        &size));
  PyObject *r = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
  hali_free(data);
  return r;
}

static PyMethodDef Module_methods[] = {
    {"function_names", (PyCFunction)Module_function_names, METH_NOARGS,
     "[(name, generated)] of the loaded module"},
    {"describe", (PyCFunction)Module_describe, METH_VARARGS,
     "describe(json=True) -> str"},
    {"write_binary", (PyCFunction)Module_write_binary, METH_VARARGS,
     "write_binary(strip=False) -> bytes (.hbc)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Module_getset[] = {
    {"name", (getter)Module_get_name, NULL, "the module's name", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ------------------------------------------------------------------------ */
/* Parameters                                                                */
/* ------------------------------------------------------------------------ */

static void Parameters_dealloc(ParametersObject *self) {
  if (self->parameters) hali_parameters_release(self->parameters);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Parameters_init(ParametersObject *self, PyObject *args,
                           PyObject *kw) {
  if (!PyArg_ParseTuple(args, ":Parameters")) return -1;
  if (self->parameters) return 0;
  hali_status_t s = hali_parameters_create(&self->parameters);
  if (s) {
    raise_status(s);
    return -1;
  }
  return 0;
}

static PyObject *Parameters_add_file(ParametersObject *self, PyObject *args) {
  const char *scope, *path;
  if (!PyArg_ParseTuple(args, "ss:add_file", &scope, &path)) return NULL;
  CHECK_STATUS(hali_parameters_add_file(self->parameters, scope, path));
  Py_RETURN_NONE;
}

static PyObject *Parameters_file_count(ParametersObject *self,
                                       PyObject *unused) {
  return PyLong_FromSize_t(hali_parameters_file_count(self->parameters));
}

static PyMethodDef Parameters_methods[] = {
    {"add_file", (PyCFunction)Parameters_add_file, METH_VARARGS,
     "add_file(scope, path): a .safetensors or .npy file"},
    {"file_count", (PyCFunction)Parameters_file_count, METH_NOARGS, ""},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------------ */
/* Buffer views                                                              */
/* ------------------------------------------------------------------------ */

static PyObject *wrap_view(hali_buffer_view_t *view) { /* takes the ref */
  BufferViewObject *o = PyObject_New(BufferViewObject, &BufferViewType);
  if (!o) {
    hali_buffer_view_release(view);
    return NULL;
  }
  o->view = view;
  o->exports = 0;
  return (PyObject *)o;
}

static void BufferView_dealloc(BufferViewObject *self) {
  if (self->view) {
    hali_buffer_view_t *v = self->view;
    Py_BEGIN_ALLOW_THREADS hali_buffer_view_release(v);
    Py_END_ALLOW_THREADS
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The Py_buffer pinning imported memory, given back by hali's release
 * callback (any thread: it takes the GIL). */
typedef struct {
  Py_buffer buffer;
} pinned_t;

static void pinned_release(void *user) {
  pinned_t *p = user;
  if (_Py_IsFinalizing()) return; /* the interpreter is gone: leak it */
  PyGILState_STATE gil = PyGILState_Ensure();
  PyBuffer_Release(&p->buffer);
  PyGILState_Release(gil);
  free(p);
}

/* import_view(obj, element_type, shape, writable) -> BufferView over obj's
 * memory (C-contiguous, aligned to the element size), no copy. */
static PyObject *mod_import_view(PyObject *unused, PyObject *args) {
  PyObject *obj, *shape_obj;
  unsigned int et;
  int writable;
  if (!PyArg_ParseTuple(args, "OIOp:import_view", &obj, &et, &shape_obj,
                        &writable))
    return NULL;
  int64_t shape[64];
  size_t rank = 0;
  if (parse_shape(shape_obj, shape, &rank) < 0) return NULL;
  pinned_t *p = calloc(1, sizeof *p);
  if (!p) return PyErr_NoMemory();
  if (PyObject_GetBuffer(obj, &p->buffer,
                         PyBUF_C_CONTIGUOUS |
                             (writable ? PyBUF_WRITABLE : 0)) < 0) {
    free(p);
    return NULL;
  }
  hali_buffer_view_t *view = NULL;
  hali_status_t s = hali_buffer_view_import(
      (hali_element_type_t)et, rank, shape, p->buffer.buf,
      (size_t)p->buffer.len,
      writable ? HALI_IMPORT_READ_WRITE : HALI_IMPORT_READ_ONLY,
      pinned_release, p, &view);
  if (s) {
    PyBuffer_Release(&p->buffer);
    free(p);
    return raise_status(s);
  }
  return wrap_view(view);
}

/* create_view(device, element_type, shape, data or None) -> a copy */
static PyObject *mod_create_view(PyObject *unused, PyObject *args) {
  PyObject *dev, *shape_obj, *data_obj;
  unsigned int et;
  if (!PyArg_ParseTuple(args, "O!IOO:create_view", &DeviceType, &dev, &et,
                        &shape_obj, &data_obj))
    return NULL;
  int64_t shape[64];
  size_t rank = 0;
  if (parse_shape(shape_obj, shape, &rank) < 0) return NULL;
  Py_buffer data = {0};
  if (data_obj != Py_None &&
      PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  hali_buffer_view_t *view = NULL;
  hali_status_t s = hali_buffer_view_create(
      ((DeviceObject *)dev)->device, (hali_element_type_t)et, rank, shape,
      data_obj != Py_None ? data.buf : NULL,
      data_obj != Py_None ? (size_t)data.len : 0, &view);
  if (data_obj != Py_None) PyBuffer_Release(&data);
  if (s) return raise_status(s);
  return wrap_view(view);
}

static PyObject *BufferView_get_shape(BufferViewObject *self, void *unused) {
  size_t rank = hali_buffer_view_rank(self->view);
  PyObject *t = PyTuple_New((Py_ssize_t)rank);
  for (size_t i = 0; t && i < rank; i++)
    PyTuple_SET_ITEM(t, (Py_ssize_t)i,
                     PyLong_FromLongLong(hali_buffer_view_dim(self->view, i)));
  return t;
}
static PyObject *BufferView_get_element_type(BufferViewObject *self,
                                             void *unused) {
  return PyLong_FromUnsignedLong(hali_buffer_view_element_type(self->view));
}
static PyObject *BufferView_get_byte_length(BufferViewObject *self,
                                            void *unused) {
  return PyLong_FromUnsignedLongLong(hali_buffer_view_byte_length(self->view));
}
static PyObject *BufferView_get_writable(BufferViewObject *self,
                                         void *unused) {
  return PyBool_FromLong(hali_buffer_view_is_writable(self->view));
}
/* The address of the storage (a read-only map): for tests of zero copy. */
static PyObject *BufferView_get_address(BufferViewObject *self, void *unused) {
  void *data = NULL;
  size_t size = 0;
  CHECK_STATUS(hali_buffer_view_map(self->view, false, &data, &size));
  return PyLong_FromVoidPtr(data);
}

static PyObject *BufferView_read(BufferViewObject *self, PyObject *unused) {
  uint64_t n = hali_buffer_view_byte_length(self->view);
  if (n > (uint64_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
  PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (!b) return NULL;
  hali_status_t s =
      hali_buffer_view_read(self->view, PyBytes_AS_STRING(b), (size_t)n);
  if (s) {
    Py_DECREF(b);
    return raise_status(s);
  }
  return b;
}

static PyObject *BufferView_element_type_name(BufferViewObject *self,
                                              PyObject *unused) {
  const char *n = hali_element_type_name(hali_buffer_view_element_type(
      self->view));
  return PyUnicode_FromString(n ? n : "?");
}

/* The buffer protocol: the storage in place (hali_buffer_view_map),
 * writable when the storage is; the exporter (this object, which holds a
 * reference to the view) stays alive while a numpy array uses it. */
static int BufferView_getbuffer(BufferViewObject *self, Py_buffer *view,
                                int flags) {
  hali_element_type_t et = hali_buffer_view_element_type(self->view);
  const char *fmt = element_format(et);
  if (!fmt) {
    PyErr_Format(PyExc_BufferError, "no buffer format for element type %s",
                 hali_element_type_name(et) ? hali_element_type_name(et)
                                            : "?");
    return -1;
  }
  bool writable = hali_buffer_view_is_writable(self->view);
  if ((flags & PyBUF_WRITABLE) && !writable) {
    PyErr_SetString(PyExc_BufferError,
                    "the buffer view's storage is read-only");
    return -1;
  }
  void *data = NULL;
  size_t size = 0;
  hali_status_t s = hali_buffer_view_map(self->view, writable, &data, &size);
  if (s) {
    char *text = hali_status_to_string(s);
    PyErr_Format(PyExc_BufferError, "cannot map the buffer view: %s",
                 text ? text : "?");
    hali_free(text);
    hali_status_free(s);
    return -1;
  }
  size_t rank = hali_buffer_view_rank(self->view);
  Py_ssize_t *dims = calloc(2 * rank + 2, sizeof *dims);
  if (!dims) {
    PyErr_NoMemory();
    return -1;
  }
  Py_ssize_t item = (Py_ssize_t)hali_element_type_byte_size(et);
  for (size_t i = 0; i < rank; i++)
    dims[i] = (Py_ssize_t)hali_buffer_view_dim(self->view, i);
  Py_ssize_t stride = item;
  for (size_t i = rank; i-- > 0;) {
    dims[rank + i] = stride;
    stride *= dims[i];
  }
  static char empty[64];
  view->buf = data ? data : empty;
  view->obj = (PyObject *)self;
  Py_INCREF(self);
  view->len = (Py_ssize_t)size;
  view->readonly = !writable;
  view->itemsize = item;
  self->format[0] = fmt[0];
  self->format[1] = 0;
  view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
  view->ndim = (int)rank;
  view->shape = (flags & PyBUF_ND) ? dims : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + rank
                                                           : NULL;
  view->suboffsets = NULL;
  view->internal = dims;
  self->exports++;
  return 0;
}

static void BufferView_releasebuffer(BufferViewObject *self,
                                     Py_buffer *view) {
  free(view->internal);
  self->exports--;
}

static PyBufferProcs BufferView_as_buffer = {
    (getbufferproc)BufferView_getbuffer,
    (releasebufferproc)BufferView_releasebuffer};

static PyMethodDef BufferView_methods[] = {
    {"read", (PyCFunction)BufferView_read, METH_NOARGS,
     "a copy of the bytes"},
    {"element_type_name", (PyCFunction)BufferView_element_type_name,
     METH_NOARGS, "\"f32\", ..."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef BufferView_getset[] = {
    {"shape", (getter)BufferView_get_shape, NULL, "dims", NULL},
    {"element_type", (getter)BufferView_get_element_type, NULL,
     "hali element type code", NULL},
    {"byte_length", (getter)BufferView_get_byte_length, NULL, "bytes", NULL},
    {"writable", (getter)BufferView_get_writable, NULL,
     "whether the storage may be written", NULL},
    {"address", (getter)BufferView_get_address, NULL,
     "the storage's address (int)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ------------------------------------------------------------------------ */
/* Fences                                                                    */
/* ------------------------------------------------------------------------ */

static PyObject *wrap_fence(hali_fence_t *fence) { /* takes the ref */
  FenceObject *o = PyObject_New(FenceObject, &FenceType);
  if (!o) {
    hali_fence_release(fence);
    return NULL;
  }
  o->fence = fence;
  return (PyObject *)o;
}

static PyObject *Fence_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  if (!PyArg_ParseTuple(args, ":Fence")) return NULL;
  hali_fence_t *f = NULL;
  CHECK_STATUS(hali_fence_create(&f));
  FenceObject *o = (FenceObject *)type->tp_alloc(type, 0);
  if (!o) {
    hali_fence_release(f);
    return NULL;
  }
  o->fence = f;
  return (PyObject *)o;
}

static void Fence_dealloc(FenceObject *self) {
  if (self->fence) {
    hali_fence_t *f = self->fence;
    Py_BEGIN_ALLOW_THREADS hali_fence_release(f);
    Py_END_ALLOW_THREADS
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Fence_signal(FenceObject *self, PyObject *unused) {
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s = hali_fence_signal(self->fence);
  Py_END_ALLOW_THREADS CHECK_STATUS(s);
  Py_RETURN_NONE;
}

static PyObject *Fence_fail(FenceObject *self, PyObject *args) {
  const char *message = "failed by the host";
  int code = HALI_STATUS_UNKNOWN;
  if (!PyArg_ParseTuple(args, "|si:fail", &message, &code)) return NULL;
  if (code <= 0 || code >= HALI_STATUS_CODE_COUNT) {
    PyErr_Format(PyExc_ValueError, "fail: code %d is not an error code", code);
    return NULL;
  }
  hali_status_t st = hali_status_make((hali_status_code_t)code, "%s", message);
  Py_BEGIN_ALLOW_THREADS hali_fence_fail(self->fence, st);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* query() -> bool (ready); raises the failure of a failed fence */
static PyObject *Fence_query(FenceObject *self, PyObject *unused) {
  bool ready = false;
  CHECK_STATUS(hali_fence_query(self->fence, &ready));
  return PyBool_FromLong(ready);
}

/* wait(timeout_ns=-1) -> True, False on timeout; raises a failure */
static PyObject *Fence_wait(FenceObject *self, PyObject *args) {
  long long timeout = -1;
  if (!PyArg_ParseTuple(args, "|L:wait", &timeout)) return NULL;
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s = hali_fence_await(self->fence, timeout);
  Py_END_ALLOW_THREADS if (s && hali_status_code(s) ==
                           HALI_STATUS_DEADLINE_EXCEEDED) {
    /* A timeout, unless the fence itself failed with that code. */
    bool ready = false;
    hali_status_t q = hali_fence_query(self->fence, &ready);
    if (!ready) {
      hali_status_free(q);
      hali_status_free(s);
      Py_RETURN_FALSE;
    }
    hali_status_free(q);
  }
  CHECK_STATUS(s);
  Py_RETURN_TRUE;
}

static PyMethodDef Fence_methods[] = {
    {"signal", (PyCFunction)Fence_signal, METH_NOARGS, "signal it"},
    {"fail", (PyCFunction)Fence_fail, METH_VARARGS,
     "fail(message, code=UNKNOWN)"},
    {"query", (PyCFunction)Fence_query, METH_NOARGS,
     "whether it is signalled; raises its failure"},
    {"wait_ns", (PyCFunction)Fence_wait, METH_VARARGS,
     "wait_ns(timeout_ns=-1) -> bool"},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------------ */
/* Variants                                                                  */
/* ------------------------------------------------------------------------ */

static void Ref_dealloc(RefObject *self) {
  hali_variant_t v = self->value;
  Py_BEGIN_ALLOW_THREADS hali_variant_release(&v);
  Py_END_ALLOW_THREADS Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Ref_repr(RefObject *self) {
  return PyUnicode_FromFormat("<hali ref %s>",
                              hali_variant_type_name(self->value.type));
}

/* A Python object for |v|: int, float, BufferView, Fence, Ref or None.
 * With |retain| a ref is retained (|v| borrowed), else taken over. */
static PyObject *wrap_variant(const hali_variant_t *v, int retain) {
  switch (v->type) {
    case HALI_VARIANT_I32: return PyLong_FromLong(v->u.i32);
    case HALI_VARIANT_I64: return PyLong_FromLongLong(v->u.i64);
    case HALI_VARIANT_F32: return PyFloat_FromDouble(v->u.f32);
    case HALI_VARIANT_F64: return PyFloat_FromDouble(v->u.f64);
    case HALI_VARIANT_NONE: Py_RETURN_NONE;
    default: break;
  }
  if (!v->u.ref) Py_RETURN_NONE;
  if (v->type == HALI_VARIANT_BUFFER_VIEW) {
    if (retain) hali_buffer_view_retain(v->u.view);
    return wrap_view(v->u.view);
  }
  if (v->type == HALI_VARIANT_FENCE) {
    if (retain) hali_fence_retain(v->u.fence);
    return wrap_fence(v->u.fence);
  }
  if (retain) {
    /* Other refs have no public retain: hand out None for borrowed ones. */
    Py_RETURN_NONE;
  }
  RefObject *o = PyObject_New(RefObject, &RefType);
  if (!o) {
    hali_variant_t tmp = *v;
    hali_variant_release(&tmp);
    return NULL;
  }
  o->value = *v;
  return (PyObject *)o;
}

/* Fills |out| (borrowing refs) from |obj| for a value of |type|;
 * TypeError/OverflowError naming |what| otherwise. */
static int variant_from_object(PyObject *obj, hali_variant_type_t type,
                               hali_variant_t *out, const char *what) {
  switch (type) {
    case HALI_VARIANT_I32:
    case HALI_VARIANT_I64: {
      if (!PyLong_Check(obj) && !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int (%s), got %s",
                     what, hali_variant_type_name(type),
                     Py_TYPE(obj)->tp_name);
        return -1;
      }
      long long x = PyLong_AsLongLong(obj);
      if (x == -1 && PyErr_Occurred()) return -1;
      if (type == HALI_VARIANT_I32) {
        if (x < INT32_MIN || x > INT32_MAX) {
          PyErr_Format(PyExc_OverflowError, "%s: %lld does not fit an i32",
                       what, x);
          return -1;
        }
        *out = hali_variant_i32((int32_t)x);
      } else {
        *out = hali_variant_i64((int64_t)x);
      }
      return 0;
    }
    case HALI_VARIANT_F32:
    case HALI_VARIANT_F64: {
      double d = PyFloat_AsDouble(obj);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a float (%s), got %s",
                     what, hali_variant_type_name(type),
                     Py_TYPE(obj)->tp_name);
        return -1;
      }
      *out = type == HALI_VARIANT_F32 ? hali_variant_f32((float)d)
                                      : hali_variant_f64(d);
      return 0;
    }
    case HALI_VARIANT_BUFFER_VIEW:
      if (!PyObject_TypeCheck(obj, &BufferViewType)) break;
      *out = hali_variant_view(((BufferViewObject *)obj)->view);
      return 0;
    case HALI_VARIANT_FENCE:
      if (!PyObject_TypeCheck(obj, &FenceType)) break;
      *out = hali_variant_fence(((FenceObject *)obj)->fence);
      return 0;
    default:
      if (PyObject_TypeCheck(obj, &RefType) &&
          ((RefObject *)obj)->value.type == type) {
        *out = ((RefObject *)obj)->value;
        return 0;
      }
      break;
  }
  PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", what,
               hali_variant_type_name(type), Py_TYPE(obj)->tp_name);
  return -1;
}

/* ------------------------------------------------------------------------ */
/* Context, functions, invocations                                           */
/* ------------------------------------------------------------------------ */

static void context_lock(ContextObject *c) {
  if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
    Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(c->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
}
static void context_unlock(ContextObject *c) { PyThread_release_lock(c->lock); }

static void Context_dealloc(ContextObject *self) {
  if (self->context) {
    hali_context_t *c = self->context;
    Py_BEGIN_ALLOW_THREADS hali_context_release(c);
    Py_END_ALLOW_THREADS
  }
  if (self->lock) PyThread_free_lock(self->lock);
  Py_XDECREF(self->instance);
  Py_XDECREF(self->trace_path);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Context_init(ContextObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[]  = {"instance",   "device",        "modules",
                           "max_memory", "max_call_depth", "fuel",
                           "deadline_ns", "parameters",   "trace_path",
                           "trace_bits", "trace_chrome",  "trace_filter",
                           "fiber_threads", NULL};
  PyObject *inst, *dev, *mods, *params_obj = Py_None, *trace_path = Py_None;
  unsigned long long max_memory = 0, fuel = 0, deadline = 0;
  unsigned int depth = 0, trace_bits = 0, fiber_threads = 0;
  int chrome = 0;
  const char *filter = NULL;
  if (!PyArg_ParseTupleAndKeywords(
          args, kw, "O!O!O|KIKKOOIpzI", kwlist, &InstanceType, &inst,
          &DeviceType, &dev, &mods, &max_memory, &depth, &fuel, &deadline,
          &params_obj, &trace_path, &trace_bits, &chrome, &filter,
          &fiber_threads))
    return -1;
  if (self->context) {
    PyErr_SetString(PyExc_RuntimeError, "Context: already initialized");
    return -1;
  }
  if (params_obj != Py_None &&
      !PyObject_TypeCheck(params_obj, &ParametersType)) {
    PyErr_SetString(PyExc_TypeError, "parameters: expected hali.Parameters");
    return -1;
  }
  PyObject *fast = PySequence_Fast(mods, "modules: expected a list");
  if (!fast) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  hali_module_t **list = calloc((size_t)n + 1, sizeof *list);
  if (!list) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *m = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyObject_TypeCheck(m, &ModuleType)) {
      PyErr_Format(PyExc_TypeError, "modules[%zd]: expected a module", i);
      free(list);
      Py_DECREF(fast);
      return -1;
    }
    list[i] = ((ModuleObject *)m)->module;
  }
  if (trace_path != Py_None) {
    if (!PyUnicode_FSConverter(trace_path, &self->trace_path)) {
      free(list);
      Py_DECREF(fast);
      return -1;
    }
  }
  hali_context_params_t params;
  hali_context_params_initialize(&params);
  params.max_memory_bytes = max_memory;
  params.max_call_depth = depth;
  params.fuel = fuel;
  params.max_duration_ns = deadline;
  params.trace_bits = trace_bits;
  params.trace_format = chrome ? HALI_TRACE_FORMAT_CHROME
                               : HALI_TRACE_FORMAT_TEXT;
  params.trace_filter = filter;
  params.fiber_threads = fiber_threads;
  params.trace_path =
      self->trace_path ? PyBytes_AS_STRING(self->trace_path) : NULL;
  if (params_obj != Py_None)
    params.parameters = ((ParametersObject *)params_obj)->parameters;
  hali_status_t s;
  hali_instance_t *instance = ((InstanceObject *)inst)->instance;
  hali_device_t *device = ((DeviceObject *)dev)->device;
  Py_BEGIN_ALLOW_THREADS s = hali_context_create(
      instance, device, list, (size_t)n, &params, &self->context);
  Py_END_ALLOW_THREADS free(list);
  Py_DECREF(fast);
  if (s) {
    raise_status(s);
    return -1;
  }
  self->lock = PyThread_allocate_lock();
  if (!self->lock) {
    PyErr_NoMemory();
    return -1;
  }
  Py_INCREF(inst);
  self->instance = inst;
  return 0;
}

static PyObject *Context_lookup(ContextObject *self, PyObject *args) {
  const char *name;
  if (!PyArg_ParseTuple(args, "s:lookup", &name)) return NULL;
  hali_function_t *fn = NULL;
  CHECK_STATUS(hali_context_lookup_function(self->context, name, &fn));
  FunctionObject *f = PyObject_New(FunctionObject, &FunctionType);
  if (!f) return NULL;
  Py_INCREF(self);
  f->context = self;
  f->function = fn;
  return (PyObject *)f;
}

/* Converts |seq| into |fn|'s argument variants (refs borrowed from the
 * objects, which the caller keeps alive).  Returns the count or -1. */
static Py_ssize_t convert_args(FunctionObject *fn, PyObject *fast,
                               hali_variant_t **out) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  size_t want = hali_function_argument_count(fn->function);
  if ((size_t)n != want) {
    PyErr_Format(PyExc_TypeError, "@%s takes %zu arguments, got %zd",
                 hali_function_name(fn->function), want, n);
    return -1;
  }
  hali_variant_t *v = calloc((size_t)n + 1, sizeof *v);
  if (!v) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    char what[96];
    snprintf(what, sizeof what, "@%s argument %zd",
             hali_function_name(fn->function), i);
    if (variant_from_object(PySequence_Fast_GET_ITEM(fast, i),
                            hali_function_argument_type(fn->function,
                                                        (size_t)i),
                            &v[i], what) < 0) {
      free(v);
      return -1;
    }
  }
  *out = v;
  return n;
}

static PyObject *results_to_list(hali_variant_t *results, size_t n) {
  PyObject *list = PyList_New((Py_ssize_t)n);
  size_t i = 0;
  for (; list && i < n; i++) {
    PyObject *o = wrap_variant(&results[i], /*retain=*/0);
    results[i].type = HALI_VARIANT_NONE;
    if (!o) {
      Py_CLEAR(list);
      i++;
      break;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, o);
  }
  for (; i < n; i++) hali_variant_release(&results[i]);
  return list;
}

/* invoke(function, args) -> [results]: runs to completion, GIL released */
static PyObject *Function_invoke(FunctionObject *self, PyObject *args) {
  PyObject *seq;
  if (!PyArg_ParseTuple(args, "O:invoke", &seq)) return NULL;
  PyObject *fast = PySequence_Fast(seq, "arguments: expected a sequence");
  if (!fast) return NULL;
  hali_variant_t *argv = NULL;
  Py_ssize_t argc = convert_args(self, fast, &argv);
  if (argc < 0) {
    Py_DECREF(fast);
    return NULL;
  }
  size_t rc = hali_function_result_count(self->function);
  hali_variant_t *results = calloc(rc + 1, sizeof *results);
  if (!results) {
    free(argv);
    Py_DECREF(fast);
    return PyErr_NoMemory();
  }
  ContextObject *c = self->context;
  context_lock(c);
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s = hali_context_invoke(
      c->context, self->function, argv, (size_t)argc, results, rc);
  /* Results handed out as arrays are read by the host next: wait for
   * work a program queued without awaiting it. */
  if (!s) s = hali_context_wait_idle(c->context, HALI_TIMEOUT_INFINITE);
  Py_END_ALLOW_THREADS context_unlock(c);
  free(argv);
  Py_DECREF(fast);
  if (s) {
    for (size_t i = 0; i < rc; i++) hali_variant_release(&results[i]);
    free(results);
    return raise_status(s);
  }
  PyObject *list = results_to_list(results, rc);
  free(results);
  return list;
}

static PyObject *Function_invoke_async(FunctionObject *self, PyObject *args) {
  PyObject *seq;
  if (!PyArg_ParseTuple(args, "O:invoke_async", &seq)) return NULL;
  PyObject *fast = PySequence_Fast(seq, "arguments: expected a sequence");
  if (!fast) return NULL;
  hali_variant_t *argv = NULL;
  Py_ssize_t argc = convert_args(self, fast, &argv);
  if (argc < 0) {
    Py_DECREF(fast);
    return NULL;
  }
  ContextObject *c = self->context;
  hali_invocation_t *inv = NULL;
  context_lock(c);
  hali_status_t s = hali_context_invoke_async(c->context, self->function,
                                              argv, (size_t)argc, &inv);
  context_unlock(c);
  free(argv);
  if (s) {
    Py_DECREF(fast);
    return raise_status(s);
  }
  InvocationObject *o = PyObject_New(InvocationObject, &InvocationType);
  if (!o) {
    Py_DECREF(fast);
    hali_invocation_cancel(inv);
    hali_invocation_release(inv);
    return NULL;
  }
  Py_INCREF(c);
  o->context = c;
  o->invocation = inv;
  o->result_count = hali_function_result_count(self->function);
  o->args = fast; /* keeps the argument objects (and their memory) */
  return (PyObject *)o;
}

static void Function_dealloc(FunctionObject *self) {
  Py_XDECREF(self->context);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *types_tuple(const hali_function_t *fn, int results) {
  size_t n = results ? hali_function_result_count(fn)
                     : hali_function_argument_count(fn);
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; i++) {
    hali_variant_type_t ty = results ? hali_function_result_type(fn, i)
                                     : hali_function_argument_type(fn, i);
    PyTuple_SET_ITEM(t, (Py_ssize_t)i,
                     PyUnicode_FromString(hali_variant_type_name(ty)));
  }
  return t;
}
static PyObject *Function_get_name(FunctionObject *self, void *unused) {
  return PyUnicode_FromString(hali_function_name(self->function));
}
static PyObject *Function_get_args(FunctionObject *self, void *unused) {
  return types_tuple(self->function, 0);
}
static PyObject *Function_get_results(FunctionObject *self, void *unused) {
  return types_tuple(self->function, 1);
}

static PyMethodDef Function_methods[] = {
    {"invoke", (PyCFunction)Function_invoke, METH_VARARGS,
     "invoke([args]) -> [results]"},
    {"invoke_async", (PyCFunction)Function_invoke_async, METH_VARARGS,
     "invoke_async([args]) -> Invocation"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Function_getset[] = {
    {"name", (getter)Function_get_name, NULL, "", NULL},
    {"argument_types", (getter)Function_get_args, NULL, "", NULL},
    {"result_types", (getter)Function_get_results, NULL, "", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyObject *Context_run(ContextObject *self, PyObject *unused) {
  hali_status_t s;
  context_lock(self);
  Py_BEGIN_ALLOW_THREADS s = hali_context_run(self->context);
  Py_END_ALLOW_THREADS context_unlock(self);
  CHECK_STATUS(s);
  Py_RETURN_NONE;
}

/* Any thread, any time: no lock. */
static PyObject *Context_cancel(ContextObject *self, PyObject *unused) {
  hali_context_cancel(self->context);
  Py_RETURN_NONE;
}

static PyObject *Context_wait_idle(ContextObject *self, PyObject *args) {
  long long timeout = -1;
  if (!PyArg_ParseTuple(args, "|L:wait_idle", &timeout)) return NULL;
  hali_status_t s;
  Py_BEGIN_ALLOW_THREADS s = hali_context_wait_idle(self->context, timeout);
  Py_END_ALLOW_THREADS CHECK_STATUS(s);
  Py_RETURN_NONE;
}

static PyMethodDef Context_methods[] = {
    {"lookup", (PyCFunction)Context_lookup, METH_VARARGS,
     "lookup(name) -> Function"},
    {"run", (PyCFunction)Context_run, METH_NOARGS,
     "run ready invocations until none can progress"},
    {"cancel", (PyCFunction)Context_cancel, METH_NOARGS,
     "cancel every invocation (any thread)"},
    {"wait_idle", (PyCFunction)Context_wait_idle, METH_VARARGS,
     "wait_idle(timeout_ns=-1)"},
    {NULL, NULL, 0, NULL}};

static void Invocation_dealloc(InvocationObject *self) {
  if (self->invocation) {
    hali_invocation_t *inv = self->invocation;
    Py_BEGIN_ALLOW_THREADS hali_invocation_release(inv);
    Py_END_ALLOW_THREADS
  }
  Py_XDECREF(self->args);
  Py_XDECREF(self->context);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* wait_ns(timeout_ns=-1) -> True when done, False on timeout.  The
 * invocation's own failure is raised by status()/results(). */
static PyObject *Invocation_wait(InvocationObject *self, PyObject *args) {
  long long timeout = -1;
  if (!PyArg_ParseTuple(args, "|L:wait_ns", &timeout)) return NULL;
  hali_status_t s;
  context_lock(self->context);
  Py_BEGIN_ALLOW_THREADS s =
      hali_invocation_await_for(self->invocation, timeout);
  Py_END_ALLOW_THREADS context_unlock(self->context);
  if (s && hali_status_code(s) == HALI_STATUS_DEADLINE_EXCEEDED &&
      !hali_invocation_is_done(self->invocation)) {
    hali_status_free(s);
    Py_RETURN_FALSE;
  }
  CHECK_STATUS(s);
  Py_RETURN_TRUE;
}

static PyObject *Invocation_done(InvocationObject *self, PyObject *unused) {
  return PyBool_FromLong(hali_invocation_is_done(self->invocation));
}

static PyObject *Invocation_status(InvocationObject *self, PyObject *unused) {
  context_lock(self->context);
  hali_status_t s = hali_invocation_status(self->invocation);
  context_unlock(self->context);
  CHECK_STATUS(s);
  Py_RETURN_NONE;
}

static PyObject *Invocation_results(InvocationObject *self,
                                    PyObject *unused) {
  hali_variant_t *r = calloc(self->result_count + 1, sizeof *r);
  if (!r) return PyErr_NoMemory();
  context_lock(self->context);
  hali_status_t s = hali_invocation_status(self->invocation);
  if (!s) s = hali_invocation_results(self->invocation, r, self->result_count);
  context_unlock(self->context);
  if (s) {
    free(r);
    return raise_status(s);
  }
  PyObject *list = results_to_list(r, self->result_count);
  free(r);
  return list;
}

static PyObject *Invocation_fence(InvocationObject *self, PyObject *unused) {
  hali_fence_t *f = hali_invocation_fence(self->invocation);
  if (!f) Py_RETURN_NONE;
  hali_fence_retain(f);
  return wrap_fence(f);
}

static PyObject *Invocation_cancel(InvocationObject *self, PyObject *unused) {
  hali_invocation_cancel(self->invocation);
  Py_RETURN_NONE;
}

static PyMethodDef Invocation_methods[] = {
    {"wait_ns", (PyCFunction)Invocation_wait, METH_VARARGS,
     "wait_ns(timeout_ns=-1) -> bool (done)"},
    {"done", (PyCFunction)Invocation_done, METH_NOARGS, ""},
    {"status", (PyCFunction)Invocation_status, METH_NOARGS,
     "raises its failure once done"},
    {"results", (PyCFunction)Invocation_results, METH_NOARGS,
     "its results once done"},
    {"fence", (PyCFunction)Invocation_fence, METH_NOARGS,
     "the fence signalled when it returns"},
    {"cancel", (PyCFunction)Invocation_cancel, METH_NOARGS,
     "cancel it (any thread)"},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------------ */
/* Module-level functions                                                    */
/* ------------------------------------------------------------------------ */

static PyObject *mod_element_types(PyObject *unused, PyObject *noargs) {
  PyObject *d = PyDict_New();
  for (size_t i = 0; d; i++) {
    hali_element_type_t t = hali_element_type_at(i);
    if (!t) break;
    PyObject *k = PyUnicode_FromString(hali_element_type_name(t));
    PyObject *v = PyLong_FromUnsignedLong(t);
    if (!k || !v || PyDict_SetItem(d, k, v) < 0) Py_CLEAR(d);
    Py_XDECREF(k);
    Py_XDECREF(v);
  }
  return d;
}

static PyObject *mod_trace_available(PyObject *unused, PyObject *noargs) {
  return PyBool_FromLong(hali_trace_available());
}

static PyObject *mod_host_allocations_live(PyObject *unused, PyObject *n) {
  return PyLong_FromSize_t(hali_host_allocations_live());
}

static PyMethodDef module_methods[] = {
    {"load_file", (PyCFunction)(void (*)(void))mod_load_file,
     METH_VARARGS | METH_KEYWORDS,
     "load_file(instance, path, passes=None, no_passes=False)"},
    {"load_bytes", (PyCFunction)mod_load_bytes, METH_VARARGS,
     "load_bytes(instance, data, name)"},
    {"import_view", (PyCFunction)mod_import_view, METH_VARARGS,
     "import_view(obj, element_type, shape, writable): no copy"},
    {"create_view", (PyCFunction)mod_create_view, METH_VARARGS,
     "create_view(device, element_type, shape, data): a copy"},
    {"element_types", (PyCFunction)mod_element_types, METH_NOARGS,
     "{name: code}"},
    {"trace_available", (PyCFunction)mod_trace_available, METH_NOARGS, ""},
    {"host_allocations_live", (PyCFunction)mod_host_allocations_live,
     METH_NOARGS, "blocks of host memory hali holds now"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_hali",
    "hali's C API for Python (use the hali package)", -1, module_methods,
    NULL, NULL, NULL, NULL};

#define TYPE(var, pyname, cstruct)                 \
  do {                                             \
    var.tp_name = "hali._hali." pyname;            \
    var.tp_basicsize = sizeof(cstruct);            \
    var.tp_flags = Py_TPFLAGS_DEFAULT;             \
  } while (0)

PyMODINIT_FUNC PyInit__hali(void);
PyMODINIT_FUNC PyInit__hali(void) {
  TYPE(InstanceType, "Instance", InstanceObject);
  InstanceType.tp_new = PyType_GenericNew;
  InstanceType.tp_init = (initproc)Instance_init;
  InstanceType.tp_dealloc = (destructor)Instance_dealloc;
  InstanceType.tp_methods = Instance_methods;
  TYPE(DeviceType, "Device", DeviceObject);
  DeviceType.tp_new = PyType_GenericNew;
  DeviceType.tp_init = (initproc)Device_init;
  DeviceType.tp_dealloc = (destructor)Device_dealloc;
  DeviceType.tp_methods = Device_methods;
  TYPE(ModuleType, "Module", ModuleObject);
  ModuleType.tp_dealloc = (destructor)Module_dealloc;
  ModuleType.tp_methods = Module_methods;
  ModuleType.tp_getset = Module_getset;
  TYPE(ParametersType, "Parameters", ParametersObject);
  ParametersType.tp_new = PyType_GenericNew;
  ParametersType.tp_init = (initproc)Parameters_init;
  ParametersType.tp_dealloc = (destructor)Parameters_dealloc;
  ParametersType.tp_methods = Parameters_methods;
  TYPE(ContextType, "Context", ContextObject);
  ContextType.tp_new = PyType_GenericNew;
  ContextType.tp_init = (initproc)Context_init;
  ContextType.tp_dealloc = (destructor)Context_dealloc;
  ContextType.tp_methods = Context_methods;
  TYPE(FunctionType, "Function", FunctionObject);
  FunctionType.tp_dealloc = (destructor)Function_dealloc;
  FunctionType.tp_methods = Function_methods;
  FunctionType.tp_getset = Function_getset;
  TYPE(InvocationType, "Invocation", InvocationObject);
  InvocationType.tp_dealloc = (destructor)Invocation_dealloc;
  InvocationType.tp_methods = Invocation_methods;
  TYPE(BufferViewType, "BufferView", BufferViewObject);
  BufferViewType.tp_dealloc = (destructor)BufferView_dealloc;
  BufferViewType.tp_methods = BufferView_methods;
  BufferViewType.tp_getset = BufferView_getset;
  BufferViewType.tp_as_buffer = &BufferView_as_buffer;
  TYPE(FenceType, "Fence", FenceObject);
  FenceType.tp_flags |= Py_TPFLAGS_BASETYPE;
  FenceType.tp_new = Fence_new;
  FenceType.tp_dealloc = (destructor)Fence_dealloc;
  FenceType.tp_methods = Fence_methods;
  TYPE(RefType, "Ref", RefObject);
  RefType.tp_dealloc = (destructor)Ref_dealloc;
  RefType.tp_repr = (reprfunc)Ref_repr;

  PyTypeObject *types[] = {&InstanceType,   &DeviceType,     &ModuleType,
                           &ParametersType, &ContextType,    &FunctionType,
                           &InvocationType, &BufferViewType, &FenceType,
                           &RefType};
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    if (PyType_Ready(types[i]) < 0) return NULL;
    Py_INCREF(types[i]);
    const char *dot = strrchr(types[i]->tp_name, '.');
    if (PyModule_AddObject(m, dot + 1, (PyObject *)types[i]) < 0) return NULL;
  }
  g_error = PyErr_NewExceptionWithDoc(
      "hali.Error", "A hali status: .code, .code_name, .message, .frames",
      NULL, NULL);
  if (!g_error || PyModule_AddObject(m, "Error", g_error) < 0) return NULL;
  Py_INCREF(g_error);
  PyObject *codes = PyDict_New();
  if (!codes) return NULL;
  for (int c = 1; c < HALI_STATUS_CODE_COUNT; c++) {
    /* CANCELLED -> CancelledError, INVALID_ARGUMENT -> InvalidArgumentError */
    const char *cn = hali_status_code_name((hali_status_code_t)c);
    char camel[96] = "hali.";
    size_t k = strlen(camel);
    int up = 1;
    for (const char *p = cn; *p && k + 8 < sizeof camel; p++) {
      if (*p == '_') {
        up = 1;
        continue;
      }
      camel[k++] = up ? *p : (char)(*p - 'A' + 'a');
      up = 0;
    }
    memcpy(camel + k, "Error", 6);
    PyObject *bases = c == HALI_STATUS_DEADLINE_EXCEEDED
                          ? PyTuple_Pack(2, g_error, PyExc_TimeoutError)
                          : PyTuple_Pack(1, g_error);
    if (!bases) return NULL;
    g_error_by_code[c] = PyErr_NewException(camel, bases, NULL);
    Py_DECREF(bases);
    if (!g_error_by_code[c]) return NULL;
    Py_INCREF(g_error_by_code[c]);
    if (PyModule_AddObject(m, camel + 5, g_error_by_code[c]) < 0) return NULL;
    PyObject *key = PyLong_FromLong(c);
    if (!key || PyDict_SetItem(codes, key, g_error_by_code[c]) < 0)
      return NULL;
    Py_DECREF(key);
  }
  if (PyModule_AddObject(m, "errors_by_code", codes) < 0) return NULL;
  PyModule_AddStringConstant(m, "version", hali_version());
  return m;
}
