/* heaprank._accel._candidates: the C kernel of the candidates stage
 * (heaprank/scoring/candidates.py): coerce_columns, the batch coerce_checked builds from clean
 * candidates, in one pass.
 *
 * Clean means: Candidate objects (read by their slots' offsets) or plain dicts with only the
 * keys id, text, score and metadata, whose values and metadata are exact str, int, float,
 * bool, None, and lists or tuples of str, each within what coerce_checked accepts without a
 * flag. Anything else makes the kernel return None, and coerce_checked decides (and words the
 * error), so the kernel never changes a result or a message.
 *
 * Memory: the kernel holds a tuple of the candidates for the whole call, and strong
 * references to each candidate's parts and chosen metadata values while it converts them
 * (a conversion allocates, and an allocation may run a GC pass whose finalisers run Python
 * code that mutates the caller's objects). Dict keys must be exact str: comparing them runs
 * no Python code.
 */

#include "_kernels.h"
#include <math.h>
#include <structmember.h>

/* Field kinds, as heaprank.scoring.candidates passes them (one byte per shape field). */
#define KIND_TIME 'T'     /* epoch seconds: [low, high], then lowered to now */
#define KIND_RANGED 'R'   /* a number within [low, high] */
#define KIND_LABEL 'L'    /* str or None; "" is None */
#define KIND_INTLABEL 'I' /* str, int (as its decimal string) or None; "" is None */
#define KIND_TAGS 'G'     /* None, a str, or a list or tuple of str: a frozenset without "" */
#define KIND_FLAG 'F'     /* None (False) or a bool */

#define MAX_FIELDS 32
#define RANK_BITS 3 /* a field code in the reverse table is field * 8 + the key's rank */

/* The module's state: the four top-level names, and the slot offsets of the Candidate class
 * (a slots dataclass), read once per class. */
typedef struct {
    PyObject *names[4]; /* "id", "text", "score", "metadata" */
    PyTypeObject *candidate_type;
    Py_ssize_t offset[4];
} State;

#define TOP_ID 0
#define TOP_TEXT 1
#define TOP_SCORE 2
#define TOP_METADATA 3

static const char *const TOP_NAMES[4] = {"id", "text", "score", "metadata"};

static State *
state_of(PyObject *module)
{
    return (State *)PyModule_GetState(module);
}

/* 1 if a str encodes as UTF-8: no surrogate code point (only UCS-2/UCS-4 strings can hold
 * one; ASCII and Latin-1 strings never do). */
static int
encodable(PyObject *s)
{
    int kind = PyUnicode_KIND(s);
    if (PyUnicode_IS_ASCII(s) || kind == PyUnicode_1BYTE_KIND) {
        return 1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            return 0;
        }
    }
    return 1;
}

/* 1 if a str is empty or whitespace only (what `not s.strip()` tells). */
static int
blank(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) {
            return 0;
        }
    }
    return 1;
}

/* A plain int or float as a double: 1 and *out set, 0 for any other type (bool included) or
 * an int beyond the float range. Never leaves an exception set. */
static int
plain_number(PyObject *v, double *out)
{
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (PyLong_CheckExact(v)) {
        double d = PyLong_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *out = d;
        return 1;
    }
    return 0;
}

/* Open-addressing set of str pointers, for duplicate ids (their hashes are cached). */
typedef struct {
    PyObject **slots;
    Py_ssize_t mask;
} id_set;

/* 1 if added, 0 if already present, -1 on error (memory). */
static int
id_set_add(id_set *set, PyObject *s)
{
    Py_hash_t h = PyObject_Hash(s); /* a str's hash cannot fail */
    Py_ssize_t i = (Py_ssize_t)((size_t)mix_key((uint64_t)h) & (size_t)set->mask);
    while (set->slots[i] != NULL) {
        PyObject *other = set->slots[i];
        if (other == s || (PyUnicode_GET_LENGTH(other) == PyUnicode_GET_LENGTH(s)
                           && PyObject_Hash(other) == h && PyUnicode_Compare(other, s) == 0)) {
            return 0;
        }
        i = (i + 1) & set->mask;
    }
    set->slots[i] = s;
    return 1;
}

/* The label value as the batch holds it: a new reference to a str (never ""), Py_None (new
 * reference) for None or "", or NULL for a value the kernel does not take. */
static PyObject *
label_value(PyObject *v, int ints)
{
    if (v == Py_None) {
        Py_RETURN_NONE;
    }
    if (PyUnicode_CheckExact(v)) {
        if (!encodable(v)) {
            return NULL;
        }
        if (PyUnicode_GET_LENGTH(v) == 0) {
            Py_RETURN_NONE;
        }
        Py_INCREF(v);
        return v;
    }
    if (ints && PyLong_CheckExact(v)) {
        PyObject *s = PyObject_Str(v);
        if (s == NULL) {
            PyErr_Clear();
        }
        return s;
    }
    return NULL;
}

/* A tags value as the batch holds it (a new reference to a frozenset without ""), or NULL. */
static PyObject *
tags_value(PyObject *v, PyObject *no_tags)
{
    if (v == Py_None) {
        Py_INCREF(no_tags);
        return no_tags;
    }
    PyObject *set = PySet_New(NULL);
    if (set == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (PyUnicode_CheckExact(v)) {
        if (!encodable(v)) {
            goto fail;
        }
        if (PyUnicode_GET_LENGTH(v) && PySet_Add(set, v) < 0) {
            goto fail;
        }
    }
    else if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        PyObject **items = PySequence_Fast_ITEMS(v);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *tag = items[i];
            if (!PyUnicode_CheckExact(tag) || !encodable(tag)) {
                goto fail;
            }
            if (PyUnicode_GET_LENGTH(tag) && PySet_Add(set, tag) < 0) {
                goto fail;
            }
        }
    }
    else {
        goto fail;
    }
    PyObject *out = PyFrozenSet_New(set);
    Py_DECREF(set);
    if (out == NULL) {
        PyErr_Clear();
    }
    return out;
fail:
    PyErr_Clear();
    Py_DECREF(set);
    return NULL;
}

/* The offset of a Candidate class's slot `name` (an object member): 1, or 0 if it has none. */
static int
slot_offset(PyTypeObject *type, PyObject *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemWithError(type->tp_dict, name); /* str keys only */
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        PyErr_Clear();
        return 0;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX && member->type != T_OBJECT) {
        return 0;
    }
    *out = member->offset;
    return 1;
}

/* Remember the slot offsets of the Candidate class; 0 if it has not the four slots. */
static int
know_candidate_type(State *st, PyTypeObject *type)
{
    if (st->candidate_type == type) {
        return 1;
    }
    Py_ssize_t offset[4];
    for (int t = 0; t < 4; t++) {
        if (!slot_offset(type, st->names[t], &offset[t])) {
            return 0;
        }
    }
    Py_XSETREF(st->candidate_type, (PyTypeObject *)Py_NewRef(type));
    memcpy(st->offset, offset, sizeof offset);
    return 1;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* One candidate's four top-level values, each a strong reference or NULL where absent. */
typedef struct {
    PyObject *part[4];
} Parts;

static void
parts_release(Parts *p)
{
    for (int t = 0; t < 4; t++) {
        Py_CLEAR(p->part[t]);
    }
}

/* Which top-level name an exact str key is (0-3), or -1. */
static int
top_name(const State *st, PyObject *key)
{
    for (int t = 0; t < 4; t++) {
        if (key == st->names[t] || PyUnicode_Compare(key, st->names[t]) == 0) {
            return t;
        }
    }
    return -1;
}

/* The parts of a Candidate object or a plain dict (held in p): 1, or 0 (nothing held) for
 * a dict with a key that is not one of the four, or without an id or a text. */
static int
read_parts(const State *st, PyObject *it, int as_dicts, PyTypeObject *type, Parts *p)
{
    memset(p, 0, sizeof *p);
    if (!as_dicts) {
        if (Py_TYPE(it) != type) {
            return 0;
        }
        for (int t = 0; t < 4; t++) {
            p->part[t] = Py_XNewRef(SLOT(it, st->offset[t]));
        }
        int whole = p->part[0] && p->part[1] && p->part[2] && p->part[3];
        if (!whole) {
            parts_release(p);
        }
        return whole;
    }
    if (!PyDict_CheckExact(it)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(it, &pos, &key, &value)) { /* runs no Python code: no lookup */
        int t = PyUnicode_CheckExact(key) ? top_name(st, key) : -1;
        if (t < 0) {
            parts_release(p);
            return 0;
        }
        p->part[t] = Py_NewRef(value);
    }
    if (p->part[TOP_ID] == NULL || p->part[TOP_TEXT] == NULL) {
        parts_release(p);
        return 0;
    }
    return 1;
}

/* One call's inputs and what it has made so far. */
typedef struct {
    PyObject *held; /* a tuple of the candidates, held for the whole call */
    PyTypeObject *type;
    int as_dicts;
    PyObject *reverse, *no_tags;
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
    b->seen.slots = NULL;
    Py_CLEAR(b->held);
    Py_CLEAR(b->ids);
    Py_CLEAR(b->texts);
    Py_CLEAR(b->floats);
    Py_CLEAR(b->columns);
}

/* The fields' kinds and bounds: 1, or 0 with a TypeError. */
static int
read_fields(Batch *b, PyObject *kinds, PyObject *bounds)
{
    b->kind = PyBytes_AS_STRING(kinds);
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

/* The made columns allocated (the id set, the ids, texts, floats, and a None per field). */
static int
batch_allot(Batch *b, int n_rows)
{
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
        return 0;
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

/* A call's inputs read: 1; 0 (nothing held) where the kernel defers; -1 with an error. */
static int
batch_open(Batch *b, PyObject *const *args, State *st)
{
    memset(b, 0, sizeof *b);
    PyObject *items = args[0], *kinds = args[3], *bounds = args[4];
    b->type = (PyTypeObject *)args[1];
    b->reverse = args[2];
    b->no_tags = args[7];
    b->now = PyFloat_AsDouble(args[5]);
    b->latest = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyType_Check(args[1]) || !PyDict_CheckExact(b->reverse) || !PyBytes_CheckExact(kinds)
            || !PyTuple_CheckExact(bounds) || !PyFrozenSet_CheckExact(b->no_tags)) {
        PyErr_SetString(PyExc_TypeError, "coerce_columns: bad arguments");
        return -1;
    }
    b->n_fields = PyBytes_GET_SIZE(kinds);
    if (b->n_fields > MAX_FIELDS || PyTuple_GET_SIZE(bounds) != b->n_fields) {
        return 0;
    }
    int n_rows = read_fields(b, kinds, bounds);
    if (n_rows == 0) {
        return -1;
    }
    b->held = as_tuple(items);
    if (b->held == NULL || PyTuple_GET_SIZE(b->held) == 0) {
        Py_CLEAR(b->held);
        return PyErr_Occurred() ? -1 : 0;
    }
    b->n = PyTuple_GET_SIZE(b->held);
    PyObject *first = PyTuple_GET_ITEM(b->held, 0);
    b->as_dicts = PyDict_CheckExact(first);
    if (!b->as_dicts && (Py_TYPE(first) != b->type
                         || !know_candidate_type(st, b->type))) {
        Py_CLEAR(b->held);
        return 0;
    }
    if (!batch_allot(b, n_rows)) {
        batch_release(b);
        return -1;
    }
    return 1;
}

/* A candidate's id, text and score checked and kept: 1, or 0 to defer. */
static int
take_parts(Batch *b, Py_ssize_t i, const Parts *p)
{
    PyObject *id = p->part[TOP_ID], *text = p->part[TOP_TEXT], *score = p->part[TOP_SCORE];
    /* id: a non-blank, encodable str, not seen before in this call */
    if (!PyUnicode_CheckExact(id) || blank(id) || !encodable(id) || id_set_add(&b->seen, id) <= 0) {
        return 0;
    }
    PyTuple_SET_ITEM(b->ids, i, Py_NewRef(id)); /* (the set's pointer: held here from now on) */
    /* text: a non-blank, encodable str */
    if (!PyUnicode_CheckExact(text) || blank(text) || !encodable(text)) {
        return 0;
    }
    PyTuple_SET_ITEM(b->texts, i, Py_NewRef(text));
    /* score: a finite plain number, on every candidate or none */
    if (score != NULL && score != Py_None) {
        double s;
        if (!plain_number(score, &s) || !isfinite(s)) {
            return 0;
        }
        b->number[i] = s;
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
        if (value == Py_None) {
            continue;
        }
        PyObject *code_obj = PyDict_GetItemWithError(b->reverse, key);
        if (code_obj == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            continue; /* not a field key */
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

/* The column of non-numeric field f, made on the first candidate that gives it (a bytearray
 * of flags, or a tuple of labels or tags, the absent value everywhere), or NULL on error. */
static PyObject *
column_of(Batch *b, int f)
{
    PyObject *column = PyTuple_GET_ITEM(b->columns, f);
    if (column != Py_None) {
        return column;
    }
    char k = b->kind[f];
    if (k == KIND_FLAG) {
        column = PyByteArray_FromStringAndSize(NULL, b->n);
        if (column != NULL) {
            memset(PyByteArray_AS_STRING(column), 0, (size_t)b->n);
        }
    }
    else {
        column = PyTuple_New(b->n);
        PyObject *fill = k == KIND_TAGS ? b->no_tags : Py_None;
        for (Py_ssize_t j = 0; column != NULL && j < b->n; j++) {
            PyTuple_SET_ITEM(column, j, Py_NewRef(fill));
        }
    }
    if (column == NULL) {
        return NULL;
    }
    PyTuple_SET_ITEM(b->columns, f, column);
    Py_DECREF(Py_None);
    b->present |= 1UL << f;
    return column;
}

/* Candidate i's value v of field f put in its column: 1, 0 to defer, -1 on error. */
static int
put_field(Batch *b, Py_ssize_t i, int f, PyObject *v)
{
    char k = b->kind[f];
    if (k == KIND_TIME || k == KIND_RANGED) {
        double x, top = k == KIND_TIME ? b->latest : b->high[f];
        if (!plain_number(v, &x) || !isfinite(x) || x < b->low[f] || x > top) {
            return 0;
        }
        if (k == KIND_TIME && x > b->now) {
            x = b->now; /* within the clock-skew tolerance: read as now */
        }
        b->number[(Py_ssize_t)b->numeric_at[f] * b->n + i] = x;
        b->present |= 1UL << f;
        return 1;
    }
    PyObject *column = column_of(b, f);
    if (column == NULL) {
        return -1;
    }
    if (k == KIND_FLAG) {
        if (v != Py_True && v != Py_False) {
            return 0;
        }
        PyByteArray_AS_STRING(column)[i] = v == Py_True;
        return 1;
    }
    PyObject *made = k == KIND_TAGS ? tags_value(v, b->no_tags)
                                    : label_value(v, k == KIND_INTLABEL);
    if (made == NULL) {
        return 0;
    }
    PyObject *old = PyTuple_GET_ITEM(column, i);
    PyTuple_SET_ITEM(column, i, made);
    Py_DECREF(old);
    return 1;
}

/* Candidate i's metadata put in the columns: 1, 0 to defer, -1 on error. */
static int
take_metadata(Batch *b, Py_ssize_t i, PyObject *meta)
{
    if (meta == NULL || meta == Py_None) {
        return 1;
    }
    if (!PyDict_CheckExact(meta)) {
        return 0;
    }
    PyObject *best[MAX_FIELDS];
    unsigned long given;
    if (!locate_fields(b, meta, best, &given)) {
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
take_candidates(Batch *b, const State *st)
{
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PREFETCH(PyTuple_GET_ITEM(b->held, i));
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        Parts p;
        if (!read_parts(st, PyTuple_GET_ITEM(b->held, i), b->as_dicts, b->type, &p)) {
            return 0;
        }
        int ok = take_parts(b, i, &p);
        if (ok > 0) {
            ok = take_metadata(b, i, p.part[TOP_METADATA]);
        }
        parts_release(&p);
        if (ok <= 0) {
            return ok;
        }
    }
    return b->scored == 0 || b->scored == b->n;
}

PyDoc_STRVAR(coerce_columns_doc,
"coerce_columns(items, candidate_type, reverse, kinds, bounds, now, latest, no_tags, /)\n"
"--\n\n"
"The columns heaprank.scoring.candidates.coerce_checked builds from clean candidates, or\n"
"None.\n\n"
"items: a list or tuple of candidate_type objects, or of plain dicts with only the keys id,\n"
"text, score and metadata. reverse: metadata key -> field * 8 + the key's rank among the\n"
"field's keys. kinds: one kind byte per field; bounds: (low, high) per field (inclusive;\n"
"a time's high is latest, and a time past now is read as now).\n"
"Returns (items, ids, texts, floats, present, columns): items as a tuple; floats is a\n"
"bytearray of float64, the scores then one block of n per numeric field in field order (NaN\n"
"where absent); present has bit f set when some candidate gives field f; columns[f] is the\n"
"tuple (labels, tags) or bytearray (flags) of each non-numeric field given, else None.");

static PyObject *
coerce_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 8, "coerce_columns")) {
        return NULL;
    }
    State *st = state_of(module);
    Batch b;
    int ok = batch_open(&b, args, st);
    if (ok > 0) {
        ok = take_candidates(&b, st);
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

/* ------------------------------------------------------------------ module */

static int
exec_module(PyObject *module)
{
    State *st = state_of(module);
    for (int t = 0; t < 4; t++) {
        st->names[t] = PyUnicode_InternFromString(TOP_NAMES[t]);
        if (st->names[t] == NULL) {
            return -1;
        }
    }
    return 0;
}

static int
traverse_module(PyObject *module, visitproc visit, void *arg)
{
    State *st = state_of(module);
    Py_VISIT(st->candidate_type);
    return 0;
}

static int
clear_module(PyObject *module)
{
    State *st = state_of(module);
    for (int t = 0; t < 4; t++) {
        Py_CLEAR(st->names[t]);
    }
    Py_CLEAR(st->candidate_type);
    return 0;
}

static void
free_module(void *module)
{
    clear_module((PyObject *)module);
}

static PyMethodDef methods[] = {
    {"coerce_columns", (PyCFunction)(void (*)(void))coerce_columns, METH_FASTCALL,
     coerce_columns_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {{Py_mod_exec, (void *)exec_module}, KERNEL_SLOTS};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "heaprank._accel._candidates",
    .m_doc = "The C kernel of heaprank's candidates stage (see heaprank._accel).",
    .m_size = sizeof(State),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = traverse_module,
    .m_clear = clear_module,
    .m_free = free_module,
};

PyMODINIT_FUNC
PyInit__candidates(void)
{
    return PyModuleDef_Init(&module_def);
}
