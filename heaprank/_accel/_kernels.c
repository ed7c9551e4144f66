/* heaprank._accel._kernels: optional C kernels of the per-candidate and per-feedback passes.
 *
 * Each kernel does, in one pass, what a pure-Python function of heaprank does in several
 * (heaprank/candidates.py: coerce_fast; heaprank/features.py: FeatureSpace.rows;
 * heaprank/state/memory.py: MemoryState._learn and _docs; heaprank/state/codec.py: encode;
 * heaprank/reranker.py: Reranker._details, _matrix, _take and _best_first; heaprank/signals.py:
 * relevance and recency; the construction of slots objects), for the usual
 * input only. Anything else (another type, a value the Python path would flag or reject, an
 * error of any kind) makes a kernel return None (or False), and the Python path decides, so a
 * kernel never changes a result or an error message: it only skips the interpreter for clean
 * input. Property tests hold every kernel's output to its Python twin, bit for bit
 * (tests/property/test_speedups.py and the tests of each twin).
 *
 * No numpy C API: numbers cross as bytearrays or buffers that numpy views, so the module builds
 * against any numpy; and no transcendental function is computed here but log1p and expm1, as
 * Python's math module computes them (numpy's log and exp2, SIMD code, stay numpy's).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ small helpers */

/* A hint to start loading what a later pass reads: the candidates' objects lie scattered in
 * memory, and on a request path most of them are out of the CPU caches. Issued for every
 * candidate first, their loads overlap instead of following one another. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define PREFETCH(p) ((void)(p))
#endif

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

/* Whether a kernel was given its count of arguments (a TypeError naming it if not). */
static int
takes(Py_ssize_t nargs, Py_ssize_t expected, const char *kernel)
{
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd arguments, got %zd", kernel, expected,
                     nargs);
        return 0;
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

/* ------------------------------------------------------------------ coerce_columns */

/* Field kinds, as heaprank.candidates passes them (one byte per shape field). */
#define KIND_TIME 'T'   /* epoch seconds: [low, high], then lowered to now */
#define KIND_RANGED 'R' /* a number within [low, high] */
#define KIND_LABEL 'L'  /* str or None; "" is None */
#define KIND_INTLABEL 'I' /* str, int (as its decimal string) or None; "" is None */
#define KIND_TAGS 'G'   /* None, a str, or a list or tuple of str: a frozenset without "" */
#define KIND_FLAG 'F'   /* None (False) or a bool */

#define MAX_FIELDS 32
#define RANK_BITS 3 /* a field code in the reverse table is field * 8 + the key's rank */

typedef struct {
    /* Candidate's slots, by offset (read once per Candidate type) */
    PyTypeObject *candidate_type;
    Py_ssize_t off_id, off_text, off_score, off_metadata;
    PyObject *str_id, *str_text, *str_score, *str_metadata;
} coerce_state;

static coerce_state CS;

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        return 0;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX && member->type != T_OBJECT) {
        return 0;
    }
    *out = member->offset;
    return 1;
}

/* Remember the slot offsets of the Candidate class (a slots dataclass); 0 if it has none. */
static int
know_candidate_type(PyTypeObject *type)
{
    if (CS.candidate_type == type) {
        return 1;
    }
    Py_ssize_t a, b, c, d;
    if (!slot_offset(type, "id", &a) || !slot_offset(type, "text", &b)
            || !slot_offset(type, "score", &c) || !slot_offset(type, "metadata", &d)) {
        return 0;
    }
    Py_XDECREF(CS.candidate_type);
    Py_INCREF(type);
    CS.candidate_type = type;
    CS.off_id = a;
    CS.off_text = b;
    CS.off_score = c;
    CS.off_metadata = d;
    return 1;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* The four top-level values of a plain dict candidate (borrowed; NULL where absent), or 0
 * if it holds any other key or lacks an id or a text. */
static int
dict_parts(PyObject *d, PyObject **id, PyObject **text, PyObject **score, PyObject **meta)
{
    Py_ssize_t found = 0;
    *id = PyDict_GetItemWithError(d, CS.str_id);
    found += *id != NULL;
    *text = PyDict_GetItemWithError(d, CS.str_text);
    found += *text != NULL;
    *score = PyDict_GetItemWithError(d, CS.str_score);
    found += *score != NULL;
    *meta = PyDict_GetItemWithError(d, CS.str_metadata);
    found += *meta != NULL;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return *id != NULL && *text != NULL && found == PyDict_GET_SIZE(d);
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
    Py_ssize_t i = (Py_ssize_t)((size_t)h & (size_t)set->mask);
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

PyDoc_STRVAR(coerce_columns_doc,
"coerce_columns(items, candidate_type, reverse, kinds, bounds, now, latest, no_tags)\n"
"--\n\n"
"The columns heaprank.candidates.coerce_fast would build from clean candidates, or None.\n\n"
"items: a list or tuple of candidate_type objects, or of plain dicts with only the keys id,\n"
"text, score and metadata. reverse: metadata key -> field * 8 + the key's rank among the\n"
"field's keys. kinds: one kind byte per field; bounds: (low, high) per field (inclusive;\n"
"a time's high is latest, and a time past now is read as now).\n"
"Returns (items, ids, texts, floats, present, columns): floats is a bytearray of float64,\n"
"the scores then one block of n per numeric field in field order (NaN where absent);\n"
"present has bit f set when some candidate gives field f; columns[f] is the tuple (labels,\n"
"tags) or bytearray (flags) of each non-numeric field given, else None.");

static PyObject *
coerce_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 8, "coerce_columns")) {
        return NULL;
    }
    PyObject *items = args[0], *type = args[1], *reverse = args[2], *kinds = args[3],
             *bounds = args[4], *no_tags = args[7];
    double now = PyFloat_AsDouble(args[5]), latest = PyFloat_AsDouble(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyType_Check(type) || !PyDict_CheckExact(reverse) || !PyBytes_CheckExact(kinds)
            || !PyTuple_CheckExact(bounds)) {
        PyErr_SetString(PyExc_TypeError, "coerce_columns: bad arguments");
        return NULL;
    }
    if (!PyList_CheckExact(items) && !PyTuple_CheckExact(items)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    Py_ssize_t n_fields = PyBytes_GET_SIZE(kinds);
    if (n == 0 || n_fields > MAX_FIELDS || PyTuple_GET_SIZE(bounds) != n_fields) {
        Py_RETURN_NONE;
    }
    const char *kind = PyBytes_AS_STRING(kinds);
    double low[MAX_FIELDS], high[MAX_FIELDS];
    int numeric_at[MAX_FIELDS], n_numeric = 0;
    for (Py_ssize_t f = 0; f < n_fields; f++) {
        PyObject *pair = PyTuple_GET_ITEM(bounds, f);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "coerce_columns: bounds must be pairs");
            return NULL;
        }
        low[f] = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 0));
        high[f] = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 1));
        if (PyErr_Occurred()) {
            return NULL;
        }
        numeric_at[f] = (kind[f] == KIND_TIME || kind[f] == KIND_RANGED) ? ++n_numeric : 0;
    }
    PyObject **item = PySequence_Fast_ITEMS(items);
    int as_dicts = PyDict_CheckExact(item[0]);
    if (!as_dicts && (Py_TYPE(item[0]) != (PyTypeObject *)type
                      || !know_candidate_type((PyTypeObject *)type))) {
        Py_RETURN_NONE;
    }

    PyObject *ids = NULL, *texts = NULL, *floats = NULL, *columns = NULL, *out = NULL;
    id_set seen = {NULL, 0};
    Py_ssize_t cap = 8;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    seen.slots = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
    if (seen.slots == NULL) {
        return PyErr_NoMemory();
    }
    seen.mask = cap - 1;
    ids = PyTuple_New(n);
    texts = PyTuple_New(n);
    floats = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * n * (1 + n_numeric));
    columns = PyTuple_New(n_fields);
    if (ids == NULL || texts == NULL || floats == NULL || columns == NULL) {
        goto error;
    }
    for (Py_ssize_t f = 0; f < n_fields; f++) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(columns, f, Py_None);
    }
    double *number = (double *)PyByteArray_AS_STRING(floats);
    for (Py_ssize_t j = 0; j < n * (1 + n_numeric); j++) {
        number[j] = NAN;
    }
    unsigned long present = 0;
    Py_ssize_t scored = 0;

    for (Py_ssize_t i = 0; i < n; i++) {
        PREFETCH(item[i]);
    }
    if (!as_dicts) { /* then what each candidate points to */
        for (Py_ssize_t i = 0; i < n; i++) {
            if (Py_TYPE(item[i]) == (PyTypeObject *)type) {
                PREFETCH(SLOT(item[i], CS.off_id));
                PREFETCH(SLOT(item[i], CS.off_text));
                PREFETCH(SLOT(item[i], CS.off_metadata));
            }
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *meta = Py_TYPE(item[i]) == (PyTypeObject *)type
                             ? SLOT(item[i], CS.off_metadata) : NULL;
            if (meta != NULL && PyDict_CheckExact(meta)) {
                PREFETCH(((PyDictObject *)meta)->ma_keys);
            }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = item[i], *id, *text, *score, *meta;
        if (as_dicts) {
            if (!PyDict_CheckExact(it) || !dict_parts(it, &id, &text, &score, &meta)) {
                goto defer;
            }
        }
        else {
            if (Py_TYPE(it) != (PyTypeObject *)type) {
                goto defer;
            }
            id = SLOT(it, CS.off_id);
            text = SLOT(it, CS.off_text);
            score = SLOT(it, CS.off_score);
            meta = SLOT(it, CS.off_metadata);
            if (id == NULL || text == NULL || score == NULL || meta == NULL) {
                goto defer;
            }
        }
        /* id: a non-blank, encodable str, not seen before in this list */
        if (!PyUnicode_CheckExact(id) || blank(id) || !encodable(id)) {
            goto defer;
        }
        int added = id_set_add(&seen, id);
        if (added <= 0) {
            goto defer;
        }
        /* text: a non-blank, encodable str */
        if (!PyUnicode_CheckExact(text) || blank(text) || !encodable(text)) {
            goto defer;
        }
        Py_INCREF(id);
        PyTuple_SET_ITEM(ids, i, id);
        Py_INCREF(text);
        PyTuple_SET_ITEM(texts, i, text);
        /* score: a finite plain number, on every candidate or none */
        if (score != NULL && score != Py_None) {
            double s;
            if (!plain_number(score, &s) || !isfinite(s)) {
                goto defer;
            }
            number[i] = s;
            scored++;
        }
        if (meta == NULL || meta == Py_None) {
            continue;
        }
        if (!PyDict_CheckExact(meta)) {
            goto defer;
        }
        /* each field's value from its highest-priority key with a value other than None */
        PyObject *best[MAX_FIELDS];
        int best_rank[MAX_FIELDS];
        unsigned long given = 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(meta, &pos, &key, &value)) {
            if (value == Py_None) {
                continue;
            }
            if (!PyUnicode_CheckExact(key)) {
                if (PyUnicode_Check(key)) {
                    goto defer; /* a str subclass: its own hash and == decide, in Python */
                }
                continue; /* not a field key */
            }
            PyObject *code_obj = PyDict_GetItemWithError(reverse, key);
            if (code_obj == NULL) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    goto defer;
                }
                continue;
            }
            long code = PyLong_AsLong(code_obj);
            int f = (int)(code >> RANK_BITS), rank = (int)(code & ((1 << RANK_BITS) - 1));
            if (f < 0 || f >= n_fields) {
                goto defer;
            }
            if (!(given & (1UL << f)) || rank < best_rank[f]) {
                best[f] = value;
                best_rank[f] = rank;
                given |= 1UL << f;
            }
        }
        for (int f = 0; f < n_fields; f++) {
            if (!(given & (1UL << f))) {
                continue;
            }
            PyObject *v = best[f];
            char k = kind[f];
            if (k == KIND_TIME || k == KIND_RANGED) {
                double x;
                double top = k == KIND_TIME ? latest : high[f];
                if (!plain_number(v, &x) || !isfinite(x) || x < low[f] || x > top) {
                    goto defer;
                }
                if (k == KIND_TIME && x > now) {
                    x = now; /* within the clock-skew tolerance: read as now */
                }
                number[(Py_ssize_t)numeric_at[f] * n + i] = x;
                present |= 1UL << f;
                continue;
            }
            PyObject *column = PyTuple_GET_ITEM(columns, f);
            if (column == Py_None) { /* first candidate that gives this field */
                if (k == KIND_FLAG) {
                    column = PyByteArray_FromStringAndSize(NULL, n);
                    if (column != NULL) {
                        memset(PyByteArray_AS_STRING(column), 0, (size_t)n);
                    }
                }
                else {
                    column = PyTuple_New(n);
                    if (column != NULL) {
                        PyObject *fill = k == KIND_TAGS ? no_tags : Py_None;
                        for (Py_ssize_t j = 0; j < n; j++) {
                            Py_INCREF(fill);
                            PyTuple_SET_ITEM(column, j, fill);
                        }
                    }
                }
                if (column == NULL) {
                    goto error;
                }
                PyTuple_SET_ITEM(columns, f, column);
                Py_DECREF(Py_None);
                present |= 1UL << f;
            }
            if (k == KIND_FLAG) {
                if (v != Py_True && v != Py_False) {
                    goto defer;
                }
                PyByteArray_AS_STRING(column)[i] = v == Py_True;
                continue;
            }
            PyObject *made = k == KIND_TAGS ? tags_value(v, no_tags)
                                            : label_value(v, k == KIND_INTLABEL);
            if (made == NULL) {
                goto defer;
            }
            PyObject *old = PyTuple_GET_ITEM(column, i);
            PyTuple_SET_ITEM(column, i, made);
            Py_DECREF(old);
        }
    }
    if (scored != 0 && scored != n) {
        goto defer;
    }
    PyObject *stored = items;
    if (PyList_CheckExact(items)) {
        stored = PyList_AsTuple(items);
        if (stored == NULL) {
            goto error;
        }
    }
    else {
        Py_INCREF(items);
    }
    out = Py_BuildValue("(NNNNkN)", stored, ids, texts, floats, present, columns);
    PyMem_Free(seen.slots);
    return out;

defer:
    PyMem_Free(seen.slots);
    Py_XDECREF(ids);
    Py_XDECREF(texts);
    Py_XDECREF(floats);
    Py_XDECREF(columns);
    Py_RETURN_NONE;
error:
    PyMem_Free(seen.slots);
    Py_XDECREF(ids);
    Py_XDECREF(texts);
    Py_XDECREF(floats);
    Py_XDECREF(columns);
    return NULL;
}

/* ------------------------------------------------------------------ shape_rows */

/* The hash of the tuple (a, b, c), as CPython 3.8-3.12 computes it (xxHash lanes over the
 * items' hashes); heaprank._accel turns the kernel off if this process's hash differs. */
#if SIZEOF_PY_UHASH_T > 4
#define XXPRIME_1 ((Py_uhash_t)11400714785074694791ULL)
#define XXPRIME_2 ((Py_uhash_t)14029467366897019727ULL)
#define XXPRIME_5 ((Py_uhash_t)2870177450012600261ULL)
#define XXROTATE(x) ((x << 31) | (x >> 33))
#else
#define XXPRIME_1 ((Py_uhash_t)2654435761UL)
#define XXPRIME_2 ((Py_uhash_t)2246822519UL)
#define XXPRIME_5 ((Py_uhash_t)374761393UL)
#define XXROTATE(x) ((x << 13) | (x >> 19))
#endif

static Py_hash_t
hash3(Py_hash_t a, Py_hash_t b, Py_hash_t c)
{
    Py_hash_t lanes[3] = {a, b, c};
    Py_uhash_t acc = XXPRIME_5;
    for (int i = 0; i < 3; i++) {
        acc += (Py_uhash_t)lanes[i] * XXPRIME_2;
        acc = XXROTATE(acc);
        acc *= XXPRIME_1;
    }
    acc += 3 ^ (XXPRIME_5 ^ 3527539UL);
    if (acc == (Py_uhash_t)-1) {
        return 1546275796;
    }
    return (Py_hash_t)acc;
}

/* hash((text[:prefix_chars], kind, source)): the shape cache's key of a candidate, or -1 with
 * an exception set. */
static Py_hash_t
shape_key_of(PyObject *text, PyObject *kind, PyObject *source, Py_ssize_t prefix_chars)
{
    Py_hash_t ht;
    if (PyUnicode_GET_LENGTH(text) > prefix_chars) {
        PyObject *prefix = PyUnicode_Substring(text, 0, prefix_chars);
        if (prefix == NULL) {
            return -1;
        }
        ht = PyObject_Hash(prefix);
        Py_DECREF(prefix);
    }
    else {
        ht = PyObject_Hash(text);
    }
    Py_hash_t hk = PyObject_Hash(kind), hs = PyObject_Hash(source);
    if (ht == -1 || hk == -1 || hs == -1) {
        return -1;
    }
    return hash3(ht, hk, hs);
}

PyDoc_STRVAR(shape_key_doc,
"shape_key(text, kind, source, prefix_chars)\n--\n\n"
"hash((text[:prefix_chars], kind, source)), computed in C (the shape cache's key).");

static PyObject *
shape_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "shape_key(text: str, kind, source, prefix_chars)");
        return NULL;
    }
    Py_ssize_t prefix_chars = PyLong_AsSsize_t(args[3]);
    if (prefix_chars == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_hash_t h = shape_key_of(args[0], args[1], args[2], prefix_chars);
    return h == -1 ? NULL : PyLong_FromSsize_t(h);
}

/* One entry of the shape table (heaprank.features.ShapeTable): 4 x int64. */
typedef struct {
    int64_t key;   /* the shape key */
    int64_t slot;  /* the slot key + 1 (0: an empty entry) */
    int64_t bloom; /* one bit per word of the text, bit hash(word) % 63 */
    int64_t words; /* the address of the shape's frozenset of words, which the table's buffer
                    * holds (TableBuffer.held) for as long as the buffer lives */
} table_entry;

/* 1 if two frozensets of str have no element in common, 0 if they do, -1 on error: what
 * frozenset.isdisjoint gives (it also walks the smaller one). */
static int
disjoint(PyObject *a, PyObject *b)
{
    if (PySet_GET_SIZE(a) > PySet_GET_SIZE(b)) {
        PyObject *t = a;
        a = b;
        b = t;
    }
    PyObject *it = PyObject_GetIter(a);
    if (it == NULL) {
        return -1;
    }
    int out = 1;
    PyObject *item;
    while (out == 1 && (item = PyIter_Next(it)) != NULL) {
        int in = PySet_Contains(b, item);
        Py_DECREF(item);
        out = in < 0 ? -1 : !in;
    }
    Py_DECREF(it);
    if (out == 1 && PyErr_Occurred()) {
        out = -1;
    }
    return out;
}

/* Whether some name of the question is one of a shape's words (its bloom bits said maybe):
 * 1 yes, 0 no, -1 on error. */
static int
shares_name(PyObject *words, PyObject *names)
{
    if (!PyFrozenSet_CheckExact(words)) {
        return -1;
    }
    int apart = disjoint(names, words);
    return apart < 0 ? -1 : !apart;
}

PyDoc_STRVAR(shape_rows_doc,
"shape_rows(table, texts, kinds, sources, prefix_chars, names, names_bloom, codes, base,\n"
"           words, words_bloom, slot_words, slot_blooms, row_table, rows)\n--\n\n"
"heaprank.features.FeatureSpace.rows for shapes the table holds, or None.\n\n"
"table: the buffer of a ShapeTable (power-of-two entries of key, slot key + 1, bloom,\n"
"address of the words' frozenset, which the buffer holds). Each candidate's row key is its\n"
"slot key, + 1 when it shares no name with the question (names non-empty), + 16 x codes[i]\n"
"(codes: neighbour codes, or None), and its full\n"
"key adds base and 2 when the question names none of its slot's source words\n"
"(slot_words[slot key // 8192], whose bloom slot_blooms holds as int64). The row of a full\n"
"key is found in row_table (a RowTable's bytearray: key, row + 1), else in the dict rows.\n"
"Returns (d, both, missing): both is a bytearray of intp,\n"
"the d distinct rows (rows[full key], in order of first appearance) then each candidate's\n"
"position among them; missing lists (position, full key, candidate, shape key) of the\n"
"distinct rows not in rows yet (their place in both is -1). None when a shape is not in the\n"
"table (the caller featurises it in Python).");

#define SLOT_SCALE 8192

static PyObject *
shape_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 15, "shape_rows")) {
        return NULL;
    }
    PyObject *table = args[0], *texts = args[1], *kinds = args[2], *sources = args[3],
             *names = args[5], *codes = args[7], *words = args[9], *slot_words = args[11],
             *slot_blooms = args[12], *row_table = args[13], *rows = args[14];
    Py_ssize_t prefix_chars = PyLong_AsSsize_t(args[4]);
    long long names_bloom = PyLong_AsLongLong(args[6]);
    long long base = PyLong_AsLongLong(args[8]);
    long long words_bloom = PyLong_AsLongLong(args[10]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyByteArray_Check(table) || !PyTuple_CheckExact(texts)
            || !PyTuple_CheckExact(kinds) || !PyTuple_CheckExact(sources)
            || !PyFrozenSet_CheckExact(names)
            || (codes != Py_None && !PyList_CheckExact(codes)) || !PyFrozenSet_CheckExact(words)
            || !PyList_CheckExact(slot_words) || !PyByteArray_CheckExact(slot_blooms)
            || !PyByteArray_Check(row_table) || !PyDict_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "shape_rows: bad arguments");
        return NULL;
    }
    const int64_t *slot_bloom = (const int64_t *)PyByteArray_AS_STRING(slot_blooms);
    Py_ssize_t n_blooms = PyByteArray_GET_SIZE(slot_blooms) / 8;
    const int64_t *row_entry = (const int64_t *)PyByteArray_AS_STRING(row_table);
    Py_ssize_t row_size = PyByteArray_GET_SIZE(row_table) / 16;
    if (row_size == 0 || (row_size & (row_size - 1)) != 0) {
        Py_RETURN_NONE;
    }
    const size_t row_mask = (size_t)row_size - 1;
    Py_ssize_t n = PyTuple_GET_SIZE(texts);
    Py_ssize_t size = PyByteArray_GET_SIZE(table) / (Py_ssize_t)sizeof(table_entry);
    if (n == 0 || PyTuple_GET_SIZE(kinds) != n || PyTuple_GET_SIZE(sources) != n
            || (codes != Py_None && PyList_GET_SIZE(codes) != n) || size == 0
            || (size & (size - 1)) != 0) {
        Py_RETURN_NONE;
    }
    const table_entry *entry = (const table_entry *)PyByteArray_AS_STRING(table);
    const size_t mask = (size_t)size - 1;
    int with_names = PySet_GET_SIZE(names) > 0;

    /* The distinct row keys: an open-addressing map key -> position, keys in order. */
    Py_ssize_t cap = 16;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    int64_t *seen_key = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    Py_ssize_t *seen_at = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
    int64_t *keys = PyMem_Malloc((size_t)n * sizeof(int64_t));
    int64_t *shape_of = PyMem_Malloc((size_t)n * sizeof(int64_t));
    Py_ssize_t *rep = PyMem_Malloc((size_t)n * sizeof(Py_ssize_t));
    PyObject *both = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(Py_ssize_t) * 2 * n);
    PyObject *missing = NULL, *out = NULL;
    if (seen_key == NULL || seen_at == NULL || keys == NULL || shape_of == NULL || rep == NULL
            || both == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < cap; j++) {
        seen_at[j] = -1;
    }
    Py_ssize_t *local = (Py_ssize_t *)PyByteArray_AS_STRING(both) + n;
    Py_ssize_t d = 0;
    /* every candidate's key first, its table entry's load started (shape_of holds the keys) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyTuple_GET_ITEM(texts, i);
        if (!PyUnicode_CheckExact(text)) {
            goto defer;
        }
        Py_hash_t h = shape_key_of(text, PyTuple_GET_ITEM(kinds, i), PyTuple_GET_ITEM(sources, i),
                                   prefix_chars);
        if (h == -1) {
            PyErr_Clear();
            goto defer;
        }
        shape_of[i] = (int64_t)h;
        PREFETCH(&entry[(size_t)h & mask]);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_hash_t h = (Py_hash_t)shape_of[i];
        size_t at = (size_t)h & mask;
        while (entry[at].slot != 0 && entry[at].key != (int64_t)h) {
            at = (at + 1) & mask;
        }
        if (entry[at].slot == 0) {
            goto defer; /* a shape not featurised yet */
        }
        int64_t key = entry[at].slot - 1;
        if (with_names) {
            int shared = 0;
            if (entry[at].bloom & names_bloom) {
                shared = shares_name((PyObject *)(intptr_t)entry[at].words, names);
                if (shared < 0) {
                    PyErr_Clear();
                    goto defer;
                }
            }
            key += !shared;
        }
        if (codes != Py_None) {
            long code = PyLong_AsLong(PyList_GET_ITEM(codes, i));
            if (code < 0 || code >= SLOT_SCALE / 16) {
                PyErr_Clear();
                goto defer;
            }
            key += 16 * (int64_t)code;
        }
        size_t s = (size_t)key & (size_t)(cap - 1);
        while (seen_at[s] >= 0 && seen_key[s] != key) {
            s = (s + 1) & (size_t)(cap - 1);
        }
        if (seen_at[s] < 0) {
            seen_key[s] = key;
            seen_at[s] = d;
            keys[d] = key;
            rep[d] = i; /* shape_of[rep[d]] is its shape key */
            d++;
        }
        local[i] = seen_at[s];
    }
    /* The distinct rows by full key, after the local positions (moved down to follow them). */
    Py_ssize_t *distinct = (Py_ssize_t *)PyByteArray_AS_STRING(both);
    memmove(distinct + d, local, (size_t)n * sizeof(Py_ssize_t));
    missing = PyList_New(0);
    if (missing == NULL) {
        goto done;
    }
    Py_ssize_t n_slots = PyList_GET_SIZE(slot_words);
    /* each distinct row's full key first (in keys), its row entry's load started */
    for (Py_ssize_t j = 0; j < d; j++) {
        int64_t slot = keys[j] / SLOT_SCALE;
        if (slot < 0 || slot >= n_slots || slot >= n_blooms) {
            goto defer;
        }
        int apart = 1; /* the question names none of the slot's source words */
        if (slot_bloom[slot] & words_bloom) { /* maybe it does: the sets tell */
            PyObject *source_words = PyList_GET_ITEM(slot_words, slot);
            if (!PyFrozenSet_CheckExact(source_words)) {
                goto defer;
            }
            apart = disjoint(words, source_words);
            if (apart < 0) {
                PyErr_Clear();
                goto defer;
            }
        }
        keys[j] += base + 2 * apart;
        PREFETCH(&row_entry[2 * ((size_t)keys[j] & row_mask)]);
    }
    for (Py_ssize_t j = 0; j < d; j++) {
        long long full = (long long)keys[j];
        size_t at = (size_t)full & row_mask;
        while (row_entry[2 * at + 1] != 0 && row_entry[2 * at] != full) {
            at = (at + 1) & row_mask;
        }
        if (row_entry[2 * at + 1] != 0) {
            distinct[j] = (Py_ssize_t)(row_entry[2 * at + 1] - 1);
            continue;
        }
        PyObject *full_key = PyLong_FromLongLong(full);
        if (full_key == NULL) {
            goto done;
        }
        PyObject *row = PyDict_GetItemWithError(rows, full_key); /* not in the table: new? */
        if (row == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(full_key);
                PyErr_Clear();
                goto defer;
            }
            distinct[j] = -1;
            PyObject *note = Py_BuildValue("(nNnL)", j, full_key, rep[j],
                                           (long long)shape_of[rep[j]]);
            if (note == NULL || PyList_Append(missing, note) < 0) {
                Py_XDECREF(note);
                goto done;
            }
            Py_DECREF(note);
            continue;
        }
        Py_DECREF(full_key);
        Py_ssize_t r = PyLong_AsSsize_t(row);
        if (r == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto defer;
        }
        distinct[j] = r;
    }
    if (PyByteArray_Resize(both, (Py_ssize_t)sizeof(Py_ssize_t) * (d + n)) < 0) {
        goto done;
    }
    out = Py_BuildValue("(nOO)", d, both, missing);
    goto done;
defer:
    out = Py_None;
    Py_INCREF(out);
done:
    PyMem_Free(seen_key);
    PyMem_Free(seen_at);
    PyMem_Free(keys);
    PyMem_Free(shape_of);
    PyMem_Free(rep);
    Py_XDECREF(both);
    Py_XDECREF(missing);
    return out;
}

/* ------------------------------------------------------------------ learn_known */

/* The correctly rounded sum of x[0..n), all finite: what math.fsum returns for them (fsum is
 * correctly rounded, so any exact summation gives its bits). Shewchuk's method: the running
 * sum is kept as non-overlapping partials, each addition split into its rounded result and the
 * exact error; the partials are then added from the largest, rounding half to even across
 * them. 0 (and *ok = 0) past the float range midway (where fsum raises) or when the
 * partials would not fit (they cannot, for doubles). */
static double
exact_sum(const double *x, Py_ssize_t n, int *ok)
{
    double partials[64];
    int count = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        double v = x[k];
        int kept = 0;
        for (int j = 0; j < count; j++) {
            double y = partials[j];
            if (fabs(v) < fabs(y)) {
                double t = v;
                v = y;
                y = t;
            }
            double hi = v + y;
            double lo = y - (hi - v);
            if (lo != 0.0) {
                partials[kept++] = lo;
            }
            v = hi;
        }
        if (!isfinite(v)) { /* an intermediate overflow: fsum raises, the kernel defers */
            *ok = 0;
            return 0.0;
        }
        if (kept >= 64) {
            *ok = 0;
            return 0.0;
        }
        if (v != 0.0) { /* a zero is no partial: an exact zero sum is +0.0, as fsum gives */
            partials[kept++] = v;
        }
        count = kept;
    }
    *ok = 1;
    if (count == 0) {
        return 0.0;
    }
    double hi = partials[--count], lo = 0.0;
    while (count > 0) {
        double a = hi, b = partials[--count];
        hi = a + b;
        lo = b - (hi - a);
        if (lo != 0.0) {
            break;
        }
    }
    /* the rest, below half an ulp of hi, decides a tie between hi and its neighbour */
    if (count > 0 && ((lo < 0.0 && partials[count - 1] < 0.0)
                      || (lo > 0.0 && partials[count - 1] > 0.0))) {
        double twice = lo * 2.0, up = hi + twice;
        if (twice == up - hi) {
            hi = up;
        }
    }
    return hi;
}

/* A used row's credit shares from its links' means p (n values): min(1, p / U) with the
 * noisy-OR U = 1 - prod(1 - p) from its log terms summed exactly, or 1 / n each when U is 0:
 * heaprank.links.used_total and credit_rows, bit for bit. 0 if a mean is outside [0, 1]. */
/* The noisy-OR U of means p (n of them, each in [0, 1]): heaprank.links.used_total, bit for
 * bit. 0 (and *ok = 0) for n past what it holds or a mean outside [0, 1]. */
static double
noisy_or_total(const double *p, Py_ssize_t n, int *ok)
{
    double terms[256];
    int saturated = 0;
    *ok = 0;
    if (n > 256) {
        return 0.0;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (!(p[j] >= 0.0 && p[j] <= 1.0)) {
            return 0.0;
        }
        saturated |= p[j] >= 1.0;
        terms[j] = saturated ? 0.0 : log1p(-p[j]);
    }
    if (saturated) {
        *ok = 1;
        return 1.0; /* a term is -inf: the product is 0 */
    }
    double total = exact_sum(terms, n, ok);
    return *ok ? -expm1(total) : 0.0;
}

static int
credit_shares(const double *p, Py_ssize_t n, double *share)
{
    int ok;
    double u = noisy_or_total(p, n, &ok);
    if (!ok) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (u > 0.0) {
            double q = p[j] / u;
            share[j] = q < 1.0 ? q : 1.0;
        }
        else {
            share[j] = 1.0 / (double)n;
        }
    }
    return 1;
}


/* A C-contiguous buffer of 8-byte items of one of the given format letters (1-d unless
 * any_shape). */
static int
get_buffer_shaped(PyObject *obj, Py_buffer *view, int writable, const char *formats,
                  int any_shape)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS
                           | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        return 0;
    }
    const char *f = view->format == NULL ? "B" : view->format;
    if (*f == '<' || *f == '=' || *f == '@') {
        f++;
    }
    if ((view->ndim != 1 && !any_shape) || view->itemsize != 8 || f[0] == '\0'
            || f[1] != '\0' || strchr(formats, f[0]) == NULL) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "expected a buffer of int64 or float64");
        return 0;
    }
    return 1;
}

static int
get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *formats)
{
    return get_buffer_shaped(obj, view, writable, formats, 0);
}

PyDoc_STRVAR(fsum_doc,
"fsum(values)\n--\n\n"
"math.fsum of a float64 array of finite values, as the learn kernel sums (for the tests that\n"
"hold the two to the same bits), or None outside what it takes.");

static PyObject *
fsum(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (!get_buffer(arg, &view, 0, "d")) {
        return NULL;
    }
    int ok = 1;
    const double *x = view.buf;
    for (Py_ssize_t j = 0; j < view.shape[0]; j++) {
        ok &= isfinite(x[j]) != 0;
    }
    double total = ok ? exact_sum(x, view.shape[0], &ok) : 0.0;
    PyBuffer_Release(&view);
    if (!ok) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(total);
}

PyDoc_STRVAR(used_total_doc,
"used_total(means)\n--\n\n"
"heaprank.links.used_total of a float64 array of means in [0, 1], as learn_known computes it\n"
"(for the tests that hold the two to the same bits), or None outside what it takes.");

static PyObject *
used_total(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (!get_buffer(arg, &view, 0, "d")) {
        return NULL;
    }
    int ok;
    double u = noisy_or_total(view.buf, view.shape[0], &ok);
    PyBuffer_Release(&view);
    if (!ok) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(u);
}

PyDoc_STRVAR(learn_known_doc,
"learn_known(rows, weights, means, fids, pos, neg, gpos, gneg)\n--\n\n"
"One feedback's credit added to a namespace (fids, pos, neg) and the pool (gpos, gneg), when\n"
"the namespace already has a link of every feature: True; False (nothing changed) if not, or\n"
"where the kernel defers.\n\n"
"rows: bytes of int64 feature ids, the ignored rows (weights[i]: each one's summed reject\n"
"weight) then the used rows (means[j]: a float64 array of its links' means, which give its\n"
"features' credit as heaprank.links.credit_rows does, or None for uniform credit). Each\n"
"feature's increments are summed in that order, from 0.0, then added once to the counts:\n"
"the arithmetic of heaprank.links.credit_rows then MemoryState._add, bit for bit.");

/* The ids of a row (bytes of int64) and how many. */
#define ROW_IDS(row) ((const int64_t *)PyBytes_AS_STRING(row))
#define ROW_LEN(row) (PyBytes_GET_SIZE(row) / 8)

/* A feedback's distinct features: an open-addressing table of their ids (cap a power of two,
 * at least twice as many as it holds), each with its place among the namespace's links and
 * the sums of its increments. The rows share most of their features: each is looked up in
 * the namespace once, and the sums live in a few small arrays rather than scattered over
 * arrays of every feature (which a cold cache makes costly). */
typedef struct {
    Py_ssize_t cap, count;
    int64_t *key;     /* cap: -1 where free */
    Py_ssize_t *slot; /* cap: the feature's index among the distinct ones */
    int64_t *id;      /* count: its feature id */
    Py_ssize_t *at;   /* count: its place in fids */
    double *add_pos, *add_neg;
} Distinct;

static Py_ssize_t
distinct_slot(Distinct *d, int64_t id, const int64_t *fids, Py_ssize_t n_fids,
              Py_ssize_t n_global)
{
    size_t h = ((uint64_t)id * 0x9E3779B97F4A7C15ULL) >> 20;
    for (;; h++) {
        Py_ssize_t b = (Py_ssize_t)(h & (size_t)(d->cap - 1));
        if (d->key[b] == id) {
            return d->slot[b];
        }
        if (d->key[b] < 0) {
            Py_ssize_t lo = 0, hi = n_fids;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (fids[mid] < id) {
                    lo = mid + 1;
                }
                else {
                    hi = mid;
                }
            }
            if (id < 0 || id >= n_global || lo == n_fids || fids[lo] != id) {
                return -1; /* a link new to the namespace */
            }
            Py_ssize_t j = d->count++;
            d->key[b] = id;
            d->slot[b] = j;
            d->id[j] = id;
            d->at[j] = lo;
            d->add_pos[j] = d->add_neg[j] = 0.0;
            return j;
        }
    }
}

static PyObject *
learn_known(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 8, "learn_known")) {
        return NULL;
    }
    PyObject *rows = args[0], *weights = args[1], *means = args[2];
    if (!PyList_CheckExact(rows) || !PyList_CheckExact(weights) || !PyList_CheckExact(means)
            || PyList_GET_SIZE(weights) + PyList_GET_SIZE(means) != PyList_GET_SIZE(rows)) {
        PyErr_SetString(PyExc_TypeError, "learn_known: rows, weights and means do not match");
        return NULL;
    }
    Py_ssize_t n_rows = PyList_GET_SIZE(rows), n_rejected = PyList_GET_SIZE(weights);
    Py_ssize_t total = 0, used_total = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyBytes_CheckExact(row) || PyBytes_GET_SIZE(row) % 8) {
            PyErr_SetString(PyExc_TypeError, "learn_known: a row is not bytes of int64");
            return NULL;
        }
        total += ROW_LEN(row);
        if (r >= n_rejected) {
            used_total += ROW_LEN(row);
        }
        else if (!PyFloat_CheckExact(PyList_GET_ITEM(weights, r))) {
            Py_RETURN_FALSE; /* the Python path adds it as it is */
        }
    }
    Py_buffer view[5];
    int held = 0, applied = 0;
    Py_ssize_t *occurrence = NULL; /* each feature occurrence's distinct index */
    double *shares = NULL;
    void *block = NULL;
    Distinct d = {0};
    static const char *formats[5] = {"lq", "d", "d", "d", "d"};
    for (; held < 5; held++) {
        if (!get_buffer(args[3 + held], &view[held], held > 0, formats[held])) {
            goto error;
        }
    }
    const int64_t *fids = view[0].buf;
    Py_ssize_t n_fids = view[0].shape[0];
    double *pos = view[1].buf, *neg = view[2].buf, *gpos = view[3].buf, *gneg = view[4].buf;
    Py_ssize_t n_global = view[3].shape[0];
    if (view[1].shape[0] != n_fids || view[2].shape[0] != n_fids
            || view[4].shape[0] != n_global) {
        PyErr_SetString(PyExc_ValueError, "learn_known: arrays of different lengths");
        goto error;
    }
    Py_ssize_t n = total ? total : 1;
    d.cap = 16;
    while (d.cap < 2 * n) {
        d.cap *= 2;
    }
    /* One allocation for the table and every per-feature array (all 8-byte items). */
    block = PyMem_Malloc((size_t)(2 * d.cap + 4 * n + n + (used_total ? used_total : 1)) * 8);
    if (block == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    d.key = block;
    d.slot = (Py_ssize_t *)(d.key + d.cap);
    d.id = (int64_t *)(d.slot + d.cap);
    d.at = (Py_ssize_t *)(d.id + n);
    d.add_pos = (double *)(d.at + n);
    d.add_neg = d.add_pos + n;
    occurrence = (Py_ssize_t *)(d.add_neg + n);
    shares = (double *)(occurrence + n);
    memset(d.key, 0xFF, (size_t)d.cap * sizeof(int64_t)); /* every key -1: free */
    /* The used rows' shares, from their means (or uniform). */
    Py_ssize_t k = 0;
    for (Py_ssize_t r = n_rejected; r < n_rows; r++) {
        Py_ssize_t len = ROW_LEN(PyList_GET_ITEM(rows, r));
        PyObject *m = PyList_GET_ITEM(means, r - n_rejected);
        if (m == Py_None) {
            for (Py_ssize_t j = 0; j < len; j++) {
                shares[k + j] = 1.0 / (double)len;
            }
        }
        else {
            Py_buffer mv;
            if (!get_buffer(m, &mv, 0, "d")) {
                PyErr_Clear();
                goto done; /* not a contiguous float64 array: the Python path */
            }
            int fits = mv.shape[0] == len && credit_shares(mv.buf, len, shares + k);
            PyBuffer_Release(&mv);
            if (!fits) {
                goto done; /* means the kernel does not take: the Python path */
            }
        }
        k += len;
    }
    /* Every feature's place among the namespace's links, before anything is written. */
    k = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        const int64_t *ids = ROW_IDS(row);
        for (Py_ssize_t j = 0; j < ROW_LEN(row); j++, k++) {
            occurrence[k] = distinct_slot(&d, ids[j], fids, n_fids, n_global);
            if (occurrence[k] < 0) {
                goto done; /* a link new to the namespace: the Python path */
            }
        }
    }
    /* The increments, summed per feature in credit_rows' order. */
    k = 0;
    Py_ssize_t u = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        Py_ssize_t len = ROW_LEN(PyList_GET_ITEM(rows, r));
        if (r < n_rejected) {
            double weight = PyFloat_AS_DOUBLE(PyList_GET_ITEM(weights, r));
            for (Py_ssize_t j = 0; j < len; j++, k++) {
                d.add_neg[occurrence[k]] += weight;
            }
        }
        else {
            for (Py_ssize_t j = 0; j < len; j++, k++, u++) {
                d.add_pos[occurrence[k]] += shares[u];
                d.add_neg[occurrence[k]] += 1.0 - shares[u];
            }
        }
    }
    /* Each feature's sums added once. */
    for (Py_ssize_t j = 0; j < d.count; j++) {
        double add_neg = d.add_neg[j], add_pos = d.add_pos[j];
        if (add_neg != 0.0 || add_pos != 0.0) {
            gneg[d.id[j]] += add_neg;
            neg[d.at[j]] += add_neg;
            gpos[d.id[j]] += add_pos;
            pos[d.at[j]] += add_pos;
        }
    }
    applied = 1;
done:
    PyMem_Free(block);
    for (int b = 0; b < held; b++) {
        PyBuffer_Release(&view[b]);
    }
    return PyBool_FromLong(applied);
error:
    PyMem_Free(block);
    for (int b = 0; b < held; b++) {
        PyBuffer_Release(&view[b]);
    }
    return NULL;
}

/* ------------------------------------------------------------------ shown_rows */

PyDoc_STRVAR(shown_rows_doc,
"shown_rows(ids, slots, used, by_slots, qtype, weights)\n--\n\n"
"The rows a fresh feedback credits, as MemoryState.apply_used's loop over the shown items\n"
"makes them (without doc features), or None where that loop must run (a row not known by its\n"
"slots' identity, another question type, more items than weights).\n\n"
"ids: tuple of str; slots: tuple of the rows' slot tuples; used: set of the used ids;\n"
"by_slots: dict id(slots) -> (slots, qtype, row, row's raw ids); weights (a list): weights[rank] is an\n"
"ignored item's reject weight at that rank (from 1). Returns (raws, rejected_weights,\n"
"used_rows, used_positions, verdicts): each distinct ignored row's raw ids (in order of first\n"
"appearance) with its summed weight, then every used row's raw ids (raws holds both, as\n"
"learn_known takes them); the used rows and their positions among the shown; one verdict\n"
"byte per shown item.");

static PyObject *
shown_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 6, "shown_rows")) {
        return NULL;
    }
    PyObject *ids = args[0], *slots = args[1], *used = args[2], *by_slots = args[3];
    PyObject *qtype = args[4], *weights = args[5];
    if (!PyTuple_CheckExact(ids) || !PyTuple_CheckExact(slots) || !PyAnySet_CheckExact(used)
            || !PyDict_CheckExact(by_slots) || !PyUnicode_CheckExact(qtype)
            || !PyList_CheckExact(weights) || PyTuple_GET_SIZE(slots) != PyTuple_GET_SIZE(ids)
            || PyList_GET_SIZE(weights) <= PyTuple_GET_SIZE(ids)) {
        Py_RETURN_NONE; /* anything else: the Python loop */
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    PyObject *rejected = PyList_New(0), *sums = PyList_New(0), *used_rows = PyList_New(0);
    PyObject *used_raws = PyList_New(0), *positions = PyList_New(0);
    PyObject *seen = PyDict_New(); /* row -> its place in rejected */
    PyObject *verdicts = PyBytes_FromStringAndSize(NULL, n), *out = NULL;
    if (rejected == NULL || sums == NULL || used_rows == NULL || used_raws == NULL
            || positions == NULL || seen == NULL || verdicts == NULL) {
        goto done;
    }
    char *verdict = PyBytes_AS_STRING(verdicts);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row_slots = PyTuple_GET_ITEM(slots, i), *d = PyTuple_GET_ITEM(ids, i);
        PyObject *key = PyLong_FromVoidPtr(row_slots);
        if (key == NULL) {
            goto done;
        }
        PyObject *entry = PyDict_GetItemWithError(by_slots, key); /* borrowed; int keys */
        Py_DECREF(key);
        if (entry == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            goto defer; /* a row first seen: the Python loop finds and caches it */
        }
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4
                || PyTuple_GET_ITEM(entry, 0) != row_slots
                || !PyBytes_CheckExact(PyTuple_GET_ITEM(entry, 3))
                || (PyTuple_GET_ITEM(entry, 1) != qtype /* the same interned name, usually */
                    && (!PyUnicode_CheckExact(PyTuple_GET_ITEM(entry, 1))
                        || PyUnicode_Compare(PyTuple_GET_ITEM(entry, 1), qtype) != 0))) {
            if (PyErr_Occurred()) {
                goto done;
            }
            goto defer;
        }
        PyObject *row = PyTuple_GET_ITEM(entry, 2), *raw = PyTuple_GET_ITEM(entry, 3);
        int is_used = PySet_Contains(used, d);
        if (is_used < 0) {
            goto done;
        }
        if (is_used) {
            verdict[i] = 1; /* codec.USED */
            PyObject *at = PyLong_FromSsize_t(i);
            if (at == NULL || PyList_Append(used_rows, row) < 0
                    || PyList_Append(used_raws, raw) < 0 || PyList_Append(positions, at) < 0) {
                Py_XDECREF(at);
                goto done;
            }
            Py_DECREF(at);
            continue;
        }
        verdict[i] = 2; /* codec.IGNORED */
        PyObject *weight = PyList_GET_ITEM(weights, i + 1);
        if (!PyFloat_CheckExact(weight)) {
            goto defer;
        }
        PyObject *place = PyDict_GetItemWithError(seen, row);
        if (place == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(rejected));
            int failed = index == NULL || PyDict_SetItem(seen, row, index) < 0
                         || PyList_Append(rejected, raw) < 0 || PyList_Append(sums, weight) < 0;
            Py_XDECREF(index);
            if (failed) {
                goto done;
            }
        }
        else { /* the same row again: its weights summed in rank order, as the loop sums */
            Py_ssize_t j = PyLong_AsSsize_t(place);
            double total = PyFloat_AS_DOUBLE(PyList_GET_ITEM(sums, j)) + PyFloat_AS_DOUBLE(weight);
            PyObject *sum = PyFloat_FromDouble(total);
            if (sum == NULL || PyList_SetItem(sums, j, sum) < 0) {
                goto done;
            }
        }
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(used_raws); j++) {
        if (PyList_Append(rejected, PyList_GET_ITEM(used_raws, j)) < 0) {
            goto done;
        }
    }
    out = PyTuple_Pack(5, rejected, sums, used_rows, positions, verdicts);
    goto done; /* out holds its own references to the parts */
defer:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(rejected);
    Py_XDECREF(sums);
    Py_XDECREF(used_rows);
    Py_XDECREF(used_raws);
    Py_XDECREF(positions);
    Py_XDECREF(seen);
    Py_XDECREF(verdicts);
    return out;
}

/* ------------------------------------------------------------------ encode_items */

PyDoc_STRVAR(encode_items_doc,
"encode_items(ids, slots, rows_by_id, signals, more_rows=None)\n--\n\n"
"The items and signal values of a stored impression (heaprank.state.codec.encode), or None.\n\n"
"Per shown item its id (varint length, UTF-8) and its row's slot codes, found by the identity\n"
"of its slots tuple in rows_by_id (id(row) -> (row, codes)), else in more_rows (the same, for\n"
"this impression's rows with free-form slots); then signals (a C-contiguous float64 array of\n"
"n x m, or None for zeros) as little-endian float32, the C cast of each value. None when a\n"
"row is in neither by identity (the Python encoder then runs).");

static PyObject *
encode_items(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 && !takes(nargs, 5, "encode_items")) {
        return NULL;
    }
#if PY_BIG_ENDIAN
    Py_RETURN_NONE; /* the stored floats are little-endian: the Python encoder swaps them */
#else
    PyObject *ids = args[0], *slots = args[1], *rows_by_id = args[2], *signals = args[3];
    PyObject *more_rows = nargs == 5 ? args[4] : Py_None;
    if (!PyTuple_CheckExact(ids) || !PyTuple_CheckExact(slots) || !PyDict_CheckExact(rows_by_id)
            || PyTuple_GET_SIZE(ids) != PyTuple_GET_SIZE(slots)
            || (more_rows != Py_None && !PyDict_CheckExact(more_rows))) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    Py_buffer view;
    int have_view = 0;
    Py_ssize_t n_values = 0;
    if (signals != Py_None) {
        if (!get_buffer_shaped(signals, &view, 0, "d", 1)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        have_view = 1;
        n_values = view.len / 8;
        if (n == 0 || n_values % n) {
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
    }
    PyObject *codes_of[256];
    const char *utf8_of[256];
    Py_ssize_t size_of[256];
    PyObject *out = NULL;
    if (n > 256) {
        goto defer;
    }
    Py_ssize_t total = 4 * n_values;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GET_ITEM(ids, i), *row = PyTuple_GET_ITEM(slots, i);
        if (!PyUnicode_CheckExact(id)) {
            goto defer;
        }
        utf8_of[i] = PyUnicode_AsUTF8AndSize(id, &size_of[i]);
        if (utf8_of[i] == NULL) {
            PyErr_Clear();
            goto defer;
        }
        PyObject *key = PyLong_FromVoidPtr(row);
        if (key == NULL) {
            goto error;
        }
        PyObject *seen = NULL;
        for (int where = 0; where < 2 && seen == NULL; where++) {
            PyObject *table = where == 0 ? rows_by_id : more_rows;
            if (table == Py_None) {
                break;
            }
            seen = PyDict_GetItemWithError(table, key);
            if (seen == NULL) {
                PyErr_Clear();
            }
            else if (!PyTuple_CheckExact(seen) || PyTuple_GET_SIZE(seen) != 2
                    || PyTuple_GET_ITEM(seen, 0) != row
                    || !PyBytes_CheckExact(PyTuple_GET_ITEM(seen, 1))) {
                seen = NULL; /* another row that had the same id: not this one */
            }
        }
        Py_DECREF(key);
        if (seen == NULL) {
            goto defer;
        }
        codes_of[i] = PyTuple_GET_ITEM(seen, 1);
        for (size_t v = (size_t)size_of[i]; ; v >>= 7) { /* the varint's bytes */
            total++;
            if (v < 0x80) {
                break;
            }
        }
        total += size_of[i] + PyBytes_GET_SIZE(codes_of[i]);
    }
    out = PyByteArray_FromStringAndSize(NULL, total);
    if (out == NULL) {
        goto error;
    }
    unsigned char *w = (unsigned char *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t v = (size_t)size_of[i];
        while (v >= 0x80) {
            *w++ = (unsigned char)((v & 0x7F) | 0x80);
            v >>= 7;
        }
        *w++ = (unsigned char)v;
        memcpy(w, utf8_of[i], (size_t)size_of[i]);
        w += size_of[i];
        Py_ssize_t k = PyBytes_GET_SIZE(codes_of[i]);
        memcpy(w, PyBytes_AS_STRING(codes_of[i]), (size_t)k);
        w += k;
    }
    if (have_view) {
        const double *x = view.buf;
        for (Py_ssize_t j = 0; j < n_values; j++) {
            float f = (float)x[j];
            memcpy(w, &f, 4);
            w += 4;
        }
        PyBuffer_Release(&view);
    }
    return out;
defer:
    if (have_view) {
        PyBuffer_Release(&view);
    }
    Py_RETURN_NONE;
error:
    if (have_view) {
        PyBuffer_Release(&view);
    }
    return NULL;
#endif
}

/* ------------------------------------------------------------------ instances */

PyDoc_STRVAR(instances_doc,
"instances(cls, slots, rows)\n--\n\n"
"New instances of a slots class, one per tuple of rows (a value for each of the member\n"
"descriptors `slots`, cls's own, in that order), set as object.__new__(cls) and each\n"
"descriptor's __set__ would set them (no __init__). None if cls or a descriptor is not such.");

#define MAX_SLOTS 32

static PyObject *
instances(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1])
            || !PyList_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "instances(cls, slots: tuple, rows: list)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *slots = args[1], *rows = args[2];
    Py_ssize_t n_slots = PyTuple_GET_SIZE(slots), offset[MAX_SLOTS];
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) || type->tp_new != PyBaseObject_Type.tp_new
            || n_slots > MAX_SLOTS) {
        Py_RETURN_NONE;
    }
    for (Py_ssize_t i = 0; i < n_slots; i++) {
        PyObject *descr = PyTuple_GET_ITEM(slots, i);
        if (Py_TYPE(descr) != &PyMemberDescr_Type
                || ((PyMemberDescrObject *)descr)->d_common.d_type != type
                || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX
                || (((PyMemberDescrObject *)descr)->d_member->flags & READONLY)) {
            Py_RETURN_NONE;
        }
        offset[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != n_slots) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "instances: a row is not a tuple of every slot");
            return NULL;
        }
        PyObject *obj = type->tp_alloc(type, 0);
        if (obj == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n_slots; i++) {
            PyObject *value = PyTuple_GET_ITEM(row, i);
            PyObject *old = SLOT(obj, offset[i]);
            Py_INCREF(value);
            SLOT(obj, offset[i]) = value;
            Py_XDECREF(old); /* NULL in a new object; a slot named twice holds the last */
        }
        PyList_SET_ITEM(out, r, obj);
    }
    return out;
}

/* ------------------------------------------------------------------ doc_stats */

PyDoc_STRVAR(doc_stats_doc,
"doc_stats(docs, ids)\n--\n\n"
"Each id's (last used, use count) in docs (a dict of id -> a tuple of two floats; NaN and 0.0\n"
"for an id not there), as a bytearray of float64: every last use, then every count. None\n"
"where docs holds anything else (the Python read then runs).");

static PyObject *
doc_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "doc_stats(docs: dict, ids: tuple)");
        return NULL;
    }
    PyObject *docs = args[0], *ids = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * 2 * n);
    if (out == NULL) {
        return NULL;
    }
    double *last = (double *)PyByteArray_AS_STRING(out), *uses = last + n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyTuple_GET_ITEM(ids, i);
        if (!PyUnicode_CheckExact(id)) {
            goto defer;
        }
        PyObject *row = PyDict_GetItemWithError(docs, id); /* a str key: no code of the caller */
        if (row == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                goto defer;
            }
            last[i] = NAN;
            uses[i] = 0.0;
            continue;
        }
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2
                || !PyFloat_CheckExact(PyTuple_GET_ITEM(row, 0))
                || !PyFloat_CheckExact(PyTuple_GET_ITEM(row, 1))) {
            goto defer;
        }
        last[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(row, 0));
        uses[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(row, 1));
    }
    return out;
defer:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ details_of */

/* `format(x, spec)` of a float as Python writes it (float.__format__ and %-formatting call
 * PyOS_double_to_string with these codes), into buf (an ASCII text); 0 on failure. */
static int
float_text(char *buf, size_t size, double x, char code, int precision)
{
    char *text = PyOS_double_to_string(x, code, precision, 0, NULL);
    if (text == NULL) {
        return 0;
    }
    int fits = strlen(text) < size;
    if (fits) {
        strcpy(buf, text);
    }
    PyMem_Free(text);
    return fits;
}

PyDoc_STRVAR(details_of_doc,
"details_of(rows, positions, scores, importance, source_count, ages_s, use_counts, kinds,\n"
"           asks)\n--\n\n"
"The three EXPLAIN details of each shown candidate (heaprank.reranker.Reranker._details, for\n"
"a query with content and no fused scores), appended to its row with a place for its top\n"
"links' text: 'score %.4g'; 'age %.1fd' (', used %gx' when used; 'no date' without one) and\n"
"asks; its kind (or 'explicit' for an explicit importance, 'default') and ', %g sources'.\n"
"False, and no row touched, when a score is not finite (the Python loop words those).");

static PyObject *
details_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 9, "details_of")) {
        return NULL;
    }
    PyObject *rows = args[0], *positions = args[1], *kinds = args[7], *asks = args[8];
    PyObject *const *column = args + 2; /* scores, importance, source_count, ages_s, uses */
    if (!PyList_CheckExact(rows) || !PyList_CheckExact(positions) || !PyTuple_CheckExact(kinds)
            || !PyUnicode_CheckExact(asks)) {
        PyErr_SetString(PyExc_TypeError, "details_of: bad arguments");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows);
    for (int c = 0; c < 5; c++) {
        if (!PyList_CheckExact(column[c]) || PyList_GET_SIZE(column[c]) != n) {
            PyErr_SetString(PyExc_TypeError, "details_of: columns of another length");
            return NULL;
        }
    }
    if (PyList_GET_SIZE(positions) != n) {
        PyErr_SetString(PyExc_TypeError, "details_of: positions of another length");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) { /* everything checked before a row is touched */
        for (int c = 0; c < 5; c++) {
            if (!PyFloat_CheckExact(PyList_GET_ITEM(column[c], j))) {
                Py_RETURN_FALSE;
            }
        }
        double age_s = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[3], j));
        if (!isfinite(PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[0], j)))
                || (age_s == age_s && !(fabs(age_s) < 1e17)) /* a day count of a few digits */
                || !PyList_CheckExact(PyList_GET_ITEM(rows, j))) {
            Py_RETURN_FALSE;
        }
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(positions, j));
        if (i < 0 || i >= PyTuple_GET_SIZE(kinds)) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        PyObject *kind = PyTuple_GET_ITEM(kinds, i);
        if (kind != Py_None && !PyUnicode_CheckExact(kind)) {
            Py_RETURN_FALSE;
        }
    }
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        double score = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[0], j));
        double imp = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[1], j));
        double sources = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[2], j));
        double age_s = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[3], j));
        double uses = PyFloat_AS_DOUBLE(PyList_GET_ITEM(column[4], j));
        PyObject *kind = PyTuple_GET_ITEM(kinds, PyLong_AsSsize_t(PyList_GET_ITEM(positions, j)));
        char a[64], b[64], c[64];
        PyObject *made[3] = {NULL, NULL, NULL};
        int ok = float_text(a, sizeof a, score, 'g', 4);
        if (ok) {
            made[0] = PyUnicode_FromFormat("score %s", a);
        }
        if (ok && age_s != age_s) {
            made[1] = PyUnicode_FromFormat("no date%U", asks);
        }
        else if (ok && uses > 0) {
            ok = float_text(b, sizeof b, age_s / 86400.0, 'f', 1)
                 && float_text(c, sizeof c, uses, 'g', 6);
            if (ok) {
                made[1] = PyUnicode_FromFormat("age %sd, used %sx%U", b, c, asks);
            }
        }
        else if (ok) {
            ok = float_text(b, sizeof b, age_s / 86400.0, 'f', 1);
            if (ok) {
                made[1] = PyUnicode_FromFormat("age %sd%U", b, asks);
            }
        }
        const char *named = imp == imp ? "explicit" : NULL; /* else the kind, or "default" */
        if (named == NULL && (kind == Py_None || PyUnicode_GET_LENGTH(kind) == 0)) {
            named = "default";
        }
        if (ok && sources == sources) {
            ok = float_text(c, sizeof c, sources, 'g', 6);
            if (ok) {
                made[2] = named != NULL ? PyUnicode_FromFormat("%s, %s sources", named, c)
                                        : PyUnicode_FromFormat("%U, %s sources", kind, c);
            }
        }
        else if (ok) {
            made[2] = named != NULL ? PyUnicode_FromString(named)
                                    : (Py_INCREF(kind), kind);
        }
        PyObject *row = PyList_GET_ITEM(rows, j);
        int appended = ok && made[0] && made[1] && made[2] && PyList_Append(row, made[0]) == 0
                       && PyList_Append(row, made[1]) == 0 && PyList_Append(row, made[2]) == 0
                       && PyList_Append(row, empty) == 0;
        for (int t = 0; t < 3; t++) {
            Py_XDECREF(made[t]);
        }
        if (!appended) {
            Py_DECREF(empty);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "details_of: a number past its text's room");
            }
            return NULL;
        }
    }
    Py_DECREF(empty);
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------ relevance, columns, take */

/* These three move numbers only, or compute them with IEEE operations alone (subtract, divide,
 * multiply, add, rint): each result is the one numpy's ufuncs give, bit for bit, provided no
 * two operations are fused into one (a multiply-add rounds once where numpy rounds twice). */
#if defined(__clang__)
#define NO_FUSED_MULTIPLY_ADD
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#define NO_FUSED_MULTIPLY_ADD __attribute__((optimize("fp-contract=off")))
#else
#define NO_FUSED_MULTIPLY_ADD
#endif

/* get_buffer_shaped for a kernel that defers: 1 to max_ndim dimensions, 0 (no exception left)
 * for anything it does not take. */
static int
try_buffer(PyObject *obj, Py_buffer *view, const char *formats, int max_ndim)
{
    if (!get_buffer_shaped(obj, view, 0, formats, 1)) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim < 1 || view->ndim > max_ndim) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* What a kernel returns: what it made, else None (it defers), or NULL with the error raised
 * (out of memory). */
static PyObject *
made_or_none(PyObject *out)
{
    if (out == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return out;
}

PyDoc_STRVAR(relevance_doc,
"relevance(scores, negate, floor)\n--\n\n"
"heaprank.signals.relevance of a float64 array of scores (negated first when negate) with no\n"
"NaN and a finite span, as a bytearray of float64: the same operations in the same order\n"
"(numpy's round(12) is x * 1e12, rint, / 1e12). None for anything else.");

static PyObject * NO_FUSED_MULTIPLY_ADD
relevance(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 3, "relevance")) {
        return NULL;
    }
    if (!PyBool_Check(args[1]) || !PyFloat_CheckExact(args[2])) {
        Py_RETURN_NONE;
    }
    int negate = args[1] == Py_True;
    double floor_ = PyFloat_AS_DOUBLE(args[2]);
    Py_buffer view;
    if (!try_buffer(args[0], &view, "d", 1)) {
        Py_RETURN_NONE;
    }
    const double *s = view.buf;
    Py_ssize_t n = view.shape[0];
    double lo = 0.0, hi = 0.0;
    int clean = n > 0;
    for (Py_ssize_t i = 0; i < n && clean; i++) {
        double v = negate ? -s[i] : s[i];
        clean = v == v;
        if (i == 0 || v < lo) {
            lo = v;
        }
        if (i == 0 || v > hi) {
            hi = v;
        }
    }
    double span = hi - lo;
    PyObject *out = NULL;
    if (clean && isfinite(span)) {
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * n);
    }
    if (out != NULL) {
        double *r = (double *)PyByteArray_AS_STRING(out), scale = 1.0 - floor_;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (span <= 0) {
                r[i] = 1.0;
                continue;
            }
            double x = (negate ? -s[i] : s[i]) - lo;
            x = x / span;
            x = x * 1e12;
            x = rint(x);
            x = x / 1e12;
            x = x * scale;
            x = x + floor_;
            r[i] = floor_ < 1e-12 && x < 1e-12 ? 1e-12 : x;
        }
    }
    PyBuffer_Release(&view);
    return made_or_none(out);
}

PyDoc_STRVAR(halvings_doc,
"halvings(age_s, half_life_s)\n--\n\n"
"The exponents of heaprank.signals.recency, max(age, 0) / -half_life, of a float64 array of\n"
"ages, as a bytearray of float64 (the caller raises 2 to them with numpy's exp2); None for\n"
"anything else.");

static PyObject * NO_FUSED_MULTIPLY_ADD
halvings(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 2, "halvings")) {
        return NULL;
    }
    if (!PyFloat_CheckExact(args[1])) {
        Py_RETURN_NONE;
    }
    double minus_h = -PyFloat_AS_DOUBLE(args[1]);
    Py_buffer view;
    if (!try_buffer(args[0], &view, "d", 1)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = view.shape[0];
    const double *age = view.buf;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * n);
    if (out != NULL) {
        double *r = (double *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            /* numpy's maximum keeps a NaN; of two zeros either one (2 ** +-0 is 1 alike) */
            double a = age[i] == age[i] && age[i] < 0.0 ? 0.0 : age[i];
            r[i] = a / minus_h;
        }
    }
    PyBuffer_Release(&view);
    return made_or_none(out);
}

PyDoc_STRVAR(recency_from_doc,
"recency_from(powers, floor)\n--\n\n"
"heaprank.signals.recency from 2 ** its exponents, in place in the bytearray of float64 that\n"
"halvings made: floor + (1 - floor) * x (at least 1e-300 when floor < 1e-300), NaN (an\n"
"unknown age) read as 1. Returns True; None for anything else.");

static PyObject * NO_FUSED_MULTIPLY_ADD
recency_from(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 2, "recency_from")) {
        return NULL;
    }
    if (!PyByteArray_CheckExact(args[0]) || !PyFloat_CheckExact(args[1])
            || PyByteArray_GET_SIZE(args[0]) % (Py_ssize_t)sizeof(double) != 0) {
        Py_RETURN_NONE;
    }
    double floor_ = PyFloat_AS_DOUBLE(args[1]), scale = 1.0 - floor_;
    double *x = (double *)PyByteArray_AS_STRING(args[0]);
    Py_ssize_t n = PyByteArray_GET_SIZE(args[0]) / (Py_ssize_t)sizeof(double);
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = x[i] * scale;
        v = v + floor_;
        if (floor_ < 1e-300 && v < 1e-300) {
            v = 1e-300;
        }
        x[i] = v == v ? v : 1.0;
    }
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(columns_doc,
"columns(n, values, at)\n--\n\n"
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
"best_first(score, tie)\n--\n\n"
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
"take(at, columns)\n--\n\n"
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
        Py_buffer *v = &view[j];
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

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"coerce_columns", (PyCFunction)(void (*)(void))coerce_columns, METH_FASTCALL,
     coerce_columns_doc},
    {"shape_key", (PyCFunction)(void (*)(void))shape_key, METH_FASTCALL, shape_key_doc},
    {"shape_rows", (PyCFunction)(void (*)(void))shape_rows, METH_FASTCALL, shape_rows_doc},
    {"learn_known", (PyCFunction)(void (*)(void))learn_known, METH_FASTCALL, learn_known_doc},
    {"used_total", (PyCFunction)used_total, METH_O, used_total_doc},
    {"fsum", (PyCFunction)fsum, METH_O, fsum_doc},
    {"encode_items", (PyCFunction)(void (*)(void))encode_items, METH_FASTCALL, encode_items_doc},
    {"instances", (PyCFunction)(void (*)(void))instances, METH_FASTCALL, instances_doc},
    {"doc_stats", (PyCFunction)(void (*)(void))doc_stats, METH_FASTCALL, doc_stats_doc},
    {"shown_rows", (PyCFunction)(void (*)(void))shown_rows, METH_FASTCALL, shown_rows_doc},
    {"details_of", (PyCFunction)(void (*)(void))details_of, METH_FASTCALL, details_of_doc},
    {"relevance", (PyCFunction)(void (*)(void))relevance, METH_FASTCALL, relevance_doc},
    {"columns", (PyCFunction)(void (*)(void))columns, METH_FASTCALL, columns_doc},
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, take_doc},
    {"best_first", (PyCFunction)(void (*)(void))best_first, METH_FASTCALL, best_first_doc},
    {"halvings", (PyCFunction)(void (*)(void))halvings, METH_FASTCALL, halvings_doc},
    {"recency_from", (PyCFunction)(void (*)(void))recency_from, METH_FASTCALL,
     recency_from_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "heaprank._accel._kernels",
    "Optional C kernels of heaprank's per-candidate passes (see heaprank._accel).", -1, methods,
};

PyMODINIT_FUNC
PyInit__kernels(void)
{
    CS.str_id = PyUnicode_InternFromString("id");
    CS.str_text = PyUnicode_InternFromString("text");
    CS.str_score = PyUnicode_InternFromString("score");
    CS.str_metadata = PyUnicode_InternFromString("metadata");
    if (CS.str_id == NULL || CS.str_text == NULL || CS.str_score == NULL
            || CS.str_metadata == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
