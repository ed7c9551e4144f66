/* heaprank._accel._feedback: the C kernels of a lean feedback on the memory backend
 * (heaprank/state/memory_learning.py): the rows a fresh feedback credits, found by the shown
 * rows' slots (shown_rows), and their credit added to the counts (learn_known).
 *
 * learn_known gives heaprank.learning.links.credit_rows' numbers bit for bit: its only
 * transcendental functions are log1p and expm1, as Python's math module computes them, and
 * its sum of logs is the correctly rounded one math.fsum gives.
 */

#include "_kernels.h"
#include <math.h>

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

/* The noisy-OR U of means p (n of them, each in [0, 1]): heaprank.learning.links.used_total,
 * bit for bit. 0 (and *ok = 0) for n past what it holds or a mean outside [0, 1]. */
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

PyDoc_STRVAR(learn_known_doc,
"learn_known(rows, weights, means, fids, pos, neg, gpos, gneg, /)\n--\n\n"
"One feedback's credit added to a namespace (fids, pos, neg) and the pool (gpos, gneg), when\n"
"the namespace already has a link of every feature: True; False (nothing changed) if not, or\n"
"where the kernel defers.\n\n"
"rows (a tuple or list): bytes of int64 feature ids, the ignored rows (weights[i]: each one's\n"
"summed reject weight, a float) then the used rows (means[j]: a float64 array of its links'\n"
"means, which give its features' credit as heaprank.learning.links.credit_rows does, or\n"
"None for uniform credit). Each feature's increments are summed in that order, from 0.0,\n"
"then added once to the counts: the arithmetic of credit_rows then MemoryState._add, bit for\n"
"bit.");

/* A feedback's parts, held: tuples of the rows, weights and means, the exported arrays. */
typedef struct {
    PyObject *rows, *weights, *means;
    Py_ssize_t n_rows, n_rejected, total, used_total;
    Py_buffer view[5]; /* fids, pos, neg, gpos, gneg */
    int exported;
} Feedback;

static void
feedback_release(Feedback *f)
{
    for (int b = 0; b < f->exported; b++) {
        PyBuffer_Release(&f->view[b]);
    }
    Py_CLEAR(f->rows);
    Py_CLEAR(f->weights);
    Py_CLEAR(f->means);
}

/* Hold a feedback's parts: 1; 0 (nothing held) where the kernel defers; -1 with an error. */
static int
feedback_open(Feedback *f, PyObject *const *args)
{
    memset(f, 0, sizeof *f);
    for (int a = 0; a < 3; a++) {
        if (!PyList_CheckExact(args[a]) && !PyTuple_CheckExact(args[a])) {
            PyErr_SetString(PyExc_TypeError, "learn_known: rows, weights and means do not match");
            return -1;
        }
    }
    f->rows = as_tuple(args[0]);
    f->weights = as_tuple(args[1]);
    f->means = as_tuple(args[2]);
    if (f->rows == NULL || f->weights == NULL || f->means == NULL) {
        feedback_release(f);
        return PyErr_Occurred() ? -1 : 0; /* a list changed as it was copied: deferred */
    }
    if (PyTuple_GET_SIZE(f->weights) + PyTuple_GET_SIZE(f->means) != PyTuple_GET_SIZE(f->rows)) {
        feedback_release(f);
        PyErr_SetString(PyExc_TypeError, "learn_known: rows, weights and means do not match");
        return -1;
    }
    f->n_rows = PyTuple_GET_SIZE(f->rows);
    f->n_rejected = PyTuple_GET_SIZE(f->weights);
    for (Py_ssize_t r = 0; r < f->n_rows; r++) {
        PyObject *row = PyTuple_GET_ITEM(f->rows, r);
        if (!PyBytes_CheckExact(row) || PyBytes_GET_SIZE(row) % 8) {
            feedback_release(f);
            PyErr_SetString(PyExc_TypeError, "learn_known: a row is not bytes of int64");
            return -1;
        }
        f->total += ROW_LEN(row);
        if (r >= f->n_rejected) {
            f->used_total += ROW_LEN(row);
        }
        else if (!PyFloat_CheckExact(PyTuple_GET_ITEM(f->weights, r))) {
            feedback_release(f);
            return 0; /* the Python path adds it as it is */
        }
    }
    static const char *formats[5] = {"lq", "d", "d", "d", "d"};
    for (; f->exported < 5; f->exported++) {
        if (!get_buffer(args[3 + f->exported], &f->view[f->exported], f->exported > 0,
                        formats[f->exported], 1)) {
            feedback_release(f);
            return -1;
        }
    }
    if (f->view[1].shape[0] != f->view[0].shape[0] || f->view[2].shape[0] != f->view[0].shape[0]
            || f->view[4].shape[0] != f->view[3].shape[0]) {
        feedback_release(f);
        PyErr_SetString(PyExc_ValueError, "learn_known: arrays of different lengths");
        return -1;
    }
    return 1;
}

/* The used rows' shares, from their means (or uniform): 1, or 0 to defer. */
static int
used_shares(const Feedback *f, double *shares)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t r = f->n_rejected; r < f->n_rows; r++) {
        Py_ssize_t len = ROW_LEN(PyTuple_GET_ITEM(f->rows, r));
        PyObject *m = PyTuple_GET_ITEM(f->means, r - f->n_rejected);
        if (m == Py_None) {
            for (Py_ssize_t j = 0; j < len; j++) {
                shares[k + j] = 1.0 / (double)len;
            }
        }
        else {
            Py_buffer mv;
            if (!try_buffer(m, &mv, "d", 1)) {
                return 0; /* not a contiguous float64 array: the Python path */
            }
            int fits = mv.shape[0] == len && credit_shares(mv.buf, len, shares + k);
            PyBuffer_Release(&mv);
            if (!fits) {
                return 0; /* means the kernel does not take: the Python path */
            }
        }
        k += len;
    }
    return 1;
}

/* Every feature occurrence's distinct index (its place among the namespace's links found
 * once), before anything is written: 1, or 0 for a link new to the namespace. */
static int
place_features(const Feedback *f, Distinct *d, Py_ssize_t *occurrence)
{
    const int64_t *fids = f->view[0].buf;
    Py_ssize_t n_fids = f->view[0].shape[0], n_global = f->view[3].shape[0], k = 0;
    for (Py_ssize_t r = 0; r < f->n_rows; r++) {
        PyObject *row = PyTuple_GET_ITEM(f->rows, r);
        const int64_t *ids = ROW_IDS(row);
        for (Py_ssize_t j = 0; j < ROW_LEN(row); j++, k++) {
            occurrence[k] = distinct_slot(d, ids[j], fids, n_fids, n_global);
            if (occurrence[k] < 0) {
                return 0;
            }
        }
    }
    return 1;
}

/* The increments, summed per feature in credit_rows' order, then each feature's sums added
 * once to the counts. */
static void
add_credit(const Feedback *f, Distinct *d, const Py_ssize_t *occurrence, const double *shares)
{
    Py_ssize_t k = 0, u = 0;
    for (Py_ssize_t r = 0; r < f->n_rows; r++) {
        Py_ssize_t len = ROW_LEN(PyTuple_GET_ITEM(f->rows, r));
        if (r < f->n_rejected) {
            double weight = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(f->weights, r));
            for (Py_ssize_t j = 0; j < len; j++, k++) {
                d->add_neg[occurrence[k]] += weight;
            }
        }
        else {
            for (Py_ssize_t j = 0; j < len; j++, k++, u++) {
                d->add_pos[occurrence[k]] += shares[u];
                d->add_neg[occurrence[k]] += 1.0 - shares[u];
            }
        }
    }
    double *pos = f->view[1].buf, *neg = f->view[2].buf;
    double *gpos = f->view[3].buf, *gneg = f->view[4].buf;
    for (Py_ssize_t j = 0; j < d->count; j++) {
        double add_neg = d->add_neg[j], add_pos = d->add_pos[j];
        if (add_neg != 0.0 || add_pos != 0.0) {
            gneg[d->id[j]] += add_neg;
            neg[d->at[j]] += add_neg;
            gpos[d->id[j]] += add_pos;
            pos[d->at[j]] += add_pos;
        }
    }
}

static PyObject *
learn_known(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!takes(nargs, 8, "learn_known")) {
        return NULL;
    }
    Feedback f;
    int opened = feedback_open(&f, args);
    if (opened <= 0) {
        return opened < 0 ? NULL : Py_NewRef(Py_False);
    }
    Py_ssize_t n = f.total ? f.total : 1;
    Distinct d = {0};
    d.cap = 16;
    while (d.cap < 2 * n) {
        d.cap *= 2;
    }
    /* One allocation for the table and every per-feature array (all 8-byte items). */
    void *block = PyMem_Malloc((size_t)(2 * d.cap + 4 * n + n + (f.used_total ? f.used_total : 1))
                               * 8);
    if (block == NULL) {
        feedback_release(&f);
        return PyErr_NoMemory();
    }
    d.key = block;
    d.slot = (Py_ssize_t *)(d.key + d.cap);
    d.id = (int64_t *)(d.slot + d.cap);
    d.at = (Py_ssize_t *)(d.id + n);
    d.add_pos = (double *)(d.at + n);
    d.add_neg = d.add_pos + n;
    Py_ssize_t *occurrence = (Py_ssize_t *)(d.add_neg + n);
    double *shares = (double *)(occurrence + n);
    memset(d.key, 0xFF, (size_t)d.cap * sizeof(int64_t)); /* every key -1: free */
    int applied = used_shares(&f, shares) && place_features(&f, &d, occurrence);
    if (applied) {
        add_credit(&f, &d, occurrence, shares);
    }
    PyMem_Free(block);
    feedback_release(&f);
    return PyBool_FromLong(applied);
}

/* ------------------------------------------------------------------ shown_rows */

/* Each distinct ignored row (by identity, as the Python loop's dict of rows keys them: a row
 * object hashes and compares by identity) -> its index: an open-addressing map. */
typedef struct {
    PyObject **key;
    Py_ssize_t *index;
    size_t mask;
} RowMap;

static Py_ssize_t *
row_map_place(RowMap *m, PyObject *row)
{
    size_t h = ((size_t)(uintptr_t)row >> 4) * 0x9E3779B97F4A7C15ULL;
    for (size_t at = h & m->mask;; at = (at + 1) & m->mask) {
        if (m->key[at] == NULL) {
            m->key[at] = row;
            m->index[at] = -1;
            return &m->index[at];
        }
        if (m->key[at] == row) {
            return &m->index[at];
        }
    }
}

/* 1 if every item of a set is an exact str (its lookups of an exact str then run no Python
 * code), 0 if not or if the set changed while it was read (the iterator's RuntimeError). */
static int
exact_strs(PyObject *set)
{
    PyObject *items = PySequence_Tuple(set);
    if (items == NULL) {
        PyErr_Clear();
        return 0;
    }
    int all = 1;
    for (Py_ssize_t i = 0; all && i < PyTuple_GET_SIZE(items); i++) {
        all = PyUnicode_CheckExact(PyTuple_GET_ITEM(items, i));
    }
    Py_DECREF(items);
    return all;
}

/* The row entry of a shown item, by its slots' identity: (slots, qtype, row, raw ids) as
 * MemoryState caches it, or NULL (with no exception) when the kernel does not know it. */
static PyObject *
known_row(PyObject *by_slots, PyObject *row_slots, PyObject *qtype)
{
    PyObject *key = PyLong_FromVoidPtr(row_slots);
    if (key == NULL) {
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(by_slots, key); /* int keys: no Python runs */
    Py_DECREF(key);
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4
            || PyTuple_GET_ITEM(entry, 0) != row_slots
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(entry, 3))) {
        return NULL;
    }
    PyObject *kept = PyTuple_GET_ITEM(entry, 1);
    if (kept != qtype /* the same interned name, usually */
            && (!PyUnicode_CheckExact(kept) || PyUnicode_Compare(kept, qtype) != 0)) {
        return NULL;
    }
    return entry;
}

/* What shown_rows gathers: the distinct ignored rows' raw ids and summed weights, the used
 * rows, their raw ids and positions. */
typedef struct {
    PyObject *raws, *used_rows, *used_raws, *positions;
    double *sums;
    Py_ssize_t n_rejected;
    RowMap seen;
} Shown;

/* One shown item's verdict and credit gathered: 1, 0 to defer, -1 on error. */
static int
gather_item(Shown *s, PyObject *entry, Py_ssize_t i, int is_used, PyObject *weight)
{
    PyObject *row = PyTuple_GET_ITEM(entry, 2), *raw = PyTuple_GET_ITEM(entry, 3);
    if (is_used) {
        PyObject *at = PyLong_FromSsize_t(i);
        int failed = at == NULL || PyList_Append(s->used_rows, row) < 0
                     || PyList_Append(s->used_raws, raw) < 0
                     || PyList_Append(s->positions, at) < 0;
        Py_XDECREF(at);
        return failed ? -1 : 1;
    }
    if (!PyFloat_CheckExact(weight)) {
        return 0;
    }
    Py_ssize_t *place = row_map_place(&s->seen, row);
    if (*place < 0) { /* a row first ignored here */
        *place = s->n_rejected;
        s->sums[s->n_rejected++] = PyFloat_AS_DOUBLE(weight);
        return PyList_Append(s->raws, raw) < 0 ? -1 : 1;
    }
    /* the same row again: its weights summed in rank order, as the loop sums them */
    s->sums[*place] += PyFloat_AS_DOUBLE(weight);
    return 1;
}

/* The kernel's result from what gather_item gathered: (raws, weights, used rows, their
 * positions, verdicts), or NULL with the error raised. */
static PyObject *
shown_result(Shown *s, PyObject *verdicts)
{
    PyObject *weights = PyList_New(s->n_rejected);
    for (Py_ssize_t j = 0; weights != NULL && j < s->n_rejected; j++) {
        PyObject *w = PyFloat_FromDouble(s->sums[j]);
        if (w == NULL) {
            Py_CLEAR(weights);
        }
        else {
            PyList_SET_ITEM(weights, j, w);
        }
    }
    if (weights == NULL || PyList_SetSlice(s->raws, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX,
                                           s->used_raws) < 0) {
        Py_XDECREF(weights);
        return NULL;
    }
    return Py_BuildValue("(ONOOO)", s->raws, weights, s->used_rows, s->positions, verdicts);
}

PyDoc_STRVAR(shown_rows_doc,
"shown_rows(ids, slots, used, by_slots, qtype, weights, /)\n--\n\n"
"The rows a fresh feedback credits, as MemoryState.apply_used's loop over the shown items\n"
"makes them (without doc features), or None where that loop must run (a row not known by its\n"
"slots' identity, another question type, more items than weights, an id or used id that is\n"
"not an exact str).\n\n"
"ids: tuple of str; slots: tuple of the rows' slot tuples; used: set of the used ids;\n"
"by_slots: dict id(slots) -> (slots, qtype, row, row's raw ids); weights (a list or tuple):\n"
"weights[rank] is an ignored item's reject weight at that rank (from 1). Returns (raws,\n"
"rejected_weights, used_rows, used_positions, verdicts): each distinct ignored row's raw ids\n"
"(in order of first appearance) with its summed weight, then every used row's raw ids (raws\n"
"holds both, as learn_known takes them); the used rows and their positions among the shown;\n"
"one verdict byte per shown item.");

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
            || !(PyList_CheckExact(weights) || PyTuple_CheckExact(weights))
            || PyTuple_GET_SIZE(slots) != PyTuple_GET_SIZE(ids)) {
        Py_RETURN_NONE; /* anything else: the Python loop */
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    if (!exact_strs(used)) {
        Py_RETURN_NONE;
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)n) {
        cap <<= 1;
    }
    Shown s = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), NULL, 0,
               {NULL, NULL, cap - 1}};
    void *block = PyMem_Calloc(cap + (size_t)n + cap, 8);
    PyObject *verdicts = PyBytes_FromStringAndSize(NULL, n), *out = NULL;
    int ok = s.raws && s.used_rows && s.used_raws && s.positions && block && verdicts ? 1 : -1;
    if (ok > 0 && PySequence_Fast_GET_SIZE(weights) <= n) { /* read after the allocations */
        ok = 0;
    }
    if (ok > 0) {
        s.seen.key = block;
        s.seen.index = (Py_ssize_t *)(s.seen.key + cap);
        s.sums = (double *)(s.seen.index + cap);
    }
    /* No Python code runs in this loop (exact str ids and used ids, int keys, no container
     * allocated), so weights keeps the size read above. */
    for (Py_ssize_t i = 0; ok > 0 && i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(ids, i);
        PyObject *entry = PyUnicode_CheckExact(d)
                          ? known_row(by_slots, PyTuple_GET_ITEM(slots, i), qtype) : NULL;
        int is_used = entry == NULL ? 0 : PySet_Contains(used, d);
        if (entry == NULL || is_used < 0) {
            ok = PyErr_Occurred() ? -1 : 0; /* a row first seen: the loop finds and caches it */
            break;
        }
        PyBytes_AS_STRING(verdicts)[i] = is_used ? 1 : 2; /* codec.USED, codec.IGNORED */
        ok = gather_item(&s, entry, i, is_used, PySequence_Fast_ITEMS(weights)[i + 1]);
    }
    if (ok > 0) {
        out = shown_result(&s, verdicts);
    }
    else if (ok == 0) {
        out = Py_NewRef(Py_None);
    }
    PyMem_Free(block);
    Py_XDECREF(s.raws);
    Py_XDECREF(s.used_rows);
    Py_XDECREF(s.used_raws);
    Py_XDECREF(s.positions);
    Py_XDECREF(verdicts);
    return out;
}

static PyMethodDef methods[] = {
    {"learn_known", (PyCFunction)(void (*)(void))learn_known, METH_FASTCALL, learn_known_doc},
    {"shown_rows", (PyCFunction)(void (*)(void))shown_rows, METH_FASTCALL, shown_rows_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(feedback, "C kernels of heaprank's lean feedback (see heaprank._accel).")
