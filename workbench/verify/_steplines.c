/* The plain pattern's step lines read in C (issue 19): what the regex engine does a line at a time,
 * with no object made per line but the ints handed back. Each function has a pure-Python twin in
 * workbench/verify/steplines.py, which runs where this module was not built, and tests compare the two
 * on every log the tests have and on generated ones (tests/test_steplines.py).
 *
 * Logs are untrusted: every read is bounded by the buffer's length, and nothing assumes text. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int is_word(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The digits s[0:n] as an int, as int(b"...") gives it (past 18 digits, through PyLong_FromString,
 * which also keeps Python's limit on the digits of an int read from text). */
static PyObject *digits_to_int(const unsigned char *s, Py_ssize_t n) {
    if (n <= 18) {
        unsigned long long v = 0;
        for (Py_ssize_t i = 0; i < n; i++) v = v * 10 + (unsigned long long)(s[i] - '0');
        return PyLong_FromUnsignedLongLong(v);
    }
    char *text = PyMem_Malloc((size_t)n + 1);
    if (text == NULL) return PyErr_NoMemory();
    memcpy(text, s, (size_t)n);
    text[n] = '\0';
    PyObject *out = PyLong_FromString(text, NULL, 10);
    PyMem_Free(text);
    return out;
}

/* step_numbers(piece) -> (steps, total, starts)
 *
 * What `_STEP_LINES.findall(piece)` gives, read as ints: the pattern
 * (?i)\bstep\b[ :=#]*+(\d++)(?:/(\d++))?+[^\n]*+ matches at most once a line, at the first place on
 * the line where it can, and takes the rest of the line. `steps` is each match's step, in order;
 * `total` the `/N` of the last match that has one (None where none has); `starts` where each match
 * starts, as native 64-bit ints in bytes (`memoryview(starts).cast("q")`). */
static PyObject *step_numbers(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = view.buf;
    const Py_ssize_t n = view.len;
    PyObject *steps = PyList_New(0);
    const unsigned char *total = NULL;
    Py_ssize_t total_len = 0;
    int64_t *starts = NULL;
    Py_ssize_t count = 0, room = 0;
    if (steps == NULL) goto fail;
    Py_ssize_t i = 0;
    while (i + 4 < n) {  /* a match needs "step" and a digit */
        unsigned char c = s[i];
        if ((c | 0x20) != 's' || (s[i + 1] | 0x20) != 't' || (s[i + 2] | 0x20) != 'e' || (s[i + 3] | 0x20) != 'p'
            || (i > 0 && is_word(s[i - 1])) || is_word(s[i + 4])) {
            i++;
            continue;
        }
        Py_ssize_t j = i + 4;
        while (j < n && (s[j] == ' ' || s[j] == ':' || s[j] == '=' || s[j] == '#')) j++;
        if (j >= n || !is_digit(s[j])) {
            i++;
            continue;
        }
        Py_ssize_t start = j;
        while (j < n && is_digit(s[j])) j++;
        PyObject *step = digits_to_int(s + start, j - start);
        if (step == NULL) goto fail;
        int appended = PyList_Append(steps, step);
        Py_DECREF(step);
        if (appended < 0) goto fail;
        if (count == room) {
            room = room ? 2 * room : 256;
            int64_t *grown = PyMem_Realloc(starts, (size_t)room * sizeof(int64_t));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            starts = grown;
        }
        starts[count++] = (int64_t)i;
        if (j + 1 < n && s[j] == '/' && is_digit(s[j + 1])) {
            Py_ssize_t t = j + 1;
            while (t < n && is_digit(s[t])) t++;
            total = s + j + 1;
            total_len = t - j - 1;
            j = t;
        }
        const unsigned char *nl = memchr(s + j, '\n', (size_t)(n - j));
        if (nl == NULL) break;
        i = (nl - s) + 1;
    }
    PyObject *last_total;
    if (total != NULL) {
        last_total = digits_to_int(total, total_len);
        if (last_total == NULL) goto fail;
    } else {
        last_total = Py_NewRef(Py_None);
    }
    PyObject *where = PyBytes_FromStringAndSize((const char *)starts, (Py_ssize_t)(count * (Py_ssize_t)sizeof(int64_t)));
    PyMem_Free(starts);
    starts = NULL;
    if (where == NULL) {
        Py_DECREF(last_total);
        goto fail;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NNN)", steps, last_total, where);
fail:
    Py_XDECREF(steps);
    PyMem_Free(starts);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"step_numbers", step_numbers, METH_O, "The steps of a piece's step lines, the last /total, and where each line's match starts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_steplines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__steplines(void) { return PyModule_Create(&module); }
