/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): the NVRTC kernel launcher (KernelLauncher). */

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

