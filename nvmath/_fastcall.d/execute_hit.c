/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): Matmul.execute's hit (MatmulExecuteHit). */

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

