/* heaprank._accel._rank: the C kernels of the rank stage (heaprank/scoring/rank.py): the signal
 * matrix (columns), the order best first (best_first), the shown rows' values (take), and the
 * ranked results themselves (instances: their slots set in one pass).
 *
 * They move numbers, and compare them, without computing any: each result is its numpy
 * twin's, bit for bit. Numbers cross as buffers (exported for the whole call, so their memory
 * cannot move), with no numpy C API.
 */

#include "_kernels.h"
#include <structmember.h>

PyDoc_STRVAR(columns_doc,
"columns(n, values, at, /)\n--\n\n"
"The matrix whose column j holds values[j], a float (in every row) or a float64 array of n, as\n"
"a bytearray of float64, row by row: n rows, or with at (an int64 array of positions, else\n"
"None) the rows at[0], at[1], ... only. None for anything else (a position out of range\n"
"included).");

#define MAX_COLUMNS 16

static PyObject *
columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 3, "columns")) {
        return NULL;
    }
    if (!PyLong_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]), m = PyTuple_GET_SIZE(args[1]), held = 0;
    if (n < 0 || m > MAX_COLUMNS) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer at_view, view[MAX_COLUMNS];
    const int64_t *at = NULL;
    Py_ssize_t rows = n;
    if (args[2] != Py_None) {
        if (!try_buffer(args[2], &at_view, "lq", 1)) {
            Py_RETURN_NONE;
        }
        at = at_view.buf;
        rows = at_view.shape[0];
    }
    const double *from[MAX_COLUMNS];
    double constant[MAX_COLUMNS];
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; at != NULL && i < rows; i++) {
        if (at[i] < 0 || at[i] >= n) {
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *v = PyTuple_GET_ITEM(args[1], j);
        from[j] = NULL;
        if (PyFloat_CheckExact(v)) {
            constant[j] = PyFloat_AS_DOUBLE(v);
            continue;
        }
        if (!try_buffer(v, &view[held], "d", 1)) {
            goto done;
        }
        from[j] = view[held].buf;
        if (view[held++].shape[0] != n) {
            goto done;
        }
    }
    if (m > 0 && rows > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(double) / m) {
        goto done;
    }
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * rows * m);
    if (out != NULL) {
        double *r = (double *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t i = 0; i < rows; i++) {
            Py_ssize_t row = at == NULL ? i : (Py_ssize_t)at[i];
            for (Py_ssize_t j = 0; j < m; j++) {
                *r++ = from[j] == NULL ? constant[j] : from[j][row];
            }
        }
    }
done:
    for (Py_ssize_t h = 0; h < held; h++) {
        PyBuffer_Release(&view[h]);
    }
    if (at != NULL) {
        PyBuffer_Release(&at_view);
    }
    return made_or_none(out);
}

PyDoc_STRVAR(best_first_doc,
"best_first(score, tie, /)\n--\n\n"
"numpy.lexsort((-tie, -score)) of two float64 arrays of one length with no NaN, as a bytearray\n"
"of int64: the positions by score, highest first, ties by tie, highest first, then by\n"
"position. None for anything else.");

typedef struct {
    double score, tie;
    int64_t at;
} Ranked3;

/* Whether x goes before y: a higher score, or the same score and a higher tie. */
static inline int
ranks_before(const Ranked3 *x, const Ranked3 *y)
{
    return x->score > y->score || (x->score == y->score && x->tie > y->tie);
}

/* A stable sort of a[0..n) by ranks_before (equal items keep their order), bottom-up merges
 * through b (n items too): insertion sorts of runs of 8, then merges of doubling width. Returns
 * where the sorted items are (a or b). */
static Ranked3 *
merge_sort(Ranked3 *a, Ranked3 *b, Py_ssize_t n)
{
    const Py_ssize_t run = 8;
    for (Py_ssize_t lo = 0; lo < n; lo += run) {
        Py_ssize_t hi = lo + run < n ? lo + run : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            Ranked3 item = a[i];
            Py_ssize_t j = i;
            for (; j > lo && ranks_before(&item, &a[j - 1]); j--) {
                a[j] = a[j - 1];
            }
            a[j] = item;
        }
    }
    for (Py_ssize_t width = run; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n;
            Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                /* the right run's item goes first only when strictly before: stability */
                b[k++] = ranks_before(&a[j], &a[i]) ? a[j++] : a[i++];
            }
            while (i < mid) {
                b[k++] = a[i++];
            }
            while (j < hi) {
                b[k++] = a[j++];
            }
        }
        Ranked3 *swap = a;
        a = b;
        b = swap;
    }
    return a;
}

static PyObject *
best_first(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 2, "best_first")) {
        return NULL;
    }
    Py_buffer score_view, tie_view;
    if (!try_buffer(args[0], &score_view, "d", 1)) {
        Py_RETURN_NONE;
    }
    if (!try_buffer(args[1], &tie_view, "d", 1)) {
        PyBuffer_Release(&score_view);
        Py_RETURN_NONE;
    }
    Py_ssize_t n = score_view.shape[0];
    const double *score = score_view.buf, *tie = tie_view.buf;
    int ok = tie_view.shape[0] == n && (size_t)n < PY_SSIZE_T_MAX / 2 / sizeof(Ranked3);
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        ok = score[i] == score[i] && tie[i] == tie[i];
    }
    PyObject *out = NULL;
    Ranked3 *work = ok ? PyMem_Malloc(sizeof(Ranked3) * 2 * (size_t)(n > 0 ? n : 1)) : NULL;
    if (ok && work == NULL) {
        PyErr_NoMemory();
    }
    if (work != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            work[i].score = score[i];
            work[i].tie = tie[i];
            work[i].at = (int64_t)i;
        }
        const Ranked3 *sorted = merge_sort(work, work + n, n);
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * n);
        if (out != NULL) {
            int64_t *order = (int64_t *)PyByteArray_AS_STRING(out);
            for (Py_ssize_t i = 0; i < n; i++) {
                order[i] = sorted[i].at;
            }
        }
        PyMem_Free(work);
    }
    PyBuffer_Release(&score_view);
    PyBuffer_Release(&tie_view);
    return made_or_none(out);
}

PyDoc_STRVAR(take_doc,
"take(at, columns, /)\n--\n\n"
"[column[at].tolist() for column in columns] for an int64 array of positions and a tuple of\n"
"C-contiguous float64 or int64 arrays (1-d, or 2-d: a list of each row's values), in one\n"
"pass. None for anything else (a position out of range included).");

/* One value of a float64 ('d') or int64 array as tolist() gives it. */
static PyObject *
item_object(const char *at, char format)
{
    if (format == 'd') {
        return PyFloat_FromDouble(*(const double *)at);
    }
    return PyLong_FromLongLong((long long)*(const int64_t *)at);
}

/* The list column[at].tolist() of one exported array (1-d: its values; 2-d: a list per row),
 * or NULL with the error raised. */
static PyObject *
column_list(const Py_buffer *v, const int64_t *at, Py_ssize_t k)
{
    const char *f = v->format == NULL ? "B" : v->format;
    char format = (*f == '<' || *f == '=' || *f == '@') ? f[1] : f[0];
    Py_ssize_t width = v->ndim == 2 ? v->shape[1] : 1;
    PyObject *column = PyList_New(k);
    for (Py_ssize_t i = 0; i < k && column != NULL; i++) {
        const char *row = (const char *)v->buf + (size_t)at[i] * (size_t)width * 8;
        PyObject *value;
        if (v->ndim == 1) {
            value = item_object(row, format);
        }
        else {
            value = PyList_New(width);
            for (Py_ssize_t c = 0; c < width && value != NULL; c++) {
                PyObject *x = item_object(row + c * 8, format);
                if (x == NULL) {
                    Py_CLEAR(value);
                }
                else {
                    PyList_SET_ITEM(value, c, x);
                }
            }
        }
        if (value == NULL) {
            Py_CLEAR(column);
        }
        else {
            PyList_SET_ITEM(column, i, value);
        }
    }
    return column;
}

static PyObject *
take(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 2, "take")) {
        return NULL;
    }
    if (!PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) > MAX_COLUMNS) {
        Py_RETURN_NONE;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(args[1]), held = 0;
    Py_buffer at_view, view[MAX_COLUMNS];
    if (!try_buffer(args[0], &at_view, "lq", 1)) {
        Py_RETURN_NONE;
    }
    const int64_t *at = at_view.buf;
    Py_ssize_t k = at_view.shape[0];
    PyObject *out = NULL;
    int ok = 1;
    for (Py_ssize_t j = 0; j < m && ok; j++) {
        ok = try_buffer(PyTuple_GET_ITEM(args[1], j), &view[held], "dlq", 2);
        held += ok;
        for (Py_ssize_t i = 0; i < k && ok; i++) {
            ok = at[i] >= 0 && at[i] < view[held - 1].shape[0];
        }
    }
    if (ok) {
        out = PyList_New(m);
    }
    for (Py_ssize_t j = 0; j < m && out != NULL; j++) {
        PyObject *column = column_list(&view[j], at, k);
        if (column == NULL) {
            Py_CLEAR(out);
        }
        else {
            PyList_SET_ITEM(out, j, column);
        }
    }
    for (Py_ssize_t h = 0; h < held; h++) {
        PyBuffer_Release(&view[h]);
    }
    PyBuffer_Release(&at_view);
    return made_or_none(out);
}

PyDoc_STRVAR(instances_doc,
"instances(cls, slots, rows, /)\n--\n\n"
"A tuple of new instances of cls, one per row of rows (a tuple of tuples), with slot slots[j]\n"
"(a member descriptor of cls itself) set to row[j], without calling __init__: what\n"
"object.__new__(cls) and slots[j].__set__(item, row[j]) for each j give. None where cls has\n"
"its own __new__ or is not a heap type, where a descriptor is not a writable object slot of\n"
"cls or is named twice, or where a row is not a tuple of len(slots) values.");

#define MAX_SLOTS 16

/* The byte offsets of `slots` in instances of `type`, or 0 where it defers (see above). */
static int
slot_offsets(PyTypeObject *type, PyObject *slots, Py_ssize_t *offset)
{
    Py_ssize_t n = PyTuple_GET_SIZE(slots);
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) || type->tp_new != PyBaseObject_Type.tp_new
            || n > MAX_SLOTS) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *descr = PyTuple_GET_ITEM(slots, j);
        if (Py_TYPE(descr) != &PyMemberDescr_Type) {
            return 0;
        }
        PyMemberDescrObject *member = (PyMemberDescrObject *)descr;
        if (member->d_common.d_type != type || member->d_member->type != T_OBJECT_EX
                || (member->d_member->flags & READONLY)) {
            return 0;
        }
        offset[j] = member->d_member->offset;
        for (Py_ssize_t i = 0; i < j; i++) {
            if (offset[i] == offset[j]) {
                return 0; /* named twice: setting it again would drop a value mid-pass */
            }
        }
    }
    return 1;
}

static PyObject *
instances(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 3, "instances")) {
        return NULL;
    }
    if (!PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2])) {
        Py_RETURN_NONE;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *slots = args[1], *rows = args[2]; /* tuples: nothing can change their items */
    Py_ssize_t offset[MAX_SLOTS], m = PyTuple_GET_SIZE(slots), n = PyTuple_GET_SIZE(rows);
    if (!slot_offsets(type, slots, offset)) {
        Py_RETURN_NONE;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PyTuple_GET_ITEM(rows, r);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != m) {
            Py_RETURN_NONE;
        }
    }
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t r = 0; r < n && out != NULL; r++) {
        /* The allocation may run a GC pass; it reads nothing of ours that Python can change. */
        PyObject *item = type->tp_alloc(type, 0);
        if (item == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyObject *row = PyTuple_GET_ITEM(rows, r);
        for (Py_ssize_t j = 0; j < m; j++) { /* every slot of a new object is NULL */
            *(PyObject **)((char *)item + offset[j]) = Py_NewRef(PyTuple_GET_ITEM(row, j));
        }
        PyTuple_SET_ITEM(out, r, item);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"columns", (PyCFunction)(void (*)(void))columns, METH_FASTCALL, columns_doc},
    {"best_first", (PyCFunction)(void (*)(void))best_first, METH_FASTCALL, best_first_doc},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, take_doc},
    {"instances", (PyCFunction)(void (*)(void))instances, METH_FASTCALL, instances_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(rank, "C kernels of heaprank's rank stage (see heaprank._accel).")
