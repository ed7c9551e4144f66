/* heaprank._accel._candidates: the C kernel of the candidates stage
 * (heaprank/scoring/candidates.py): coerce_columns, the batch coerce_checked builds from clean
 * Candidate objects, in one pass.
 *
 * Clean means: Candidate objects (their four slots read by the offsets of the member
 * descriptors the caller passes) whose id and text are exact non-blank str, whose score is a
 * finite exact int or float on every candidate or none, and whose metadata is None or an
 * exact dict with exact str keys, its shape fields numbers within their bounds or exact str
 * labels. Anything else (plain dicts, tags, int keys, flags) makes the kernel return None and
 * the Python paths decide (and word the error), so the kernel never changes a result or a
 * message.
 *
 * Memory: the kernel holds a tuple of the candidates for the whole call, and strong
 * references to each candidate's parts and chosen metadata values while it converts them
 * (a conversion allocates, and an allocation may run a GC pass whose finalisers run Python
 * code that mutates the caller's objects).
 */

#include "_kernels.h"
#include <math.h>
#include <structmember.h>

/* Field kinds, as heaprank.scoring.candidates passes them (one byte per shape field). */
#define KIND_TIME 'T'   /* epoch seconds: [low, high], then lowered to now */
#define KIND_RANGED 'R' /* a number within [low, high] */
#define KIND_LABEL 'L'  /* a str; "" is None */
/* any other kind: the kernel defers when a candidate gives the field */

#define MAX_FIELDS 32
#define RANK_BITS 3 /* a field code in the reverse table is field * 8 + the key's rank */

/* 1 if a str encodes as UTF-8 (no surrogate code point) and, when `filled`, is not blank
 * (what `not s.strip()` tells). A Latin-1 string holds no surrogate. */
static int
clean_str(PyObject *s, int filled)
{
    int kind = PyUnicode_KIND(s), blank = filled;
    if (kind == PyUnicode_1BYTE_KIND && !filled) {
        return 1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            return 0;
        }
        if (blank && !Py_UNICODE_ISSPACE(c)) {
            blank = 0;
            if (kind == PyUnicode_1BYTE_KIND) {
                return 1;
            }
        }
    }
    return !blank;
}

/* A plain int or float as a finite double: 1 and *out set, 0 for any other type (bool
 * included), an int beyond the float range, or an inf or NaN. Leaves no exception set. */
static int
plain_number(PyObject *v, double *out)
{
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
    }
    else if (PyLong_CheckExact(v)) {
        *out = PyLong_AsDouble(v);
        if (*out == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
    }
    else {
        return 0;
    }
    return isfinite(*out);
}

/* Open-addressing set of str pointers, for duplicate ids (their hashes are cached). */
typedef struct {
    PyObject **slots;
    Py_ssize_t mask;
} id_set;

/* 1 if added, 0 if already present. */
static int
id_set_add(id_set *set, PyObject *s)
{
    Py_hash_t h = PyObject_Hash(s); /* a str's hash cannot fail */
    Py_ssize_t i = (Py_ssize_t)((size_t)mix_key((uint64_t)h) & (size_t)set->mask);
    while (set->slots[i] != NULL) {
        PyObject *other = set->slots[i];
        if (other == s || (PyObject_Hash(other) == h && PyUnicode_Compare(other, s) == 0)) {
            return 0;
        }
        i = (i + 1) & set->mask;
    }
    set->slots[i] = s;
    return 1;
}

/* One call's inputs and what it has made so far. */
typedef struct {
    PyObject *held; /* a tuple of the candidates, held for the whole call */
    PyTypeObject *type;
    Py_ssize_t offset[4]; /* of the id, text, score and metadata slots */
    PyObject *reverse;
    const char *kind;
    Py_ssize_t n_fields, n, scored;
    double low[MAX_FIELDS], high[MAX_FIELDS], now, latest;
    int numeric_at[MAX_FIELDS];
    PyObject *ids, *texts, *floats, *columns;
    double *number; /* the floats' block: the scores, then one row of n per numeric field */
    unsigned long present;
    id_set seen;
} Batch;

static void
batch_release(Batch *b)
{
    PyMem_Free(b->seen.slots);
    Py_CLEAR(b->held);
    Py_CLEAR(b->ids);
    Py_CLEAR(b->texts);
    Py_CLEAR(b->floats);
    Py_CLEAR(b->columns);
}

/* The class and slot offsets from the four member descriptors: 1, or 0 if they are not the
 * object slots of one class. */
static int
read_slots(Batch *b, PyObject *slots)
{
    if (!PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) != 4) {
        return 0;
    }
    for (int t = 0; t < 4; t++) {
        PyObject *d = PyTuple_GET_ITEM(slots, t);
        if (Py_TYPE(d) != &PyMemberDescr_Type) {
            return 0;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
        b->type = ((PyDescrObject *)d)->d_type;
        if ((member->type != T_OBJECT_EX && member->type != T_OBJECT)
                || (t > 0 && b->type != ((PyDescrObject *)PyTuple_GET_ITEM(slots, 0))->d_type)) {
            return 0;
        }
        b->offset[t] = member->offset;
    }
    return 1;
}

/* The fields' kinds and bounds: 1 + the count of numeric fields, or 0 with a TypeError. */
static int
read_fields(Batch *b, PyObject *bounds)
{
    int n_numeric = 0;
    for (Py_ssize_t f = 0; f < b->n_fields; f++) {
        PyObject *pair = PyTuple_GET_ITEM(bounds, f);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "coerce_columns: bounds must be pairs");
            return 0;
        }
        b->low[f] = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 0));
        b->high[f] = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 1));
        if (PyErr_Occurred()) {
            return 0;
        }
        b->numeric_at[f] = (b->kind[f] == KIND_TIME || b->kind[f] == KIND_RANGED) ? ++n_numeric
                                                                                  : 0;
    }
    return 1 + n_numeric;
}

/* A call's inputs read and its columns allotted: 1; 0 (nothing held) where the kernel
 * defers; -1 with an error. */
static int
batch_open(Batch *b, PyObject *const *args)
{
    memset(b, 0, sizeof *b);
    PyObject *kinds = args[3], *bounds = args[4];
    b->reverse = args[2];
    b->now = PyFloat_AsDouble(args[5]);
    b->latest = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyDict_CheckExact(b->reverse) || !PyBytes_CheckExact(kinds)
            || !PyTuple_CheckExact(bounds)) {
        PyErr_SetString(PyExc_TypeError, "coerce_columns: bad arguments");
        return -1;
    }
    b->kind = PyBytes_AS_STRING(kinds);
    b->n_fields = PyBytes_GET_SIZE(kinds);
    if (b->n_fields > MAX_FIELDS || PyTuple_GET_SIZE(bounds) != b->n_fields
            || !read_slots(b, args[1])) {
        return 0;
    }
    int n_rows = read_fields(b, bounds);
    if (n_rows == 0) {
        return -1;
    }
    b->held = as_tuple(args[0]);
    if (b->held == NULL || PyTuple_GET_SIZE(b->held) == 0) {
        Py_CLEAR(b->held);
        return PyErr_Occurred() ? -1 : 0;
    }
    b->n = PyTuple_GET_SIZE(b->held);
    Py_ssize_t cap = 8;
    while (cap < 2 * b->n) {
        cap <<= 1;
    }
    b->seen.slots = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
    b->seen.mask = cap - 1;
    b->ids = PyTuple_New(b->n);
    b->texts = PyTuple_New(b->n);
    b->floats = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * b->n * n_rows);
    b->columns = PyTuple_New(b->n_fields);
    if (b->seen.slots == NULL || b->ids == NULL || b->texts == NULL || b->floats == NULL
            || b->columns == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    for (Py_ssize_t f = 0; f < b->n_fields; f++) {
        PyTuple_SET_ITEM(b->columns, f, Py_NewRef(Py_None));
    }
    b->number = (double *)PyByteArray_AS_STRING(b->floats);
    for (Py_ssize_t j = 0; j < b->n * n_rows; j++) {
        b->number[j] = NAN;
    }
    return 1;
}

/* A candidate's id, text and score checked and kept: 1, or 0 to defer. */
static int
take_parts(Batch *b, Py_ssize_t i, PyObject *id, PyObject *text, PyObject *score)
{
    if (!PyUnicode_CheckExact(id) || !clean_str(id, 1) || !id_set_add(&b->seen, id)) {
        return 0;
    }
    PyTuple_SET_ITEM(b->ids, i, Py_NewRef(id)); /* (the set's pointer: held here from now on) */
    if (!PyUnicode_CheckExact(text) || !clean_str(text, 1)) {
        return 0;
    }
    PyTuple_SET_ITEM(b->texts, i, Py_NewRef(text));
    if (score != Py_None) { /* a finite plain number, on every candidate or none */
        if (!plain_number(score, &b->number[i])) {
            return 0;
        }
        b->scored++;
    }
    return 1;
}

/* Each field's value from its highest-priority key with a value other than None, as strong
 * references in best (given: a bit per field found): 1, or 0 to defer. The walk runs no Python
 * code (exact str keys, looked up in a dict of exact str keys), so its borrowed values stay
 * valid until they are taken. */
static int
locate_fields(const Batch *b, PyObject *meta, PyObject **best, unsigned long *given)
{
    int best_rank[MAX_FIELDS];
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    *given = 0;
    while (PyDict_Next(meta, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0; /* its own hash and == decide, in Python */
        }
        PyObject *code_obj = value == Py_None ? NULL : PyDict_GetItemWithError(b->reverse, key);
        if (code_obj == NULL) {
            continue; /* None, or not a field key (a str key's lookup cannot fail) */
        }
        long code = PyLong_CheckExact(code_obj) ? PyLong_AsLong(code_obj) : -1;
        int f = (int)(code >> RANK_BITS), rank = (int)(code & ((1 << RANK_BITS) - 1));
        if (code < 0 || f >= b->n_fields) {
            PyErr_Clear();
            return 0;
        }
        if (!(*given & (1UL << f)) || rank < best_rank[f]) {
            best[f] = value;
            best_rank[f] = rank;
            *given |= 1UL << f;
        }
    }
    for (int f = 0; f < b->n_fields; f++) {
        if (*given & (1UL << f)) {
            Py_INCREF(best[f]);
        }
    }
    return 1;
}

/* Candidate i's value v of field f put in its column: 1, 0 to defer, -1 on error. */
static int
put_field(Batch *b, Py_ssize_t i, int f, PyObject *v)
{
    char k = b->kind[f];
    if (k == KIND_TIME || k == KIND_RANGED) {
        double x, top = k == KIND_TIME ? b->latest : b->high[f];
        if (!plain_number(v, &x) || x < b->low[f] || x > top) {
            return 0;
        }
        b->number[(Py_ssize_t)b->numeric_at[f] * b->n + i] = k == KIND_TIME && x > b->now
            ? b->now : x; /* a time within the clock-skew tolerance is read as now */
        b->present |= 1UL << f;
        return 1;
    }
    if (k != KIND_LABEL || !PyUnicode_CheckExact(v) || !clean_str(v, 0)) {
        return 0;
    }
    PyObject *column = PyTuple_GET_ITEM(b->columns, f);
    if (column == Py_None) { /* the first candidate to give it: None everywhere else */
        column = PyTuple_New(b->n);
        if (column == NULL) {
            return -1;
        }
        for (Py_ssize_t j = 0; j < b->n; j++) {
            PyTuple_SET_ITEM(column, j, Py_NewRef(Py_None));
        }
        PyTuple_SET_ITEM(b->columns, f, column);
        Py_DECREF(Py_None);
        b->present |= 1UL << f;
    }
    PyObject *old = PyTuple_GET_ITEM(column, i);
    PyTuple_SET_ITEM(column, i, Py_NewRef(PyUnicode_GET_LENGTH(v) ? v : Py_None));
    Py_DECREF(old);
    return 1;
}

/* Candidate i's metadata put in the columns: 1, 0 to defer, -1 on error. */
static int
take_metadata(Batch *b, Py_ssize_t i, PyObject *meta)
{
    if (meta == Py_None) {
        return 1;
    }
    PyObject *best[MAX_FIELDS];
    unsigned long given;
    if (!PyDict_CheckExact(meta) || !locate_fields(b, meta, best, &given)) {
        return 0;
    }
    int ok = 1;
    for (int f = 0; f < b->n_fields; f++) {
        if (given & (1UL << f)) {
            ok = ok > 0 ? put_field(b, i, f, best[f]) : ok;
            Py_DECREF(best[f]);
        }
    }
    return ok;
}

/* Every candidate read into the batch: 1, 0 to defer, -1 on error. */
static int
take_candidates(Batch *b)
{
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PREFETCH(PyTuple_GET_ITEM(b->held, i));
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *it = PyTuple_GET_ITEM(b->held, i), *part[4];
        if (Py_TYPE(it) != b->type) {
            return 0;
        }
        int whole = 1;
        for (int t = 0; t < 4; t++) {
            part[t] = Py_XNewRef(*(PyObject **)((char *)it + b->offset[t]));
            whole = whole && part[t] != NULL;
        }
        int ok = whole && take_parts(b, i, part[0], part[1], part[2]);
        if (ok > 0) {
            ok = take_metadata(b, i, part[3]);
        }
        for (int t = 0; t < 4; t++) {
            Py_XDECREF(part[t]);
        }
        if (ok <= 0) {
            return ok;
        }
    }
    return b->scored == 0 || b->scored == b->n;
}

PyDoc_STRVAR(coerce_columns_doc,
"coerce_columns(items, slots, reverse, kinds, bounds, now, latest, /)\n"
"--\n\n"
"The columns heaprank.scoring.candidates.coerce_checked builds from clean Candidate objects,\n"
"or None.\n\n"
"items: a list or tuple of objects of the class whose id, text, score and metadata slots\n"
"are the member descriptors `slots`. reverse: metadata key -> field * 8 + the key's rank\n"
"among the field's keys. kinds: one kind byte per field; bounds: (low, high) per field\n"
"(inclusive; a time's high is latest, and a time past now is read as now).\n"
"Returns (items, ids, texts, floats, present, columns): items as a tuple; floats is a\n"
"bytearray of float64, the scores then one block of n per numeric field in field order (NaN\n"
"where absent); present has bit f set when some candidate gives field f; columns[f] is the\n"
"tuple of each label field given, else None.");

static PyObject *
coerce_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 7, "coerce_columns")) {
        return NULL;
    }
    Batch b;
    int ok = batch_open(&b, args);
    if (ok > 0) {
        ok = take_candidates(&b);
    }
    PyObject *out = NULL;
    if (ok > 0) {
        out = Py_BuildValue("(OOOOkO)", b.held, b.ids, b.texts, b.floats, b.present, b.columns);
    }
    else if (ok == 0) {
        out = Py_NewRef(Py_None);
    }
    batch_release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"coerce_columns", (PyCFunction)(void (*)(void))coerce_columns, METH_FASTCALL,
     coerce_columns_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(candidates, "The C kernel of heaprank's candidates stage (see heaprank._accel).")
