/* The cold path's hot loops in C: split a prepared text into tokens, look each up in a
 * table of token -> term, and count the terms (crag_heuristic/_text.py, Analyzer); and
 * read the query terms' counts in stored analyses' rows (row_counts below, for
 * crag_heuristic/_analyses.py, ChunkAnalyses).
 *
 * Optional: built by setuptools with optional=True; without it the analyzer runs the
 * same steps in Python (Analyzer._analyze_python), and tests/test_native.py checks that
 * both give the same tokens, counts and order (and the same for row_counts and
 * ChunkAnalyses._counts_numpy). Nothing here decides what a token is beyond the reading
 * rules below; NFKC, case folding of non-ASCII text and stemming stay in Python.
 *
 *   TermCounter.count(text, folds, stops=False) ->
 *       (counts, n_tokens, n_stop, stop_tokens | None), or a list of the tokens the
 *       table lacks (nothing counted: add them and call again).
 *   text: NFKC already; folds: {code point: replacement} for every non-ASCII character
 *   of text that is not a letter or digit equal to its case folding (Analyzer._folds).
 *   The text is read as Analyzer.tokens reads it: ASCII letters and digits lower-cased,
 *   other ASCII characters spaces, a character of folds its replacement (whose spaces
 *   split), any other non-ASCII character kept; tokens are the runs between spaces.
 *   counts: term -> occurrences, terms in order of first occurrence (what
 *   collections.Counter of the looked-up terms gives), stop words left out.
 *
 * Table: open addressing, linear probing, at most half full. An entry owns a reference
 * to its token and its term (both str). Per count, each token entry met gets the call's
 * stamp and a counter; the entries met are kept in order of first occurrence. No
 * Python code of ours runs while a call works (str keys only), but an allocation may start
 * the garbage collector, whose finalizers run any Python code (and may let another thread
 * in): so a count marks the table busy, and while it is, a count answers None (the caller
 * then takes the Python path) and update and clear change nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject *token; /* str; NULL: an empty slot */
    PyObject *term;  /* str; " " marks a stop word */
    uint64_t hash;
    uint64_t stamp;
    Py_ssize_t count;
    int stop;
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *slots;
    size_t mask; /* capacity - 1 (a power of two) */
    Py_ssize_t used;
    uint64_t stamp;
    size_t *met; /* slot indices met by the current count, in order */
    size_t met_cap;
    Py_UCS4 *buf; /* the current token's characters */
    Py_ssize_t buf_cap;
    int busy; /* a count is running: the table, the buffer and the stamps are its own */
} TermCounter;

typedef struct {
    Py_UCS4 code;
    PyObject *replacement; /* borrowed from the folds dict */
} Fold;

#define FNV_START 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL
#define INITIAL_CAPACITY 1024

static inline uint64_t mix(uint64_t h, Py_UCS4 c) { return (h ^ c) * FNV_PRIME; }

static inline int ascii_alnum(Py_UCS4 c) {
    return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

static inline Py_UCS4 ascii_lower(Py_UCS4 c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* Whether a token (str) is the characters chars[0:len]. */
static int same(PyObject *token, const Py_UCS4 *chars, Py_ssize_t len) {
    if (PyUnicode_GET_LENGTH(token) != len) return 0;
    int kind = PyUnicode_KIND(token);
    const void *data = PyUnicode_DATA(token);
    for (Py_ssize_t j = 0; j < len; j++)
        if (PyUnicode_READ(kind, data, j) != chars[j]) return 0;
    return 1;
}

static Entry *find(TermCounter *self, uint64_t hash, const Py_UCS4 *chars, Py_ssize_t len) {
    for (size_t i = (size_t)hash & self->mask;; i = (i + 1) & self->mask) {
        Entry *e = &self->slots[i];
        if (e->token == NULL) return NULL;
        if (e->hash == hash && same(e->token, chars, len)) return e;
    }
}

/* Room for n characters in the token buffer. */
static int reserve(TermCounter *self, Py_ssize_t n) {
    if (n <= self->buf_cap) return 0;
    Py_ssize_t cap = self->buf_cap ? self->buf_cap : 64;
    while (cap < n) cap *= 2;
    Py_UCS4 *buf = PyMem_Realloc(self->buf, (size_t)cap * sizeof(Py_UCS4));
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = buf;
    self->buf_cap = cap;
    return 0;
}

static void free_slots(Entry *slots, size_t capacity) {
    for (size_t i = 0; i < capacity; i++) {
        Py_XDECREF(slots[i].token);
        Py_XDECREF(slots[i].term);
    }
    PyMem_Free(slots);
}

/* Empty slots of a new capacity, the entries moved over (references move too). */
static int resize(TermCounter *self, size_t capacity) {
    Entry *slots = PyMem_Calloc(capacity, sizeof(Entry));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t mask = capacity - 1;
    if (self->slots != NULL) {
        for (size_t i = 0; i <= self->mask; i++) {
            Entry *e = &self->slots[i];
            if (e->token == NULL) continue;
            size_t j = (size_t)e->hash & mask;
            while (slots[j].token != NULL) j = (j + 1) & mask;
            slots[j] = *e;
            slots[j].stamp = 0;
        }
        PyMem_Free(self->slots);
    }
    self->slots = slots;
    self->mask = mask;
    self->stamp = 0;
    return 0;
}

/* token -> term (new or replaced); both must be str. */
static int put(TermCounter *self, PyObject *token, PyObject *term) {
    if (!PyUnicode_Check(token) || !PyUnicode_Check(term)) {
        PyErr_SetString(PyExc_TypeError, "TermCounter maps str tokens to str terms");
        return -1;
    }
    if ((size_t)(self->used + 1) * 2 > self->mask + 1 && resize(self, (self->mask + 1) * 2) < 0)
        return -1;
    int kind = PyUnicode_KIND(token);
    const void *data = PyUnicode_DATA(token);
    Py_ssize_t len = PyUnicode_GET_LENGTH(token);
    if (reserve(self, len) < 0) return -1;
    uint64_t hash = FNV_START;
    for (Py_ssize_t j = 0; j < len; j++) {
        self->buf[j] = PyUnicode_READ(kind, data, j);
        hash = mix(hash, self->buf[j]);
    }
    Entry *e = find(self, hash, self->buf, len);
    if (e == NULL) { /* find stopped at an empty slot: take the first empty one */
        size_t i = (size_t)hash & self->mask;
        while (self->slots[i].token != NULL) i = (i + 1) & self->mask;
        e = &self->slots[i];
        Py_INCREF(token);
        e->token = token;
        e->hash = hash;
        e->stamp = 0;
        self->used++;
    } else {
        Py_DECREF(e->term);
    }
    Py_INCREF(term);
    e->term = term;
    e->stop = PyUnicode_GET_LENGTH(term) == 1 && PyUnicode_READ_CHAR(term, 0) == ' ';
    return 0;
}

static PyObject *TermCounter_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":TermCounter", kwlist)) return NULL;
    TermCounter *self = (TermCounter *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (resize(self, INITIAL_CAPACITY) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void TermCounter_dealloc(TermCounter *self) {
    if (self->slots != NULL) free_slots(self->slots, self->mask + 1);
    PyMem_Free(self->met);
    PyMem_Free(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t TermCounter_len(TermCounter *self) { return self->used; }

static PyObject *TermCounter_update(TermCounter *self, PyObject *mapping) {
    if (!PyDict_Check(mapping)) {
        PyErr_SetString(PyExc_TypeError, "update() takes a dict of token -> term");
        return NULL;
    }
    if (self->busy) Py_RETURN_NONE; /* inside a count (see the header): nothing changes */
    PyObject *token, *term;
    Py_ssize_t pos = 0;
    while (PyDict_Next(mapping, &pos, &token, &term))
        if (put(self, token, term) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *TermCounter_clear(TermCounter *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) Py_RETURN_NONE; /* inside a count (see the header): nothing changes */
    Entry *old = self->slots;
    size_t capacity = self->mask + 1;
    self->slots = NULL;
    if (resize(self, INITIAL_CAPACITY) < 0) { /* keep the old table: still consistent */
        self->slots = old;
        return NULL;
    }
    self->used = 0;
    free_slots(old, capacity);
    Py_RETURN_NONE;
}

/* Note slot e as met by this count (first time: counter reset, index kept in order). */
static int meet(TermCounter *self, Entry *e, size_t *n_met) {
    if (e->stamp != self->stamp) {
        if (*n_met == self->met_cap) {
            size_t cap = self->met_cap ? self->met_cap * 2 : 256;
            size_t *met = PyMem_Realloc(self->met, cap * sizeof(size_t));
            if (met == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->met = met;
            self->met_cap = cap;
        }
        self->met[(*n_met)++] = (size_t)(e - self->slots);
        e->stamp = self->stamp;
        e->count = 0;
    }
    e->count++;
    return 0;
}

/* A token the table lacks (the buffer's characters), as a new str appended to *missing. */
static int add_missing(PyObject **missing, const Py_UCS4 *chars, Py_ssize_t len) {
    PyObject *token = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, chars, len);
    if (token == NULL) return -1;
    if (*missing == NULL && (*missing = PyList_New(0)) == NULL) {
        Py_DECREF(token);
        return -1;
    }
    int failed = PyList_Append(*missing, token);
    Py_DECREF(token);
    return failed;
}

/* The counted terms of the met entries (stop words apart), and the stop tokens. */
static PyObject *results(TermCounter *self, size_t n_met, Py_ssize_t n_tokens, int stops) {
    PyObject *counts = PyDict_New();
    PyObject *stop_tokens = stops ? PyList_New(0) : Py_NewRef(Py_None);
    Py_ssize_t n_stop = 0;
    if (counts == NULL || stop_tokens == NULL) goto fail;
    for (size_t m = 0; m < n_met; m++) {
        Entry *e = &self->slots[self->met[m]];
        if (e->stop) {
            n_stop += e->count;
            if (stops && PyList_Append(stop_tokens, e->token) < 0) goto fail;
            continue;
        }
        Py_ssize_t total = e->count;
        PyObject *before = PyDict_GetItemWithError(counts, e->term); /* borrowed */
        if (before != NULL) {
            total += PyLong_AsSsize_t(before);
            if (total == -1 && PyErr_Occurred()) goto fail;
        } else if (PyErr_Occurred()) {
            goto fail;
        }
        PyObject *value = PyLong_FromSsize_t(total);
        if (value == NULL) goto fail;
        int failed = PyDict_SetItem(counts, e->term, value);
        Py_DECREF(value);
        if (failed < 0) goto fail;
    }
    return Py_BuildValue("(NnnN)", counts, n_tokens, n_stop, stop_tokens);
fail:
    Py_XDECREF(counts);
    Py_XDECREF(stop_tokens);
    return NULL;
}

static int fold_order(const void *a, const void *b) {
    Py_UCS4 x = ((const Fold *)a)->code, y = ((const Fold *)b)->code;
    return (x > y) - (x < y);
}

/* The folds dict as an array sorted by code point (to search per character). */
static Fold *read_folds(PyObject *folds, Py_ssize_t *n) {
    *n = PyDict_GET_SIZE(folds);
    Fold *out = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof(Fold));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(folds, &pos, &key, &value)) {
        long code = PyLong_Check(key) ? PyLong_AsLong(key) : -1;
        if (code < 128 || code > 0x10FFFF || !PyUnicode_Check(value)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError,
                                "folds maps non-ASCII code points to str replacements");
            PyMem_Free(out);
            return NULL;
        }
        out[i].code = (Py_UCS4)code;
        out[i++].replacement = value;
    }
    qsort(out, (size_t)*n, sizeof(Fold), fold_order);
    return out;
}

static PyObject *find_fold(const Fold *folds, Py_ssize_t n, Py_UCS4 c) {
    Py_ssize_t low = 0, high = n;
    while (low < high) {
        Py_ssize_t mid = (low + high) / 2;
        if (folds[mid].code < c)
            low = mid + 1;
        else
            high = mid;
    }
    return low < n && folds[low].code == c ? folds[low].replacement : NULL;
}

/* State of one count: the token being read (in self->buf) and what was met. */
typedef struct {
    Py_ssize_t len, n_tokens;
    size_t n_met;
    uint64_t hash;
    PyObject *missing;
} Scan;

static inline int emit(TermCounter *self, Scan *scan, Py_UCS4 c) {
    if (scan->len == self->buf_cap && reserve(self, scan->len + 1) < 0) return -1;
    if (scan->len == 0) scan->hash = FNV_START;
    self->buf[scan->len++] = c;
    scan->hash = mix(scan->hash, c);
    return 0;
}

/* The end of a token (if one is open): look it up and count it, or note it missing. */
static int close_token(TermCounter *self, Scan *scan) {
    if (scan->len == 0) return 0;
    scan->n_tokens++;
    Entry *e = find(self, scan->hash, self->buf, scan->len);
    int failed = e == NULL ? add_missing(&scan->missing, self->buf, scan->len)
                           : (scan->missing == NULL ? meet(self, e, &scan->n_met) : 0);
    scan->len = 0;
    return failed;
}

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Read text[0:n] token by token (the rules in the header). Inlined with a constant kind
 * at each call, so that the compiler makes each kind's loop without a switch per read. */
static ALWAYS_INLINE int scan_text(TermCounter *self, Scan *scan, int kind, const void *data,
                                   Py_ssize_t n, const Fold *folds, Py_ssize_t n_folds) {
    int failed = 0;
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128) {
            failed = ascii_alnum(c) ? emit(self, scan, ascii_lower(c)) : close_token(self, scan);
            continue;
        }
        PyObject *replacement = n_folds ? find_fold(folds, n_folds, c) : NULL;
        if (replacement == NULL) { /* a letter or digit that folds to itself */
            failed = emit(self, scan, c);
            continue;
        }
        int rkind = PyUnicode_KIND(replacement);
        const void *rdata = PyUnicode_DATA(replacement);
        for (Py_ssize_t j = 0; j < PyUnicode_GET_LENGTH(replacement) && !failed; j++) {
            Py_UCS4 r = PyUnicode_READ(rkind, rdata, j);
            failed = r == ' ' ? close_token(self, scan) : emit(self, scan, r);
        }
    }
    return failed;
}

/* count(text, folds, stops=False), positional only (METH_FASTCALL: no argument tuple). */
static PyObject *TermCounter_count(TermCounter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "count(text: str, folds: dict, stops: bool = False)");
        return NULL;
    }
    PyObject *text = args[0], *folds_dict = args[1];
    int stops = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (stops < 0) return NULL;
    if (self->busy) Py_RETURN_NONE; /* called from inside a count (see the header) */
    Py_ssize_t n_folds;
    Fold *folds = read_folds(folds_dict, &n_folds);
    if (folds == NULL) return NULL;
    self->busy = 1; /* until the return: no other count, update or clear */
    if (++self->stamp == 0) { /* the stamps wrapped: forget every entry's */
        for (size_t i = 0; i <= self->mask; i++) self->slots[i].stamp = 0;
        self->stamp = 1;
    }
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Scan scan = {0, 0, 0, FNV_START, NULL};
    int failed;
    switch (PyUnicode_KIND(text)) { /* one copy of the loop per kind, each with its reads */
    case PyUnicode_1BYTE_KIND:
        failed = scan_text(self, &scan, PyUnicode_1BYTE_KIND, data, n, folds, n_folds);
        break;
    case PyUnicode_2BYTE_KIND:
        failed = scan_text(self, &scan, PyUnicode_2BYTE_KIND, data, n, folds, n_folds);
        break;
    default:
        failed = scan_text(self, &scan, PyUnicode_4BYTE_KIND, data, n, folds, n_folds);
    }
    PyMem_Free(folds);
    PyObject *out;
    if (failed || close_token(self, &scan) < 0) {
        Py_XDECREF(scan.missing);
        out = NULL;
    } else {
        out = scan.missing != NULL ? scan.missing : results(self, scan.n_met, scan.n_tokens, stops);
    }
    self->busy = 0;
    return out;
}

/* -- row_counts: the query terms' counts in stored analyses' rows (_analyses.py) ------- */

/* An unsigned integer of `size` bytes at p. */
static inline uint64_t read_uint(const char *p, Py_ssize_t size) {
    switch (size) {
    case 1: return *(const uint8_t *)p;
    case 2: return *(const uint16_t *)p;
    case 4: return *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
    }
}

/* row_counts(term_ids, term_counts, table, wanted) -> counts[i][j]: the count of table
 * position wanted[j] (-1: none) among row i's terms, a row's terms being
 * term_ids[s:s + n] with s, n = table[i, 3], table[i, 4] (ChunkAnalyses._row_table) and
 * their counts term_counts[s:s + n]. term_ids and term_counts: unsigned, C-contiguous,
 * one dimension; table: int64, C-contiguous, (rows, 5). */
static PyObject *row_counts(PyObject *module, PyObject *args) {
    PyObject *ids_obj, *counts_obj, *table_obj, *wanted_obj, *out = NULL;
    if (!PyArg_ParseTuple(args, "OOOO!:row_counts", &ids_obj, &counts_obj, &table_obj,
                          &PyList_Type, &wanted_obj))
        return NULL;
    Py_buffer ids = {0}, counts = {0}, table = {0};
    long long *wanted = NULL;
    int got_ids = PyObject_GetBuffer(ids_obj, &ids, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0;
    int got_counts =
        got_ids && PyObject_GetBuffer(counts_obj, &counts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0;
    int got_table = got_counts &&
                    PyObject_GetBuffer(table_obj, &table, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0;
    if (!got_table) goto done;
    Py_ssize_t n_ids = ids.itemsize ? ids.len / ids.itemsize : 0;
    if (ids.ndim != 1 || ids.itemsize != 4 || counts.ndim != 1 ||
        counts.len / (counts.itemsize ? counts.itemsize : 1) != n_ids ||
        (counts.itemsize != 1 && counts.itemsize != 2 && counts.itemsize != 4) ||
        table.ndim != 2 || table.itemsize != 8 || table.shape[1] != 5) {
        PyErr_SetString(PyExc_ValueError,
                        "row_counts takes uint32 term ids, as many 1, 2 or 4-byte counts and "
                        "an int64 table of (rows, 5)");
        goto done;
    }
    Py_ssize_t n_wanted = PyList_GET_SIZE(wanted_obj), n_rows = table.shape[0];
    wanted = PyMem_Malloc((size_t)(n_wanted ? n_wanted : 1) * sizeof(long long));
    if (wanted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < n_wanted; j++) {
        wanted[j] = PyLong_AsLongLong(PyList_GET_ITEM(wanted_obj, j));
        if (wanted[j] == -1 && PyErr_Occurred()) goto done;
    }
    if ((out = PyList_New(n_rows)) == NULL) goto done;
    const int64_t *rows = (const int64_t *)table.buf;
    const uint32_t *term_ids = (const uint32_t *)ids.buf;
    for (Py_ssize_t i = 0; i < n_rows; i++) {
        int64_t start = rows[5 * i + 3], length = rows[5 * i + 4];
        if (start < 0 || length < 0 || start > n_ids || length > n_ids - start) {
            PyErr_SetString(PyExc_ValueError, "a row's terms lie outside the term ids");
            Py_CLEAR(out);
            goto done;
        }
        PyObject *row = PyList_New(n_wanted);
        if (row == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, row); /* steals the reference; filled below */
        for (Py_ssize_t j = 0; j < n_wanted; j++) {
            uint64_t value = 0;
            for (int64_t t = start; wanted[j] >= 0 && t < start + length; t++)
                if (term_ids[t] == (uint64_t)wanted[j]) { /* a row lists a term once */
                    value = read_uint((const char *)counts.buf + t * counts.itemsize,
                                      counts.itemsize);
                    break;
                }
            PyObject *number = PyLong_FromUnsignedLongLong(value);
            if (number == NULL) {
                Py_CLEAR(out);
                goto done;
            }
            PyList_SET_ITEM(row, j, number);
        }
    }
done:
    PyMem_Free(wanted);
    if (got_table) PyBuffer_Release(&table);
    if (got_counts) PyBuffer_Release(&counts);
    if (got_ids) PyBuffer_Release(&ids);
    return out;
}

static PyMethodDef TermCounter_methods[] = {
    {"count", (PyCFunction)(void (*)(void))TermCounter_count, METH_FASTCALL,
     "count(text, folds, stops=False): (counts, n_tokens, n_stop, stop tokens or None), or "
     "the list of tokens the table lacks."},
    {"update", (PyCFunction)TermCounter_update, METH_O, "update(dict): add token -> term."},
    {"clear", (PyCFunction)TermCounter_clear, METH_NOARGS, "clear(): forget every token."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods TermCounter_as_sequence = {.sq_length = (lenfunc)TermCounter_len};

static PyTypeObject TermCounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crag_heuristic._text._native.TermCounter",
    .tp_basicsize = sizeof(TermCounter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A table of token -> term that splits and counts a text in one pass.",
    .tp_new = TermCounter_new,
    .tp_dealloc = (destructor)TermCounter_dealloc,
    .tp_methods = TermCounter_methods,
    .tp_as_sequence = &TermCounter_as_sequence,
};

static PyMethodDef native_functions[] = {
    {"row_counts", row_counts, METH_VARARGS,
     "row_counts(term_ids, term_counts, table, wanted): the wanted terms' counts per row."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, .m_name = "crag_heuristic._text._native",
    .m_doc = "The cold path's hot loops in C (optional; see _text.py and _analyses.py).",
    .m_size = -1, .m_methods = native_functions,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&TermCounterType) < 0) return NULL;
    PyObject *module = PyModule_Create(&native_module);
    if (module == NULL) return NULL;
    Py_INCREF(&TermCounterType);
    if (PyModule_AddObject(module, "TermCounter", (PyObject *)&TermCounterType) < 0) {
        Py_DECREF(&TermCounterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
