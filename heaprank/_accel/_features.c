/* heaprank._accel._features: the C kernel of the features stage (heaprank/scoring/space.py):
 * FeatureSpace.rows for candidates whose shapes are cached (shape_rows). Python hashes each
 * candidate's shape key (its own tuple hash: no twin of it here) and passes the keys.
 *
 * The caches are mirrored for this kernel in open-addressing tables of int64 entries
 * (heaprank/_accel/tables.py): bytearrays Python writes, so nothing read from them is trusted.
 * A shape's word set is an index into a list, bounds-checked; every probe sequence is bounded
 * by the table's size; every slot key is range-checked before any arithmetic on it.
 */

#include "_kernels.h"

/* One entry of the shape table (heaprank._accel.tables.ShapeTable): 4 x int64. */
typedef struct {
    int64_t key;   /* the shape key */
    int64_t slot;  /* the slot key + 1 (0: an empty entry) */
    int64_t bloom; /* one bit per word of the text, bit hash(word) % 63 */
    int64_t words; /* the index of the shape's word set in the table's list of word sets */
} table_entry;

#define SLOT_SCALE 131072
/* The largest slot key + 1 taken: row keys add at most a few thousand to a slot key, so no
 * arithmetic on a key read from a table can overflow. */
#define MAX_SLOT ((int64_t)1 << 48)

/* What shape_rows reads: the tables (exported for the whole call, so their memory stays put),
 * the lists of word sets they index, and the question's words. */
typedef struct {
    Py_buffer shapes, rows, blooms;
    int exported;
    PyObject *shape_words, *slot_words; /* held by the tables tuple */
    PyObject *names, *words; /* the question's names and words, as tuples of exact str */
    long long names_bloom, words_bloom, base;
} Reading;

static void
reading_release(Reading *r)
{
    Py_buffer *views[3] = {&r->shapes, &r->rows, &r->blooms};
    for (int b = 0; b < r->exported; b++) {
        PyBuffer_Release(views[b]);
    }
    r->exported = 0;
    Py_CLEAR(r->names);
    Py_CLEAR(r->words);
}

/* A new tuple of a frozenset's items if each is an exact str (a set lookup of one then runs
 * no Python code), else NULL with no exception set. */
static PyObject *
str_tuple(PyObject *set)
{
    if (!PyFrozenSet_CheckExact(set)) {
        return NULL;
    }
    PyObject *items = PySequence_Tuple(set);
    if (items == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(items, i))) {
            Py_DECREF(items);
            return NULL;
        }
    }
    return items;
}

/* Fill r from the tables tuple (shape table, its word sets, slot words, slot blooms, row
 * table) and the question tuple (names, names bloom, words, words
 * bloom): 1, or 0 (with r released) for anything it does not take. */
static int
reading_open(Reading *r, PyObject *tables, PyObject *question, PyObject *base)
{
    memset(r, 0, sizeof *r);
    if (!PyTuple_CheckExact(tables) || PyTuple_GET_SIZE(tables) != 5
            || !PyTuple_CheckExact(question) || PyTuple_GET_SIZE(question) != 4) {
        return 0;
    }
    r->shape_words = PyTuple_GET_ITEM(tables, 1);
    r->slot_words = PyTuple_GET_ITEM(tables, 2);
    r->names_bloom = PyLong_AsLongLong(PyTuple_GET_ITEM(question, 1));
    r->words_bloom = PyLong_AsLongLong(PyTuple_GET_ITEM(question, 3));
    r->base = PyLong_AsLongLong(base);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (!PyList_CheckExact(r->shape_words) || !PyList_CheckExact(r->slot_words)
            || r->base < 0 || r->base >= SLOT_SCALE) {
        return 0;
    }
    PyObject *views[3] = {PyTuple_GET_ITEM(tables, 0), PyTuple_GET_ITEM(tables, 4),
                          PyTuple_GET_ITEM(tables, 3)};
    Py_buffer *into[3] = {&r->shapes, &r->rows, &r->blooms};
    for (; r->exported < 3; r->exported++) {
        if (!PyByteArray_CheckExact(views[r->exported])
                || PyObject_GetBuffer(views[r->exported], into[r->exported], PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            reading_release(r);
            return 0;
        }
    }
    r->names = str_tuple(PyTuple_GET_ITEM(question, 0));
    r->words = str_tuple(PyTuple_GET_ITEM(question, 2));
    if (r->names == NULL || r->words == NULL) {
        reading_release(r);
        return 0;
    }
    return 1;
}

/* The word set at index i of a list (a new reference), or NULL: out of range, or not a
 * frozenset. */
static PyObject *
word_set(PyObject *list, int64_t i)
{
    if (i < 0 || i >= PyList_GET_SIZE(list)) {
        return NULL;
    }
    PyObject *set = PyList_GET_ITEM(list, (Py_ssize_t)i);
    return PyFrozenSet_CheckExact(set) ? Py_NewRef(set) : NULL;
}

/* 1 if no item of a tuple of exact str is in set (a new reference this call releases), 0 if
 * one is, -1 on error or for a set it does not take. */
static int
disjoint(PyObject *items, PyObject *set)
{
    if (set == NULL) {
        return -1;
    }
    int out = 1;
    for (Py_ssize_t i = 0; out == 1 && i < PyTuple_GET_SIZE(items); i++) {
        int in = PySet_Contains(set, PyTuple_GET_ITEM(items, i));
        out = in < 0 ? -1 : !in;
    }
    Py_DECREF(set);
    if (out < 0) {
        PyErr_Clear();
    }
    return out;
}

/* The entry of shape key h in the shape table (its probe bounded by the table's size), or
 * NULL if the table does not hold it. */
static const table_entry *
find_shape(const Reading *r, Py_hash_t h)
{
    const table_entry *entry = r->shapes.buf;
    size_t size = (size_t)r->shapes.len / sizeof(table_entry), mask = size - 1;
    if (size == 0 || (size & mask) != 0) {
        return NULL;
    }
    size_t at = (size_t)mix_key((uint64_t)h) & mask;
    for (size_t probes = 0; probes < size; probes++, at = (at + 1) & mask) {
        if (entry[at].slot == 0) {
            return NULL;
        }
        if (entry[at].key == (int64_t)h) {
            return &entry[at];
        }
    }
    return NULL;
}

/* The row of full key `full` in the row table: 1 and *row set; 0 if it does not hold it (a
 * row not built yet, or inserted in the dict and not yet in the table: the caller looks it up
 * in the dict); -1 for what the kernel does not take. */
static int
find_row(const Reading *r, int64_t full, Py_ssize_t *row)
{
    const int64_t *entry = r->rows.buf;
    size_t size = (size_t)r->rows.len / 16, mask = size - 1;
    if (size == 0 || (size & mask) != 0) {
        return -1;
    }
    size_t at = (size_t)mix_key((uint64_t)full) & mask;
    for (size_t probes = 0; probes < size && entry[2 * at + 1] != 0; probes++) {
        if (entry[2 * at] == full) {
            *row = (Py_ssize_t)(entry[2 * at + 1] - 1);
            return *row >= 0 ? 1 : -1;
        }
        at = (at + 1) & mask;
    }
    return 0;
}

/* One call's scratch: per candidate its shape key, its position among the distinct rows and
 * its neighbour code; per distinct row its key (then full key), a candidate of it, and the
 * distinct rows not built yet; the open-addressing map of the distinct keys. */
typedef struct {
    Py_ssize_t n, d, cap, n_absent;
    int64_t *shape_of, *keys, *codes, *seen_key;
    Py_ssize_t *rep, *seen_at, *absent;
} Work;

static int
work_open(Work *w, Py_ssize_t n, PyObject *codes)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->cap = 16;
    while (w->cap < 2 * n) {
        w->cap <<= 1;
    }
    /* one block of 8-byte items: 4 arrays of n int64, 2 of n Py_ssize_t, and the map */
    void *block = PyMem_Malloc((size_t)(6 * n + 2 * w->cap) * 8);
    if (block == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->shape_of = block;
    w->keys = w->shape_of + n;
    w->codes = w->keys + n;
    w->seen_key = w->codes + n;
    w->rep = (Py_ssize_t *)(w->seen_key + w->cap);
    w->seen_at = w->rep + n;
    w->absent = w->seen_at + w->cap;
    for (Py_ssize_t j = 0; j < w->cap; j++) {
        w->seen_at[j] = -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* the codes read now, before anything can run */
        PyObject *code = codes == Py_None ? NULL : PyList_GET_ITEM(codes, i);
        w->codes[i] = code == NULL ? 0 : PyLong_CheckExact(code) ? PyLong_AsLong(code) : -1;
        if (w->codes[i] < 0 || w->codes[i] >= SLOT_SCALE / 16) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Each candidate's shape key read from `keys` (an exact int each), its table entry's load
 * started: 1, or 0 to defer. */
static int
shape_keys(Work *w, const Reading *r, PyObject *keys)
{
    size_t mask = (size_t)r->shapes.len / sizeof(table_entry) - 1;
    for (Py_ssize_t i = 0; i < w->n; i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        long long h = PyLong_CheckExact(key) ? PyLong_AsLongLong(key) : -1;
        if (h == -1) { /* not an int, out of range, or -1 (never a hash) */
            PyErr_Clear();
            return 0;
        }
        w->shape_of[i] = (int64_t)h;
        PREFETCH((const table_entry *)r->shapes.buf + ((size_t)mix_key((uint64_t)h) & mask));
    }
    return 1;
}

/* Each candidate's row key (slot key, + 1 when it shares no name with the question, + 16 x
 * its neighbour code), and its position among the distinct keys (into local): 1, or 0 to
 * defer (a shape not cached yet, or a table entry the kernel does not take). */
static int
row_keys(Work *w, const Reading *r, Py_ssize_t *local)
{
    int with_names = PyTuple_GET_SIZE(r->names) > 0;
    for (Py_ssize_t i = 0; i < w->n; i++) {
        const table_entry *entry = find_shape(r, (Py_hash_t)w->shape_of[i]);
        if (entry == NULL || entry->slot <= 0 || entry->slot > MAX_SLOT) {
            return 0;
        }
        int64_t key = entry->slot - 1;
        if (with_names) {
            int apart = 1;
            if (entry->bloom & r->names_bloom) { /* maybe shared: the sets tell */
                apart = disjoint(r->names, word_set(r->shape_words, entry->words));
                if (apart < 0) {
                    return 0;
                }
            }
            key += apart;
        }
        key += 16 * w->codes[i];
        size_t s = (size_t)mix_key((uint64_t)key) & (size_t)(w->cap - 1);
        while (w->seen_at[s] >= 0 && w->seen_key[s] != key) {
            s = (s + 1) & (size_t)(w->cap - 1);
        }
        if (w->seen_at[s] < 0) {
            w->seen_key[s] = key;
            w->seen_at[s] = w->d;
            w->keys[w->d] = key;
            w->rep[w->d++] = i; /* shape_of[rep[d]] is its shape key */
        }
        local[i] = w->seen_at[s];
    }
    return 1;
}

/* Each distinct row's full key (+ base, + 2 when the question names none of its slot's
 * source words), and its row (-1: not built yet, noted in absent): 1, or 0 to defer. */
static int
full_rows(Work *w, const Reading *r, Py_ssize_t *distinct)
{
    const int64_t *slot_bloom = r->blooms.buf;
    Py_ssize_t n_blooms = r->blooms.len / 8;
    for (Py_ssize_t j = 0; j < w->d; j++) {
        int64_t slot = w->keys[j] / SLOT_SCALE;
        if (slot >= n_blooms) {
            return 0;
        }
        int apart = 1; /* the question names none of the slot's source words */
        if (slot_bloom[slot] & r->words_bloom) { /* maybe it does: the sets tell */
            apart = disjoint(r->words, word_set(r->slot_words, slot));
            if (apart < 0) {
                return 0;
            }
        }
        w->keys[j] += r->base + 2 * apart;
    }
    for (Py_ssize_t j = 0; j < w->d; j++) {
        int found = find_row(r, w->keys[j], &distinct[j]);
        if (found < 0) {
            return 0;
        }
        if (found == 0) {
            distinct[j] = -1;
            w->absent[w->n_absent++] = j;
        }
    }
    return 1;
}

/* The (position, full key, candidate, shape key) of each distinct row not built yet. */
static PyObject *
missing_rows(const Work *w)
{
    PyObject *missing = PyList_New(w->n_absent);
    for (Py_ssize_t a = 0; missing != NULL && a < w->n_absent; a++) {
        Py_ssize_t j = w->absent[a];
        PyObject *note = Py_BuildValue("(nLnL)", j, (long long)w->keys[j], w->rep[j],
                                       (long long)w->shape_of[w->rep[j]]);
        if (note == NULL) {
            Py_CLEAR(missing);
        }
        else {
            PyList_SET_ITEM(missing, a, note);
        }
    }
    return missing;
}

PyDoc_STRVAR(shape_rows_doc,
"shape_rows(tables, keys, question, codes, base, /)\n--\n\n"
"heaprank.scoring.space.FeatureSpace.rows for shapes the tables hold, or None.\n\n"
"tables: (shape table, its word sets, slot words, slot blooms, row table): a ShapeTable's\n"
"bytearray (power-of-two entries of shape key, slot key + 1, bloom, index of the shape's\n"
"word set in the list that follows), the source words of each slot id and their blooms (a\n"
"bytearray of int64), a RowTable's bytearray (full key, row + 1). keys: each candidate's\n"
"shape key (a tuple of int). question: (names, names bloom, words, words bloom).\n"
"Each candidate's row key is its slot key, + 1 when it shares no name with the question\n"
"(names non-empty), + 16 x codes[i] (codes: neighbour codes, or None); its full key adds\n"
"base and 2 when the question names none of its slot's source words.\n"
"Returns (d, both, missing): both is a bytearray of intp, the d distinct rows (in order of\n"
"first appearance) then each candidate's position among them; missing lists (position,\n"
"full key, candidate, shape key) of the distinct rows the table does not hold (-1 in both).\n"
"None when a shape is not in the table (the caller featurises it in Python), or for anything\n"
"else.");

static PyObject *
shape_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 5, "shape_rows")) {
        return NULL;
    }
    PyObject *keys = args[1], *codes = args[3];
    if (!PyTuple_CheckExact(keys) || (codes != Py_None && !PyList_CheckExact(codes))) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(keys);
    Reading r;
    if (n == 0 || !reading_open(&r, args[0], args[2], args[4])) {
        Py_RETURN_NONE;
    }
    Work w = {0};
    PyObject *both = NULL, *out = NULL;
    /* the codes' count read again: reading_open allocates, so Python code may have run */
    int ok = (codes == Py_None || PyList_GET_SIZE(codes) == n) ? work_open(&w, n, codes) : 0;
    if (ok > 0) {
        both = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(Py_ssize_t) * 2 * n);
        ok = both == NULL ? -1 : 1;
    }
    if (ok > 0) {
        Py_ssize_t *rows = (Py_ssize_t *)PyByteArray_AS_STRING(both), *local = rows + n;
        ok = shape_keys(&w, &r, keys) && row_keys(&w, &r, local);
        if (ok) { /* the distinct rows go first, the local positions right after them */
            memmove(rows + w.d, local, (size_t)n * sizeof(Py_ssize_t));
            ok = full_rows(&w, &r, rows);
        }
    }
    reading_release(&r);
    if (ok > 0 && PyByteArray_Resize(both, (Py_ssize_t)sizeof(Py_ssize_t) * (w.d + n)) == 0) {
        PyObject *missing = missing_rows(&w);
        out = missing == NULL ? NULL : Py_BuildValue("(nON)", w.d, both, missing);
    }
    else if (ok == 0) {
        out = Py_NewRef(Py_None);
    }
    PyMem_Free(w.shape_of); /* the block work_open allocated, or NULL */
    Py_XDECREF(both);
    return out;
}

static PyMethodDef methods[] = {
    {"shape_rows", (PyCFunction)(void (*)(void))shape_rows, METH_FASTCALL, shape_rows_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(features, "The C kernel of heaprank's features stage (see heaprank._accel).")
