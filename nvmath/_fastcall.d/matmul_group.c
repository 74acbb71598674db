/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): the FP8 GroupedLinear's per-group GEMMs in one call (MatmulGroup). */

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

