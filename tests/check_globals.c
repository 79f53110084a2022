/* Module globals (issue 14): the text syntax and its errors, the verifier's
 * rules (types, immutability, initializers), the binary form (round trip,
 * versions, malformed sections), per-context storage through the C API,
 * initializers (order, failure), ref globals across calls, and ordering
 * across invocations through a fence held in a global. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"
#include "loader/hbc.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------------------ */
/* Helpers. */

static hali_ir_module_t *parse_ok(const char *text) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_load_bytes((const uint8_t *)text, strlen(text), "g.hasm",
                               &m));
  return m;
}

static hali_status_t parse(const char *text) {
  hali_ir_module_t *m = NULL;
  hali_status_t s =
      hali_load_bytes((const uint8_t *)text, strlen(text), "g.hasm", &m);
  hali_ir_module_free(m);
  return s;
}

static hali_instance_t *instance_new(void) {
  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(NULL, &in));
  return in;
}

static hali_device_t *device_new(hali_instance_t *in) {
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = HALI_DEVICE_LOCAL_SYNC;
  hali_device_t *d = NULL;
  ck_assert_ok(hali_device_create(in, &p, &d));
  return d;
}

static hali_module_t *module_new(hali_instance_t *in, const char *text) {
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_bytes(in, text, strlen(text), "g.hasm", &m));
  return m;
}

static hali_status_t try_context(hali_instance_t *in, hali_device_t *d,
                                 hali_module_t *m, hali_context_t **out) {
  return hali_context_create(in, d, &m, 1, NULL, out);
}

static hali_context_t *context_new(hali_instance_t *in, hali_device_t *d,
                                   hali_module_t *m) {
  hali_context_t *c = NULL;
  ck_assert_ok(try_context(in, d, m, &c));
  return c;
}

/* Calls a () -> (i32) function of |c|. */
static int32_t call_i32(hali_context_t *c, const char *name) {
  hali_function_t *f = NULL;
  ck_assert_ok(hali_context_lookup_function(c, name, &f));
  hali_variant_t r;
  ck_assert_ok(hali_context_invoke(c, f, NULL, 0, &r, 1));
  ck_assert_int_eq(r.type, HALI_VARIANT_I32);
  return r.u.i32;
}

/* ------------------------------------------------------------------------ */
/* Every scalar type: initial values, loads, stores (run unlinked). */

static const char *scalars_text =
    "module @g\n"
    "global @a : i32 mutable = -7\n"
    "global @b : i64 mutable = -9000000000\n"
    "global @c : f32 mutable = 0.5\n"
    "global @d : f64 mutable = -2.25\n"
    "global @z : i32 mutable\n"
    "func @get() -> (i32, i64, f32, f64, i32) {\n"
    "  %a = global.load.i32 @a\n"
    "  %b = global.load.i64 @b\n"
    "  %c = global.load.f32 @c\n"
    "  %d = global.load.f64 @d\n"
    "  %z = global.load.i32 @z\n"
    "  return %a, %b, %c, %d, %z\n"
    "}\n"
    "func @set(%a: i32, %b: i64, %c: f32, %d: f64) {\n"
    "  global.store.i32 @a, %a\n"
    "  global.store.i64 @b, %b\n"
    "  global.store.f32 @c, %c\n"
    "  global.store.f64 @d, %d\n"
    "  return\n"
    "}\n";

START_TEST(scalar_globals_start_at_their_initial_values) {
  hali_vm_module_t *m = hali_test_module(scalars_text);
  hali_vm_stack_t *st = NULL;
  ck_assert_ok(hali_vm_stack_create(0, &st));
  hali_value_t r[5];
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "get"), NULL, 0,
                              r, 5));
  ck_assert_int_eq(r[0].i32, -7);
  ck_assert_int_eq(r[1].i64, -9000000000LL);
  ck_assert_float_eq(r[2].f32, 0.5f);
  ck_assert_double_eq(r[3].f64, -2.25);
  ck_assert_int_eq(r[4].i32, 0); /* no initial value: zero */
  /* Stores stay (the bits exactly: a nan payload and -0). */
  float nanp;
  uint32_t nbits = 0x7fc01234u;
  memcpy(&nanp, &nbits, 4);
  hali_value_t args[4] = {hali_value_i32(INT32_MIN),
                          hali_value_i64(INT64_MAX), hali_value_f32(nanp),
                          hali_value_f64(-0.0)};
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "set"), args, 4,
                              NULL, 0));
  ck_assert_ok(hali_vm_invoke(st, m, hali_vm_module_lookup(m, "get"), NULL, 0,
                              r, 5));
  ck_assert_int_eq(r[0].i32, INT32_MIN);
  ck_assert_int_eq(r[1].i64, INT64_MAX);
  uint32_t got;
  memcpy(&got, &r[2].f32, 4);
  ck_assert_uint_eq(got, nbits);
  ck_assert(r[3].f64 == 0.0 && signbit(r[3].f64));
  hali_vm_stack_free(st);
  hali_vm_module_release(m);
}
END_TEST

/* dis prints the declarations as written; the text reassembles. */
START_TEST(globals_print_and_reassemble) {
  const char *text =
      "module @p\n"
      "global @n : i32 = 3\n"
      "global @m : i64 mutable\n"
      "global @x : f32 = -1.5\n"
      "global @y : f64 mutable = 1e300\n"
      "global @buf : !hal.buffer mutable\n"
      "global @fence : !hal.fence\n"
      "func @f() -> i32 {\n"
      "  %v = global.load.i32 @n\n"
      "  %b = global.load.ref @buf\n"
      "  global.store.ref @buf, %b\n"
      "  return %v\n"
      "}\n";
  hali_ir_module_t *m = parse_ok(text);
  ck_assert_uint_eq(m->global_count, 6);
  char *t = hali_ir_print(m, false);
  ck_assert_ptr_nonnull(strstr(t, "global @n : i32 = 3\n"));
  ck_assert_ptr_nonnull(strstr(t, "global @m : i64 mutable\n"));
  ck_assert_ptr_nonnull(strstr(t, "global @x : f32 = -1.5\n"));
  ck_assert_ptr_nonnull(strstr(t, "global @y : f64 mutable = 1e+300\n"));
  ck_assert_ptr_nonnull(strstr(t, "global @buf : !hal.buffer mutable\n"));
  ck_assert_ptr_nonnull(strstr(t, "global @fence : !hal.fence\n"));
  ck_assert_ptr_nonnull(strstr(t, "%b = global.load.ref @buf\n"));
  ck_assert_ptr_nonnull(strstr(t, "global.store.ref @buf, %b\n"));
  hali_ir_module_t *m2 = parse_ok(t);
  char *t2 = hali_ir_print(m2, false);
  ck_assert_str_eq(t, t2);
  free(t);
  free(t2);
  hali_ir_module_free(m);
  hali_ir_module_free(m2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Errors, each naming the place and the global. */

#define FUNC_WITH(body) "func @f() {\n" body "  return\n}\n"

START_TEST(assembler_errors_name_the_global) {
  ck_assert_status(parse("global @g : i32\nglobal @g : i64\n"),
                   HALI_STATUS_INVALID_ARGUMENT, "2:8: global defined twice");
  ck_assert_status(parse(FUNC_WITH("  %x = global.load.i32 @nope\n")),
                   HALI_STATUS_INVALID_ARGUMENT, "undefined global");
  ck_assert_status(
      parse("global @g : i32 mutable\n" FUNC_WITH("  %x = global.load.i64 @g\n")),
      HALI_STATUS_INVALID_ARGUMENT,
      "global @g is i32 but global.load.i64 takes i64");
  ck_assert_status(
      parse("global @g : i32\n" FUNC_WITH("  %x = global.load.ref @g\n")),
      HALI_STATUS_INVALID_ARGUMENT,
      "global @g is i32 but global.load.ref takes a ref global");
  ck_assert_status(parse("global @b : !hal.buffer = 0\n"),
                   HALI_STATUS_INVALID_ARGUMENT, "a ref global starts null");
  ck_assert_status(parse("global @g : i32 = 4294967296\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "1:19: i32 literal out of range");
  ck_assert_status(parse("global @g : f32 = abc\n"),
                   HALI_STATUS_INVALID_ARGUMENT, "1:19");
  ck_assert_status(parse("global @g : tensor<4xf32> = 1\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "a tensor global's initial value is 'parameter");
  ck_assert_status(parse("global @g : tensor<4xf32> mutable = parameter "
                         "\"s\" :: \"k\"\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "a parameter global is immutable");
  ck_assert_status(parse("global g : i32\n"), HALI_STATUS_INVALID_ARGUMENT,
                   "1:8: expected a global name (@name)");
  ck_assert_status(parse("global @g i32\n"), HALI_STATUS_INVALID_ARGUMENT,
                   "expected ':' after the global name");
}
END_TEST

START_TEST(verifier_rules) {
  /* A store to an immutable global outside an initializer. */
  ck_assert_status(
      parse("global @k : i32 = 1\n"
            "func @f(%x: i32) {\n  global.store.i32 @k, %x\n  return\n}\n"),
      HALI_STATUS_INVALID_ARGUMENT,
      "@f, block ^entry, instruction 0 (global.store.i32), g.hasm:3: stores "
      "immutable global @k: only an initializer");
  /* ... is fine in one. */
  ck_assert_ok(parse("global @k : i32 = 1\n"
                     "func @i() attributes [\"initializer\"] {\n"
                     "  %x = const.i32 2\n  global.store.i32 @k, %x\n"
                     "  return\n}\n"));
  /* A ref global moves refs of its own type only. */
  ck_assert_status(
      parse("global @b : !hal.buffer mutable\n"
            "func @f(%e: !hal.fence) {\n  global.store.ref @b, %e\n"
            "  return\n}\n"),
      HALI_STATUS_INVALID_ARGUMENT,
      "global @b is !hal.buffer, but global.store.ref moves !hal.fence");
  /* Initializers take and return nothing. */
  ck_assert_status(parse("func @i(%x: i32) attributes [\"initializer\"] {\n"
                         "  return\n}\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "@i: an initializer takes no arguments and returns nothing");
  ck_assert_status(parse("func @i() -> i32 attributes [\"initializer\"] {\n"
                         "  %x = const.i32 0\n  return %x\n}\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "an initializer takes no arguments");
}
END_TEST

/* The IR a reader or a pass could build, checked by the verifier. */
START_TEST(verifier_rejects_malformed_globals) {
  hali_ir_module_t *m = parse_ok(scalars_text);
  m->globals[0].flags |= 0x80;
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @a has unknown flags 0x");
  m->globals[0].flags = HALI_GLOBAL_INIT;
  m->globals[0].init = INT64_C(1) << 40;
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @a: initial value does not fit in i32");
  m->globals[0].init = 0;
  m->globals[2].init = INT64_C(1) << 33;
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @c: f32 initial value has high bits set");
  m->globals[2].init = 0;
  m->globals[1].type = 77;
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @b has unknown type code 77");
  m->globals[1].type = HALI_TYPE_I64;
  /* An operand past the globals. */
  m->funcs[0].blocks[0].insns[0].operands[1].v = 99;
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "operand 1: global 99 out of range (module has 5)");
  ck_assert_status(hali_ir_verify_structure(m), HALI_STATUS_INVALID_ARGUMENT,
                   "operand 1: global 99 out of range");
  m->funcs[0].blocks[0].insns[0].operands[1].v = 0;
  free(m->globals[4].name);
  m->globals[4].name = strdup("a");
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @a defined twice");
  hali_ir_module_free(m);
}
END_TEST

/* A tensor global is accepted before the passes and rejected if any is
 * left after them (the verifier never lets one reach the interpreter). */
START_TEST(tensor_globals_parse_and_print) {
  const char *text = "module @t\n"
                     "global @kv : tensor<2x3xf32> mutable\n"
                     "global @w : tensor<4xf32> = parameter \"model\" :: "
                     "\"layer.0\"\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "t.hasm", &m));
  ck_assert_ok(hali_ir_verify_structure(m));
  ck_assert_uint_eq(m->global_count, 2);
  ck_assert_uint_eq(m->globals[0].type, HALI_TYPE_TENSOR);
  ck_assert_uint_eq(m->globals[0].xtype.rank, 2);
  ck_assert_str_eq(m->globals[1].param_scope, "model");
  ck_assert_str_eq(m->globals[1].param_key, "layer.0");
  char *t = hali_ir_print(m, false);
  ck_assert_ptr_nonnull(
      strstr(t, "global @kv : tensor<2x3xf32> mutable\n"
                "global @w : tensor<4xf32> = parameter \"model\" :: "
                "\"layer.0\"\n"));
  free(t);
  ck_assert_status(hali_ir_verify(m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @kv is a tensor: tensor globals are lowered");
  m->globals[0].xtype.dims[1] = -1;
  ck_assert_status(hali_ir_verify_structure(m), HALI_STATUS_INVALID_ARGUMENT,
                   "tensor global @kv must have a static shape");
  hali_ir_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The binary form. */

static void assemble(const char *text, bool strip, uint8_t **d, size_t *n) {
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(text, strlen(text), "g.hasm", &m));
  hali_hbc_write_options_t o = {.strip = strip};
  ck_assert_ok(hali_hbc_write(m, &o, d, n));
  hali_ir_module_free(m);
}

START_TEST(binary_round_trip_same_bytes) {
  const char *texts[] = {
      scalars_text,
      "module @t\n"
      "global @kv : tensor<2x3xf32> mutable\n"
      "global @w : tensor<4xf32> = parameter \"model\" :: \"w\"\n"
      "global @b : !hal.buffer mutable\n",
  };
  for (size_t k = 0; k < 2; ++k)
    for (int strip = 0; strip < 2; ++strip) {
      uint8_t *a = NULL, *b = NULL;
      size_t na = 0, nb = 0;
      assemble(texts[k], strip, &a, &na);
      ck_assert_uint_eq(a[10], HALI_HBC_VERSION_MINOR); /* the current minor (1.3 has globals) */
      hali_ir_module_t *m = NULL;
      ck_assert_ok(hali_hbc_read(a, na, NULL, &m));
      char *text = hali_ir_print(m, true);
      hali_ir_module_free(m);
      /* dis -> asm gives the same bytes. */
      hali_ir_module_t *m2 = NULL;
      ck_assert_ok(hali_asm_parse(text, strlen(text), "g.hasm", &m2));
      hali_hbc_write_options_t o = {.strip = strip};
      ck_assert_ok(hali_hbc_write(m2, &o, &b, &nb));
      hali_ir_module_free(m2);
      ck_assert_uint_eq(na, nb);
      ck_assert_msg(memcmp(a, b, na) == 0, "text %zu strip %d differs", k,
                    strip);
      free(text);
      free(a);
      free(b);
    }
}
END_TEST

/* Rewrites the minor version and the checksum of |d|. */
static void set_minor(uint8_t *d, size_t n, uint16_t minor) {
  d[10] = (uint8_t)minor;
  d[11] = (uint8_t)(minor >> 8);
  uint32_t crc = hali_crc32(d + HALI_HBC_HEADER_SIZE, n - HALI_HBC_HEADER_SIZE);
  for (int i = 0; i < 4; ++i) d[20 + i] = (uint8_t)(crc >> (8 * i));
}

/* The offset of section |id|'s contents. */
static size_t section_at(const uint8_t *d, size_t n, uint32_t id) {
  size_t p = HALI_HBC_HEADER_SIZE;
  while (p + 8 <= n) {
    uint32_t sid = d[p] | d[p + 1] << 8 | d[p + 2] << 16 | (uint32_t)d[p + 3] << 24;
    uint32_t len = d[p + 4] | d[p + 5] << 8 | d[p + 6] << 16 |
                   (uint32_t)d[p + 7] << 24;
    if (sid == id) return p + 8;
    p += 8 + len;
  }
  ck_abort_msg("no section %u", id);
  return 0;
}

START_TEST(binary_reader_rejects_what_it_does_not_know) {
  uint8_t *d = NULL;
  size_t n = 0;
  hali_ir_module_t *m = NULL;
  /* GLOBALS in a module that declares 1.2. */
  const char *only_globals = "module @o\nglobal @a : i32 mutable = 1\n";
  assemble(only_globals, true, &d, &n);
  set_minor(d, n, 2);
  ck_assert_status(hali_hbc_read(d, n, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                   "GLOBALS is new in format 1.3, but the module declares 1.2");
  free(d);
  /* A global op in a module that declares 1.2. */
  assemble(scalars_text, true, &d, &n);
  set_minor(d, n, 2);
  ck_assert_status(hali_hbc_read(d, n, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                   "GLOBALS is new in format 1.3");
  free(d);
  /* Unknown flags and type codes. */
  assemble(only_globals, true, &d, &n);
  size_t g = section_at(d, n, HALI_HBC_SECTION_GLOBALS);
  /* u32 count, u32 name, u8 type, u8 flags */
  d[g + 9] |= 0x40;
  set_minor(d, n, 3);
  ck_assert_status(hali_hbc_read(d, n, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                   "GLOBALS section at byte");
  d[g + 9] &= (uint8_t)~0x40;
  d[g + 8] = 99;
  set_minor(d, n, 3);
  ck_assert_status(hali_hbc_read(d, n, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                   "global @a has unknown type code 99");
  d[g + 8] = HALI_TYPE_I32;
  /* A count the section cannot hold. */
  d[g] = 0xff;
  set_minor(d, n, 3);
  ck_assert_status(hali_hbc_read(d, n, NULL, &m), HALI_STATUS_INVALID_ARGUMENT,
                   "global count 255 exceeds");
  d[g] = 1;
  /* Restored, the module reads again: the patches were the errors. */
  set_minor(d, n, 3);
  ck_assert_ok(hali_hbc_read(d, n, NULL, &m));
  ck_assert_int_eq(m->globals[0].init, 1);
  hali_ir_module_free(m);
  m = NULL;
  free(d);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Contexts: storage per context, initializers. */

static const char *counter_text =
    "module @c\n"
    "global @n : i32 mutable = 10\n"
    "func @bump() -> i32 {\n"
    "  %n = global.load.i32 @n\n"
    "  %one = const.i32 1\n"
    "  %m = add.i32 %n, %one\n"
    "  global.store.i32 @n, %m\n"
    "  return %m\n"
    "}\n";

START_TEST(two_contexts_never_share_globals) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, counter_text);
  hali_context_t *a = context_new(in, d, m), *b = context_new(in, d, m);
  ck_assert_int_eq(call_i32(a, "bump"), 11);
  ck_assert_int_eq(call_i32(a, "bump"), 12);
  ck_assert_int_eq(call_i32(a, "bump"), 13);
  ck_assert_int_eq(call_i32(b, "bump"), 11); /* b starts from 10 */
  hali_context_release(a);
  /* A new context starts again at the initial value. */
  hali_context_t *c = context_new(in, d, m);
  ck_assert_int_eq(call_i32(c, "bump"), 11);
  ck_assert_int_eq(call_i32(b, "bump"), 12);
  hali_context_release(b);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Initializers run once per context, in module order, before anything
 * else: @first writes 2, @second 10 * that + 3, so 23 proves the order. */
static const char *init_text =
    "module @i\n"
    "global @k : i32\n"
    "global @runs : i32 mutable\n"
    "func @first() attributes [\"initializer\"] {\n"
    "  %two = const.i32 2\n"
    "  global.store.i32 @k, %two\n"
    "  call @count()\n"
    "  return\n"
    "}\n"
    "func @count() {\n"
    "  %r = global.load.i32 @runs\n"
    "  %one = const.i32 1\n"
    "  %s = add.i32 %r, %one\n"
    "  global.store.i32 @runs, %s\n"
    "  return\n"
    "}\n"
    "func @second() attributes [\"initializer\"] {\n"
    "  %k = global.load.i32 @k\n"
    "  %ten = const.i32 10\n"
    "  %three = const.i32 3\n"
    "  %t = mul.i32 %k, %ten\n"
    "  %u = add.i32 %t, %three\n"
    "  global.store.i32 @k, %u\n"
    "  call @count()\n"
    "  return\n"
    "}\n"
    "func @k() -> i32 {\n"
    "  %k = global.load.i32 @k\n"
    "  return %k\n"
    "}\n"
    "func @runs() -> i32 {\n"
    "  %r = global.load.i32 @runs\n"
    "  return %r\n"
    "}\n";

START_TEST(initializers_run_once_in_module_order) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, init_text);
  for (int round = 0; round < 2; ++round) {
    hali_context_t *c = context_new(in, d, m);
    ck_assert_int_eq(call_i32(c, "k"), 23);
    ck_assert_int_eq(call_i32(c, "runs"), 2);
    ck_assert_int_eq(call_i32(c, "k"), 23); /* not again per call */
    hali_context_release(c);
  }
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

START_TEST(a_failing_initializer_fails_the_context) {
  const char *text = "module @bad\n"
                     "global @k : i32\n"
                     "func @ok() attributes [\"initializer\"] {\n"
                     "  return\n"
                     "}\n"
                     "func @deep() {\n"
                     "  %code = const.i32 9\n"
                     "  fail %code, \"weights missing\"\n"
                     "}\n"
                     "func @boom() attributes [\"initializer\"] {\n"
                     "  call @deep()\n"
                     "  return\n"
                     "}\n";
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, text);
  hali_context_t *c = (hali_context_t *)1;
  hali_status_t s = try_context(in, d, m, &c);
  ck_assert_ptr_null(c);
  char *msg = hali_status_to_string(s);
  /* Its status (FAILED_PRECONDITION = 9), message and backtrace: the
   * failing function, its caller, then which initializer it was. */
  ck_assert_msg(strstr(msg, "weights missing") && strstr(msg, "@deep") &&
                    strstr(msg, "@boom") &&
                    strstr(msg, "initializer @boom of module @bad"),
                "%s", msg);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_FAILED_PRECONDITION);
  free(msg);
  hali_status_free(s);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* A buffer made once by the initializer lives in a ref global: later calls
 * add to what earlier ones stored in it. */
static const char *buffer_text =
    "module @buf\n"
    "global @acc : !hal.buffer\n"
    "func @init() attributes [\"initializer\"] {\n"
    "  %device = hal.device.get\n"
    "  %allocator = hal.device.allocator %device\n"
    "  %memory = const.i32 19\n"
    "  %usage = const.i32 7\n"
    "  %bytes = const.i64 8\n"
    "  %b = hal.allocator.allocate %allocator, %memory, %usage, %bytes\n"
    "  %zero = const.i64 0\n"
    "  %one = const.i32 1\n"
    "  hal.buffer.store.i32 %b, %zero, %one\n"
    "  global.store.ref @acc, %b\n"
    "  return\n"
    "}\n"
    "func @double() -> i32 {\n"
    "  %b = global.load.ref @acc\n"
    "  %zero = const.i64 0\n"
    "  %v = hal.buffer.load.i32 %b, %zero\n"
    "  %w = add.i32 %v, %v\n"
    "  hal.buffer.store.i32 %b, %zero, %w\n"
    "  return %w\n"
    "}\n";

START_TEST(ref_globals_keep_a_buffer_across_calls) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, buffer_text);
  hali_context_t *a = context_new(in, d, m), *b = context_new(in, d, m);
  int32_t want = 1;
  for (int i = 0; i < 5; ++i) {
    want *= 2;
    ck_assert_int_eq(call_i32(a, "double"), want);
  }
  ck_assert_int_eq(call_i32(b, "double"), 2); /* its own buffer */
  hali_context_release(a);
  hali_context_release(b);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Concurrent invocations of one context share its globals; nothing but the
 * program's fences orders them.  Here the consumer starts first and waits
 * on a fence the initializer put in a global; the producer stores the
 * value, then signals it: the consumer sees the value. */
static const char *fence_text =
    "module @pc\n"
    "global @ready : !hal.fence\n"
    "global @value : i32 mutable\n"
    "func @init() attributes [\"initializer\"] {\n"
    "  %device = hal.device.get\n"
    "  %f = hal.fence.create %device\n"
    "  global.store.ref @ready, %f\n"
    "  return\n"
    "}\n"
    "func @consumer() -> i32 {\n"
    "  %f = global.load.ref @ready\n"
    "  %forever = const.i64 -1\n"
    "  %s = hal.fence.await %f, %forever\n"
    "  %v = global.load.i32 @value\n"
    "  return %v\n"
    "}\n"
    "func @producer(%v: i32) {\n"
    "  global.store.i32 @value, %v\n"
    "  %f = global.load.ref @ready\n"
    "  hal.fence.signal %f\n"
    "  return\n"
    "}\n";

START_TEST(fences_in_globals_order_invocations) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, fence_text);
  hali_context_t *c = context_new(in, d, m);
  hali_function_t *consumer = NULL, *producer = NULL;
  ck_assert_ok(hali_context_lookup_function(c, "consumer", &consumer));
  ck_assert_ok(hali_context_lookup_function(c, "producer", &producer));
  hali_invocation_t *ci = NULL, *pi = NULL;
  ck_assert_ok(hali_context_invoke_async(c, consumer, NULL, 0, &ci));
  ck_assert_ok(hali_context_run(c));
  ck_assert(!hali_invocation_is_done(ci)); /* waiting on @ready */
  hali_variant_t arg = hali_variant_i32(77);
  ck_assert_ok(hali_context_invoke_async(c, producer, &arg, 1, &pi));
  ck_assert_ok(hali_invocation_await(ci));
  ck_assert_ok(hali_invocation_status(ci));
  hali_variant_t r;
  ck_assert_ok(hali_invocation_results(ci, &r, 1));
  ck_assert_int_eq(r.u.i32, 77);
  ck_assert_ok(hali_invocation_await(pi));
  hali_invocation_release(ci);
  hali_invocation_release(pi);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* --trace-values shows what a global load gave and a store took. */
START_TEST(trace_shows_global_loads_and_stores) {
  FILE *f = fopen("check_globals_trace.hasm", "w");
  ck_assert_ptr_nonnull(f);
  fputs(counter_text, f);
  fclose(f);
  char *out = NULL, *err = NULL;
  int rc = hali_test_shell(HALI_TOOL " run check_globals_trace.hasm "
                                     "--function=bump --trace=vm",
                           &out, &err);
  ck_assert_int_eq(rc, 0);
  ck_assert_ptr_nonnull(strstr(err, "%n = global.load.i32 @n"));
  ck_assert_ptr_nonnull(strstr(err, "-> %n=10"));
  ck_assert_ptr_nonnull(strstr(err, "global.store.i32 @n, %m  ; %m=11"));
  free(out);
  free(err);
  remove("check_globals_trace.hasm");
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Tensor globals: the variable lifetime (stream-to-hal). */

static const char *tensor_text =
    "module @tg\n"
    "executable @ex format \"bytecode\" {\n"
    "  export @add(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>) "
    "function @add_kernel\n"
    "}\n"
    "global @acc : tensor<4xf32> mutable\n"
    "global @base : tensor<4xf32>\n"
    "func @init() attributes [\"initializer\"] {\n"
    "  %ten = const.f32 10\n"
    "  %b = tensor.splat %ten : tensor<4xf32>\n"
    "  tensor.global.store @base, %b\n"
    "  return\n"
    "}\n"
    "func @get() -> tensor<4xf32> {\n"
    "  %v = tensor.global.load @acc\n"
    "  return %v\n"
    "}\n"
    "func @base() -> tensor<4xf32> {\n"
    "  %v = tensor.global.load @base\n"
    "  return %v\n"
    "}\n"
    "func @put(%x: tensor<4xf32>) {\n"
    "  tensor.global.store @acc, %x\n"
    "  return\n"
    "}\n"
    "# acc += x, in place (the result goes straight back to @acc)\n"
    "func @accumulate(%x: tensor<4xf32>) {\n"
    "  %a = tensor.global.load @acc\n"
    "  %s = tensor.dispatch @ex::@add[4](%a, %x) -> %a as tensor<4xf32>\n"
    "  tensor.global.store @acc, %s\n"
    "  return\n"
    "}\n"
    "# acc += x, returning the old value: the tie must copy\n"
    "func @exchange(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %a = tensor.global.load @acc\n"
    "  %s = tensor.dispatch @ex::@add[4](%a, %x) -> %a as tensor<4xf32>\n"
    "  tensor.global.store @acc, %s\n"
    "  return %a\n"
    "}\n"
    "func @add_kernel(%a: !hal.buffer, %b: !hal.buffer, %out: !hal.buffer, "
    "%x: i32, %y: i32, %z: i32, %cx: i32, %cy: i32, %cz: i32) {\n"
    "  %four = const.i32 4\n"
    "  %i = mul.i32 %x, %four\n"
    "  %o = ext.u.i32.i64 %i\n"
    "  %v = hal.buffer.load.f32 %a, %o\n"
    "  %w = hal.buffer.load.f32 %b, %o\n"
    "  %v = add.f32 %v, %w\n"
    "  hal.buffer.store.f32 %out, %o, %v\n"
    "  return\n"
    "}\n";

typedef struct {
  hali_instance_t *in;
  hali_device_t *dev;
  hali_module_t *m;
  hali_context_t *c;
} tenv_t;

static tenv_t tenv_new(const char *text, hali_device_kind_t kind) {
  tenv_t e = {0};
  e.in = instance_new();
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = kind;
  p.worker_count = 2;
  ck_assert_ok(hali_device_create(e.in, &p, &e.dev));
  e.m = module_new(e.in, text);
  e.c = context_new(e.in, e.dev, e.m);
  return e;
}

static void tenv_free(tenv_t *e) {
  hali_context_release(e->c);
  hali_module_release(e->m);
  hali_device_release(e->dev);
  hali_instance_release(e->in);
}

static hali_buffer_view_t *vec4(const tenv_t *e, const float v[4]) {
  int64_t n = 4;
  hali_buffer_view_t *view = NULL;
  ck_assert_ok(hali_buffer_view_create(e->dev, HALI_ELEMENT_TYPE_F32, 1, &n, v,
                                       4 * sizeof(float), &view));
  return view;
}

static void expect4(hali_buffer_view_t *v, float a, float b, float c,
                    float d, const char *what) {
  float got[4], want[4] = {a, b, c, d};
  ck_assert_ok(hali_buffer_view_read(v, got, sizeof(got)));
  for (int i = 0; i < 4; ++i)
    ck_assert_msg(got[i] == want[i], "%s[%d]: got %g, want %g", what, i,
                  (double)got[i], (double)want[i]);
}

/* Calls |fn| of |e| with at most one view argument and one view result. */
static hali_buffer_view_t *tcall(tenv_t *e, const char *fn,
                                 hali_buffer_view_t *arg, bool result) {
  hali_function_t *f = NULL;
  ck_assert_ok(hali_context_lookup_function(e->c, fn, &f));
  hali_variant_t a = hali_variant_view(arg), r;
  ck_assert_ok(hali_context_invoke(e->c, f, &a, arg ? 1 : 0, &r,
                                   result ? 1 : 0));
  return result ? r.u.view : NULL;
}

/* What the loader lowered |fn| to, as text. */
static char *lowered(const char *text, const char *fn) {
  hali_ir_module_t *m = parse_ok(text);
  int32_t fi = hali_ir_module_find_func(m, fn);
  ck_assert_int_ge(fi, 0);
  hali_strbuf_t sb = {0};
  const hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      hali_ir_print_insn(&sb, m, f, &f->blocks[b].insns[i]);
      hali_strbuf_append(&sb, "\n", 1);
    }
  hali_ir_module_free(m);
  return hali_strbuf_take(&sb);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  return n;
}

START_TEST(tensor_globals_keep_values_across_invocations) {
  tenv_t e = tenv_new(tensor_text, _i ? HALI_DEVICE_LOCAL_TASK
                                      : HALI_DEVICE_LOCAL_SYNC);
  /* Storage starts zeroed; the initializer stored @base. */
  hali_buffer_view_t *v = tcall(&e, "get", NULL, true);
  expect4(v, 0, 0, 0, 0, "initial @acc");
  hali_buffer_view_release(v);
  v = tcall(&e, "base", NULL, true);
  expect4(v, 10, 10, 10, 10, "@base");
  hali_buffer_view_release(v);
  const float x[4] = {1, 2, 3, 4};
  hali_buffer_view_t *xv = vec4(&e, x);
  tcall(&e, "put", xv, false);
  /* A returned value is a copy: a later store does not change it. */
  hali_buffer_view_t *before = tcall(&e, "get", NULL, true);
  for (int k = 0; k < 3; ++k) tcall(&e, "accumulate", xv, false);
  expect4(before, 1, 2, 3, 4, "@acc returned before the updates");
  v = tcall(&e, "get", NULL, true);
  expect4(v, 4, 8, 12, 16, "@acc after put and 3 accumulates");
  hali_buffer_view_release(v);
  /* exchange returns the old value and stores old + x. */
  v = tcall(&e, "exchange", xv, true);
  expect4(v, 4, 8, 12, 16, "exchange's old value");
  hali_buffer_view_release(v);
  v = tcall(&e, "get", NULL, true);
  expect4(v, 5, 10, 15, 20, "@acc after exchange");
  hali_buffer_view_release(v);
  /* The caller's argument never changed. */
  expect4(xv, 1, 2, 3, 4, "the argument");
  /* Another context has its own storage. */
  hali_context_t *c2 = context_new(e.in, e.dev, e.m);
  hali_function_t *g2 = NULL;
  ck_assert_ok(hali_context_lookup_function(c2, "get", &g2));
  hali_variant_t r;
  ck_assert_ok(hali_context_invoke(c2, g2, NULL, 0, &r, 1));
  expect4(r.u.view, 0, 0, 0, 0, "@acc of a second context");
  hali_buffer_view_release(r.u.view);
  hali_context_release(c2);
  hali_buffer_view_release(before);
  hali_buffer_view_release(xv);
  tenv_free(&e);
}
END_TEST

/* The lowering: a load waits for the global's timepoint by fence join (no
 * host wait), a store records the fence of the work that wrote it; an
 * update that goes straight back is in place (no copy), one whose old
 * value is still read copies first. */
START_TEST(tensor_global_lowering) {
  char *acc = lowered(tensor_text, "accumulate$async");
  ck_assert_msg(strstr(acc, "= global.load.ref @acc\n") &&
                    strstr(acc, "= global.load.ref @acc$ready\n") &&
                    strstr(acc, "= hal.fence.join %wait, %a.ready\n") &&
                    strstr(acc, "global.store.ref @acc$ready, %timepoint"),
                "%s", acc);
  ck_assert_int_eq(count(acc, "hal.fence.await"), 0);
  ck_assert_int_eq(count(acc, "hal.command_buffer.copy"), 0);
  free(acc);
  char *ex = lowered(tensor_text, "exchange$async");
  /* The copy of the old value for the tie, and the copy of the result
   * into @acc's storage; the returned old value is a third. */
  ck_assert_int_eq(count(ex, "hal.command_buffer.copy"), 3);
  ck_assert_int_eq(count(ex, "hal.fence.await"), 0);
  free(ex);
  /* The storage initializer comes first and zero-fills on the queue. */
  hali_ir_module_t *m = parse_ok(tensor_text);
  ck_assert_str_eq(m->funcs[0].name, "globals$storage");
  ck_assert(hali_ir_func_has_attr(&m->funcs[0], HALI_ATTR_INITIALIZER));
  int32_t ia = hali_ir_module_find_func(m, "init$async");
  ck_assert_int_ge(ia, 0);
  ck_assert(!hali_ir_func_has_attr(&m->funcs[ia], HALI_ATTR_INITIALIZER));
  int32_t g = hali_ir_module_find_global(m, "acc");
  ck_assert_uint_eq(m->globals[g].type, HALI_TYPE_BUFFER);
  ck_assert_int_ge(hali_ir_module_find_global(m, "acc$ready"), 0);
  hali_ir_module_free(m);
}
END_TEST

/* Two f$async calls chained only through the global: the get's own wait
 * fence is signalled already, yet it sees the put, whose work is held back
 * by a host fence until after the get was submitted. */
START_TEST(tensor_globals_order_f_async_calls) {
  tenv_t e = tenv_new(tensor_text, HALI_DEVICE_LOCAL_TASK);
  const float x[4] = {7, 8, 9, 10};
  hali_buffer_view_t *xv = vec4(&e, x);
  hali_fence_t *gate = NULL, *put_done = NULL, *get_done = NULL,
               *open = NULL;
  ck_assert_ok(hali_fence_create(&gate));
  ck_assert_ok(hali_fence_create(&put_done));
  ck_assert_ok(hali_fence_create(&get_done));
  ck_assert_ok(hali_fence_create(&open));
  ck_assert_ok(hali_fence_signal(open));
  hali_function_t *put = NULL, *get = NULL;
  ck_assert_ok(hali_context_lookup_function(e.c, "put$async", &put));
  ck_assert_ok(hali_context_lookup_function(e.c, "get$async", &get));
  hali_variant_t pa[3] = {hali_variant_view(xv), hali_variant_fence(gate),
                          hali_variant_fence(put_done)};
  hali_variant_t ga[2] = {hali_variant_fence(open),
                          hali_variant_fence(get_done)};
  hali_invocation_t *pi = NULL, *gi = NULL;
  ck_assert_ok(hali_context_invoke_async(e.c, put, pa, 3, &pi));
  ck_assert_ok(hali_context_run(e.c));
  ck_assert_ok(hali_context_invoke_async(e.c, get, ga, 2, &gi));
  ck_assert_ok(hali_invocation_await(gi));
  ck_assert_ok(hali_invocation_status(gi));
  /* Both programs returned; the put's copy still waits for the gate. */
  ck_assert_ok(hali_invocation_await(pi));
  hali_variant_t r;
  ck_assert_ok(hali_invocation_results(gi, &r, 1));
  ck_assert_ok(hali_fence_signal(gate));
  ck_assert_ok(hali_fence_await(get_done, HALI_TIMEOUT_INFINITE));
  expect4(r.u.view, 7, 8, 9, 10, "get after put");
  hali_buffer_view_release(r.u.view);
  hali_invocation_release(pi);
  hali_invocation_release(gi);
  hali_fence_release(gate);
  hali_fence_release(put_done);
  hali_fence_release(get_done);
  hali_fence_release(open);
  hali_buffer_view_release(xv);
  tenv_free(&e);
}
END_TEST

START_TEST(tensor_global_errors) {
  ck_assert_status(
      parse("global @w : tensor<4xf32>\n"
            "func @f(%x: tensor<4xf32>) {\n"
            "  tensor.global.store @w, %x\n  return\n}\n"),
      HALI_STATUS_INVALID_ARGUMENT,
      "verify structure: @f, block ^entry, instruction 0 "
      "(tensor.global.store), g.hasm:3: stores immutable global @w");
  ck_assert_status(
      parse("global @w : tensor<4xf32> mutable\n"
            "func @f(%x: tensor<2xf32>) {\n"
            "  tensor.global.store @w, %x\n  return\n}\n"),
      HALI_STATUS_INVALID_ARGUMENT,
      "3:27: tensor.global.store of tensor<2xf32> into tensor<4xf32> @w: "
      "the types differ");
  ck_assert_status(parse("global @n : i32\n"
                         "func @f() -> tensor<4xf32> {\n"
                         "  %v = tensor.global.load @n\n  return %v\n}\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "global @n is i32 but tensor.global.load takes tensor");
  ck_assert_status(parse("global @w : tensor<4xf32>\n"
                         "func @f() -> i32 {\n"
                         "  %v = global.load.i32 @w\n  return %v\n}\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "global @w is a tensor but global.load.i32 takes i32");
}
END_TEST

/* A parameter global needs the context's parameters; none is bound. */
START_TEST(parameter_globals_need_parameters) {
  const char *text = "module @p\n"
                     "global @w : tensor<4xf32> = parameter \"model\" :: "
                     "\"w0\"\n"
                     "func @get() -> tensor<4xf32> {\n"
                     "  %v = tensor.global.load @w\n"
                     "  return %v\n"
                     "}\n";
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = module_new(in, text);
  hali_context_t *c = NULL;
  ck_assert_status(try_context(in, d, m, &c), HALI_STATUS_NOT_FOUND,
                   "no parameters bound for scope 'model' (global @w = "
                   "parameter \"model\" :: \"w0\" of module @p)");
  ck_assert_ptr_null(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST


/* ------------------------------------------------------------------------ */
/* Constants uploaded once: examples/mlp_tensor_rodata.hasm's weights
 * (mlp_tensor.hasm takes them from a parameter file: tests/check_params.c). */

typedef struct {
  pthread_mutex_t mu;
  int updates, update_bytes, allocations;
} hal_count_t;

static void count_line(void *user, const char *line) {
  hal_count_t *c = user;
  pthread_mutex_lock(&c->mu);
  const char *u = strstr(line, " update ");
  if (u) {
    c->updates++;
    /* "... -> !hal.buffer#N+OFF BYTES bytes" */
    const char *b = strrchr(line, '+');
    long off = 0, bytes = 0;
    if (b && sscanf(b, "+%ld %ld bytes", &off, &bytes) == 2)
      c->update_bytes += (int)bytes;
  }
  if (strncmp(line, "[hal] allocate ", 15) == 0) c->allocations++;
  pthread_mutex_unlock(&c->mu);
}

START_TEST(warm_calls_copy_no_weight_bytes) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_file(
      in, HALI_SRCDIR "/examples/mlp_tensor_rodata.hasm", &m));
  hal_count_t cnt = {.mu = PTHREAD_MUTEX_INITIALIZER};
  hali_context_params_t p;
  hali_context_params_initialize(&p);
  p.trace_bits = HALI_TRACE_BITS_HAL;
  p.trace_callback = count_line;
  p.trace_user = &cnt;
  hali_context_t *c = NULL;
  ck_assert_ok(hali_context_create(in, d, &m, 1, &p, &c));
  /* Creation uploaded every weight, once: w1 b1 w2 b2 and the input,
   * 32768 + 512 + 5120 + 40 + 256 bytes, into one allocation. */
  ck_assert_int_eq(cnt.updates, 5);
  ck_assert_int_eq(cnt.update_bytes, 38696);
  hali_function_t *f = NULL;
  ck_assert_ok(hali_context_lookup_function(c, "main", &f));
  float first[10];
  for (int k = 0; k < 4; ++k) {
    pthread_mutex_lock(&cnt.mu);
    cnt.updates = cnt.update_bytes = cnt.allocations = 0;
    pthread_mutex_unlock(&cnt.mu);
    hali_variant_t r;
    ck_assert_ok(hali_context_invoke(c, f, NULL, 0, &r, 1));
    float got[10];
    ck_assert_ok(hali_buffer_view_read(r.u.view, got, sizeof(got)));
    hali_buffer_view_release(r.u.view);
    if (k == 0) memcpy(first, got, sizeof(got));
    ck_assert(memcmp(first, got, sizeof(got)) == 0);
    /* A call copies no weight bytes; it allocates only its activations
     * (the slab of %h and the returned logits). */
    ck_assert_int_eq(cnt.updates, 0);
    ck_assert_int_eq(cnt.update_bytes, 0);
    ck_assert_int_eq(cnt.allocations, 2);
  }
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* What the passes make of globals prints as text that loads again, and
 * assembles to a binary that reads back the same (the passes_text fuzz
 * target's rule). */
START_TEST(lowered_globals_reload) {
  const char *param_text =
      "module @p\n"
      "global @w : tensor<4xf32> = parameter \"model\" :: \"w0\"\n"
      "func @get() -> tensor<4xf32> {\n"
      "  %v = tensor.global.load @w\n"
      "  return %v\n"
      "}\n";
  const char *texts[] = {tensor_text, param_text};
  for (int k = 0; k < 2; ++k) {
    hali_ir_module_t *m = parse_ok(texts[k]);
    char *low = hali_ir_print(m, false);
    hali_ir_module_free(m);
    hali_ir_module_t *again = parse_ok(low);
    char *low2 = hali_ir_print(again, false);
    ck_assert_str_eq(low, low2);
    uint8_t *d = NULL;
    size_t n = 0;
    ck_assert_ok(hali_hbc_write(again, NULL, &d, &n));
    hali_ir_module_free(again);
    hali_ir_module_t *b = NULL;
    ck_assert_ok(hali_hbc_read(d, n, NULL, &b));
    ck_assert_ok(hali_ir_verify(b));
    char *low3 = hali_ir_print(b, false);
    ck_assert_str_eq(low, low3);
    if (k == 1)
      ck_assert_ptr_nonnull(strstr(
          low, "global @w : !hal.buffer = parameter \"model\" :: \"w0\" : "
               "tensor<4xf32>\n"));
    hali_ir_module_free(b);
    free(d);
    free(low);
    free(low2);
    free(low3);
  }
  /* The lowered form needs the tensor type. */
  ck_assert_status(parse("global @w : !hal.buffer = parameter \"s\" :: \"k\"\n"),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "expected ':' before the parameter's tensor type");
}
END_TEST

/* examples/running_sum.hasm: one context keeps the sum across calls. */
START_TEST(running_sum_example) {
  hali_instance_t *in = instance_new();
  hali_device_t *d = device_new(in);
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_file(
      in, HALI_SRCDIR "/examples/running_sum.hasm", &m));
  hali_context_t *c = context_new(in, d, m);
  hali_function_t *f = NULL;
  ck_assert_ok(hali_context_lookup_function(c, "add", &f));
  const float x[4] = {1, 2, 3, 4};
  int64_t n = 4;
  hali_buffer_view_t *xv = NULL;
  ck_assert_ok(hali_buffer_view_create(d, HALI_ELEMENT_TYPE_F32, 1, &n, x,
                                       sizeof(x), &xv));
  for (int k = 1; k <= 3; ++k) {
    hali_variant_t a = hali_variant_view(xv), r;
    ck_assert_ok(hali_context_invoke(c, f, &a, 1, &r, 1));
    expect4(r.u.view, (float)k, 2.0f * k, 3.0f * k, 4.0f * k, "running sum");
    hali_buffer_view_release(r.u.view);
  }
  hali_buffer_view_release(xv);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

/* Initializers of several modules: the modules in the order the context is
 * given them, each module's in its own order; imports are bound before.
 * A host import records the order. */
static hali_status_t record(void *user, const hali_variant_t *args,
                            size_t nargs, hali_variant_t *res, size_t nres) {
  (void)res;
  (void)nres;
  char *log = user;
  size_t n = strlen(log);
  if (nargs == 1 && n + 2 < 64) {
    log[n] = (char)('0' + args[0].u.i32);
    log[n + 1] = 0;
  }
  return HALI_OK;
}

START_TEST(initializers_of_several_modules_run_in_order) {
  static char log[64];
  log[0] = 0;
  hali_instance_t *in = instance_new();
  hali_import_function_t fn = {"record", "(i32)", record, log};
  ck_assert_ok(hali_instance_register_import_module(in, "host", &fn, 1));
  hali_device_t *d = device_new(in);
  const char *a = "module @a\n"
                  "func @host.record(%x: i32) import\n"
                  "func @one() attributes [\"initializer\"] {\n"
                  "  %x = const.i32 1\n  call @host.record(%x)\n  return\n}\n"
                  "func @two() attributes [\"initializer\"] {\n"
                  "  %x = const.i32 2\n  call @host.record(%x)\n  return\n}\n";
  const char *b = "module @b\n"
                  "func @host.record(%x: i32) import\n"
                  "func @three() attributes [\"initializer\"] {\n"
                  "  %x = const.i32 3\n  call @host.record(%x)\n  return\n}\n";
  hali_module_t *ms[2] = {module_new(in, b), module_new(in, a)};
  hali_context_t *c = NULL;
  ck_assert_ok(hali_context_create(in, d, ms, 2, NULL, &c));
  ck_assert_str_eq(log, "312"); /* @b first: it was given first */
  hali_context_release(c);
  log[0] = 0;
  hali_module_t *rev[2] = {ms[1], ms[0]};
  ck_assert_ok(hali_context_create(in, d, rev, 2, NULL, &c));
  ck_assert_str_eq(log, "123");
  hali_context_release(c);
  hali_module_release(ms[0]);
  hali_module_release(ms[1]);
  hali_device_release(d);
  hali_instance_release(in);
}
END_TEST

static Suite *globals_suite(void) {
  Suite *s = suite_create("globals");
  TCase *tc = tcase_create("globals");
  tcase_add_test(tc, scalar_globals_start_at_their_initial_values);
  tcase_add_test(tc, globals_print_and_reassemble);
  tcase_add_test(tc, assembler_errors_name_the_global);
  tcase_add_test(tc, verifier_rules);
  tcase_add_test(tc, verifier_rejects_malformed_globals);
  tcase_add_test(tc, tensor_globals_parse_and_print);
  tcase_add_test(tc, binary_round_trip_same_bytes);
  tcase_add_test(tc, binary_reader_rejects_what_it_does_not_know);
  tcase_add_test(tc, two_contexts_never_share_globals);
  tcase_add_test(tc, initializers_run_once_in_module_order);
  tcase_add_test(tc, initializers_of_several_modules_run_in_order);
  tcase_add_test(tc, a_failing_initializer_fails_the_context);
  tcase_add_test(tc, ref_globals_keep_a_buffer_across_calls);
  tcase_add_test(tc, fences_in_globals_order_invocations);
  tcase_add_test(tc, trace_shows_global_loads_and_stores);
  suite_add_tcase(s, tc);
  tc = tcase_create("tensor");
  tcase_add_loop_test(tc, tensor_globals_keep_values_across_invocations, 0, 2);
  tcase_add_test(tc, tensor_global_lowering);
  tcase_add_test(tc, tensor_globals_order_f_async_calls);
  tcase_add_test(tc, tensor_global_errors);
  tcase_add_test(tc, parameter_globals_need_parameters);
  tcase_add_test(tc, warm_calls_copy_no_weight_bytes);
  tcase_add_test(tc, lowered_globals_reload);
  tcase_add_test(tc, running_sum_example);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(globals_suite()); }
