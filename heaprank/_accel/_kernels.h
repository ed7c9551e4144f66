/* What both kernel modules share: their module slots, a key's home in a table, and the
 * argument checks (heaprank/_accel/_candidates.c and _features.c include this header).
 *
 * The rules every kernel keeps (heaprank/_accel/__init__.py says why):
 * - A kernel only gives what its Python twin gives, or None (or False) where it defers.
 * - Every sequence a kernel iterates is one it holds: a tuple (immutable, held by the call's
 *   arguments or copied from a list by as_tuple), or a buffer it has exported (while exported,
 *   a bytearray cannot be resized under it).
 * - No borrowed pointer is kept across a call that can run Python code: a comparison of
 *   objects that are not exact str or int (a __eq__, a __hash__), or an allocation of a
 *   container (a tuple, list, set or dict may start a GC pass, whose finalisers run Python).
 *   Values read before such a call are held by strong references; sizes are read again after.
 * - No object pointer is read from a buffer Python can write: a table holds indexes into a
 *   list the kernel receives and bounds-checks.
 */

#ifndef HEAPRANK_KERNELS_H
#define HEAPRANK_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A hint to start loading what a later pass reads: the candidates' objects lie scattered in
 * memory, and on a request path most of them are out of the CPU caches. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define PREFETCH(p) ((void)(p))
#endif

/* The home of a key in an open-addressing table: splitmix64's finaliser, so that keys that
 * differ only in their high bits (a row key is slot * 2**17 + rest) spread over every bucket.
 * heaprank/_accel/tables.py homes its entries with the same function (`home`). */
static inline uint64_t
mix_key(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* The slots every kernel module declares besides its own: one module object per interpreter
 * (its state lives in the module, no static globals), and, on a free-threaded build, that it
 * needs the GIL. The kernels read the caller's lists, dicts and tables without locks of their
 * own, and heaprank's feature space reads its tables lock-free because one kernel call is
 * atomic under the GIL; so the interpreter keeps the GIL on while a kernel module is loaded.
 * Each slot is guarded by the macro that names it, so the modules build on 3.10 to 3.13+. */
#ifdef Py_mod_multiple_interpreters
#define KERNEL_INTERPRETERS_SLOT \
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#else
#define KERNEL_INTERPRETERS_SLOT
#endif
#ifdef Py_mod_gil
#define KERNEL_GIL_SLOT {Py_mod_gil, Py_MOD_GIL_USED},
#else
#define KERNEL_GIL_SLOT
#endif
#define KERNEL_SLOTS KERNEL_INTERPRETERS_SLOT KERNEL_GIL_SLOT {0, NULL}

/* The definition and init function of the module heaprank._accel._<stage>, without state
 * (multi-phase init; its functions in `methods`). */
#define KERNEL_MODULE(stage, doc)                                                          \
    static PyModuleDef_Slot slots[] = {KERNEL_SLOTS};                                      \
    static struct PyModuleDef module_def = {                                               \
        PyModuleDef_HEAD_INIT,                                                             \
        .m_name = "heaprank._accel._" #stage,                                              \
        .m_doc = doc,                                                                      \
        .m_size = 0,                                                                       \
        .m_methods = methods,                                                              \
        .m_slots = slots,                                                                  \
    };                                                                                     \
    PyMODINIT_FUNC PyInit__##stage(void)                                                   \
    {                                                                                      \
        return PyModuleDef_Init(&module_def);                                              \
    }

/* Whether a kernel was given its count of arguments (a TypeError naming it if not). */
static inline int
takes(Py_ssize_t nargs, Py_ssize_t expected, const char *kernel)
{
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd arguments, got %zd", kernel, expected,
                     nargs);
        return 0;
    }
    return 1;
}

/* A new reference to a tuple of the items of an exact list or tuple (the tuple itself, or a
 * copy of the list), or NULL: with an exception set on an error, with none for anything else.
 * Not PyList_AsTuple: it reads the list's items after allocating the tuple, and the allocation
 * may run a GC pass whose finalisers change the list (CPython 3.10-3.13). Here the list's size
 * is read again after the allocation, and a list that changed is deferred. */
static inline PyObject *
as_tuple(PyObject *seq)
{
    if (PyTuple_CheckExact(seq)) {
        return Py_NewRef(seq);
    }
    if (!PyList_CheckExact(seq)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(seq);
    PyObject *copy = PyTuple_New(n);
    if (copy == NULL || PyList_GET_SIZE(seq) != n) {
        Py_XDECREF(copy);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* no Python code runs in this loop */
        PyTuple_SET_ITEM(copy, i, Py_NewRef(PyList_GET_ITEM(seq, i)));
    }
    return copy;
}

#endif /* HEAPRANK_KERNELS_H */
