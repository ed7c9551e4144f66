/* heaprank._accel._state: the C kernels of the state stage: an impression's items in their
 * stored form (encode_items, for heaprank/state/codec.py) and the documents' use records of a
 * memory namespace (doc_stats, for heaprank/state/memory.py).
 *
 * Both copy bytes and numbers without computing any: each result is its Python twin's, byte for
 * byte, or None where the kernel defers.
 */

#include "_kernels.h"

PyDoc_STRVAR(encode_items_doc,
"encode_items(ids, slots, rows, signals, m, /)\n--\n\n"
"The items and signal values of a stored impression (heaprank.state.codec.encode's body), as\n"
"bytes: per shown item its id (varint length, UTF-8) and its row's codes, rows[slots[i]]\n"
"(rows: a dict of codebook rows, a tuple of exact str -> bytes), then signals (a float64 array\n"
"of shape (len(ids), m)) as little-endian float32, row by row. None where an id is not an\n"
"exact encodable str, a row is not an exact tuple of exact str found in rows, or signals is\n"
"anything else.");

#define MAX_ITEMS 256 /* more shown items than this: the Python pass */

/* Whether `row` is an exact tuple of exact str (hashing and comparing it runs no Python code). */
static int
plain_row(PyObject *row)
{
    if (!PyTuple_CheckExact(row)) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); j++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(row, j))) {
            return 0;
        }
    }
    return 1;
}

static Py_ssize_t
varint_size(Py_ssize_t n)
{
    Py_ssize_t size = 1;
    while (n >= 0x80) {
        n >>= 7;
        size++;
    }
    return size;
}

static char *
put_varint(char *out, Py_ssize_t n)
{
    while (n >= 0x80) {
        *out++ = (char)((n & 0x7F) | 0x80);
        n >>= 7;
    }
    *out++ = (char)n;
    return out;
}

/* The items' parts: each id's UTF-8 (cached in the str, which the ids tuple holds) and its
 * row's codes (borrowed from rows: no Python code runs until they are copied). The size of the
 * items' bytes, or -1 where the kernel defers. */
static Py_ssize_t
item_parts(PyObject *ids, PyObject *slots, PyObject *rows, const char **utf8, Py_ssize_t *size,
           PyObject **codes)
{
    Py_ssize_t n = PyTuple_GET_SIZE(ids), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GET_ITEM(ids, i), *row = PyTuple_GET_ITEM(slots, i);
        if (!PyUnicode_CheckExact(id) || !plain_row(row)) {
            return -1;
        }
        utf8[i] = PyUnicode_AsUTF8AndSize(id, &size[i]);
        if (utf8[i] == NULL) { /* a lone surrogate: the Python pass raises its own error */
            PyErr_Clear();
            return -1;
        }
        codes[i] = PyDict_GetItemWithError(rows, row);
        if (codes[i] == NULL || !PyBytes_CheckExact(codes[i])) {
            PyErr_Clear();
            return -1;
        }
        total += varint_size(size[i]) + size[i] + PyBytes_GET_SIZE(codes[i]);
    }
    return total;
}

static PyObject *
encode_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 5, "encode_items")) {
        return NULL;
    }
#if PY_BIG_ENDIAN
    Py_RETURN_NONE; /* the stored floats are little-endian: the Python pass swaps them */
#endif
    PyObject *ids = args[0], *slots = args[1], *rows = args[2];
    if (!PyTuple_CheckExact(ids) || !PyTuple_CheckExact(slots) || !PyDict_CheckExact(rows)
            || !PyLong_CheckExact(args[4]) || PyTuple_GET_SIZE(ids) != PyTuple_GET_SIZE(slots)
            || PyTuple_GET_SIZE(ids) > MAX_ITEMS) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids), m = PyLong_AsSsize_t(args[4]);
    if (m < 0 || m > 255) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (!try_buffer(args[3], &view, "d", 2)) {
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    const char *utf8[MAX_ITEMS];
    Py_ssize_t size[MAX_ITEMS];
    PyObject *codes[MAX_ITEMS];
    Py_ssize_t total = -1;
    if (view.ndim == 2 && view.shape[0] == n && view.shape[1] == m) {
        total = item_parts(ids, slots, rows, utf8, size, codes);
    }
    if (total >= 0) {
        out = PyBytes_FromStringAndSize(NULL, total + 4 * n * m);
    }
    if (out != NULL) { /* a bytes allocation runs no Python code: the parts are still held */
        char *at = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            at = put_varint(at, size[i]);
            memcpy(at, utf8[i], (size_t)size[i]);
            at += size[i];
            memcpy(at, PyBytes_AS_STRING(codes[i]), (size_t)PyBytes_GET_SIZE(codes[i]));
            at += PyBytes_GET_SIZE(codes[i]);
        }
        const double *values = view.buf;
        for (Py_ssize_t v = 0; v < n * m; v++) {
            float f = (float)values[v]; /* the C cast array("f") makes */
            memcpy(at, &f, 4);
            at += 4;
        }
    }
    PyBuffer_Release(&view);
    return made_or_none(out);
}

PyDoc_STRVAR(doc_stats_doc,
"doc_stats(docs, ids, /)\n--\n\n"
"Each id's (last used, use count) in docs (a dict of exact str -> a tuple of two floats; NaN\n"
"and 0.0 for an id not there), as a bytearray of float64: every last use, then every count.\n"
"None where an id is not an exact str or docs holds anything else for it.");

static PyObject *
doc_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 2, "doc_stats")) {
        return NULL;
    }
    PyObject *docs = args[0], *ids = args[1];
    if (!PyDict_CheckExact(docs) || !PyTuple_CheckExact(ids)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 16 * n);
    if (out == NULL) {
        return NULL;
    }
    double *last = (double *)PyByteArray_AS_STRING(out), *count = last + n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GET_ITEM(ids, i);
        if (!PyUnicode_CheckExact(id)) { /* an exact str key: the lookup runs no Python code */
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *record = PyDict_GetItemWithError(docs, id);
        if (record == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            last[i] = Py_NAN;
            count[i] = 0.0;
            continue;
        }
        if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 2
                || !PyFloat_CheckExact(PyTuple_GET_ITEM(record, 0))
                || !PyFloat_CheckExact(PyTuple_GET_ITEM(record, 1))) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        last[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(record, 0));
        count[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(record, 1));
    }
    return out;
}

static PyMethodDef methods[] = {
    {"encode_items", (PyCFunction)(void (*)(void))encode_items, METH_FASTCALL, encode_items_doc},
    {"doc_stats", (PyCFunction)(void (*)(void))doc_stats, METH_FASTCALL, doc_stats_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(state, "C kernels of heaprank's state stage (see heaprank._accel).")
