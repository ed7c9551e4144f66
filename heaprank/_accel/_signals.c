/* heaprank._accel._signals: the C kernels of the signals stage (heaprank/scoring/signals.py):
 * relevance, and recency around numpy's exp2 (halvings, then recency_from).
 *
 * Each computes with IEEE operations alone (subtract, divide, multiply, add, rint), in the
 * order its numpy twin does, so each value is the one numpy's ufuncs give, bit for bit,
 * provided no two operations are fused into one (a multiply-add rounds once where numpy rounds
 * twice). Numbers cross as buffers: no numpy C API, so the module builds against any numpy.
 */

#include "_kernels.h"
#include <math.h>

/* No fused multiply-add (see above). */
#if defined(__clang__)
#define NO_FUSED_MULTIPLY_ADD
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#define NO_FUSED_MULTIPLY_ADD __attribute__((optimize("fp-contract=off")))
#else
#define NO_FUSED_MULTIPLY_ADD
#endif

PyDoc_STRVAR(relevance_doc,
"relevance(scores, negate, floor, /)\n--\n\n"
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
"halvings(age_s, half_life_s, /)\n--\n\n"
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
"recency_from(powers, floor, /)\n--\n\n"
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

static PyMethodDef methods[] = {
    {"relevance", (PyCFunction)(void (*)(void))relevance, METH_FASTCALL, relevance_doc},
    {"halvings", (PyCFunction)(void (*)(void))halvings, METH_FASTCALL, halvings_doc},
    {"recency_from", (PyCFunction)(void (*)(void))recency_from, METH_FASTCALL,
     recency_from_doc},
    {NULL, NULL, 0, NULL},
};

KERNEL_MODULE(signals, "C kernels of heaprank's signals stage (see heaprank._accel).")
