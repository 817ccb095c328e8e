/* The walk of a piece's lines against a step line's shape (workbench/verify/shapes.py's `_Shape`),
 * compiled ahead of time (issue 19): what `shape.regex.findall(piece)` gives, without a Python object
 * per field.
 *
 * A shape is a sequence of ops, each mirroring one part of the shape's regex
 * `(?m)^(?:SHAPE|([^\n]*+))$`:
 *   bytes b"..."  the literal bytes (never a newline)
 *   0             \d++     a whole run of ASCII digits, at least one, never given back
 *   n > 0         \d{n}    exactly n ASCII digits (what follows is the next op's business)
 *   -1, -2        ( and )  a group's start and end: the first is the step's (a lone \d++), the
 *                          others the kept values'
 * No part can match in more than one way (literals are fixed, \d{n} takes n, \d++ takes the whole
 * run), so the regex never backtracks into the shape: a line is of the shape when the ops, applied
 * in turn from its start, all succeed and leave the walk at the line's end (`$`: a newline or the
 * piece's end). Any other line is the second alternative's: its whole text.
 *
 * Logs are untrusted: every read is bounds-checked against the piece, the ops are checked before
 * use, and sizes are checked for overflow.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { OP_LIT, OP_DIGITS, OP_FIXED, OP_OPEN, OP_CLOSE };

typedef struct {
    int kind;
    Py_ssize_t n;           /* OP_LIT: length; OP_FIXED: digits */
    const unsigned char *lit;
} Op;

/* A growable array of Py_ssize_t, filled without the GIL (raw allocator). */
typedef struct {
    Py_ssize_t *v;
    Py_ssize_t len, cap;
} Vec;

static int vec_reserve(Vec *vec, Py_ssize_t more) {
    if (more > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(Py_ssize_t) - vec->len) return -1;
    if (vec->len + more <= vec->cap) return 0;
    Py_ssize_t cap = vec->cap ? vec->cap : 1024;
    while (cap < vec->len + more) {
        if (cap > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(Py_ssize_t) / 2) return -1;
        cap *= 2;
    }
    Py_ssize_t *v = PyMem_RawRealloc(vec->v, (size_t)cap * sizeof(Py_ssize_t));
    if (v == NULL) return -1;
    vec->v = v;
    vec->cap = cap;
    return 0;
}

#define IS_DIGIT(c) ((unsigned char)((c) - '0') < 10)

#if PY_LITTLE_ENDIAN && (defined(__GNUC__) || defined(__clang__))
#define SWAR 1
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* The high bit of each byte of x that is an ASCII digit (bytes from 0x80 never are): exact per
 * byte, as no byte's arithmetic carries into the next. */
static inline uint64_t digit_bytes(uint64_t x) {
    uint64_t low = x & (ONES * 127);
    return (ONES * (127 + '9' + 1) - low) & ~x & (low + ONES * (127 - '0' + 1)) & HIGHS;
}
#endif

/* The end of the run of digits from p (p itself where none): eight bytes at a time where eight
 * can be read, so that the run's end is found without a mispredicted branch per run. */
static inline Py_ssize_t digits_end(const unsigned char *a, Py_ssize_t p, Py_ssize_t n) {
#ifdef SWAR
    while (n - p >= 8) {
        uint64_t x;
        memcpy(&x, a + p, 8);
        uint64_t other = ~digit_bytes(x) & HIGHS;
        if (other) return p + (__builtin_ctzll(other) >> 3);
        p += 8;
    }
#endif
    while (p < n && IS_DIGIT(a[p])) p++;
    return p;
}
/* 10**18 - 1 fits a 64-bit Py_ssize_t (10**9 - 1 a 32-bit one); a longer step goes back to the regex */
#define MAX_STEP_DIGITS (sizeof(Py_ssize_t) >= 8 ? 18 : 9)

#define MAX_FIXED (1 << 20) /* a \d{n} is as long as a run of the sample line (2048 bytes at most) */

/* The ops as a C array, checked: literals non-empty bytes without a newline, groups not nested,
 * the first group a lone \d++ (the step). Returns the number of groups, or -1 with an exception. */
static Py_ssize_t parse_ops(PyObject *ops, Op **out, Py_ssize_t *nops) {
    if (!PyTuple_Check(ops)) {
        PyErr_SetString(PyExc_TypeError, "ops must be a tuple");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(ops);
    Op *arr = PyMem_Malloc(sizeof(Op) * (size_t)(count ? count : 1));
    if (arr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t groups = 0, k = 0, opened = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GET_ITEM(ops, i);
        Op op = {0, 0, NULL};
        if (PyBytes_Check(item)) {
            op.kind = OP_LIT;
            op.n = PyBytes_GET_SIZE(item);
            op.lit = (const unsigned char *)PyBytes_AS_STRING(item);
            if (op.n == 0 || memchr(op.lit, '\n', (size_t)op.n) != NULL) goto bad;
        } else if (PyLong_Check(item)) {
            long code = PyLong_AsLong(item);
            if (code == -1 && PyErr_Occurred()) goto fail;
            if (code == 0) {
                op.kind = OP_DIGITS;
            } else if (code > 0) {
                if (code > MAX_FIXED) goto bad;
                op.kind = OP_FIXED;
                op.n = code;
            } else if (code == -1) {
                if (opened >= 0) goto bad;
                op.kind = OP_OPEN;
                opened = k;
            } else if (code == -2) {
                if (opened < 0) goto bad;
                /* the step's group: exactly one \d++ */
                if (groups == 0 && !(k - opened == 2 && arr[opened + 1].kind == OP_DIGITS)) goto bad;
                op.kind = OP_CLOSE;
                opened = -1;
                groups++;
            } else {
                goto bad;
            }
        } else {
            goto bad;
        }
        arr[k++] = op;
    }
    if (opened >= 0 || groups == 0) goto bad;
    *out = arr;
    *nops = k;
    return groups;
bad:
    PyErr_SetString(PyExc_ValueError, "not a shape's ops");
fail:
    PyMem_Free(arr);
    return -1;
}

/* Whether a[s:e] holds `needle` (ASCII lowercase letters), in any case. */
static int holds(const unsigned char *a, Py_ssize_t s, Py_ssize_t e, const unsigned char *needle, Py_ssize_t m) {
    if (m == 0) return 1;
    unsigned char first = needle[0];
    for (Py_ssize_t i = s; i + m <= e; i++) {
        if ((a[i] | 0x20) != first) continue;
        Py_ssize_t j = 1;
        while (j < m && (a[i + j] | 0x20) == needle[j]) j++;
        if (j == m) return 1;
    }
    return 0;
}

typedef struct {
    Vec at, steps, spans, others, starts;
    Py_ssize_t rows;
    int long_step;
    int nomem;
} Found;

/* The walk itself: no Python object is touched (run without the GIL). */
static void walk_lines(const unsigned char *a, Py_ssize_t n, const Op *ops, Py_ssize_t nops, Py_ssize_t values,
                       const unsigned char *needle, Py_ssize_t m, Found *f) {
    Py_ssize_t pos = 0, line = 0, shortest = 1; /* the fewest bytes a line of the shape takes, its newline too */
    for (Py_ssize_t j = 0; j < nops && shortest <= n; j++) {
        Py_ssize_t take = ops[j].kind == OP_LIT || ops[j].kind == OP_FIXED ? ops[j].n : ops[j].kind == OP_DIGITS;
        shortest = take > n - shortest + 1 ? n + 1 : shortest + take; /* (saturated: never past n + 1) */
    }
    /* room for as many shape lines as the piece can hold, so that the arrays are not copied as they grow
     * (pages not written are never touched: 15% of the scan of a 1 MiB piece); past 2**17 lines, they grow */
    Py_ssize_t most = n / shortest + 1;
    if (most > (1 << 17)) most = 1 << 17;
    if (vec_reserve(&f->at, most) < 0 || vec_reserve(&f->steps, most) < 0 || vec_reserve(&f->starts, most) < 0 ||
        (values && vec_reserve(&f->spans, most * 2 * values) < 0)) {
        f->nomem = 1;
        return;
    }
    for (;;) {
        /* room for this line's value spans, kept only if it is of the shape */
        if (vec_reserve(&f->spans, 2 * values) < 0 || vec_reserve(&f->starts, 1) < 0) {
            f->nomem = 1;
            return;
        }
        f->starts.v[f->starts.len++] = pos;
        Py_ssize_t *span = f->spans.v + f->spans.len;
        Py_ssize_t p = pos, step_s = 0, step_e = 0, g = 0, j;
        int ok = 1;
        for (j = 0; j < nops; j++) {
            const Op *op = &ops[j];
            switch (op->kind) {
            case OP_LIT:
                if (op->n > n - p || memcmp(a + p, op->lit, (size_t)op->n) != 0) ok = 0;
                else p += op->n;
                break;
            case OP_DIGITS: {
                Py_ssize_t q = digits_end(a, p, n);
                if (q == p) ok = 0;
                else p = q;
                break;
            }
            case OP_FIXED: {
                if (op->n > n - p) {
                    ok = 0;
                    break;
                }
                for (Py_ssize_t i = 0; i < op->n; i++)
                    if (!IS_DIGIT(a[p + i])) {
                        ok = 0;
                        break;
                    }
                if (ok) p += op->n;
                break;
            }
            case OP_OPEN:
                if (g == 0) step_s = p;
                else span[2 * (g - 1)] = p;
                break;
            default: /* OP_CLOSE */
                if (g == 0) step_e = p;
                else span[2 * (g - 1) + 1] = p;
                g++;
                break;
            }
            if (!ok) break;
        }
        Py_ssize_t end;
        /* every byte the ops took is a digit or a literal's (no newline), so the line goes on from p */
        if (ok && (p == n || a[p] == '\n')) {
            end = p;
            if (step_e - step_s > MAX_STEP_DIGITS) {
                f->long_step = 1;
                return;
            }
            Py_ssize_t step = 0;
            for (Py_ssize_t i = step_s; i < step_e; i++) step = step * 10 + (a[i] - '0');
            if (vec_reserve(&f->at, 1) < 0 || vec_reserve(&f->steps, 1) < 0) {
                f->nomem = 1;
                return;
            }
            f->at.v[f->at.len++] = line;
            f->steps.v[f->steps.len++] = step;
            f->spans.len += 2 * values;
        } else {
            const unsigned char *nl = p < n ? memchr(a + p, '\n', (size_t)(n - p)) : NULL;
            end = nl == NULL ? n : (Py_ssize_t)(nl - a);
            if (end > pos && holds(a, pos, end, needle, m)) {
                if (vec_reserve(&f->others, 3) < 0) {
                    f->nomem = 1;
                    return;
                }
                f->others.v[f->others.len++] = line;
                f->others.v[f->others.len++] = pos;
                f->others.v[f->others.len++] = end;
            }
        }
        if (end >= n) {
            f->rows = line + 1;
            return;
        }
        pos = end + 1;
        line++;
    }
}

/* The values as native int64s in a bytes object (for array("q"): no Python int per line). */
static PyObject *int64s_of(const Vec *vec) {
    if (vec->len > PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, vec->len * 8);
    if (out == NULL) return NULL;
    int64_t *v = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < vec->len; i++) v[i] = (int64_t)vec->v[i];
    return out;
}

PyDoc_STRVAR(walk_doc,
"walk(piece, ops, needle=None) -> (rows, starts, at, steps, highest, spans, others) | None\n\n"
"The lines of `piece` (a bytes-like object) read against a shape's `ops`, as the shape's regex\n"
"`(?m)^(?:SHAPE|([^\\n]*+))$` with `findall` reads them: `rows`, how many lines (`findall`'s rows:\n"
"a piece that ends with a newline has an empty last one) and `starts`, where each starts, as native\n"
"int64s in bytes (array(\"q\", ...)); for the lines of the shape, `at` their\n"
"indexes in the piece and `steps` their steps, each as native int64s in bytes (array(\"q\", ...)),\n"
"`highest` the highest step (None without any); `spans`, the (start, end) of each kept value of\n"
"each of those lines, for `join`; `others`, (index, text) of each other non-empty line (with\n"
"`needle`, lowercase ASCII letters, only the lines that hold it in any case). None where a step\n"
"has more than 18 digits: the regex reads that piece.");

static PyObject *walk(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"piece", "ops", "needle", NULL};
    Py_buffer buf;
    PyObject *ops_obj, *needle_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|O:walk", keywords, &buf, &ops_obj, &needle_obj)) return NULL;
    PyObject *result = NULL;
    Op *ops = NULL;
    Py_ssize_t nops = 0;
    Found f;
    memset(&f, 0, sizeof f);
    const unsigned char *needle = NULL;
    Py_ssize_t m = 0;
    if (needle_obj != Py_None) {
        if (!PyBytes_Check(needle_obj)) {
            PyErr_SetString(PyExc_TypeError, "needle must be bytes or None");
            goto done;
        }
        needle = (const unsigned char *)PyBytes_AS_STRING(needle_obj);
        m = PyBytes_GET_SIZE(needle_obj);
        for (Py_ssize_t i = 0; i < m; i++)
            if (needle[i] < 'a' || needle[i] > 'z') {
                PyErr_SetString(PyExc_ValueError, "needle must be lowercase ASCII letters");
                goto done;
            }
    }
    Py_ssize_t groups = parse_ops(ops_obj, &ops, &nops);
    if (groups < 0) goto done;
    Py_BEGIN_ALLOW_THREADS
    walk_lines((const unsigned char *)buf.buf, buf.len, ops, nops, groups - 1, needle, m, &f);
    Py_END_ALLOW_THREADS
    if (f.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (f.long_step) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *starts = int64s_of(&f.starts);
    PyObject *at = starts ? int64s_of(&f.at) : NULL;
    PyObject *steps = at ? int64s_of(&f.steps) : NULL;
    PyObject *highest = NULL;
    if (steps != NULL) {
        if (f.steps.len == 0) highest = Py_NewRef(Py_None);
        else {
            Py_ssize_t top = f.steps.v[0];
            for (Py_ssize_t i = 1; i < f.steps.len; i++)
                if (f.steps.v[i] > top) top = f.steps.v[i];
            highest = PyLong_FromSsize_t(top);
        }
    }
    PyObject *spans = highest ? PyBytes_FromStringAndSize((const char *)f.spans.v,
                                                        f.spans.len * (Py_ssize_t)sizeof(Py_ssize_t)) : NULL;
    Py_ssize_t count = f.others.len / 3;
    PyObject *others = spans ? PyList_New(count) : NULL;
    for (Py_ssize_t i = 0; others != NULL && i < count; i++) {
        Py_ssize_t *o = f.others.v + 3 * i;
        PyObject *text = PyBytes_FromStringAndSize((const char *)buf.buf + o[1], o[2] - o[1]);
        PyObject *pair = text ? Py_BuildValue("(nN)", o[0], text) : NULL;
        if (pair == NULL) {
            Py_CLEAR(others);
            break;
        }
        PyList_SET_ITEM(others, i, pair);
    }
    if (others != NULL) result = Py_BuildValue("(nNNNNNN)", f.rows, starts, at, steps, highest, spans, others);
    else {
        Py_XDECREF(starts);
        Py_XDECREF(at);
        Py_XDECREF(steps);
        Py_XDECREF(highest);
        Py_XDECREF(spans);
    }
done:
    PyMem_RawFree(f.at.v);
    PyMem_RawFree(f.steps.v);
    PyMem_RawFree(f.spans.v);
    PyMem_RawFree(f.others.v);
    PyMem_RawFree(f.starts.v);
    PyMem_Free(ops);
    PyBuffer_Release(&buf);
    return result;
}

PyDoc_STRVAR(join_doc,
"join(piece, spans, values, column, lo, hi) -> bytes\n\n"
"The text of value `column` (of `values` kept per line) on the shape's lines lo..hi-1 of a\n"
"`walk`'s `spans`, joined by single spaces (as `b\" \".join` of the regex's groups).");

static PyObject *join(PyObject *self, PyObject *args) {
    Py_buffer buf, sp;
    Py_ssize_t values, column, lo, hi;
    if (!PyArg_ParseTuple(args, "y*y*nnnn:join", &buf, &sp, &values, &column, &lo, &hi)) return NULL;
    PyObject *result = NULL;
    const Py_ssize_t *spans = (const Py_ssize_t *)sp.buf;
    Py_ssize_t width = 2 * values, total = 0;
    if (values <= 0 || column < 0 || column >= values || sp.len % ((Py_ssize_t)sizeof(Py_ssize_t) * width) != 0 ||
        lo < 0 || lo > hi || hi > sp.len / ((Py_ssize_t)sizeof(Py_ssize_t) * width)) {
        PyErr_SetString(PyExc_ValueError, "spans, column or rows out of range");
        goto done;
    }
    if ((uintptr_t)sp.buf % sizeof(Py_ssize_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "spans not aligned");
        goto done;
    }
    for (Py_ssize_t i = lo; i < hi; i++) {
        Py_ssize_t s = spans[i * width + 2 * column], e = spans[i * width + 2 * column + 1];
        if (s < 0 || s > e || e > buf.len) {
            PyErr_SetString(PyExc_ValueError, "a span outside the piece");
            goto done;
        }
        if (e - s + 1 > PY_SSIZE_T_MAX - total) {
            PyErr_NoMemory();
            goto done;
        }
        total += e - s + (i > lo);
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = lo; i < hi; i++) {
        Py_ssize_t s = spans[i * width + 2 * column], e = spans[i * width + 2 * column + 1];
        if (i > lo) *out++ = ' ';
        memcpy(out, (const char *)buf.buf + s, (size_t)(e - s));
        out += e - s;
    }
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&sp);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_VARARGS | METH_KEYWORDS, walk_doc},
    {"join", join, METH_VARARGS, join_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_shapewalk",
    "A piece's lines read against a step line's shape in one compiled walk (shapes.py's `_Shape`).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__shapewalk(void) { return PyModule_Create(&module); }
