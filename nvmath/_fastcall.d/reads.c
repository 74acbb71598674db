/* Part of nvmath/_fastcall.c (one translation unit: included there, in order, after the shared
   helpers): attribute reads and no-argument method calls through the type's own descriptor. */

/* ================================================================================================ */
/* The hits read a dozen attributes of torch tensors per call (shape, dtype, device, requires_grad, and
   the results of stride() and data_ptr()). PyObject_GetAttr and PyObject_CallMethodNoArgs look the name
   up in the type on every call (and, for a method, in the instance's __dict__ first, where a tensor
   has one); a ReadSlot remembers, for the last type it saw, the descriptor the name resolves to on the
   type, and calls it directly: a getset descriptor's getter or a __slots__ member's read (what GetAttr
   calls for these data descriptors), or a method descriptor with the object as its first argument
   (what the method call would run, less an instance attribute of the same name, which no caller here
   wants).

   A slot is re-resolved when it sees another type, and falls back to the generic call for a name that
   resolves to anything else (a Python property, a function, nothing): the result is always what the
   generic call would give for an object without instance attributes of that name. It holds strong
   references to its type and descriptor (a few static slots for the life of the module). */

typedef struct {
    PyTypeObject *type;  /* the type the descriptor was resolved on (NULL: none yet) */
    PyObject *descr;     /* the descriptor (NULL: use the generic call) */
    int kind;            /* 1: a getset descriptor, 2: a method descriptor, 3: a member, 0: generic */
} ReadSlot;

static void read_slot_bind(ReadSlot *s, PyTypeObject *tp, PyObject *name)
{
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name); /* (a descriptor on its own type: itself) */
    int kind = 0;
    if (d == NULL)
        PyErr_Clear();
    else if (Py_IS_TYPE(d, &PyGetSetDescr_Type) && ((PyGetSetDescrObject *)d)->d_getset->get != NULL
             && PyType_IsSubtype(tp, PyDescr_TYPE(d)))
        kind = 1;
    else if (Py_IS_TYPE(d, &PyMethodDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(d)))
        kind = 2;
    else if (Py_IS_TYPE(d, &PyMemberDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(d)))
        kind = 3;
    Py_XDECREF(s->descr);
    Py_XDECREF(s->type);
    Py_INCREF(tp);
    s->type = tp;
    s->kind = kind;
    s->descr = kind ? d : NULL;
    if (!kind)
        Py_XDECREF(d);
}

/* `o.name` (call 0) or `o.name()` (call 1): a new reference, or NULL with an error set. */
static PyObject *slot_read(ReadSlot *s, PyObject *o, PyObject *name, int call)
{
    if (s->type != Py_TYPE(o))
        read_slot_bind(s, Py_TYPE(o), name);
    if (s->kind == 1 && !call) {
        PyGetSetDef *g = ((PyGetSetDescrObject *)s->descr)->d_getset;
        return g->get(o, g->closure);
    }
    if (s->kind == 2 && call)
        return PyObject_Vectorcall(s->descr, &o, 1, NULL);
    if (s->kind == 3 && !call)
        return PyMember_GetOne((const char *)o, ((PyMemberDescrObject *)s->descr)->d_member);
    return call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
}
