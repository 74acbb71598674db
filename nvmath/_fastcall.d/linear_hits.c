/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): the table of LinearHit entries (LinearHits): lookup, the stateless and backward calls. */

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
static ReadSlot rs_shape, rs_stride, rs_dtype, rs_device, rs_data_ptr, rs_requires_grad, rs_is_conj, rs_locked,
    rs_closed, rs_algo, rs_live, rs_value, rs_size, rs_ptr, rs_bound_stream, rs_space_stream;

static int read_ptr(PyObject *t, u64 *out)
{
    PyObject *v = slot_read(&rs_data_ptr, t, s_data_ptr, 1);
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
    if ((*shape = slot_read(&rs_shape, t, s_shape, 0)) == NULL || (*strides = slot_read(&rs_stride, t, s_stride, 1)) == NULL
        || (*dtype = slot_read(&rs_dtype, t, s_dtype, 0)) == NULL || (*device = slot_read(&rs_device, t, s_device, 0)) == NULL)
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
        PyObject *v = slot_read(&rs_locked, e->lock, s_locked, 1);
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

/* The u64 attribute `name` of `o` (read through `slot`; NULL: the generic read): 0, or -1 with an error
   set. */
static int slot_u64(ReadSlot *slot, PyObject *o, PyObject *name, u64 *out)
{
    PyObject *v = slot ? slot_read(slot, o, name, 0) : PyObject_GetAttr(o, name);
    int rc;
    if (v == NULL)
        return -1;
    rc = to_u64(v, out, "attribute", 0);
    Py_DECREF(v);
    return rc;
}

static int attr_u64(PyObject *o, PyObject *name, u64 *out)
{
    return slot_u64(NULL, o, name, out);
}

/* 1: `launch` (a MatmulLaunch) is open and runs the `algo` tuple it had when the caller was made, 0: not
   (a miss), -1: an error (set). */
static int launch_open(PyObject *launch, PyObject *algo)
{
    PyObject *v = slot_read(&rs_closed, launch, s_closed, 0);
    int ok;
    if (v == NULL)
        return -1;
    ok = v == Py_False;
    Py_DECREF(v);
    if (!ok)
        return 0;
    if ((v = slot_read(&rs_algo, launch, s_algo, 0)) == NULL)
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
    PyObject *v = slot_read(owner == space ? &rs_space_stream : &rs_bound_stream, owner, s_stream, 0);
    u64 size;
    int status;

    if (v == NULL)
        return -1;
    status = v == handle;
    Py_DECREF(v);
    if (!status)
        return 0;
    if (slot_u64(&rs_size, space, s_size, &size) < 0)
        return -1;
    if (size < need)
        return 0;
    return slot_u64(&rs_ptr, space, s_ptr, ws) < 0 ? -1 : 1;
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

    if ((v = slot_read(&rs_live, e->launch, s_live, 0)) == NULL)
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
        if ((v = slot_read(&rs_value, attr, s_value, 0)) == NULL)
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
            if ((v = slot_read(&rs_is_conj, ts[k], s_is_conj, 1)) == NULL)
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
    if (e->ctx_get) { /* the device's primary context must be current (a stricter test than the device) */
        u64 now = 0;
        if (((ctx_get_fn)(uintptr_t)e->ctx_get)(&now) != 0 || now != e->ctx)
            Py_RETURN_NONE;
    }
    else {
        if (call_u64(e->get_device, NULL, &device) < 0)
            return NULL;
        if ((long)device != e->device_id)
            Py_RETURN_NONE; /* another device is current: the launch switches the context */
    }
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
        PyObject *v = slot_read(&rs_requires_grad, ts[i], s_requires_grad, 0);
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

