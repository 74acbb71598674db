/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): the Linear-layer hit's entry (LinearHit): its key, checks and launch. */

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
   code or release the GIL (torch's attribute reads, grad mode, stream, device (or, with `ctx_get`, the
   driver's current context, which must be the device's primary one) and capture queries, the
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
    u64 ctx_get, ctx;                          /* cuCtxGetCurrent's address and the device's primary
                                                  context: the current-device check without Python (0:
                                                  get_device() is asked instead) */
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
        "after", "attrs", "set_attr", "lock", "scalars", "conj", "kind", "bind_memo", "aux_alloc", "ctx_get",
        "ctx", NULL};
    PyObject *o[47];
    LinearHit *h;
    Py_ssize_t i, n;
    u64 thread, device_id, scalar_addr[2] = {0, 0};
    long kind;

    memset(o, 0, sizeof o);
    if (!PyArg_ParseTupleAndKeywords(args, kwds,
            "|$OOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOOO:LinearHit", keywords,
            &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12],
            &o[13], &o[14], &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22], &o[23], &o[24],
            &o[25], &o[26], &o[27], &o[28], &o[29], &o[30], &o[31], &o[32], &o[33], &o[34], &o[35], &o[36],
            &o[37], &o[38], &o[39], &o[40], &o[41], &o[42], &o[43], &o[44], &o[45], &o[46]))
        return NULL;
    for (i = 0; i < 39; i++) /* (the rest are optional: the stateless matmuls' checks, kind, aux_alloc, ctx) */
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
        || (o[45] != NULL && u64_arg(o[45], &h->ctx_get, "ctx_get") < 0)
        || (o[46] != NULL && u64_arg(o[46], &h->ctx, "ctx") < 0)
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

