/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers, whose static functions and types it uses): the FFT hit (FFTHit): torch's stream, the result and the one-call cufftXtExec. */

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

