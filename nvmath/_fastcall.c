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
   (narrow parameters, some on the stack). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

/* ================================================================================================ */
/* nvmath.torch's Linear-layer hit (issue #21, block "LinearHit"): the key check and the launch of a
   planned Linear problem in one C call, for nvmath.torch._linear_hit (which builds the objects; nothing
   else uses them).

   A LinearHit holds one planned problem as nvmath.torch.PlannerCache ran it on addresses: the key
   (the activation, the types, shapes and strides of x, weight and bias, their dtype and device, the
   pointer alignment classes, the calling thread and torch's current raw stream), how the result is
   allocated (a pre-bound callable), and the fixed arguments of its cublasLtMatmul (a FastCall of this
   module, with the launch object whose `closed` flag and `algo` tuple are re-read on every call, the
   workspace, the bias pointer attributes of the descriptor). A LinearHits table holds up to `capacity`
   of them; calling it with (x, weight, bias, activation) finds the entry whose key the tensors match
   and runs it, returning the result tensor, or None on any mismatch (then the Python path runs, with
   every check and error message of its own).

   The stateless matmuls keep tables of their own, of plain products `a @ b` (no bias, activation None,
   x_first): nvmath.linalg.advanced.matmul (nvmath.linalg.advanced._matmul_hit) and
   nvmath.linalg.matmul (nvmath.linalg.generic._matmul_hit). They call the table with the call's other
   arguments after the four (each must be None, else a miss), and their entries carry checks a Linear
   entry has no use for: `lock` (the plan cache entry's lock: held means a Python-path call owns the
   plan now, a miss), `scalars` ((address, bytes) pairs: the host alpha (and beta) a plain call runs
   with; a call with other values left them changed, a miss) and `conj` (complex operands: torch's
   conjugate bit set on either is a miss).

   A generic matmul entry (kind 1) launches cublasGemmEx / cublasGemmStridedBatchedEx instead (a FastCall
   of 6 slots: handle, alpha, x1, x2, beta, d, with x1 = b when `swap`): `launch` is its plan cache entry
   (`live` re-read on every call), `space` the shared Workspace (used when it is bound to the call's
   stream and large enough: `algo` is (0, its bytes)), and the thread's cuBLAS handle must be bound to
   (stream, workspace, bytes) already, as `bind_memo` (nvmath.linalg.generic._cublas's memo of the
   bindings, a dict) records; anything else is a miss, and the Python path binds.

   An entry with `aux_alloc` (a Linear layer's weight gradient with its fused bias gradient, BGRADB: no
   bias operand) also makes, per call, the output cuBLASLt writes through the descriptor's pointer
   attributes `attrs` (the bias gradient): the attributes are pointed at it as at a moved bias, and the
   call returns (result, that output).

   LinearHits.backward(x, dz, weight, weight_act, input_act) makes a Linear layer's backward products
   (nvmath.torch._kernels.linear_backward): it reads x, dz and weight once, finds both entries (the
   weight gradient of (x, dz), the input gradient of (dz, weight)) before launching either, then runs
   each as a call of the table would.

   Order of a call, so that nothing of a freed plan is ever used: first everything that may run Python
   code or release the GIL (torch's attribute reads, grad mode, stream, device and capture queries, the
   thread's cuBLASLt handle, the result's allocation); then, with no Python code in between, the
   launch's `closed` and `algo`, the workspace, the bias pointers (cublasLtMatmulDescSetAttribute through
   its address) and cublasLtMatmul. A plan is freed only by Python code holding the GIL, so it cannot
   be freed inside that second part. */

#define LINEAR_HIT_MAX_ATTRS 4

typedef int (*desc_set_attr_fn)(u64, u64, const void *, u64);

typedef struct {
    PyObject_HEAD
    PyObject *key, *act;                       /* the PlannerCache key (hit folding); None or a str */
    PyObject *xtype, *wtype, *btype;           /* btype: Py_None for a problem without bias */
    PyObject *dtype, *device;
    PyObject *xshape, *xstrides, *wshape, *wstrides, *bshape, *bstrides;
    u64 xalign, walign, balign;
    unsigned long thread;
    PyObject *device_index;                    /* int: the argument of raw_stream */
    long device_id;
    u64 stream;
    PyObject *raw_stream, *get_device, *capturing; /* capturing: None, or asked before every call */
    PyObject *alloc;
    PyObject *launch, *algo;
    FastCall *call;
    int x_first, swap, c_is_d;
    PyObject *bound, *handle, *space;          /* Py_None when the algorithm uses no workspace */
    u64 algo_ptr, ws_size, lt_handle;          /* lt_handle 0: the thread's from handles_local */
    PyObject *handles_local, *handles_module, *pool_get;
    PyObject *after;                           /* Py_None or a callable run after the launch */
    PyObject *attrs;                           /* tuple of the descriptor's bias PointerAttribute objects */
    u64 set_attr;                              /* cublasLtMatmulDescSetAttribute's address (0: none) */
    u64 attr_desc[LINEAR_HIT_MAX_ATTRS], attr_id[LINEAR_HIT_MAX_ATTRS];
    PyObject *lock;                            /* Py_None, or a lock whose holder owns the plan now */
    PyObject *scalars;                         /* ((address, bytes), ...): host memory as a plain call leaves it */
    u64 scalar_addr[2];
    PyObject *bind_memo;                       /* kind 1: handle -> (stream, workspace, bytes); else Py_None */
    PyObject *aux_alloc;                       /* Py_None, or makes the output `attrs` point at (see the notes) */
    int kind;                                  /* 0: cublasLtMatmul, 1: a cuBLAS GEMM (see the notes) */
    int conj;                                  /* complex operands: a conjugate view is a miss */
    Py_ssize_t hits;
    int listed;                                /* in a table now (LinearHits.add/clear keep it) */
} LinearHit;

static PyTypeObject LinearHitType;

/* (the object fields of a LinearHit, for traverse / clear) */
#define LINEAR_HIT_FIELDS(X) X(key) X(act) X(xtype) X(wtype) X(btype) X(dtype) X(device) X(xshape) \
    X(xstrides) X(wshape) X(wstrides) X(bshape) X(bstrides) X(device_index) X(raw_stream) X(get_device) \
    X(capturing) X(alloc) X(launch) X(algo) X(bound) X(handle) X(space) X(handles_local) \
    X(handles_module) X(pool_get) X(after) X(attrs) X(lock) X(scalars) X(bind_memo) X(aux_alloc)

static int linear_hit_traverse(LinearHit *h, visitproc visit, void *arg)
{
#define VISIT(f) Py_VISIT(h->f);
    LINEAR_HIT_FIELDS(VISIT)
#undef VISIT
    Py_VISIT((PyObject *)h->call);
    return 0;
}

static int linear_hit_clear(LinearHit *h)
{
#define CLEAR(f) Py_CLEAR(h->f);
    LINEAR_HIT_FIELDS(CLEAR)
#undef CLEAR
    Py_CLEAR(h->call);
    return 0;
}

static void linear_hit_dealloc(LinearHit *h)
{
    PyObject_GC_UnTrack(h);
    linear_hit_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static int u64_arg(PyObject *value, u64 *out, const char *name)
{
    return to_u64(value, out, name, 0);
}

static PyObject *linear_hit_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {
        "key", "act", "xtype", "wtype", "btype", "dtype", "device", "xshape", "xstrides", "xalign",
        "wshape", "wstrides", "walign", "bshape", "bstrides", "balign", "thread", "device_id", "stream",
        "raw_stream", "get_device", "capturing", "alloc", "launch", "algo", "call", "x_first", "swap",
        "c_is_d", "bound", "handle", "space", "lt_handle", "handles_local", "handles_module", "pool_get",
        "after", "attrs", "set_attr", "lock", "scalars", "conj", "kind", "bind_memo", "aux_alloc", NULL};
    PyObject *o[45];
    LinearHit *h;
    Py_ssize_t i, n;
    u64 thread, device_id, scalar_addr[2] = {0, 0};
    long kind;

    memset(o, 0, sizeof o);
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
            "|$OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO:LinearHit", keywords,
            &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12],
            &o[13], &o[14], &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22], &o[23], &o[24],
            &o[25], &o[26], &o[27], &o[28], &o[29], &o[30], &o[31], &o[32], &o[33], &o[34], &o[35], &o[36],
            &o[37], &o[38], &o[39], &o[40], &o[41], &o[42], &o[43], &o[44]))
        return NULL;
    for (i = 0; i < 39; i++) /* (the last six are optional: the stateless matmuls' checks, kind, aux_alloc) */
        if (o[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "LinearHit() missing required keyword argument '%s'", keywords[i]);
            return NULL;
        }
    kind = o[42] != NULL ? PyLong_AsLong(o[42]) : 0;
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    if (kind != 0 && kind != 1) {
        PyErr_Format(PyExc_ValueError, "LinearHit kind must be 0 (cublasLtMatmul) or 1 (a cuBLAS GEMM), got %ld", kind);
        return NULL;
    }
    n = o[40] != NULL && o[40] != Py_None ? (PyTuple_Check(o[40]) ? PyTuple_GET_SIZE(o[40]) : -1) : 0;
    if (n < 0 || n > 2 || (kind == 1 && n != 2)) {
        PyErr_SetString(PyExc_ValueError, "LinearHit scalars must be a tuple of at most 2 (address, bytes) "
                                          "pairs (a cuBLAS GEMM's: alpha and beta)");
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(o[40], i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))
            || PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) == 0 || PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) > 16
            || u64_arg(PyTuple_GET_ITEM(pair, 0), &scalar_addr[i], "scalars") < 0 || !scalar_addr[i]) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "LinearHit scalars: each an (address, 1 to 16 bytes) pair");
            return NULL;
        }
    }
    if (Py_TYPE(o[25]) != &FastCallType) {
        PyErr_Format(PyExc_TypeError, "LinearHit call must be a FastCall (of cublasLtMatmul), not %.200s",
                     Py_TYPE(o[25])->tp_name);
        return NULL;
    }
    if (kind == 1 && (((FastCall *)o[25])->nslots != 6 || (o[43] == NULL || !PyDict_Check(o[43])))) {
        PyErr_SetString(PyExc_ValueError, "a LinearHit of kind 1 needs a cuBLAS GEMM's FastCall (6 slots) and "
                                          "bind_memo (a dict)");
        return NULL;
    }
    if (kind == 0 && (((FastCall *)o[25])->nargs != 16 || ((FastCall *)o[25])->nslots != 9)) {
        PyErr_SetString(PyExc_ValueError, "LinearHit call must be cublasLtMatmul's FastCall (16 arguments, 9 slots)");
        return NULL;
    }
    if (!PyTuple_Check(o[37]) || PyTuple_GET_SIZE(o[37]) > LINEAR_HIT_MAX_ATTRS) {
        PyErr_Format(PyExc_ValueError, "LinearHit attrs must be a tuple of at most %d pointer attributes",
                     LINEAR_HIT_MAX_ATTRS);
        return NULL;
    }
    if (o[44] != NULL && o[44] != Py_None
        && (kind != 0 || o[4] != Py_None || PyTuple_GET_SIZE(o[37]) < 1 || !PyCallable_Check(o[44]))) {
        PyErr_SetString(PyExc_ValueError, "LinearHit aux_alloc needs a callable, kind 0, no bias (btype None) "
                                          "and the output's pointer attributes (attrs)");
        return NULL;
    }
    h = (LinearHit *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
#define TAKE(f, idx) Py_INCREF(o[idx]); h->f = o[idx];
    TAKE(key, 0) TAKE(act, 1) TAKE(xtype, 2) TAKE(wtype, 3) TAKE(btype, 4) TAKE(dtype, 5) TAKE(device, 6)
    TAKE(xshape, 7) TAKE(xstrides, 8) TAKE(wshape, 10) TAKE(wstrides, 11) TAKE(bshape, 13)
    TAKE(bstrides, 14) TAKE(device_index, 17) TAKE(raw_stream, 19) TAKE(get_device, 20)
    TAKE(capturing, 21) TAKE(alloc, 22) TAKE(launch, 23) TAKE(algo, 24) TAKE(bound, 29) TAKE(handle, 30)
    TAKE(space, 31) TAKE(handles_local, 33) TAKE(handles_module, 34) TAKE(pool_get, 35) TAKE(after, 36)
    TAKE(attrs, 37)
#undef TAKE
    h->lock = Py_NewRef(o[39] != NULL ? o[39] : Py_None);
    h->scalars = n ? Py_NewRef(o[40]) : PyTuple_New(0);
    h->bind_memo = Py_NewRef(o[43] != NULL ? o[43] : Py_None);
    h->aux_alloc = Py_NewRef(o[44] != NULL ? o[44] : Py_None);
    h->kind = (int)kind;
    memcpy(h->scalar_addr, scalar_addr, sizeof scalar_addr);
    h->conj = o[41] != NULL ? PyObject_IsTrue(o[41]) : 0;
    if (h->conj < 0 || h->scalars == NULL) {
        Py_DECREF(h);
        return NULL;
    }
    Py_INCREF(o[25]);
    h->call = (FastCall *)o[25];
    h->x_first = PyObject_IsTrue(o[26]);
    h->swap = PyObject_IsTrue(o[27]);
    h->c_is_d = PyObject_IsTrue(o[28]);
    if (u64_arg(o[9], &h->xalign, "xalign") < 0 || u64_arg(o[12], &h->walign, "walign") < 0
        || u64_arg(o[15], &h->balign, "balign") < 0 || u64_arg(o[16], &thread, "thread") < 0
        || u64_arg(o[17], &device_id, "device_id") < 0 || u64_arg(o[18], &h->stream, "stream") < 0
        || u64_arg(o[32], &h->lt_handle, "lt_handle") < 0 || u64_arg(o[38], &h->set_attr, "set_attr") < 0
        || h->x_first < 0 || h->swap < 0 || h->c_is_d < 0) {
        Py_DECREF(h);
        return NULL;
    }
    h->thread = (unsigned long)thread;
    h->device_id = (long)device_id;
    if (!PyTuple_Check(o[24]) || PyTuple_GET_SIZE(o[24]) != 2
        || u64_arg(PyTuple_GET_ITEM(o[24], 0), &h->algo_ptr, "algo") < 0
        || u64_arg(PyTuple_GET_ITEM(o[24], 1), &h->ws_size, "algo") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "LinearHit algo must be the launch's (algo_ptr, workspace size)");
        Py_DECREF(h);
        return NULL;
    }
    n = PyTuple_GET_SIZE(o[37]);
    if (n && !h->set_attr) {
        PyErr_SetString(PyExc_ValueError, "LinearHit with pointer attributes needs set_attr (an address)");
        Py_DECREF(h);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *attr = PyTuple_GET_ITEM(o[37], i), *desc = NULL, *dptr = NULL, *id = NULL;
        int bad = (desc = PyObject_GetAttrString(attr, "desc")) == NULL
                  || (dptr = PyObject_GetAttrString(desc, "ptr")) == NULL
                  || (id = PyObject_GetAttrString(attr, "attr")) == NULL
                  || u64_arg(dptr, &h->attr_desc[i], "desc") < 0 || u64_arg(id, &h->attr_id[i], "attr") < 0;
        Py_XDECREF(desc);
        Py_XDECREF(dptr);
        Py_XDECREF(id);
        if (bad) {
            Py_DECREF(h);
            return NULL;
        }
    }
    return (PyObject *)h;
}

static PyObject *linear_hit_get_hits(LinearHit *h, void *closure) { return PyLong_FromSsize_t(h->hits); }
static int linear_hit_set_hits(LinearHit *h, PyObject *value, void *closure)
{
    Py_ssize_t n = value ? PyLong_AsSsize_t(value) : -1;
    if (n < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "LinearHit hits must be an int >= 0");
        return -1;
    }
    h->hits = n;
    return 0;
}
static PyObject *linear_hit_get_key(LinearHit *h, void *closure) { Py_INCREF(h->key); return h->key; }
static PyObject *linear_hit_get_launch(LinearHit *h, void *closure) { Py_INCREF(h->launch); return h->launch; }
static PyObject *linear_hit_get_stream(LinearHit *h, void *closure) { return PyLong_FromUnsignedLongLong(h->stream); }
static PyObject *linear_hit_get_thread(LinearHit *h, void *closure) { return PyLong_FromUnsignedLong(h->thread); }
static PyObject *linear_hit_get_algo(LinearHit *h, void *closure) { Py_INCREF(h->algo); return h->algo; }
static PyObject *linear_hit_get_listed(LinearHit *h, void *closure) { return PyBool_FromLong(h->listed); }
static PyObject *linear_hit_get_device_id(LinearHit *h, void *closure) { return PyLong_FromLong(h->device_id); }
static PyObject *linear_hit_get_pinned(LinearHit *h, void *closure) { return PyBool_FromLong(h->capturing == Py_None); }

static PyGetSetDef linear_hit_getset[] = {
    {"hits", (getter)linear_hit_get_hits, (setter)linear_hit_set_hits, "Calls served since the count was last reset.", NULL},
    {"key", (getter)linear_hit_get_key, NULL, "The PlannerCache key of the problem.", NULL},
    {"launch", (getter)linear_hit_get_launch, NULL, "The launch it calls (re-checked on every call).", NULL},
    {"stream", (getter)linear_hit_get_stream, NULL, "The raw stream it runs on (part of the key).", NULL},
    {"thread", (getter)linear_hit_get_thread, NULL, "The thread it runs on (part of the key).", NULL},
    {"algo", (getter)linear_hit_get_algo, NULL, "The launch's algo tuple it was made with.", NULL},
    {"listed", (getter)linear_hit_get_listed, NULL, "Whether a table holds it now.", NULL},
    {"device_id", (getter)linear_hit_get_device_id, NULL, "The device it runs on (part of the key).", NULL},
    {"capture_free", (getter)linear_hit_get_pinned, NULL,
     "Whether it runs without asking for a CUDA graph capture (no workspace, or a pinned planner).", NULL},
    {NULL},
};

static PyTypeObject LinearHitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.LinearHit",
    .tp_basicsize = sizeof(LinearHit),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "LinearHit(*, key, act, ...): one planned Linear problem of a LinearHits table "
              "(made by nvmath.torch._linear_hit.build).",
    .tp_new = linear_hit_new,
    .tp_dealloc = (destructor)linear_hit_dealloc,
    .tp_traverse = (traverseproc)linear_hit_traverse,
    .tp_clear = (inquiry)linear_hit_clear,
    .tp_getset = linear_hit_getset,
};

/* The table. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *grad_enabled;
    Py_ssize_t capacity, n, next;
    LinearHit **entries;
    int operands_first;                        /* ask grad mode only when an operand requires grad */
} LinearHits;

/* The tensor reads one call compares with the entries (new references; NULL where not read). */
typedef struct {
    PyObject *xshape, *xstrides, *wshape, *wstrides, *bshape, *bstrides;
    PyObject *xdtype, *wdtype, *bdtype, *xdevice, *wdevice, *bdevice;
    u64 px, pw, pb;
} HitReads;

static void hit_reads_clear(HitReads *r)
{
    Py_XDECREF(r->xshape); Py_XDECREF(r->xstrides); Py_XDECREF(r->wshape); Py_XDECREF(r->wstrides);
    Py_XDECREF(r->bshape); Py_XDECREF(r->bstrides); Py_XDECREF(r->xdtype); Py_XDECREF(r->wdtype);
    Py_XDECREF(r->bdtype); Py_XDECREF(r->xdevice); Py_XDECREF(r->wdevice); Py_XDECREF(r->bdevice);
}

static PyObject *s_shape, *s_stride, *s_dtype, *s_device, *s_data_ptr, *s_requires_grad, *s_closed,
    *s_algo, *s_stream, *s_size, *s_ptr, *s_handles, *s_get_handle, *s_value, *s_locked, *s_is_conj, *s_live;

/* A method call without arguments, or an attribute, as a u64 (-1: error set). */
static int read_ptr(PyObject *t, u64 *out)
{
    PyObject *v = PyObject_CallMethodNoArgs(t, s_data_ptr);
    int rc;
    if (v == NULL)
        return -1;
    rc = to_u64(v, out, "data_ptr", 0);
    Py_DECREF(v);
    return rc;
}

static int read_tensor(PyObject *t, PyObject **shape, PyObject **strides, PyObject **dtype, PyObject **device,
                       u64 *ptr)
{
    if ((*shape = PyObject_GetAttr(t, s_shape)) == NULL || (*strides = PyObject_CallMethodNoArgs(t, s_stride)) == NULL
        || (*dtype = PyObject_GetAttr(t, s_dtype)) == NULL || (*device = PyObject_GetAttr(t, s_device)) == NULL)
        return -1;
    return read_ptr(t, ptr);
}

static int same(PyObject *a, PyObject *b)
{
    return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ);
}

static u64 align_class(u64 p)
{
    p |= 256;
    return p & (~p + 1);
}

/* 1: `e` matches the reads (x, w, b), 0: not, -1: error. */
static int entry_matches(LinearHit *e, HitReads *r, int has_bias)
{
    int ok;
    if (align_class(r->px) != e->xalign || align_class(r->pw) != e->walign
        || (has_bias && align_class(r->pb) != e->balign))
        return 0;
    if (r->xdtype != e->dtype || r->wdtype != e->dtype || (has_bias && r->bdtype != e->dtype))
        return 0;
    if ((ok = same(r->xshape, e->xshape)) != 1 || (ok = same(r->wshape, e->wshape)) != 1
        || (ok = same(r->xstrides, e->xstrides)) != 1 || (ok = same(r->wstrides, e->wstrides)) != 1)
        return ok;
    if (has_bias && ((ok = same(r->bshape, e->bshape)) != 1 || (ok = same(r->bstrides, e->bstrides)) != 1))
        return ok;
    if ((ok = same(r->xdevice, e->device)) != 1 || (ok = same(r->wdevice, e->device)) != 1)
        return ok;
    if (has_bias && (ok = same(r->bdevice, e->device)) != 1)
        return ok;
    return 1;
}

static int same_act(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (a == Py_None || b == Py_None || !PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b))
        return 0;
    return PyUnicode_Compare(a, b) == 0;
}

/* A bool-returning call: 1 true, 0 false, -1 error. */
static int call_flag(PyObject *fn)
{
    PyObject *v = PyObject_CallNoArgs(fn);
    int rc;
    if (v == NULL)
        return -1;
    rc = PyObject_IsTrue(v);
    Py_DECREF(v);
    return rc;
}

static int call_u64(PyObject *fn, PyObject *arg, u64 *out)
{
    PyObject *v = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    int rc;
    if (v == NULL)
        return -1;
    rc = to_u64(v, out, "query result", 0);
    Py_DECREF(v);
    return rc;
}

/* A failed library call of an entry: the binding's error (the FastCall's class) for `status`; -1. */
static int launch_failed(FastCall *fc, int status, const char *what)
{
    if (fc->error != NULL)
        raise_status(fc->error, status);
    else
        PyErr_Format(PyExc_RuntimeError, "%s failed: status %d", what, status);
    return -1;
}

/* A stateless entry's checks of the second part: 1 the plan is free to run as planned, 0 a miss, -1 an
   error (set). The lock: held means a Python-path call owns the plan (its scalars, its slots) now. The
   scalars: the host memory holds what a plain call runs with (the launch keeps it alive). */
static int hit_owned(LinearHit *e)
{
    Py_ssize_t i;
    if (e->lock != Py_None) {
        PyObject *v = PyObject_CallMethodNoArgs(e->lock, s_locked);
        int free_now;
        if (v == NULL)
            return -1;
        free_now = v == Py_False;
        Py_DECREF(v);
        if (!free_now)
            return 0;
    }
    for (i = 0; i < PyTuple_GET_SIZE(e->scalars); i++) {
        PyObject *want = PyTuple_GET_ITEM(PyTuple_GET_ITEM(e->scalars, i), 1);
        if (memcmp((const void *)(uintptr_t)e->scalar_addr[i], PyBytes_AS_STRING(want),
                   (size_t)PyBytes_GET_SIZE(want)) != 0)
            return 0;
    }
    return 1;
}

/* Helpers of every compiled launch in this file (LinearHit, MatmulExecuteHit, MatmulGroup). */

/* The u64 attribute `name` of `o`: 0, or -1 with an error set. */
static int attr_u64(PyObject *o, PyObject *name, u64 *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    int rc;
    if (v == NULL)
        return -1;
    rc = to_u64(v, out, "attribute", 0);
    Py_DECREF(v);
    return rc;
}

/* 1: `launch` (a MatmulLaunch) is open and runs the `algo` tuple it had when the caller was made, 0: not
   (a miss), -1: an error (set). */
static int launch_open(PyObject *launch, PyObject *algo)
{
    PyObject *v = PyObject_GetAttr(launch, s_closed);
    int ok;
    if (v == NULL)
        return -1;
    ok = v == Py_False;
    Py_DECREF(v);
    if (!ok)
        return 0;
    if ((v = PyObject_GetAttr(launch, s_algo)) == NULL)
        return -1;
    ok = v == algo;
    Py_DECREF(v);
    return ok;
}

/* The workspace's address in `*ws` when `owner` (a BoundWorkspace, or the Workspace itself) is bound to
   the stream handle object `handle` and the Workspace `space` holds `need` bytes: 1; else 0 (a miss),
   -1 an error (set). (BoundWorkspace.ptr_for's and Workspace.ensure's first test.) */
static int workspace_ready(PyObject *owner, PyObject *handle, PyObject *space, u64 need, u64 *ws)
{
    PyObject *v = PyObject_GetAttr(owner, s_stream);
    u64 size;
    int status;

    if (v == NULL)
        return -1;
    status = v == handle;
    Py_DECREF(v);
    if (!status)
        return 0;
    if (attr_u64(space, s_size, &size) < 0)
        return -1;
    if (size < need)
        return 0;
    return attr_u64(space, s_ptr, ws) < 0 ? -1 : 1;
}

/* The second part of a generic matmul entry's call (kind 1; see the block's notes): no Python code runs
   here. 1 launched, 0 a miss, -1 an error (set). */
static int gemm_hit_launch(LinearHit *e, u64 handle, u64 pa, u64 pb, u64 py)
{
    PyObject *v, *key, *bound;
    u64 a[FASTCALL_MAX_ARGS], ws = 0, x[3];
    FastCall *fc = e->call;
    Py_ssize_t i;
    int status;

    if ((v = PyObject_GetAttr(e->launch, s_live)) == NULL)
        return -1;
    status = v == Py_True;
    Py_DECREF(v);
    if (!status)
        return 0; /* the plan was freed (evicted, cleared) */
    if ((status = hit_owned(e)) <= 0)
        return status;
    if ((status = workspace_ready(e->space, e->handle, e->space, e->ws_size, &ws)) <= 0)
        return status;
    /* the handle is bound to (stream, workspace, bytes) already (else the Python path binds it) */
    if ((key = PyLong_FromUnsignedLongLong(handle)) == NULL)
        return -1;
    bound = PyDict_GetItemWithError(e->bind_memo, key);
    Py_DECREF(key);
    if (bound == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(bound) || PyTuple_GET_SIZE(bound) != 3)
        return 0;
    for (i = 0; i < 3; i++) {
        PyObject *item = PyTuple_GET_ITEM(bound, i);
        if (!PyLong_CheckExact(item) || to_u64(item, &x[i], "binding", 0) < 0) {
            PyErr_Clear();
            return 0;
        }
    }
    if (x[0] != e->stream || x[1] != ws || x[2] != e->ws_size)
        return 0;
    /* the GEMM's slots, in the launch caller's order: handle, alpha, x1, x2, beta, d */
    memcpy(a, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
    a[fc->slots[0]] = handle;
    a[fc->slots[1]] = e->scalar_addr[0];
    a[fc->slots[2]] = e->swap ? pb : pa;
    a[fc->slots[3]] = e->swap ? pa : pb;
    a[fc->slots[4]] = e->scalar_addr[1];
    a[fc->slots[5]] = py;
    status = dispatch(fc->fn, fc->nargs, a);
    return status != 0 ? launch_failed(fc, status, "cuBLAS GEMM") : 1;
}

/* The second part of a call (see the block's notes): no Python code runs here. 1 launched, 0 a miss,
   -1 an error (set). */
static int linear_hit_launch(LinearHit *e, u64 lt, u64 px, u64 pw, u64 pb, u64 py)
{
    PyObject *v;
    u64 a[FASTCALL_MAX_ARGS], ws = 0, A, B;
    FastCall *fc = e->call;
    Py_ssize_t i;
    int status;

    if ((status = launch_open(e->launch, e->algo)) <= 0 || (status = hit_owned(e)) <= 0)
        return status;
    if (e->ws_size && (status = workspace_ready(e->bound, e->handle, e->space, e->ws_size, &ws)) <= 0)
        return status;
    for (i = 0; i < PyTuple_GET_SIZE(e->attrs); i++) { /* the bias pointer, when it moved */
        PyObject *attr = PyTuple_GET_ITEM(e->attrs, i);
        u64 now, buf = pb;
        if ((v = PyObject_GetAttr(attr, s_value)) == NULL)
            return -1;
        status = to_u64(v, &now, "attribute value", 0);
        Py_DECREF(v);
        if (status < 0)
            return -1;
        if (now != pb) {
            status = ((desc_set_attr_fn)(uintptr_t)e->set_attr)(e->attr_desc[i], e->attr_id[i], &buf, 8);
            if (status != 0)
                return launch_failed(fc, status, "cublasLtMatmulDescSetAttribute");
            if ((v = PyLong_FromUnsignedLongLong(pb)) == NULL || PyObject_SetAttr(attr, s_value, v) < 0) {
                Py_XDECREF(v);
                return -1;
            }
            Py_DECREF(v);
        }
    }
    A = e->x_first ? px : pw;
    B = e->x_first ? pw : px;
    if (e->swap) {
        u64 t = A;
        A = B;
        B = t;
    }
    /* cublasLtMatmul's slots, in the launch caller's order: handle, a, b, c, d, algo, ws, ws_size, stream */
    memcpy(a, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
    a[fc->slots[0]] = lt;
    a[fc->slots[1]] = A;
    a[fc->slots[2]] = B;
    a[fc->slots[3]] = e->c_is_d ? py : 0;
    a[fc->slots[4]] = py;
    a[fc->slots[5]] = e->algo_ptr;
    a[fc->slots[6]] = ws;
    a[fc->slots[7]] = e->ws_size;
    a[fc->slots[8]] = e->stream;
    status = dispatch(fc->fn, fc->nargs, a);
    return status != 0 ? launch_failed(fc, status, "cublasLtMatmul") : 1;
}

/* The first part of a call for the matched entry `e`, then the launch: a new reference to the result,
   Py_None (a miss) or NULL (an error). */
static PyObject *linear_hit_run(LinearHit *e, HitReads *r, PyObject *x, PyObject *w)
{
    PyObject *y, *v, *aux = NULL;
    u64 stream, device, py, pb = r->pb, lt = e->lt_handle;
    int rc;

    if (e->conj) { /* torch's conjugate bit is part of a complex operand's key */
        PyObject *ts[2] = {x, w};
        int k;
        for (k = 0; k < 2; k++) {
            if ((v = PyObject_CallMethodNoArgs(ts[k], s_is_conj)) == NULL)
                return NULL;
            rc = v != Py_False;
            Py_DECREF(v);
            if (rc)
                Py_RETURN_NONE;
        }
    }
    if (call_u64(e->raw_stream, e->device_index, &stream) < 0)
        return NULL;
    if (stream != e->stream)
        Py_RETURN_NONE;
    if (call_u64(e->get_device, NULL, &device) < 0)
        return NULL;
    if ((long)device != e->device_id)
        Py_RETURN_NONE; /* another device is current: the launch switches the context */
    if (e->capturing != Py_None) {
        rc = call_flag(e->capturing);
        if (rc != 0)
            return rc < 0 ? NULL : Py_NewRef(Py_None); /* a capture pins the planner first (Python) */
    }
    if (!lt) { /* the thread's handle, as the launch reads it: inline from the pool, else get_handle() */
        PyObject *get = PyObject_GetAttr(e->handles_module, s_get_handle), *handles;
        if (get == NULL)
            return NULL;
        if (get != e->pool_get) { /* (a test's replacement) */
            rc = call_u64(get, e->device_index, &lt);
            Py_DECREF(get);
            if (rc < 0)
                return NULL;
        }
        else {
            Py_DECREF(get);
            handles = PyObject_GetAttr(e->handles_local, s_handles);
            if (handles == NULL) {
                PyErr_Clear();
                Py_RETURN_NONE; /* (the thread's first handle: the Python path makes it) */
            }
            v = PyDict_Check(handles) ? PyDict_GetItemWithError(handles, e->device_index) : NULL;
            rc = v != NULL ? to_u64(v, &lt, "handle", 0) : -1;
            Py_DECREF(handles);
            if (rc < 0 || !lt) {
                PyErr_Clear();
                Py_RETURN_NONE;
            }
        }
    }
    y = PyObject_CallNoArgs(e->alloc);
    if (y == NULL)
        return NULL;
    if (read_ptr(y, &py) < 0) {
        Py_DECREF(y);
        return NULL;
    }
    if (e->aux_alloc != Py_None) { /* an output cuBLASLt writes through `attrs` (a bias gradient) */
        aux = PyObject_CallNoArgs(e->aux_alloc);
        if (aux == NULL || read_ptr(aux, &pb) < 0) {
            Py_XDECREF(aux);
            Py_DECREF(y);
            return NULL;
        }
    }
    rc = e->kind ? gemm_hit_launch(e, lt, r->px, r->pw, py) : linear_hit_launch(e, lt, r->px, r->pw, pb, py);
    if (rc > 0 && e->after != Py_None) { /* the done event of a mortal stream */
        v = PyObject_CallNoArgs(e->after);
        rc = v == NULL ? -1 : 1;
        Py_XDECREF(v);
    }
    if (rc <= 0) {
        Py_DECREF(y);
        Py_XDECREF(aux);
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    }
    e->hits++;
    if (aux == NULL)
        return y;
    v = PyTuple_Pack(2, y, aux);
    Py_DECREF(y);
    Py_DECREF(aux);
    return v;
}

/* 1: an operand requires grad (1 when unreadable too: the Python path decides), 0: none, -1 an error. */
static int any_requires_grad(PyObject *x, PyObject *w, PyObject *b, int has_bias)
{
    PyObject *ts[3] = {x, w, b};
    int i, rc;
    for (i = 0; i < 2 + has_bias; i++) {
        PyObject *v = PyObject_GetAttr(ts[i], s_requires_grad);
        if (v == NULL)
            return -1;
        rc = v != Py_False;
        Py_DECREF(v);
        if (rc)
            return 1;
    }
    return 0;
}

/* Whether the call needs autograd (1: a miss), grad mode asked first (a Linear table: its weights require
   grad, and under no_grad one query settles it): 1, 0, or -1 with an error set. */
static int needs_grad_mode_first(LinearHits *t, PyObject *x, PyObject *w, PyObject *b, int has_bias)
{
    int rc = call_flag(t->grad_enabled);
    return rc <= 0 ? rc : any_requires_grad(x, w, b, has_bias);
}

/* The same, the operands read first (a stateless table: its operands seldom require grad, and then grad
   mode is never asked). */
static int needs_grad(LinearHits *t, PyObject *x, PyObject *w, PyObject *b, int has_bias)
{
    int rc = any_requires_grad(x, w, b, has_bias);
    return rc <= 0 ? rc : call_flag(t->grad_enabled);
}

/* The first entry from index `from` on that serves (x, w, b of type `tb` or Py_None, act) on this thread
   with the reads `r`, or NULL (none; no error set). */
static LinearHit *find_entry(LinearHits *t, Py_ssize_t from, PyObject *x, PyObject *w, PyObject *tb,
                             PyObject *act, HitReads *r, int has_bias)
{
    PyObject *tx = (PyObject *)Py_TYPE(x), *tw = (PyObject *)Py_TYPE(w);
    unsigned long thread = PyThread_get_thread_ident();
    Py_ssize_t i;
    int rc;

    for (i = from; i < t->n; i++) {
        LinearHit *e = t->entries[i];
        if (tx != e->xtype || tw != e->wtype || tb != e->btype || e->thread != thread || !same_act(e->act, act))
            continue;
        rc = entry_matches(e, r, has_bias);
        if (rc < 0)
            PyErr_Clear();
        else if (rc)
            return e;
    }
    return NULL;
}

static PyObject *linear_hits_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    LinearHits *t = (LinearHits *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), i, first = -1;
    PyObject *x, *w, *b, *act, *out = NULL;
    PyTypeObject *tx, *tw;
    PyObject *tb;
    HitReads r;
    LinearHit *e;
    unsigned long thread;
    int has_bias, rc;

    if (nargs < 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "LinearHits takes (x, weight, bias, activation, *unserved)");
        return NULL;
    }
    if (t->n == 0)
        Py_RETURN_NONE;
    for (i = 4; i < nargs; i++) /* arguments no entry serves (a stateless call's options): all None */
        if (args[i] != Py_None)
            Py_RETURN_NONE;
    x = args[0], w = args[1], b = args[2], act = args[3];
    tx = Py_TYPE(x), tw = Py_TYPE(w);
    has_bias = b != Py_None;
    tb = has_bias ? (PyObject *)Py_TYPE(b) : Py_None;
    thread = PyThread_get_thread_ident();
    for (i = 0; i < t->n && first < 0; i++) {
        LinearHit *e = t->entries[i];
        if ((PyObject *)tx == e->xtype && (PyObject *)tw == e->wtype && tb == e->btype && e->thread == thread
            && same_act(e->act, act))
            first = i;
    }
    if (first < 0)
        Py_RETURN_NONE;
    /* with grad on, a tensor that requires grad takes the autograd path */
    rc = t->operands_first ? needs_grad(t, x, w, b, has_bias) : needs_grad_mode_first(t, x, w, b, has_bias);
    if (rc != 0)
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    memset(&r, 0, sizeof r);
    if (read_tensor(x, &r.xshape, &r.xstrides, &r.xdtype, &r.xdevice, &r.px) < 0
        || read_tensor(w, &r.wshape, &r.wstrides, &r.wdtype, &r.wdevice, &r.pw) < 0
        || (has_bias && read_tensor(b, &r.bshape, &r.bstrides, &r.bdtype, &r.bdevice, &r.pb) < 0)) {
        PyErr_Clear(); /* (what the Python path makes of these tensors, with its own errors) */
        hit_reads_clear(&r);
        Py_RETURN_NONE;
    }
    e = find_entry(t, first, x, w, tb, act, &r, has_bias);
    if (e != NULL) { /* (held: its run may run Python code, and another thread may replace it meanwhile) */
        Py_INCREF(e);
        out = linear_hit_run(e, &r, x, w);
        Py_DECREF(e);
    }
    hit_reads_clear(&r);
    if (out == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return out;
}

/* hits.backward(x, dz, weight, weight_act, input_act): a Linear layer's backward products in one call
   (nvmath.torch._kernels.linear_backward): the weight gradient (entry `weight_act`: x and dz, None when
   not wanted) and the input gradient (entry `input_act`: dz and weight, None when not wanted), dz read
   once for both. None when an entry wanted is missing or its checks fail before any launch (the Python
   path then runs both); else (what the weight-gradient entry returns or None, dx or None), a None dx
   where it was wanted meaning that its entry missed after the first launch (the Python path makes it). */
static PyObject *linear_hits_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    LinearHits *t = (LinearHits *)self;
    PyObject *x, *dz, *w, *wact, *xact, *wout = NULL, *dx = NULL, *out;
    LinearHit *ew = NULL, *ex = NULL;
    HitReads rw, rx;

    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "LinearHits.backward takes (x, dz, weight, weight_act, input_act)");
        return NULL;
    }
    x = args[0], dz = args[1], w = args[2], wact = args[3], xact = args[4];
    if (t->n == 0 || (wact == Py_None && xact == Py_None))
        Py_RETURN_NONE;
    if (needs_grad_mode_first(t, x, dz, w, 1) != 0) /* (create_graph: the Python path, as in the table) */
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    memset(&rw, 0, sizeof rw);
    memset(&rx, 0, sizeof rx);
    if (read_tensor(x, &rw.xshape, &rw.xstrides, &rw.xdtype, &rw.xdevice, &rw.px) < 0
        || read_tensor(dz, &rw.wshape, &rw.wstrides, &rw.wdtype, &rw.wdevice, &rw.pw) < 0
        || read_tensor(w, &rx.wshape, &rx.wstrides, &rx.wdtype, &rx.wdevice, &rx.pw) < 0) {
        PyErr_Clear();
        hit_reads_clear(&rw);
        hit_reads_clear(&rx);
        Py_RETURN_NONE;
    }
    /* dz is the weight gradient's second operand and the input gradient's first: its reads, borrowed */
    rx.xshape = rw.wshape, rx.xstrides = rw.wstrides, rx.xdtype = rw.wdtype, rx.xdevice = rw.wdevice;
    rx.px = rw.pw;
    if (wact != Py_None)
        ew = find_entry(t, 0, x, dz, Py_None, wact, &rw, 0);
    if (xact != Py_None && (wact == Py_None || ew != NULL))
        ex = find_entry(t, 0, dz, w, Py_None, xact, &rx, 0);
    Py_XINCREF(ew); /* (held: a run may run Python code, and another thread may replace them meanwhile) */
    Py_XINCREF(ex);
    if ((wact != Py_None && ew == NULL) || (xact != Py_None && ex == NULL)) {
        out = NULL;
        goto done;
    }
    if (ew != NULL && ((wout = linear_hit_run(ew, &rw, x, dz)) == NULL || wout == Py_None)) {
        out = NULL; /* (an error, or a miss before its launch: nothing launched) */
        goto done;
    }
    if (ex != NULL && (dx = linear_hit_run(ex, &rx, dz, w)) == NULL) {
        out = NULL;
        goto done;
    }
    out = PyTuple_Pack(2, wout != NULL ? wout : Py_None, dx != NULL ? dx : Py_None);
done:
    Py_XDECREF(ew);
    Py_XDECREF(ex);
    Py_XDECREF(wout);
    Py_XDECREF(dx);
    rx.xshape = rx.xstrides = rx.xdtype = rx.xdevice = NULL; /* (borrowed from rw) */
    hit_reads_clear(&rw);
    hit_reads_clear(&rx);
    if (out == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return out;
}

static PyObject *linear_hits_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"capacity", "grad_enabled", "operands_first", NULL};
    Py_ssize_t capacity;
    PyObject *grad_enabled;
    int operands_first = 0;
    LinearHits *t;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nO|$p:LinearHits", keywords, &capacity, &grad_enabled,
                                     &operands_first))
        return NULL;
    if (capacity < 1 || capacity > 4096) {
        PyErr_Format(PyExc_ValueError, "LinearHits capacity must be in 1 .. 4096, got %zd", capacity);
        return NULL;
    }
    if (!PyCallable_Check(grad_enabled)) {
        PyErr_SetString(PyExc_TypeError, "LinearHits grad_enabled must be callable (torch.is_grad_enabled)");
        return NULL;
    }
    t = (LinearHits *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->vectorcall = linear_hits_vectorcall;
    t->entries = PyMem_Calloc((size_t)capacity, sizeof(LinearHit *));
    if (t->entries == NULL) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    t->capacity = capacity;
    t->operands_first = operands_first;
    Py_INCREF(grad_enabled);
    t->grad_enabled = grad_enabled;
    return (PyObject *)t;
}

static int linear_hits_traverse(LinearHits *t, visitproc visit, void *arg)
{
    Py_ssize_t i;
    Py_VISIT(t->grad_enabled);
    for (i = 0; i < t->n; i++)
        Py_VISIT((PyObject *)t->entries[i]);
    return 0;
}

static int linear_hits_clear_refs(LinearHits *t)
{
    Py_ssize_t i, n = t->n;
    t->n = t->next = 0;
    for (i = 0; i < n; i++)
        Py_CLEAR(t->entries[i]);
    Py_CLEAR(t->grad_enabled);
    return 0;
}

static void linear_hits_dealloc(LinearHits *t)
{
    PyObject_GC_UnTrack(t);
    linear_hits_clear_refs(t);
    PyMem_Free(t->entries);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *linear_hits_add(LinearHits *t, PyObject *hit)
{
    Py_ssize_t i;
    LinearHit *h = (LinearHit *)hit, *old = NULL;

    if (Py_TYPE(hit) != &LinearHitType) {
        PyErr_Format(PyExc_TypeError, "LinearHits.add takes a LinearHit, not %.200s", Py_TYPE(hit)->tp_name);
        return NULL;
    }
    /* the same problem on the same thread and stream replaces its entry (a re-planned launch, say) */
    for (i = 0; i < t->n; i++) {
        LinearHit *e = t->entries[i];
        if (e->thread == h->thread && e->stream == h->stream && same(e->key, h->key) == 1)
            break;
    }
    PyErr_Clear();
    if (i == t->n) {
        if (t->n < t->capacity)
            i = t->n++;
        else
            i = t->next, t->next = (t->next + 1) % t->capacity; /* the oldest added goes */
    }
    old = t->entries[i];
    Py_INCREF(hit);
    t->entries[i] = h;
    h->listed = 1;
    if (old != NULL && old != h) {
        if (same(old->key, h->key) == 1)
            h->hits += old->hits; /* (not yet folded into the cache's counters) */
        else
            PyErr_Clear();
        old->listed = 0;
        Py_DECREF(old);
    }
    else
        Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *linear_hits_clear_method(LinearHits *t, PyObject *unused)
{
    Py_ssize_t i, n = t->n;
    t->n = t->next = 0;
    for (i = 0; i < n; i++) {
        t->entries[i]->listed = 0;
        Py_CLEAR(t->entries[i]);
    }
    Py_RETURN_NONE;
}

static PyObject *linear_hits_entries(LinearHits *t, PyObject *unused)
{
    PyObject *out = PyTuple_New(t->n);
    Py_ssize_t i;
    for (i = 0; out != NULL && i < t->n; i++) {
        Py_INCREF(t->entries[i]);
        PyTuple_SET_ITEM(out, i, (PyObject *)t->entries[i]);
    }
    return out;
}

static Py_ssize_t linear_hits_len(LinearHits *t) { return t->n; }

static PyMethodDef linear_hits_methods[] = {
    {"add", (PyCFunction)linear_hits_add, METH_O,
     "Add a LinearHit (replacing the entry of the same key, thread and stream; else the oldest when full)."},
    {"clear", (PyCFunction)linear_hits_clear_method, METH_NOARGS, "Drop every entry."},
    {"entries", (PyCFunction)linear_hits_entries, METH_NOARGS, "The entries, oldest first."},
    {"backward", (PyCFunction)(void (*)(void))linear_hits_backward, METH_FASTCALL,
     "backward(x, dz, weight, weight_act, input_act): a Linear layer's weight and input gradients "
     "(entries weight_act and input_act; None: not wanted) -> (weight entry's result, dx), or None."},
    {NULL},
};

static PySequenceMethods linear_hits_as_sequence = {.sq_length = (lenfunc)linear_hits_len};

static PyTypeObject LinearHitsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.LinearHits",
    .tp_basicsize = sizeof(LinearHits),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "LinearHits(capacity, grad_enabled, *, operands_first=False): planned Linear problems; "
              "hits(x, weight, bias, activation) -> the result, or None (run the Python path).",
    .tp_new = linear_hits_new,
    .tp_dealloc = (destructor)linear_hits_dealloc,
    .tp_traverse = (traverseproc)linear_hits_traverse,
    .tp_clear = (inquiry)linear_hits_clear_refs,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(LinearHits, vectorcall),
    .tp_methods = linear_hits_methods,
    .tp_as_sequence = &linear_hits_as_sequence,
};

/* Called once by PyInit__fastcall: the interned names and the two types. */
static int register_linear_hit(PyObject *m)
{
#define INTERN(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return -1;
    INTERN(s_shape, "shape") INTERN(s_stride, "stride") INTERN(s_dtype, "dtype") INTERN(s_device, "device")
    INTERN(s_data_ptr, "data_ptr") INTERN(s_requires_grad, "requires_grad") INTERN(s_closed, "closed")
    INTERN(s_algo, "algo") INTERN(s_stream, "stream") INTERN(s_size, "size") INTERN(s_ptr, "ptr")
    INTERN(s_handles, "handles") INTERN(s_get_handle, "get_handle") INTERN(s_value, "value")
    INTERN(s_locked, "locked") INTERN(s_is_conj, "is_conj") INTERN(s_live, "live")
#undef INTERN
    if (PyType_Ready(&LinearHitType) < 0 || PyType_Ready(&LinearHitsType) < 0)
        return -1;
    Py_INCREF(&LinearHitType);
    if (PyModule_AddObject(m, "LinearHit", (PyObject *)&LinearHitType) < 0) {
        Py_DECREF(&LinearHitType);
        return -1;
    }
    Py_INCREF(&LinearHitsType);
    if (PyModule_AddObject(m, "LinearHits", (PyObject *)&LinearHitsType) < 0) {
        Py_DECREF(&LinearHitsType);
        return -1;
    }
    return 0;
}
/* ================================================================ end of block "LinearHit" (hA) */

/* ------------------------------------------------------------------------------------------------ */
/* FFTHit (task hB): the hit of a planned FFT whose results torch makes, in one call: the whole of
   nvmath.fft._planner.FFT.hit_entry's Python hit for the common call (an allowed direction, torch's
   current stream), with no Python frame. Constructed by the planner with torch's raw current-stream
   getter, the device, the result allocator (a bound `new_empty_strided`) and its two arguments (shape,
   strides), the default direction (the object and its int; a C2C plan's other one too) and the Python hit
   (the fallback); *armed* by the cuFFT plan
   (nvmath.fft._cufft_plan.CufftPlan) with the stream it is bound to and its one-call launch (a FastCall of
   fft_exec_in_context with slots input, output, direction) whenever that launch is valid on that stream,
   and disarmed whenever it is not (another stream bound, workspace released, plan closed).

   hit(operand, ptr, tensor, direction, stream), with the Python hit's arguments: when armed, `stream` is
   None, `ptr` an int, `direction` None, the default or the other allowed one (C2C: `other`, compared by
   identity as the default is), and raw(device) is the armed stream, it allocates the result
   (alloc(shape, strides)), reads its data_ptr() and makes the launch (ptr + in_offset, result +
   out_offset, direction) on the bound stream; a nonzero status raises the FastCall's error. Every other
   call is the fallback's (the Python hit: stream resolution, Python launch, re-arming). hit.run(...) is
   the same call as a built-in method (profilers see it; the planner hands it out). */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *raw;       /* raw(device) -> int: torch's current stream */
    PyObject *device;    /* int */
    PyObject *alloc;     /* alloc(shape, strides) -> tensor */
    PyObject *args[2];   /* shape, strides */
    PyObject *direction; /* the default direction object (compared by identity) */
    PyObject *other;     /* NULL or the other allowed direction object (a C2C transform's) */
    PyObject *fallback;  /* the Python hit */
    FastCall *launch;    /* NULL: disarmed */
    u64 stream, in_offset, out_offset, dir, other_dir;
} FFTHit;

static PyObject *fft_hit_data_ptr; /* "data_ptr", interned at module init */

static PyObject *fft_hit_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FFTHit *h = (FFTHit *)self;
    FastCall *fc = h->launch;
    PyObject *value, *out = NULL;
    u64 a[FASTCALL_MAX_ARGS], current, input, output, stream, in_offset, out_offset, dir;
    int status;

    if (fc == NULL || PyVectorcall_NARGS(nargsf) != 5 || kwnames != NULL || args[4] != Py_None
        || !PyLong_CheckExact(args[1]))
        return PyObject_Vectorcall(h->fallback, args, nargsf, kwnames);
    if (args[3] == Py_None || args[3] == h->direction)
        dir = h->dir;
    else if (h->other != NULL && args[3] == h->other)
        dir = h->other_dir;
    else
        return PyObject_Vectorcall(h->fallback, args, nargsf, kwnames);
    /* the arming as it is now (the calls below run Python code, which may re-arm or disarm) */
    Py_INCREF(fc);
    stream = h->stream, in_offset = h->in_offset, out_offset = h->out_offset;
    value = PyObject_Vectorcall(h->raw, &h->device, 1, NULL);
    if (value == NULL)
        goto done;
    status = to_u64(value, &current, "current stream", 0);
    Py_DECREF(value);
    if (status < 0)
        goto done;
    if (current != stream) {
        Py_DECREF(fc);
        return PyObject_Vectorcall(h->fallback, args, nargsf, kwnames);
    }
    if (to_u64(args[1], &input, "operand address", 1) < 0)
        goto done;
    out = PyObject_Vectorcall(h->alloc, h->args, 2, NULL);
    if (out == NULL)
        goto done;
    value = PyObject_VectorcallMethod(fft_hit_data_ptr, &out, 1, NULL);
    if (value == NULL || to_u64(value, &output, "result address", 0) < 0) {
        Py_XDECREF(value);
        Py_CLEAR(out);
        goto done;
    }
    Py_DECREF(value);
    memcpy(a, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
    a[fc->slots[0]] = input + in_offset;
    a[fc->slots[1]] = output + out_offset;
    a[fc->slots[2]] = dir;
    status = dispatch(fc->fn, fc->nargs, a);
    if (status != 0) {
        Py_CLEAR(out);
        if (fc->error != NULL)
            raise_status(fc->error, status);
        else
            PyErr_Format(PyExc_RuntimeError, "FFTHit: the launch failed with status %d", status);
    }
done:
    Py_DECREF(fc);
    return out;
}

static PyObject *fft_hit_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"raw", "device", "alloc", "shape", "strides", "direction", "direction_value",
                               "fallback", "other", "other_value", NULL};
    PyObject *raw, *device, *alloc, *shape, *strides, *direction, *dir_value, *fallback, *other = Py_None;
    PyObject *other_value = NULL;
    FFTHit *h;
    u64 dir, other_dir = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO|$OO:FFTHit", keywords, &raw, &device, &alloc,
                                     &shape, &strides, &direction, &dir_value, &fallback, &other, &other_value))
        return NULL;
    if ((other == Py_None) != (other_value == NULL)) {
        PyErr_SetString(PyExc_TypeError, "FFTHit: other and other_value go together");
        return NULL;
    }
    if (other_value != NULL && to_u64(other_value, &other_dir, "other_value", 0) < 0)
        return NULL;
    if (!PyCallable_Check(raw) || !PyCallable_Check(alloc) || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "FFTHit: raw, alloc and fallback must be callable");
        return NULL;
    }
    if (to_u64(dir_value, &dir, "direction_value", 0) < 0)
        return NULL;
    h = (FFTHit *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->vectorcall = fft_hit_vectorcall;
    Py_INCREF(raw), Py_INCREF(device), Py_INCREF(alloc), Py_INCREF(shape), Py_INCREF(strides);
    Py_INCREF(direction), Py_INCREF(fallback);
    h->raw = raw, h->device = device, h->alloc = alloc, h->args[0] = shape, h->args[1] = strides;
    h->direction = direction, h->fallback = fallback, h->dir = dir;
    if (other != Py_None) {
        Py_INCREF(other);
        h->other = other, h->other_dir = other_dir;
    }
    return (PyObject *)h;
}

static PyObject *fft_hit_arm(FFTHit *h, PyObject *args)
{
    PyObject *stream, *launch, *in_offset, *out_offset;
    u64 s, i, o;

    if (!PyArg_ParseTuple(args, "OOOO:arm", &stream, &launch, &in_offset, &out_offset))
        return NULL;
    if (Py_TYPE(launch) != &FastCallType || ((FastCall *)launch)->nslots != 3) {
        PyErr_Format(PyExc_TypeError, "FFTHit.arm: launch must be a FastCall of 3 slots (input, output, "
                     "direction), not %.200s", Py_TYPE(launch)->tp_name);
        return NULL;
    }
    if (to_u64(stream, &s, "stream", 0) < 0 || to_u64(in_offset, &i, "in_offset", 2) < 0
        || to_u64(out_offset, &o, "out_offset", 3) < 0)
        return NULL;
    Py_INCREF(launch);
    Py_XSETREF(h->launch, (FastCall *)launch);
    h->stream = s, h->in_offset = i, h->out_offset = o;
    Py_RETURN_NONE;
}

/* hit.run(...): the same call as a built-in method, which profilers see (a call of the object is not). */
static PyObject *fft_hit_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return fft_hit_vectorcall(self, args, (size_t)nargs, NULL);
}

static PyObject *fft_hit_disarm(FFTHit *h, PyObject *unused)
{
    Py_CLEAR(h->launch);
    Py_RETURN_NONE;
}

static int fft_hit_traverse(FFTHit *h, visitproc visit, void *arg)
{
    Py_VISIT(h->raw);
    Py_VISIT(h->device);
    Py_VISIT(h->alloc);
    Py_VISIT(h->args[0]);
    Py_VISIT(h->args[1]);
    Py_VISIT(h->direction);
    Py_VISIT(h->other);
    Py_VISIT(h->fallback);
    Py_VISIT(h->launch);
    return 0;
}

static int fft_hit_clear(FFTHit *h)
{
    Py_CLEAR(h->raw);
    Py_CLEAR(h->device);
    Py_CLEAR(h->alloc);
    Py_CLEAR(h->args[0]);
    Py_CLEAR(h->args[1]);
    Py_CLEAR(h->direction);
    Py_CLEAR(h->other);
    Py_CLEAR(h->fallback);
    Py_CLEAR(h->launch);
    return 0;
}

static void fft_hit_dealloc(FFTHit *h)
{
    PyObject_GC_UnTrack(h);
    fft_hit_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *fft_hit_get_armed(FFTHit *h, void *closure) { return PyBool_FromLong(h->launch != NULL); }

static PyObject *fft_hit_get_stream(FFTHit *h, void *closure)
{
    if (h->launch == NULL)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(h->stream);
}

static PyObject *fft_hit_get_fallback(FFTHit *h, void *closure)
{
    Py_INCREF(h->fallback);
    return h->fallback;
}

static PyMethodDef fft_hit_methods[] = {
    {"arm", (PyCFunction)fft_hit_arm, METH_VARARGS,
     "arm(stream, launch, in_offset, out_offset): serve calls on raw stream `stream` with `launch`."},
    {"run", (PyCFunction)(void (*)(void))fft_hit_run, METH_FASTCALL,
     "run(operand, ptr, tensor, direction, stream): the call, as a built-in method (seen by profilers)."},
    {"disarm", (PyCFunction)fft_hit_disarm, METH_NOARGS,
     "Send every call to the fallback until armed again."},
    {NULL},
};

static PyGetSetDef fft_hit_getset[] = {
    {"armed", (getter)fft_hit_get_armed, NULL, "Whether calls on the armed stream are served in C.", NULL},
    {"stream", (getter)fft_hit_get_stream, NULL, "The armed raw stream, or None when disarmed.", NULL},
    {"fallback", (getter)fft_hit_get_fallback, NULL, "The Python hit every other call goes to.", NULL},
    {NULL},
};

PyDoc_STRVAR(fft_hit_doc,
"FFTHit(raw, device, alloc, shape, strides, direction, direction_value, fallback, *, other=None,\n"
"       other_value=None)\n\n"
"The hit of a planned FFT with results made by torch, in one call (see nvmath/_fastcall.c): \n"
"hit(operand, ptr, tensor, direction, stream) allocates alloc(shape, strides) and launches the armed\n"
"FastCall when armed for raw(device); any other call is fallback(operand, ptr, tensor, direction, stream).");

static PyTypeObject FFTHitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.FFTHit",
    .tp_basicsize = sizeof(FFTHit),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = fft_hit_doc,
    .tp_new = fft_hit_new,
    .tp_dealloc = (destructor)fft_hit_dealloc,
    .tp_traverse = (traverseproc)fft_hit_traverse,
    .tp_clear = (inquiry)fft_hit_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FFTHit, vectorcall),
    .tp_methods = fft_hit_methods,
    .tp_getset = fft_hit_getset,
};

/* Adds FFTHit to the module (called once from PyInit__fastcall). */
static int fft_hit_register(PyObject *m)
{
    if (PyType_Ready(&FFTHitType) < 0)
        return -1;
    fft_hit_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (fft_hit_data_ptr == NULL)
        return -1;
    Py_INCREF(&FFTHitType);
    if (PyModule_AddObject(m, "FFTHit", (PyObject *)&FFTHitType) < 0) {
        Py_DECREF(&FFTHitType);
        return -1;
    }
    return 0;
}
/* (end of FFTHit) */

/* ================================================================================================ */
/* MatmulExecuteHit (task fexec, issue #21, block "MatmulExecuteHit"): the common call of a planned
   nvmath.linalg.advanced.Matmul's execute() -- no arguments, torch operands, a result made by torch on
   torch's current stream, no aux outputs -- in one C call (with the done event where the launch records
   one: the `after` callable), made by
   nvmath.linalg.advanced._execute_hit (which builds the object; Matmul.execute calls it inside its state
   guard and runs its Python path on a miss).

   It holds what the launch's compiled_parts() gave when it was made (the cublasLtMatmul FastCall, the
   operand swap, the workspace objects, the handle option), the stream it was made for, the result's
   allocator (a bound new_empty_strided of an empty template, and its shape and strides), torch's raw
   current-stream and current-device getters, and the planner's operand slots. Nothing per call is
   cached beyond that: each call re-reads what the Python launch reads (the slots' addresses and
   tensors, the launch's `closed` and `algo`, the workspace binding, the thread's cuBLASLt handle), so a
   reset, a re-plan, an algorithm selection, a workspace change or free() makes a call a miss (None),
   never a stale launch.

   Order of a call: first what may run Python code or release the GIL (the grad-mode and requires_grad
   reads, stream and device queries, the thread's handle, the operand addresses, the allocation); then,
   with no Python code in between, the launch's `closed` and `algo`, the workspace and cublasLtMatmul. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *raw, *device_index, *get_device, *grad_enabled, *alloc;
    PyObject *alloc_args[2];                   /* alloc(shape, strides): the result */
    PyObject *slots, *grad_slots;              /* (a, b[, c]) slots (`ptr` read); those whose tensor may need grad */
    PyObject *launch, *algo;                   /* the MatmulLaunch and the algo tuple it was made with */
    PyObject *bound, *handle, *space;          /* Py_None without workspace */
    PyObject *handles_local, *handles_module, *pool_get;
    PyObject *after;                           /* Py_None or a callable run after the launch (done event) */
    FastCall *call;
    u64 stream, algo_ptr, ws_size, lt_handle;
    long device_id;
    int swap, c_is_d;
    Py_ssize_t hits;
} MatmulExecuteHit;

#define MEH_FIELDS(X) X(raw) X(device_index) X(get_device) X(grad_enabled) X(alloc) X(alloc_args[0]) \
    X(alloc_args[1]) X(slots) X(grad_slots) \
    X(launch) X(algo) X(bound) X(handle) X(space) X(handles_local) X(handles_module) X(pool_get) X(after)

static PyObject *meh_s_ptr, *meh_s_user, *meh_s_tensor, *meh_s_requires_grad,
    *meh_s_handles, *meh_s_get_handle, *meh_s_data_ptr;

/* (attr_u64, call_u64, launch_open, workspace_ready, launch_failed: the LinearHit block's helpers) */

/* 1: an operand tensor requires grad while grad mode is on (nvmath.torch runs the call), 0: none, -1: error. */
static int meh_wants_grad(MatmulExecuteHit *h)
{
    PyObject *v, *user, *tensor;
    Py_ssize_t i;
    int on;

    if (h->grad_enabled == Py_None)
        return 0;
    if ((v = PyObject_CallNoArgs(h->grad_enabled)) == NULL)
        return -1;
    on = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (on <= 0)
        return on;
    for (i = 0; i < PyTuple_GET_SIZE(h->grad_slots); i++) {
        if ((user = PyObject_GetAttr(PyTuple_GET_ITEM(h->grad_slots, i), meh_s_user)) == NULL)
            return -1;
        if (user == Py_None) {
            Py_DECREF(user);
            continue;
        }
        tensor = PyObject_GetAttr(user, meh_s_tensor);
        Py_DECREF(user);
        if (tensor == NULL)
            return -1;
        v = PyObject_GetAttr(tensor, meh_s_requires_grad);
        Py_DECREF(tensor);
        if (v == NULL)
            return -1;
        on = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (on != 0)
            return on;
    }
    return 0;
}

/* The thread's cuBLASLt handle as the launch reads it: 1 found, 0 not yet made (a miss), -1 error. */
static int meh_lt_handle(MatmulExecuteHit *h, u64 *lt)
{
    PyObject *get, *handles, *v;
    int rc;

    if (h->lt_handle) {
        *lt = h->lt_handle;
        return 1;
    }
    if ((get = PyObject_GetAttr(h->handles_module, meh_s_get_handle)) == NULL)
        return -1;
    if (get != h->pool_get) { /* (a test's replacement) */
        rc = call_u64(get, h->device_index, lt);
        Py_DECREF(get);
        return rc < 0 ? -1 : 1;
    }
    Py_DECREF(get);
    if ((handles = PyObject_GetAttr(h->handles_local, meh_s_handles)) == NULL) {
        PyErr_Clear(); /* (the thread's first handle: the Python path makes it) */
        return 0;
    }
    v = PyDict_Check(handles) ? PyDict_GetItemWithError(handles, h->device_index) : NULL;
    rc = v != NULL ? to_u64(v, lt, "handle", 0) : -1;
    Py_DECREF(handles);
    if (rc < 0 || !*lt) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The second part (no Python code runs): 1 launched, 0 a miss, -1 an error (set). */
static int meh_launch(MatmulExecuteHit *h, FastCall *fc, u64 lt, u64 pa, u64 pb, u64 pc, u64 pd)
{
    u64 a[FASTCALL_MAX_ARGS], ws = 0;
    int ok;

    if ((ok = launch_open(h->launch, h->algo)) <= 0)
        return ok;
    if (h->ws_size && (ok = workspace_ready(h->bound, h->handle, h->space, h->ws_size, &ws)) <= 0)
        return ok;
    /* cublasLtMatmul's slots, in the launch caller's order: handle, a, b, c, d, algo, ws, ws_size, stream */
    memcpy(a, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
    a[fc->slots[0]] = lt;
    a[fc->slots[1]] = h->swap ? pb : pa;
    a[fc->slots[2]] = h->swap ? pa : pb;
    a[fc->slots[3]] = !pc && h->c_is_d ? pd : pc;
    a[fc->slots[4]] = pd;
    a[fc->slots[5]] = h->algo_ptr;
    a[fc->slots[6]] = ws;
    a[fc->slots[7]] = h->ws_size;
    a[fc->slots[8]] = h->stream;
    ok = dispatch(fc->fn, fc->nargs, a);
    return ok != 0 ? launch_failed(fc, ok, "cublasLtMatmul") : 1;
}

static PyObject *meh_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MatmulExecuteHit *h = (MatmulExecuteHit *)self;
    FastCall *fc = h->call;
    PyObject *out = NULL, *v;
    u64 stream, device, lt = 0, pa, pb, pc = 0, pd;
    int rc;

    if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "MatmulExecuteHit() takes no arguments");
        return NULL;
    }
    if (fc == NULL)
        Py_RETURN_NONE;
    Py_INCREF(fc); /* (the calls below run Python code) */
    if ((rc = meh_wants_grad(h)) != 0)
        goto miss_or_error;
    if ((rc = call_u64(h->raw, h->device_index, &stream)) < 0)
        goto miss_or_error;
    if (stream != h->stream)
        goto miss;
    if ((rc = call_u64(h->get_device, NULL, &device)) < 0)
        goto miss_or_error;
    if ((long)device != h->device_id)
        goto miss; /* another device is current: the launch switches the context */
    if ((rc = meh_lt_handle(h, &lt)) <= 0)
        goto miss_or_error;
    if (attr_u64(PyTuple_GET_ITEM(h->slots, 0), meh_s_ptr, &pa) < 0
        || attr_u64(PyTuple_GET_ITEM(h->slots, 1), meh_s_ptr, &pb) < 0
        || (PyTuple_GET_SIZE(h->slots) == 3 && attr_u64(PyTuple_GET_ITEM(h->slots, 2), meh_s_ptr, &pc) < 0))
        goto error;
    if ((out = PyObject_Vectorcall(h->alloc, h->alloc_args, 2, NULL)) == NULL)
        goto error;
    if ((v = PyObject_CallMethodNoArgs(out, meh_s_data_ptr)) == NULL)
        goto error;
    rc = to_u64(v, &pd, "result address", 0);
    Py_DECREF(v);
    if (rc < 0)
        goto error;
    if (h->call != fc) { /* disarmed while the allocation ran other threads */
        Py_CLEAR(out);
        goto miss;
    }
    rc = meh_launch(h, fc, lt, pa, pb, pc, pd);
    if (rc <= 0) {
        Py_CLEAR(out);
        goto miss_or_error;
    }
    if (h->after != Py_None) { /* the done event of a mortal stream */
        if ((v = PyObject_CallNoArgs(h->after)) == NULL)
            goto error;
        Py_DECREF(v);
    }
    h->hits++;
    Py_DECREF(fc);
    return out;
miss_or_error:
    if (rc < 0)
        goto error;
miss:
    Py_DECREF(fc);
    Py_RETURN_NONE;
error:
    Py_XDECREF(out);
    Py_DECREF(fc);
    return NULL;
}

static PyObject *meh_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"raw", "device_id", "get_device", "grad_enabled", "alloc", "shape", "strides", "slots",
                               "grad_slots", "launch", "algo", "call", "swap", "c_is_d", "bound", "handle",
                               "space", "stream", "lt_handle", "handles_local", "handles_module", "pool_get",
                               "after", NULL};
    PyObject *o[23], *shape, *strides;
    MatmulExecuteHit *h;
    u64 device_id;

    memset(o, 0, sizeof o);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "$OOOOOOOOOOOOOOOOOOOOOOO:MatmulExecuteHit", keywords, &o[0],
                                     &o[1], &o[2], &o[3], &o[4], &shape, &strides, &o[5], &o[6], &o[7], &o[8],
                                     &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16], &o[17],
                                     &o[18], &o[19], &o[20]))
        return NULL;
    if (Py_TYPE(o[9]) != &FastCallType || ((FastCall *)o[9])->nargs != 16 || ((FastCall *)o[9])->nslots != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "MatmulExecuteHit call must be cublasLtMatmul's FastCall (16 arguments, 9 slots)");
        return NULL;
    }
    if (!PyTuple_Check(o[5]) || PyTuple_GET_SIZE(o[5]) < 2 || PyTuple_GET_SIZE(o[5]) > 3 || !PyTuple_Check(o[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "MatmulExecuteHit slots must be a tuple (a, b) or (a, b, c); grad_slots a tuple");
        return NULL;
    }
    if (!PyTuple_Check(o[8]) || PyTuple_GET_SIZE(o[8]) != 2) {
        PyErr_SetString(PyExc_TypeError, "MatmulExecuteHit algo must be the launch's (algo_ptr, workspace size)");
        return NULL;
    }
    h = (MatmulExecuteHit *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->vectorcall = meh_vectorcall;
#define MEH_TAKE(f, i) Py_INCREF(o[i]); h->f = o[i];
    MEH_TAKE(raw, 0) MEH_TAKE(device_index, 1) MEH_TAKE(get_device, 2) MEH_TAKE(grad_enabled, 3)
    MEH_TAKE(alloc, 4) MEH_TAKE(slots, 5) MEH_TAKE(grad_slots, 6) MEH_TAKE(launch, 7) MEH_TAKE(algo, 8)
    MEH_TAKE(bound, 12) MEH_TAKE(handle, 13) MEH_TAKE(space, 14) MEH_TAKE(handles_local, 17)
    MEH_TAKE(handles_module, 18) MEH_TAKE(pool_get, 19) MEH_TAKE(after, 20)
#undef MEH_TAKE
    h->alloc_args[0] = Py_NewRef(shape);
    h->alloc_args[1] = Py_NewRef(strides);
    Py_INCREF(o[9]);
    h->call = (FastCall *)o[9];
    h->swap = PyObject_IsTrue(o[10]);
    h->c_is_d = PyObject_IsTrue(o[11]);
    if (h->swap < 0 || h->c_is_d < 0 || to_u64(o[1], &device_id, "device_id", 0) < 0
        || to_u64(o[15], &h->stream, "stream", 0) < 0 || to_u64(o[16], &h->lt_handle, "lt_handle", 0) < 0
        || to_u64(PyTuple_GET_ITEM(o[8], 0), &h->algo_ptr, "algo", 0) < 0
        || to_u64(PyTuple_GET_ITEM(o[8], 1), &h->ws_size, "algo", 1) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    h->device_id = (long)device_id;
    if (h->ws_size && (h->bound == Py_None || h->space == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "MatmulExecuteHit with a workspace needs bound and space");
        Py_DECREF(h);
        return NULL;
    }
    return (PyObject *)h;
}

static int meh_traverse(MatmulExecuteHit *h, visitproc visit, void *arg)
{
#define MEH_VISIT(f) Py_VISIT(h->f);
    MEH_FIELDS(MEH_VISIT)
#undef MEH_VISIT
    Py_VISIT(h->call);
    return 0;
}

static int meh_clear(MatmulExecuteHit *h)
{
#define MEH_CLEAR(f) Py_CLEAR(h->f);
    MEH_FIELDS(MEH_CLEAR)
#undef MEH_CLEAR
    Py_CLEAR(h->call);
    return 0;
}

static void meh_dealloc(MatmulExecuteHit *h)
{
    PyObject_GC_UnTrack(h);
    meh_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

/* hit.run(): the same call as a built-in method, which profilers see (a call of the object is not). */
static PyObject *meh_run(PyObject *self, PyObject *unused)
{
    return meh_vectorcall(self, NULL, 0, NULL);
}

static PyObject *meh_disarm(MatmulExecuteHit *h, PyObject *unused)
{
    Py_CLEAR(h->call);
    Py_RETURN_NONE;
}

static PyObject *meh_get_armed(MatmulExecuteHit *h, void *closure) { return PyBool_FromLong(h->call != NULL); }
static PyObject *meh_get_hits(MatmulExecuteHit *h, void *closure) { return PyLong_FromSsize_t(h->hits); }
static PyObject *meh_get_stream(MatmulExecuteHit *h, void *closure) { return PyLong_FromUnsignedLongLong(h->stream); }
static PyObject *meh_get_launch(MatmulExecuteHit *h, void *closure) { return Py_NewRef(h->launch); }

static PyMethodDef meh_methods[] = {
    {"run", (PyCFunction)meh_run, METH_NOARGS, "run(): the call, as a built-in method (seen by profilers)."},
    {"disarm", (PyCFunction)meh_disarm, METH_NOARGS, "Make every later call a miss (None)."},
    {NULL},
};

static PyGetSetDef meh_getset[] = {
    {"armed", (getter)meh_get_armed, NULL, "Whether calls may launch (disarm() makes every call a miss).", NULL},
    {"hits", (getter)meh_get_hits, NULL, "The calls served (launched) so far.", NULL},
    {"stream", (getter)meh_get_stream, NULL, "The raw stream the hit serves (torch's current one when made).", NULL},
    {"launch", (getter)meh_get_launch, NULL, "The MatmulLaunch the hit was made from.", NULL},
    {NULL},
};

static PyTypeObject MatmulExecuteHitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.MatmulExecuteHit",
    .tp_basicsize = sizeof(MatmulExecuteHit),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "MatmulExecuteHit(*, raw, device_id, get_device, grad_enabled, alloc, shape, strides, slots,\n"
              "    grad_slots, launch, algo, call, swap, c_is_d, bound, handle, space, stream, lt_handle,\n"
              "    handles_local, handles_module, pool_get, after)\n\n"
              "Matmul.execute()'s common call in one C call (see nvmath/_fastcall.c): hit() (or hit.run()) returns\n"
              "or None when the call must take the Python path.",
    .tp_new = meh_new,
    .tp_dealloc = (destructor)meh_dealloc,
    .tp_traverse = (traverseproc)meh_traverse,
    .tp_clear = (inquiry)meh_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MatmulExecuteHit, vectorcall),
    .tp_methods = meh_methods,
    .tp_getset = meh_getset,
};

/* Adds MatmulExecuteHit to the module (called once from PyInit__fastcall). */
static int register_matmul_execute_hit(PyObject *m)
{
#define MEH_INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    MEH_INTERN(meh_s_ptr, "ptr") MEH_INTERN(meh_s_user, "user") MEH_INTERN(meh_s_tensor, "tensor")
    MEH_INTERN(meh_s_requires_grad, "requires_grad")
    MEH_INTERN(meh_s_handles, "handles") MEH_INTERN(meh_s_get_handle, "get_handle")
    MEH_INTERN(meh_s_data_ptr, "data_ptr")
#undef MEH_INTERN
    if (PyType_Ready(&MatmulExecuteHitType) < 0)
        return -1;
    Py_INCREF(&MatmulExecuteHitType);
    if (PyModule_AddObject(m, "MatmulExecuteHit", (PyObject *)&MatmulExecuteHitType) < 0) {
        Py_DECREF(&MatmulExecuteHitType);
        return -1;
    }
    return 0;
}
/* ===================================================== end of block "MatmulExecuteHit" (fexec) */

/* ================================================================================================ */
/* The per-group GEMMs of an FP8 GroupedLinear (issue #23, block "MatmulGroup"): one product's launches
   of every group in one C call, for nvmath.torch._grouped_fp8_group (which builds the objects; nothing
   else uses them).

   A MatmulGroup holds, per member (one group's planned GEMM), the fixed parts of its cublasLtMatmul as
   nvmath.linalg.advanced's MatmulLaunch.compiled_parts gives them: the compiled FastCall, the launch
   object (its `closed` flag and `algo` tuple re-read on every call), the operand swap, c_is_d, the
   workspace (BoundWorkspace and Workspace) and the descriptor's bias pointer attributes. Calling it
   with (lt_handle, stream, a, b, d, bias) -- tuples of one address per member, `bias` None for a
   product without bias -- first checks every member (launch open, same algorithm, workspace bound to
   the stream and large enough; the stream the members were made for) and returns False, launching
   nothing, when any check fails (the Python path then runs every launch with its own checks); else it
   launches every member in order (setting a bias pointer attribute that moved) and returns True. A
   nonzero status raises the FastCall's error (the members before it were launched).

   As in LinearHit, nothing between the first check and the last launch runs Python code (attribute
   reads of plain slots, calls through addresses): a plan is freed only by Python code holding the GIL,
   so none is freed meanwhile. */

#define GROUP_MAX_ATTRS 4

typedef int (*group_set_attr_fn)(u64, u64, const void *, u64);

typedef struct {
    FastCall *call;
    PyObject *launch, *algo, *bound, *handle, *space, *attrs; /* bound/space: Py_None without workspace */
    u64 algo_ptr, ws_size, ws;
    u64 attr_desc[GROUP_MAX_ATTRS], attr_id[GROUP_MAX_ATTRS];
    Py_ssize_t nattrs;
    int swap, c_is_d;
} GroupMember;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t n;
    u64 stream, set_attr;
    Py_ssize_t calls;
    GroupMember *m;
} MatmulGroup;

static PyObject *group_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *g_ptr, *g_value, *g_desc, *g_attr;

static int group_traverse(MatmulGroup *g, visitproc visit, void *arg)
{
    Py_ssize_t i;
    for (i = 0; g->m != NULL && i < g->n; i++) {
        GroupMember *e = &g->m[i];
        Py_VISIT((PyObject *)e->call);
        Py_VISIT(e->launch); Py_VISIT(e->algo); Py_VISIT(e->bound); Py_VISIT(e->handle);
        Py_VISIT(e->space); Py_VISIT(e->attrs);
    }
    return 0;
}

static int group_clear(MatmulGroup *g)
{
    Py_ssize_t i;
    for (i = 0; g->m != NULL && i < g->n; i++) {
        GroupMember *e = &g->m[i];
        Py_CLEAR(e->call);
        Py_CLEAR(e->launch); Py_CLEAR(e->algo); Py_CLEAR(e->bound); Py_CLEAR(e->handle);
        Py_CLEAR(e->space); Py_CLEAR(e->attrs);
    }
    return 0;
}

static void group_dealloc(MatmulGroup *g)
{
    PyObject_GC_UnTrack(g);
    group_clear(g);
    PyMem_Free(g->m);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

/* A new reference to parts[name] (KeyError naming it when missing). */
static PyObject *group_part(PyObject *parts, const char *name)
{
    PyObject *v = PyDict_GetItemString(parts, name);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "MatmulGroup member parts need %s", name);
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

/* Fill member `e` from one compiled_parts dict: 0, or -1 with an error set. */
static int group_member_init(GroupMember *e, PyObject *parts, u64 *stream)
{
    PyObject *call, *flag;
    Py_ssize_t i;
    int rc;

    if (!PyDict_Check(parts)) {
        PyErr_Format(PyExc_TypeError, "MatmulGroup members must be compiled_parts dicts, not %.200s",
                     Py_TYPE(parts)->tp_name);
        return -1;
    }
    if ((call = group_part(parts, "call")) == NULL)
        return -1;
    e->call = (FastCall *)call;
    if (Py_TYPE(call) != &FastCallType || e->call->nargs != 16 || e->call->nslots != 9) {
        PyErr_SetString(PyExc_ValueError, "MatmulGroup call must be cublasLtMatmul's FastCall (16 arguments, 9 slots)");
        return -1;
    }
    if ((e->launch = group_part(parts, "launch")) == NULL || (e->algo = group_part(parts, "algo")) == NULL
        || (e->bound = group_part(parts, "bound")) == NULL || (e->handle = group_part(parts, "handle")) == NULL
        || (e->space = group_part(parts, "space")) == NULL || (e->attrs = group_part(parts, "attrs")) == NULL)
        return -1;
    if (!PyTuple_Check(e->algo) || PyTuple_GET_SIZE(e->algo) != 2
        || to_u64(PyTuple_GET_ITEM(e->algo, 0), &e->algo_ptr, "algo", 0) < 0
        || to_u64(PyTuple_GET_ITEM(e->algo, 1), &e->ws_size, "algo", 1) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "MatmulGroup algo must be the launch's (algo_ptr, workspace size)");
        return -1;
    }
    if (e->ws_size && (e->bound == Py_None || e->space == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "MatmulGroup member with a workspace needs bound and space");
        return -1;
    }
    if (attr_u64(e->handle, g_ptr, stream) < 0)
        return -1;
    if ((flag = group_part(parts, "swap")) == NULL)
        return -1;
    rc = e->swap = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (rc < 0 || (flag = group_part(parts, "c_is_d")) == NULL)
        return -1;
    rc = e->c_is_d = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (rc < 0)
        return -1;
    if (!PyTuple_Check(e->attrs) || PyTuple_GET_SIZE(e->attrs) > GROUP_MAX_ATTRS) {
        PyErr_Format(PyExc_ValueError, "MatmulGroup attrs must be a tuple of at most %d pointer attributes",
                     GROUP_MAX_ATTRS);
        return -1;
    }
    e->nattrs = PyTuple_GET_SIZE(e->attrs);
    for (i = 0; i < e->nattrs; i++) {
        PyObject *attr = PyTuple_GET_ITEM(e->attrs, i), *desc = PyObject_GetAttr(attr, g_desc);
        rc = desc == NULL || attr_u64(desc, g_ptr, &e->attr_desc[i]) < 0
             || attr_u64(attr, g_attr, &e->attr_id[i]) < 0;
        Py_XDECREF(desc);
        if (rc)
            return -1;
    }
    return 0;
}

static PyObject *group_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"members", "set_attr", NULL};
    PyObject *members, *set_attr;
    MatmulGroup *g;
    Py_ssize_t i, n;
    u64 stream;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:MatmulGroup", keywords, &members, &set_attr))
        return NULL;
    if (!PyTuple_Check(members) || PyTuple_GET_SIZE(members) == 0) {
        PyErr_SetString(PyExc_ValueError, "MatmulGroup members must be a non-empty tuple of compiled_parts dicts");
        return NULL;
    }
    n = PyTuple_GET_SIZE(members);
    g = (MatmulGroup *)type->tp_alloc(type, 0);
    if (g == NULL)
        return NULL;
    g->m = PyMem_Calloc((size_t)n, sizeof(GroupMember));
    if (g->m == NULL) {
        Py_DECREF(g);
        return PyErr_NoMemory();
    }
    g->n = n;
    g->vectorcall = group_vectorcall;
    if (to_u64(set_attr, &g->set_attr, "set_attr", 0) < 0) {
        Py_DECREF(g);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (group_member_init(&g->m[i], PyTuple_GET_ITEM(members, i), &stream) < 0) {
            Py_DECREF(g);
            return NULL;
        }
        if (i > 0 && stream != g->stream) {
            PyErr_SetString(PyExc_ValueError, "MatmulGroup members must run on one stream");
            Py_DECREF(g);
            return NULL;
        }
        g->stream = stream;
        if (g->m[i].nattrs && !g->set_attr) {
            PyErr_SetString(PyExc_ValueError, "MatmulGroup with pointer attributes needs set_attr (an address)");
            Py_DECREF(g);
            return NULL;
        }
    }
    return (PyObject *)g;
}

/* 1: member `e` may be launched now (its workspace pointer in e->ws), 0: not, -1: error. */
static int group_member_ready(GroupMember *e)
{
    int ok;

    e->ws = 0;
    if ((ok = launch_open(e->launch, e->algo)) <= 0 || !e->ws_size)
        return ok;
    return workspace_ready(e->bound, e->handle, e->space, e->ws_size, &e->ws);
}

/* Member `e`'s bias pointer attributes set to `pb` where they moved: 0, or -1 with an error set. */
static int group_set_bias(MatmulGroup *g, GroupMember *e, u64 pb)
{
    Py_ssize_t i;
    for (i = 0; i < e->nattrs; i++) {
        PyObject *attr = PyTuple_GET_ITEM(e->attrs, i), *v;
        u64 now, buf = pb;
        int status;
        if (attr_u64(attr, g_value, &now) < 0)
            return -1;
        if (now == pb)
            continue;
        status = ((group_set_attr_fn)(uintptr_t)g->set_attr)(e->attr_desc[i], e->attr_id[i], &buf, 8);
        if (status != 0)
            return launch_failed(e->call, status, "cublasLtMatmulDescSetAttribute");
        if ((v = PyLong_FromUnsignedLongLong(pb)) == NULL || PyObject_SetAttr(attr, g_value, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

static int group_addresses(PyObject *t, Py_ssize_t n, const char *name)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_TypeError, "MatmulGroup %s must be a tuple of %zd addresses", name, n);
        return -1;
    }
    return 0;
}

static PyObject *group_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MatmulGroup *g = (MatmulGroup *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), i;
    PyObject *ta, *tb, *td, *tbias;
    u64 lt, stream, v[FASTCALL_MAX_ARGS];
    int rc;

    if (kwnames != NULL || nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "MatmulGroup takes (lt_handle, stream, a, b, d, bias) positionally");
        return NULL;
    }
    ta = args[2], tb = args[3], td = args[4], tbias = args[5];
    if (to_u64(args[0], &lt, "lt_handle", 0) < 0 || to_u64(args[1], &stream, "stream", 1) < 0
        || group_addresses(ta, g->n, "a") < 0 || group_addresses(tb, g->n, "b") < 0
        || group_addresses(td, g->n, "d") < 0 || (tbias != Py_None && group_addresses(tbias, g->n, "bias") < 0))
        return NULL;
    if (stream != g->stream)
        Py_RETURN_FALSE;
    for (i = 0; i < g->n; i++) { /* every check first: all members launch, or none */
        if (g->m[i].nattrs && tbias == Py_None) {
            PyErr_SetString(PyExc_TypeError, "MatmulGroup members with a bias need the bias addresses");
            return NULL;
        }
        rc = group_member_ready(&g->m[i]);
        if (rc <= 0)
            return rc < 0 ? NULL : Py_NewRef(Py_False);
    }
    for (i = 0; i < g->n; i++) {
        GroupMember *e = &g->m[i];
        FastCall *fc = e->call;
        u64 A, B, D, t;
        if (to_u64(PyTuple_GET_ITEM(ta, i), &A, "a", i) < 0 || to_u64(PyTuple_GET_ITEM(tb, i), &B, "b", i) < 0
            || to_u64(PyTuple_GET_ITEM(td, i), &D, "d", i) < 0)
            return NULL;
        if (e->nattrs) {
            if (to_u64(PyTuple_GET_ITEM(tbias, i), &t, "bias", i) < 0 || group_set_bias(g, e, t) < 0)
                return NULL;
        }
        if (e->swap)
            t = A, A = B, B = t;
        /* cublasLtMatmul's slots, in the launch caller's order: handle, a, b, c, d, algo, ws, ws_size, stream */
        memcpy(v, fc->fixed, sizeof(u64) * (size_t)fc->nargs);
        v[fc->slots[0]] = lt;
        v[fc->slots[1]] = A;
        v[fc->slots[2]] = B;
        v[fc->slots[3]] = e->c_is_d ? D : 0;
        v[fc->slots[4]] = D;
        v[fc->slots[5]] = e->algo_ptr;
        v[fc->slots[6]] = e->ws;
        v[fc->slots[7]] = e->ws_size;
        v[fc->slots[8]] = stream;
        rc = dispatch(fc->fn, fc->nargs, v);
        if (rc != 0)
            return launch_failed(fc, rc, "cublasLtMatmul"), NULL;
    }
    g->calls++;
    Py_RETURN_TRUE;
}

static PyObject *group_get_calls(MatmulGroup *g, void *closure) { return PyLong_FromSsize_t(g->calls); }
static PyObject *group_get_size(MatmulGroup *g, void *closure) { return PyLong_FromSsize_t(g->n); }
static PyObject *group_get_stream(MatmulGroup *g, void *closure) { return PyLong_FromUnsignedLongLong(g->stream); }

static PyGetSetDef group_getset[] = {
    {"calls", (getter)group_get_calls, NULL, "Calls that launched every member.", NULL},
    {"size", (getter)group_get_size, NULL, "The number of members.", NULL},
    {"stream", (getter)group_get_stream, NULL, "The raw stream the members run on.", NULL},
    {NULL},
};

static PyTypeObject MatmulGroupType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.MatmulGroup",
    .tp_basicsize = sizeof(MatmulGroup),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "MatmulGroup(members, set_attr): launches of several planned cublasLtMatmul calls in one "
              "call: group(lt_handle, stream, a, b, d, bias) -> True (all launched) or False (none).",
    .tp_new = group_new,
    .tp_dealloc = (destructor)group_dealloc,
    .tp_traverse = (traverseproc)group_traverse,
    .tp_clear = (inquiry)group_clear,
    .tp_vectorcall_offset = offsetof(MatmulGroup, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getset = group_getset,
};

static int register_matmul_group(PyObject *m)
{
#define GINTERN(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return -1;
    GINTERN(g_ptr, "ptr") GINTERN(g_value, "value") GINTERN(g_desc, "desc") GINTERN(g_attr, "attr")
#undef GINTERN
    if (PyType_Ready(&MatmulGroupType) < 0)
        return -1;
    Py_INCREF(&MatmulGroupType);
    if (PyModule_AddObject(m, "MatmulGroup", (PyObject *)&MatmulGroupType) < 0) {
        Py_DECREF(&MatmulGroupType);
        return -1;
    }
    return 0;
}
/* (end of MatmulGroup) */

/* ================================================================================================ */
/* KernelLauncher (task klaunch, issue #23, block "KernelLauncher"): one launch of an NVRTC kernel
   (nvmath.torch._fp8_cast's cast-transpose family, or any other) in one C call, for
   nvmath._internal.kernel_launch (which builds the object; cuda.core's launch is the pure-Python path).

   Made once per process with the driver's cuLaunchKernel, cuCtxGetCurrent and cuCtxSetCurrent
   addresses, torch's raw current-stream getter (stream(device) -> int) and the argument kinds (a tuple
   of (type, code) pairs: the parameter width of a value of that exact type). A call

       launcher(ctx, device, kernel, grid, block, args[, shared]) -> int

   reads the stream (stream(device)), packs `args` (a tuple, in the kernel's parameter order) by kind --
   'b' 'B' 'h' 'H' 'i' 'I' 'q' 'Q' integers of 1, 2, 4, 8 bytes (the low bytes of the value: a numpy
   scalar is in its type's range; a Python int, 8 bytes, as cuda.core packs it), '?' a bool (1 byte), 'f'
   float32, 'd' float64 -- and calls cuLaunchKernel(kernel, grid, block, shared, stream, params, NULL)
   with context `ctx` current: switched only when another one (or none: torch's autograd thread) is
   current, and restored after, as devices.device_ctx does. `kernel` is a CUfunction or a CUkernel
   handle (cuLaunchKernel takes either). Returns cuLaunchKernel's CUresult (0: launched), or
   KERNEL_LAUNCH_DRIVER_FAILED | CUresult when a context call failed (nothing is launched when the switch
   fails). An argument of a kind not listed raises TypeError, too many arguments ValueError, a value out
   of 64 bits OverflowError -- all before any driver call. The GIL is kept (the calls only enqueue). */

#define KERNEL_LAUNCH_DRIVER_FAILED 0x10000
#define KERNEL_LAUNCH_MAX_ARGS 64
#define KERNEL_LAUNCH_MAX_KINDS 32

typedef int (*cu_launch_fn)(u64, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, u64,
                            void **, void **);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    uintptr_t launch, get, set;
    PyObject *stream;                          /* stream(device) -> int */
    PyObject *kinds;                           /* the constructor's tuple (kept for repr / GC) */
    Py_ssize_t nkinds;
    PyTypeObject *kind_types[KERNEL_LAUNCH_MAX_KINDS]; /* borrowed from `kinds` */
    char kind_codes[KERNEL_LAUNCH_MAX_KINDS];
    Py_ssize_t launches;
} KernelLauncher;

/* The 64-bit pattern of the integer `value` (two's complement for negatives); -1 with an error set. */
static int klaunch_int(PyObject *value, u64 *out, Py_ssize_t i)
{
    PyObject *index = PyNumber_Index(value);
    int overflow;
    long long s;

    if (index == NULL)
        return -1;
    s = PyLong_AsLongLongAndOverflow(index, &overflow);
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_OverflowError, "KernelLauncher: argument %zd does not fit 64 bits", i);
            return -1;
        }
        *out = (u64)u;
        return 0;
    }
    Py_DECREF(index);
    if (overflow < 0 || (s == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "KernelLauncher: argument %zd does not fit 64 bits", i);
        }
        return -1;
    }
    *out = (u64)s;
    return 0;
}

/* Pack args[i] into slot[i] (8 bytes, zeroed first) by its kind; -1 with an error set. */
static int klaunch_pack(KernelLauncher *kl, PyObject *args, u64 *slot)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args), i, k;

    for (i = 0; i < n; i++) {
        PyObject *value = PyTuple_GET_ITEM(args, i);
        PyTypeObject *type = Py_TYPE(value);
        char code = 0;
        u64 bits = 0;
        double d;

        for (k = 0; k < kl->nkinds; k++)
            if (kl->kind_types[k] == type) {
                code = kl->kind_codes[k];
                break;
            }
        slot[i] = 0;
        switch (code) {
        case 'b': case 'B': case 'h': case 'H': case 'i': case 'I': case 'q': case 'Q':
            if (klaunch_int(value, &bits, i) < 0)
                return -1;
            /* little-endian (x86-64, aarch64 Linux): the low bytes are the first ones */
            memcpy(&slot[i], &bits, code == 'b' || code == 'B' ? 1 : code == 'h' || code == 'H' ? 2
                                    : code == 'i' || code == 'I' ? 4 : 8);
            break;
        case '?': {
            int truth = PyObject_IsTrue(value);
            unsigned char byte = (unsigned char)truth;
            if (truth < 0)
                return -1;
            memcpy(&slot[i], &byte, 1);
            break;
        }
        case 'f': case 'd':
            d = PyFloat_AsDouble(value);
            if (d == -1.0 && PyErr_Occurred())
                return -1;
            if (code == 'f') {
                float f = (float)d;
                memcpy(&slot[i], &f, sizeof f);
            } else
                memcpy(&slot[i], &d, sizeof d);
            break;
        default:
            PyErr_Format(PyExc_TypeError, "KernelLauncher: argument %zd is a %.200s, not one of the kinds "
                         "this launcher packs", i, type->tp_name);
            return -1;
        }
    }
    return 0;
}

/* grid or block: a tuple of three ints, each 1 .. 2**32 - 1. */
static int klaunch_dims(PyObject *value, unsigned *out, const char *what)
{
    Py_ssize_t i;

    if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 3) {
        PyErr_Format(PyExc_TypeError, "KernelLauncher: %s must be a tuple of 3 ints", what);
        return -1;
    }
    for (i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(value, i));
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        if (v == 0 || v > 0xFFFFFFFFul) {
            PyErr_Format(PyExc_ValueError, "KernelLauncher: %s sizes must be 1 .. 2**32 - 1, not %lu", what, v);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    return 0;
}

static int klaunch_in_context(KernelLauncher *kl, u64 ctx, u64 kernel, const unsigned *g, const unsigned *b,
                              unsigned shared, u64 stream, void **params)
{
    u64 prev = 0;
    int status, restored;

    status = ((ctx_get_fn)kl->get)(&prev);
    if (status != 0)
        return KERNEL_LAUNCH_DRIVER_FAILED | status;
    if (prev != ctx) {
        status = ((ctx_set_fn)kl->set)(ctx);
        if (status != 0)
            return KERNEL_LAUNCH_DRIVER_FAILED | status;
    }
    status = ((cu_launch_fn)kl->launch)(kernel, g[0], g[1], g[2], b[0], b[1], b[2], shared, stream, params, NULL);
    if (prev != ctx) {
        restored = ((ctx_set_fn)kl->set)(prev);
        if (status == 0 && restored != 0)
            return KERNEL_LAUNCH_DRIVER_FAILED | restored;
    }
    return status;
}

static PyObject *klaunch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    KernelLauncher *kl = (KernelLauncher *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), n, i;
    u64 ctx, kernel, stream, slot[KERNEL_LAUNCH_MAX_ARGS];
    void *params[KERNEL_LAUNCH_MAX_ARGS];
    unsigned grid[3], block[3], shared = 0;
    PyObject *value;
    int status;

    if (kwnames != NULL || nargs < 6 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError,
                        "KernelLauncher(ctx, device, kernel, grid, block, args[, shared]): positional only");
        return NULL;
    }
    if (klaunch_int(args[0], &ctx, 0) < 0 || klaunch_int(args[2], &kernel, 2) < 0
        || klaunch_dims(args[3], grid, "grid") < 0 || klaunch_dims(args[4], block, "block") < 0)
        return NULL;
    if (nargs == 7) {
        unsigned long s = PyLong_AsUnsignedLong(args[6]);
        if (s == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        shared = (unsigned)s;
    }
    if (!PyTuple_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "KernelLauncher: args must be a tuple");
        return NULL;
    }
    n = PyTuple_GET_SIZE(args[5]);
    if (n > KERNEL_LAUNCH_MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "KernelLauncher: %zd arguments; at most %d", n, KERNEL_LAUNCH_MAX_ARGS);
        return NULL;
    }
    if (klaunch_pack(kl, args[5], slot) < 0)
        return NULL;
    value = PyObject_Vectorcall(kl->stream, &args[1], 1, NULL);
    if (value == NULL)
        return NULL;
    status = klaunch_int(value, &stream, 1);
    Py_DECREF(value);
    if (status < 0)
        return NULL;
    for (i = 0; i < n; i++)
        params[i] = &slot[i];
    status = klaunch_in_context(kl, ctx, kernel, grid, block, shared, stream, n ? params : NULL);
    if (status == 0)
        kl->launches++;
    return PyLong_FromLong(status);
}

static PyObject *klaunch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"launch", "ctx_get", "ctx_set", "stream", "kinds", NULL};
    PyObject *launch, *get, *set, *stream, *kinds;
    uintptr_t a[3];
    KernelLauncher *kl;
    Py_ssize_t i, n;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO:KernelLauncher", keywords, &launch, &get, &set, &stream,
                                     &kinds))
        return NULL;
    if (parse_address(launch, &a[0]) < 0 || parse_address(get, &a[1]) < 0 || parse_address(set, &a[2]) < 0)
        return NULL;
    if (!PyCallable_Check(stream)) {
        PyErr_SetString(PyExc_TypeError, "KernelLauncher: stream must be callable (device -> raw stream)");
        return NULL;
    }
    if (!PyTuple_Check(kinds) || (n = PyTuple_GET_SIZE(kinds)) > KERNEL_LAUNCH_MAX_KINDS) {
        PyErr_Format(PyExc_TypeError, "KernelLauncher: kinds must be a tuple of at most %d (type, code) pairs",
                     KERNEL_LAUNCH_MAX_KINDS);
        return NULL;
    }
    kl = (KernelLauncher *)type->tp_alloc(type, 0);
    if (kl == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(kinds, i);
        const char *code;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyType_Check(PyTuple_GET_ITEM(pair, 0))
            || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 1))
            || (code = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 1))) == NULL || strlen(code) != 1
            || strchr("bBhHiIqQ?fd", code[0]) == NULL) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "KernelLauncher: kinds[%zd] must be (type, code), code one of "
                         "b B h H i I q Q ? f d", i);
            Py_DECREF(kl);
            return NULL;
        }
        kl->kind_types[i] = (PyTypeObject *)PyTuple_GET_ITEM(pair, 0);
        kl->kind_codes[i] = code[0];
    }
    kl->vectorcall = klaunch_vectorcall;
    kl->launch = a[0], kl->get = a[1], kl->set = a[2], kl->nkinds = n;
    Py_INCREF(stream), Py_INCREF(kinds);
    kl->stream = stream, kl->kinds = kinds;
    return (PyObject *)kl;
}

static int klaunch_traverse(KernelLauncher *kl, visitproc visit, void *arg)
{
    Py_VISIT(kl->stream);
    Py_VISIT(kl->kinds);
    return 0;
}

static int klaunch_clear(KernelLauncher *kl)
{
    kl->nkinds = 0;
    Py_CLEAR(kl->stream);
    Py_CLEAR(kl->kinds);
    return 0;
}

static void klaunch_dealloc(KernelLauncher *kl)
{
    PyObject_GC_UnTrack(kl);
    klaunch_clear(kl);
    Py_TYPE(kl)->tp_free((PyObject *)kl);
}

/* launcher.run(...): the same call as a built-in method, which profilers see (a call of the object is not). */
static PyObject *klaunch_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return klaunch_vectorcall(self, args, (size_t)nargs, NULL);
}

static PyObject *klaunch_get_launches(KernelLauncher *kl, void *closure) { return PyLong_FromSsize_t(kl->launches); }
static PyObject *klaunch_get_kinds(KernelLauncher *kl, void *closure) { return Py_NewRef(kl->kinds); }

static PyMethodDef klaunch_methods[] = {
    {"run", (PyCFunction)(void (*)(void))klaunch_run, METH_FASTCALL,
     "run(ctx, device, kernel, grid, block, args[, shared]): the call, as a built-in method (seen by profilers)."},
    {NULL},
};

static PyGetSetDef klaunch_getset[] = {
    {"launches", (getter)klaunch_get_launches, NULL, "Launches the driver accepted.", NULL},
    {"kinds", (getter)klaunch_get_kinds, NULL, "The (type, code) pairs arguments are packed by.", NULL},
    {NULL},
};

static PyTypeObject KernelLauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvmath._fastcall.KernelLauncher",
    .tp_basicsize = sizeof(KernelLauncher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "KernelLauncher(launch, ctx_get, ctx_set, stream, kinds): cuLaunchKernel of an NVRTC kernel "
              "in one call: launcher(ctx, device, kernel, grid, block, args[, shared]) -> CUresult "
              "(see nvmath/_fastcall.c).",
    .tp_new = klaunch_new,
    .tp_dealloc = (destructor)klaunch_dealloc,
    .tp_traverse = (traverseproc)klaunch_traverse,
    .tp_clear = (inquiry)klaunch_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(KernelLauncher, vectorcall),
    .tp_methods = klaunch_methods,
    .tp_getset = klaunch_getset,
};

static int register_kernel_launcher(PyObject *m)
{
    if (PyType_Ready(&KernelLauncherType) < 0)
        return -1;
    Py_INCREF(&KernelLauncherType);
    if (PyModule_AddObject(m, "KernelLauncher", (PyObject *)&KernelLauncherType) < 0) {
        Py_DECREF(&KernelLauncherType);
        return -1;
    }
    return PyModule_AddIntConstant(m, "KERNEL_LAUNCH_DRIVER_FAILED", KERNEL_LAUNCH_DRIVER_FAILED);
}
/* ======================================================= end of block "KernelLauncher" (klaunch) */

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
