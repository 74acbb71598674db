/* nvmath._fastcall: call a C function through its address with a fixed argument vector (hand-written).

   A FastCall holds a function address (taken from nvmath's loader: no CUDA or library headers are
   needed here), the function's whole argument vector as 64-bit integers, and the positions ("slots")
   that change per call (device pointers, the stream). Calling it fills the slots, calls the function
   and returns its int status (cublasStatus_t, cufftResult, CUresult: all C enums).

   ABI assumption (checked at compile time; elsewhere the build fails and, the extension being optional,
   nvmath uses its pure-Python path):
     * Linux on x86-64 (System V) or aarch64 (AAPCS64), 64-bit pointers.
     * Every argument of the callee is integer-class: a pointer, a handle, an enum, a bool or an integer
       of at most 64 bits. No float or double by value (alpha and beta are passed by address), no struct
       by value, no varargs. The Python API only accepts integers, so a float cannot be passed.
     * The callee returns int (an enum). Each argument is passed as a uint64_t: in a register or an
       8-byte stack slot on both ABIs, the callee reads the low bytes of narrower parameters, so an
       int32_t parameter given -1 (stored as 2**64 - 1) sees -1.
   Arities 0 .. FASTCALL_MAX_ARGS are dispatched with a switch to exactly typed calls: the largest
   callers are cublasGemmStridedBatchedEx (23 arguments) and cublasLtMatmul (16).

   The GIL: a FastCall keeps it by default. The library calls it makes only enqueue work (a few µs of
   host time, no blocking wait), and dropping and retaking an uncontended GIL nearly doubles the call's
   own cost (tools/bench_fastcall.py, 16 arguments on an x86-64 CPU: 64 ns kept, 114 ns released; the
   ctypes binding it replaces: 1.4 µs). release_gil=True releases it around the call, for callers that
   run other Python threads next to long host-side calls.

   Test hooks: _probe_address(n) is the address of a built-in function of n uint64_t parameters that
   records its arguments (_probe_record()) and returns the status set by _probe_set_status();
   _probe_mixed_address() is the same for a 12-parameter function of alternating int32_t and uint64_t
   (narrow parameters, some on the stack). _slot_read(obj, name, call) reads through a ReadSlot
   (_fastcall.d/reads.c), as the hits read tensors.

   Layout: this file holds the shared helpers, FastCall, the module's functions and its init; each hit
   or launcher block is a file of nvmath/_fastcall.d/ included below in order (one translation unit:
   the blocks use the helpers' static functions, and the compiled code is that of one file). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h> /* PyMember_GetOne (Python.h declares it from 3.12 on) */
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__linux__) || !(defined(__x86_64__) || defined(__aarch64__)) || UINTPTR_MAX != UINT64_MAX
#error "nvmath._fastcall supports 64-bit Linux on x86-64 and aarch64 only; nvmath uses its pure-Python path elsewhere"
#endif

#if defined(__x86_64__)
#define FASTCALL_ABI "x86_64 System V"
#else
#define FASTCALL_ABI "aarch64 AAPCS64"
#endif

typedef uint64_t u64;
#define FASTCALL_MAX_ARGS 24

/* Parameter lists U<n> (n uint64_t), argument lists A<n> (a[0..n-1]), probe parameters P<n> and
   recorders R<n>, for n = 1 .. FASTCALL_MAX_ARGS. */
#define U1 u64
#define U2 U1, u64
#define U3 U2, u64
#define U4 U3, u64
#define U5 U4, u64
#define U6 U5, u64
#define U7 U6, u64
#define U8 U7, u64
#define U9 U8, u64
#define U10 U9, u64
#define U11 U10, u64
#define U12 U11, u64
#define U13 U12, u64
#define U14 U13, u64
#define U15 U14, u64
#define U16 U15, u64
#define U17 U16, u64
#define U18 U17, u64
#define U19 U18, u64
#define U20 U19, u64
#define U21 U20, u64
#define U22 U21, u64
#define U23 U22, u64
#define U24 U23, u64
#define A1 a[0]
#define A2 A1, a[1]
#define A3 A2, a[2]
#define A4 A3, a[3]
#define A5 A4, a[4]
#define A6 A5, a[5]
#define A7 A6, a[6]
#define A8 A7, a[7]
#define A9 A8, a[8]
#define A10 A9, a[9]
#define A11 A10, a[10]
#define A12 A11, a[11]
#define A13 A12, a[12]
#define A14 A13, a[13]
#define A15 A14, a[14]
#define A16 A15, a[15]
#define A17 A16, a[16]
#define A18 A17, a[17]
#define A19 A18, a[18]
#define A20 A19, a[19]
#define A21 A20, a[20]
#define A22 A21, a[21]
#define A23 A22, a[22]
#define A24 A23, a[23]
#define P1 u64 x0
#define P2 P1, u64 x1
#define P3 P2, u64 x2
#define P4 P3, u64 x3
#define P5 P4, u64 x4
#define P6 P5, u64 x5
#define P7 P6, u64 x6
#define P8 P7, u64 x7
#define P9 P8, u64 x8
#define P10 P9, u64 x9
#define P11 P10, u64 x10
#define P12 P11, u64 x11
#define P13 P12, u64 x12
#define P14 P13, u64 x13
#define P15 P14, u64 x14
#define P16 P15, u64 x15
#define P17 P16, u64 x16
#define P18 P17, u64 x17
#define P19 P18, u64 x18
#define P20 P19, u64 x19
#define P21 P20, u64 x20
#define P22 P21, u64 x21
#define P23 P22, u64 x22
#define P24 P23, u64 x23
#define R1 probe_args[0] = x0;
#define R2 R1 probe_args[1] = x1;
#define R3 R2 probe_args[2] = x2;
#define R4 R3 probe_args[3] = x3;
#define R5 R4 probe_args[4] = x4;
#define R6 R5 probe_args[5] = x5;
#define R7 R6 probe_args[6] = x6;
#define R8 R7 probe_args[7] = x7;
#define R9 R8 probe_args[8] = x8;
#define R10 R9 probe_args[9] = x9;
#define R11 R10 probe_args[10] = x10;
#define R12 R11 probe_args[11] = x11;
#define R13 R12 probe_args[12] = x12;
#define R14 R13 probe_args[13] = x13;
#define R15 R14 probe_args[14] = x14;
#define R16 R15 probe_args[15] = x15;
#define R17 R16 probe_args[16] = x16;
#define R18 R17 probe_args[17] = x17;
#define R19 R18 probe_args[18] = x18;
#define R20 R19 probe_args[19] = x19;
#define R21 R20 probe_args[20] = x20;
#define R22 R21 probe_args[21] = x21;
#define R23 R22 probe_args[22] = x22;
#define R24 R23 probe_args[23] = x23;

#define CALL_CASE(n) case n: return ((int (*)(U##n))fn)(A##n);

/* fn(a[0], ..., a[n-1]) as an exactly typed call of n uint64_t arguments. */
static int dispatch(uintptr_t fn, Py_ssize_t n, const u64 *a)
{
    switch (n) {
    case 0: return ((int (*)(void))fn)();
    CALL_CASE(1) CALL_CASE(2) CALL_CASE(3) CALL_CASE(4) CALL_CASE(5) CALL_CASE(6)
    CALL_CASE(7) CALL_CASE(8) CALL_CASE(9) CALL_CASE(10) CALL_CASE(11) CALL_CASE(12)
    CALL_CASE(13) CALL_CASE(14) CALL_CASE(15) CALL_CASE(16) CALL_CASE(17) CALL_CASE(18)
    CALL_CASE(19) CALL_CASE(20) CALL_CASE(21) CALL_CASE(22) CALL_CASE(23) CALL_CASE(24)
    }
    return -1; /* unreachable: the constructor bounds n */
}

/* ------------------------------------------------------------------------------------------------ */
/* Integer conversion: int or __index__, in [-2**63, 2**64 - 1], stored as its 64-bit two's complement. */

static int to_u64(PyObject *value, u64 *out, const char *what, Py_ssize_t position)
{
    PyObject *index;
    int overflow;
    long long s;

    if (PyLong_CheckExact(value)) {
        s = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow == 0) {
            *out = (u64)s;
            return 0;
        }
    }
    if (PyFloat_Check(value) || PyComplex_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "FastCall %s %zd must be an int (pointer, handle, enum or integer), not %.200s: "
                     "float-class arguments are not supported (pass floating-point scalars by address)",
                     what, position, Py_TYPE(value)->tp_name);
        return -1;
    }
    index = PyNumber_Index(value);
    if (index == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "FastCall %s %zd must be an int (pointer, handle, enum or integer) or an object "
                         "with __index__, not %.200s", what, position, Py_TYPE(value)->tp_name);
        }
        return -1;
    }
    s = PyLong_AsLongLongAndOverflow(index, &overflow);
    if (overflow == 0 && !(s == -1 && PyErr_Occurred())) {
        *out = (u64)s;
        Py_DECREF(index);
        return 0;
    }
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(index);
        if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
            *out = (u64)u;
            Py_DECREF(index);
            return 0;
        }
    }
    PyErr_Clear();
    PyErr_Format(PyExc_OverflowError,
                 "FastCall %s %zd = %R is out of range for a 64-bit integer-class argument "
                 "[-2**63, 2**64 - 1]", what, position, index);
    Py_DECREF(index);
    return -1;
}

/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    uintptr_t fn;
    Py_ssize_t nargs;
    Py_ssize_t nslots;
    int release_gil;
    PyObject *error; /* NULL or an exception class called with the status when it is nonzero */
    Py_ssize_t slots[FASTCALL_MAX_ARGS];
    u64 fixed[FASTCALL_MAX_ARGS];
} FastCall;

static PyObject *raise_status(PyObject *error, int status)
{
    PyObject *exc = PyObject_CallFunction(error, "i", status);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *fastcall_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastCall *fc = (FastCall *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), i;
    u64 a[FASTCALL_MAX_ARGS];
    int status;

    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError, "FastCall takes no keyword arguments");
        return NULL;
    }
    if (n != fc->nslots) {
        PyErr_Format(PyExc_TypeError, "FastCall takes %zd per-call argument%s (one per slot), got %zd",
                     fc->nslots, fc->nslots == 1 ? "" : "s", n);
        return NULL;
    }
    memcpy(a, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
    for (i = 0; i < n; i++) {
        if (to_u64(args[i], &a[fc->slots[i]], "per-call argument", i) < 0)
            return NULL;
    }
    if (fc->release_gil) {
        Py_BEGIN_ALLOW_THREADS
        status = dispatch(fc->fn, fc->nargs, a);
        Py_END_ALLOW_THREADS
    }
    else {
        status = dispatch(fc->fn, fc->nargs, a);
    }
    if (status != 0 && fc->error != NULL)
        return raise_status(fc->error, status);
    return PyLong_FromLong(status);
}

static int parse_address(PyObject *value, uintptr_t *out)
{
    PyObject *index = PyNumber_Index(value);
    unsigned long long u;

    if (index == NULL || PyFloat_Check(value)) {
        Py_XDECREF(index);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "FastCall address must be an int (a function address), not %.200s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    u = PyLong_AsUnsignedLongLong(index);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "FastCall address %R is out of range [1, 2**64 - 1]", index);
        Py_DECREF(index);
        return -1;
    }
    Py_DECREF(index);
    if (u == 0) {
        PyErr_SetString(PyExc_ValueError, "FastCall address must be a nonzero function address, not 0 (NULL)");
        return -1;
    }
    *out = (uintptr_t)u;
    return 0;
}

static int parse_fixed(FastCall *fc, PyObject *fixed)
{
    PyObject *seq = PySequence_Fast(fixed, "FastCall fixed arguments must be a sequence of ints");
    Py_ssize_t n, i;

    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > FASTCALL_MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "FastCall takes at most %d arguments, got %zd fixed arguments",
                     FASTCALL_MAX_ARGS, n);
        Py_DECREF(seq);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (to_u64(PySequence_Fast_GET_ITEM(seq, i), &fc->fixed[i], "fixed argument", i) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    fc->nargs = n;
    Py_DECREF(seq);
    return 0;
}

static int parse_slots(FastCall *fc, PyObject *slots)
{
    PyObject *seq = PySequence_Fast(slots, "FastCall slots must be a sequence of argument positions (ints)");
    Py_ssize_t n, i, j;

    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > fc->nargs) {
        PyErr_Format(PyExc_ValueError, "FastCall has %zd slots for %zd arguments", n, fc->nargs);
        Py_DECREF(seq);
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t s;
        if (!PyLong_Check(item)) {
            PyErr_Format(PyExc_TypeError, "FastCall slot %zd must be an int (an argument position), not %.200s",
                         i, Py_TYPE(item)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        s = PyLong_AsSsize_t(item);
        if (s == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (s < 0 || s >= fc->nargs) {
            PyErr_Format(PyExc_ValueError, "FastCall slot %zd = %R is not an argument position: allowed 0 .. %zd",
                         i, item, fc->nargs - 1);
            Py_DECREF(seq);
            return -1;
        }
        for (j = 0; j < i; j++) {
            if (fc->slots[j] == s) {
                PyErr_Format(PyExc_ValueError, "FastCall slot %zd repeats argument position %zd", i, s);
                Py_DECREF(seq);
                return -1;
            }
        }
        fc->slots[i] = s;
    }
    fc->nslots = n;
    Py_DECREF(seq);
    return 0;
}

static PyObject *fastcall_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"address", "fixed", "slots", "error", "release_gil", NULL};
    PyObject *address, *fixed, *slots, *error = Py_None;
    int release_gil = 0;
    FastCall *fc;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|$Op:FastCall", keywords, &address, &fixed, &slots,
                                     &error, &release_gil))
        return NULL;
    if (error != Py_None && !PyExceptionClass_Check(error)) {
        PyErr_Format(PyExc_TypeError, "FastCall error must be None or an exception class, not %.200s",
                     Py_TYPE(error)->tp_name);
        return NULL;
    }
    fc = (FastCall *)type->tp_alloc(type, 0);
    if (fc == NULL)
        return NULL;
    fc->vectorcall = fastcall_vectorcall;
    fc->release_gil = release_gil;
    if (parse_address(address, &fc->fn) < 0 || parse_fixed(fc, fixed) < 0 || parse_slots(fc, slots) < 0) {
        Py_DECREF(fc);
        return NULL;
    }
    if (error != Py_None) {
        Py_INCREF(error);
        fc->error = error;
    }
    return (PyObject *)fc;
}

static int fastcall_traverse(FastCall *fc, visitproc visit, void *arg)
{
    Py_VISIT(fc->error);
    return 0;
}

static int fastcall_clear(FastCall *fc)
{
    Py_CLEAR(fc->error);
    return 0;
}

static void fastcall_dealloc(FastCall *fc)
{
    PyObject_GC_UnTrack(fc);
    fastcall_clear(fc);
    Py_TYPE(fc)->tp_free((PyObject *)fc);
}

static PyObject *get_address(FastCall *fc, void *closure) { return PyLong_FromUnsignedLongLong(fc->fn); }
static PyObject *get_arity(FastCall *fc, void *closure) { return PyLong_FromSsize_t(fc->nargs); }
static PyObject *get_release_gil(FastCall *fc, void *closure) { return PyBool_FromLong(fc->release_gil); }

static PyObject *get_error(FastCall *fc, void *closure)
{
    PyObject *error = fc->error ? fc->error : Py_None;
    Py_INCREF(error);
    return error;
}

static PyObject *get_fixed(FastCall *fc, void *closure)
{
    PyObject *t = PyTuple_New(fc->nargs);
    Py_ssize_t i;
    for (i = 0; t != NULL && i < fc->nargs; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(fc->fixed[i]);
        if (v == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *get_slots(FastCall *fc, void *closure)
{
    PyObject *t = PyTuple_New(fc->nslots);
    Py_ssize_t i;
    for (i = 0; t != NULL && i < fc->nslots; i++) {
        PyObject *v = PyLong_FromSsize_t(fc->slots[i]);
        if (v == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *fastcall_repr(FastCall *fc)
{
    PyObject *slots = get_slots(fc, NULL), *r;
    if (slots == NULL)
        return NULL;
    r = PyUnicode_FromFormat("<FastCall %p: %zd arguments, slots %R%s>", (void *)fc->fn,
                             fc->nargs, slots, fc->release_gil ? ", releases the GIL" : "");
    Py_DECREF(slots);
    return r;
}

static PyGetSetDef fastcall_getset[] = {
    {"address", (getter)get_address, NULL, "The function's address.", NULL},
    {"arity", (getter)get_arity, NULL, "The number of arguments of the function.", NULL},
    {"fixed", (getter)get_fixed, NULL,
     "The argument vector as unsigned 64-bit values (slot positions hold their placeholder).", NULL},
    {"slots", (getter)get_slots, NULL, "The argument positions filled by each call, in call order.", NULL},
    {"error", (getter)get_error, NULL, "The exception class raised with a nonzero status, or None.", NULL},
    {"release_gil", (getter)get_release_gil, NULL, "Whether the call releases the GIL.", NULL},
    {NULL},
};

PyDoc_STRVAR(fastcall_doc,
"FastCall(address, fixed, slots, *, error=None, release_gil=False)\n\n"
"A C function of integer-class arguments, called with a fixed argument vector whose `slots` positions\n"
"are filled per call: `fc(*values)` puts values[i] at position slots[i], makes the call and returns the\n"
"int status. With `error` (an exception class), a nonzero status raises error(status) instead.\n"
"Arguments: ints or objects with __index__ in [-2**63, 2**64 - 1]; at most 24 arguments.");

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = fastcall_doc,
    .tp_new = fastcall_new,
    .tp_dealloc = (destructor)fastcall_dealloc,
    .tp_traverse = (traverseproc)fastcall_traverse,
    .tp_clear = (inquiry)fastcall_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastCall, vectorcall),
    .tp_repr = (reprfunc)fastcall_repr,
    .tp_getset = fastcall_getset,
};

/* ------------------------------------------------------------------------------------------------ */
/* The done-event rule of nvmath._internal.streams.record_done in one call (a FastCall of this function
   with every argument fixed): record `event` on `stream` unless the stream is capturing a CUDA graph.
   `query` has the signature of cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *), `record` that of
   cuEventRecord(CUevent, CUstream) (both integer-class, returning CUresult). The capture state is asked
   on every call; a failed query records anyway, so that the record reports the stream's error. */

typedef int (*capture_query_fn)(u64, int *);
typedef int (*event_record_fn)(u64, u64);

static int record_unless_capturing(u64 query, u64 record, u64 stream, u64 event)
{
    int capture = 0;
    if (((capture_query_fn)(uintptr_t)query)(stream, &capture) == 0 && capture != 0)
        return 0;
    return ((event_record_fn)(uintptr_t)record)(event, stream);
}

static PyObject *record_unless_capturing_address(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong((uintptr_t)record_unless_capturing);
}

/* ------------------------------------------------------------------------------------------------ */
/* One FFT launch of nvmath.fft._cufft_plan in one call (a FastCall of this function with the entry
   points, the context and the plan fixed, and the two buffers and the direction per call):
   cufftXtExec(plan, input, output, direction) with `ctx` current. The context is switched only when
   another one is current, and restored after. `get` / `set` have the signatures of cuCtxGetCurrent
   (CUcontext *) and cuCtxSetCurrent (CUcontext), `exec` that of cufftXtExec. Returns cufftXtExec's
   status, or FFT_LAUNCH_DRIVER_FAILED | CUresult when a context call failed (nothing is launched when
   the switch fails; a failed restore after a successful launch is reported as such). */

#define FFT_LAUNCH_DRIVER_FAILED 0x10000

typedef int (*ctx_get_fn)(u64 *);
typedef int (*ctx_set_fn)(u64);
typedef int (*xt_exec_fn)(u64, u64, u64, u64);

static int fft_exec_in_context(u64 get, u64 set, u64 exec, u64 ctx, u64 plan, u64 input, u64 output,
                               u64 direction)
{
    u64 prev = 0;
    int status, restored;

    status = ((ctx_get_fn)(uintptr_t)get)(&prev);
    if (status != 0)
        return FFT_LAUNCH_DRIVER_FAILED | status;
    if (prev != ctx) {
        status = ((ctx_set_fn)(uintptr_t)set)(ctx);
        if (status != 0)
            return FFT_LAUNCH_DRIVER_FAILED | status;
    }
    status = ((xt_exec_fn)(uintptr_t)exec)(plan, input, output, direction);
    if (prev != ctx) {
        restored = ((ctx_set_fn)(uintptr_t)set)(prev);
        if (status == 0 && restored != 0)
            return FFT_LAUNCH_DRIVER_FAILED | restored;
    }
    return status;
}

static PyObject *fft_exec_in_context_address(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong((uintptr_t)fft_exec_in_context);
}

#include "_fastcall.d/reads.c"
#include "_fastcall.d/linear_hit.c"
#include "_fastcall.d/linear_hits.c"
#include "_fastcall.d/fft_hit.c"
#include "_fastcall.d/execute_hit.c"
#include "_fastcall.d/matmul_group.c"
#include "_fastcall.d/kernel_launcher.c"

/* ------------------------------------------------------------------------------------------------ */
/* Test hooks: probe functions of every arity that record their arguments. */

static u64 probe_args[FASTCALL_MAX_ARGS];
static int probe_arity = -1;
static int probe_status = 0;

static int probe_0(void)
{
    probe_arity = 0;
    return probe_status;
}

#define PROBE(n) static int probe_##n(P##n) { R##n probe_arity = n; return probe_status; }
PROBE(1) PROBE(2) PROBE(3) PROBE(4) PROBE(5) PROBE(6) PROBE(7) PROBE(8) PROBE(9) PROBE(10) PROBE(11)
PROBE(12) PROBE(13) PROBE(14) PROBE(15) PROBE(16) PROBE(17) PROBE(18) PROBE(19) PROBE(20) PROBE(21)
PROBE(22) PROBE(23) PROBE(24)

static const uintptr_t probes[FASTCALL_MAX_ARGS + 1] = {
    (uintptr_t)probe_0, (uintptr_t)probe_1, (uintptr_t)probe_2, (uintptr_t)probe_3, (uintptr_t)probe_4,
    (uintptr_t)probe_5, (uintptr_t)probe_6, (uintptr_t)probe_7, (uintptr_t)probe_8, (uintptr_t)probe_9,
    (uintptr_t)probe_10, (uintptr_t)probe_11, (uintptr_t)probe_12, (uintptr_t)probe_13,
    (uintptr_t)probe_14, (uintptr_t)probe_15, (uintptr_t)probe_16, (uintptr_t)probe_17,
    (uintptr_t)probe_18, (uintptr_t)probe_19, (uintptr_t)probe_20, (uintptr_t)probe_21,
    (uintptr_t)probe_22, (uintptr_t)probe_23, (uintptr_t)probe_24,
};

/* Alternating int32_t and uint64_t parameters: narrow values in registers and on the stack. */
static int probe_mixed(int32_t x0, u64 x1, int32_t x2, u64 x3, int32_t x4, u64 x5, int32_t x6, u64 x7,
                       int32_t x8, u64 x9, int32_t x10, u64 x11)
{
    R12
    probe_arity = 12;
    return probe_status;
}

static PyObject *probe_address(PyObject *module, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || n > FASTCALL_MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "no probe of %zd arguments: allowed 0 .. %d", n, FASTCALL_MAX_ARGS);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(probes[n]);
}

static PyObject *probe_mixed_address(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong((uintptr_t)probe_mixed);
}

static PyObject *probe_record(PyObject *module, PyObject *unused)
{
    Py_ssize_t n = probe_arity < 0 ? 0 : probe_arity, i;
    PyObject *values = PyTuple_New(n);
    for (i = 0; values != NULL && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(probe_args[i]);
        if (v == NULL) {
            Py_CLEAR(values);
            break;
        }
        PyTuple_SET_ITEM(values, i, v);
    }
    if (values == NULL)
        return NULL;
    return Py_BuildValue("(iN)", probe_arity, values);
}

static PyObject *probe_set_status(PyObject *module, PyObject *arg)
{
    long status = PyLong_AsLong(arg);
    if (status == -1 && PyErr_Occurred())
        return NULL;
    probe_status = (int)status;
    probe_arity = -1;
    memset(probe_args, 0, sizeof probe_args);
    Py_RETURN_NONE;
}

/* _slot_read(obj, name, call): slot_read through one test slot (reset when the name changes), and the
   slot's kind after the read: (value, kind). */
static ReadSlot probe_slot;
static PyObject *probe_slot_name;

static PyObject *probe_slot_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *v;
    int call;
    if (nargs != 3 || !PyUnicode_Check(args[1]) || (call = PyObject_IsTrue(args[2])) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_slot_read(obj, name: str, call: bool)");
        return NULL;
    }
    if (probe_slot_name == NULL || PyUnicode_Compare(probe_slot_name, args[1]) != 0) {
        Py_XSETREF(probe_slot_name, Py_NewRef(args[1]));
        Py_CLEAR(probe_slot.type);
        Py_CLEAR(probe_slot.descr);
        probe_slot.kind = 0;
    }
    if ((v = slot_read(&probe_slot, args[0], probe_slot_name, call)) == NULL)
        return NULL;
    return Py_BuildValue("(Ni)", v, probe_slot.kind);
}

static PyMethodDef module_methods[] = {
    {"fft_exec_in_context_address", fft_exec_in_context_address, METH_NOARGS,
     "Address of fft_exec_in_context(get, set, exec, ctx, plan, input, output, direction)."},
    {"record_unless_capturing_address", record_unless_capturing_address, METH_NOARGS,
     "Address of record_unless_capturing(query, record, stream, event): the done-event rule in one call."},
    {"_probe_address", probe_address, METH_O, "Address of the probe function of n uint64_t parameters."},
    {"_probe_mixed_address", probe_mixed_address, METH_NOARGS,
     "Address of the probe of 12 alternating int32_t / uint64_t parameters."},
    {"_probe_record", probe_record, METH_NOARGS,
     "(arity, arguments) of the last probe call; (-1, ()) after _probe_set_status."},
    {"_probe_set_status", probe_set_status, METH_O,
     "Set the status the probes return and forget the last call."},
    {"_slot_read", (PyCFunction)(void (*)(void))probe_slot_read, METH_FASTCALL,
     "(obj.name or obj.name(), the slot's kind) through a ReadSlot: the attribute reads of the hits."},
    {NULL},
};

static struct PyModuleDef fastcall_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "nvmath._fastcall",
    .m_doc = "Compiled hot path of nvmath: FastCall calls a C function of integer-class arguments.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastcall(void)
{
    PyObject *m;
    if (PyType_Ready(&FastCallType) < 0)
        return NULL;
    m = PyModule_Create(&fastcall_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FastCallType);
    if (PyModule_AddObject(m, "FastCall", (PyObject *)&FastCallType) < 0
        || PyModule_AddIntConstant(m, "MAX_ARGS", FASTCALL_MAX_ARGS) < 0
        || PyModule_AddStringConstant(m, "ABI", FASTCALL_ABI) < 0
        || PyModule_AddIntConstant(m, "FFT_LAUNCH_DRIVER_FAILED", FFT_LAUNCH_DRIVER_FAILED) < 0
        || register_linear_hit(m) < 0 /* (hA: block "LinearHit") */
        || fft_hit_register(m) < 0
        || register_matmul_execute_hit(m) < 0 /* (fexec: block "MatmulExecuteHit") */
        || register_matmul_group(m) < 0 /* (gfp8: block "MatmulGroup") */
        || register_kernel_launcher(m) < 0 /* (klaunch: block "KernelLauncher") */) {
        Py_DECREF(&FastCallType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
