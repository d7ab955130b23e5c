/* server_control.logs._native_json: the JSON lines of a batch of log records, in C.

   json_batch(nums, kinds, raws) -> (data, left, at)

   writes, for every record it takes, exactly the bytes that json_lines.py's fast groups
   write (head, body and "\n"), in order, into one bytes object `data`; the records it does
   not take are listed by index in `left`, with the byte offset in `data` where each belongs
   in `at` (the caller writes those the Python way and splices them in). It takes a record
   only where the Python fast path takes it too, and writes the same bytes (tests/logs/
   test_native_json.py compares both byte for byte); it leaves a record whenever in doubt:
   a raw that is not ASCII, holds a "\n", or is not of the exact shape below.

   Shapes (the patterns of json_lines.py, without backtracking: each part below is followed
   by a character its run cannot hold, so a greedy run of the allowed length is the match).
   Every kind: "[" [date (" " | "T")] clock [" " ranks] "]" [" "] at the start, then
   - decode/prefill: any text without control characters, read key by key as
     record.parse_stat_pairs reads it (", "-separated pieces, each key the part before its
     last ": ", or after the last ". " in that; unknown keys skipped, a later key over an
     earlier); each known key's value clean: an int is "0" or 1-18 ASCII digits without a
     leading zero, a float that int, "." and 1+ digits, a graph flag True or False; the text
     JSON-escaped, each number written as the server wrote it;
   - http, other, warning, error, ready: any text, JSON-escaped ("\\", "\"", "\t", and \u00XX
     for the other control characters but "\n").
   date: 4-2-2 digits with "-"; clock: 2:2:2 digits, optionally "." and 1-9 digits; ranks:
   1-8 tokens split by one space, each [A-Z]{1,6}"_" (optional), [A-Z]{2,3}, 1-6 digits. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    const char *p, *e;
} Cur;

typedef struct {
    const char *s;
    Py_ssize_t n;
} Span;

static int lit(Cur *c, const char *s, Py_ssize_t n)
{
    if (c->e - c->p < n || memcmp(c->p, s, (size_t)n) != 0)
        return 0;
    c->p += n;
    return 1;
}
#define LIT(c, s) lit((c), (s), (Py_ssize_t)sizeof(s) - 1)

static Py_ssize_t run_of(Cur *c, char lo, char hi)
{
    const char *q = c->p;
    while (q < c->e && *q >= lo && *q <= hi)
        q++;
    Py_ssize_t n = q - c->p;
    c->p = q;
    return n;
}

/* a run of ASCII digits whose length is in [lo, hi] */
static int digits(Cur *c, Py_ssize_t lo, Py_ssize_t hi)
{
    Py_ssize_t n = run_of(c, '0', '9');
    return n >= lo && n <= hi;
}

static int rank_token(Cur *c)
{
    Py_ssize_t n = run_of(c, 'A', 'Z');
    if (c->p < c->e && *c->p == '_') {
        if (n < 1 || n > 6)
            return 0;
        c->p++;
        n = run_of(c, 'A', 'Z');
    }
    return n >= 2 && n <= 3 && digits(c, 1, 6);
}

/* " " ranks, if there; on failure the cursor is left where the caller must find "]" */
static void ranks(Cur *c, Span *rank)
{
    rank->s = NULL;
    rank->n = 0;
    Cur save = *c;
    if (!LIT(c, " ") || !rank_token(c)) {
        *c = save;
        return;
    }
    rank->s = save.p + 1;
    for (int i = 1; i < 8; i++) {
        Cur before = *c;
        if (!LIT(c, " ") || !rank_token(c)) {
            *c = before;
            break;
        }
    }
    rank->n = c->p - rank->s;
}

static int date_part(Cur *c, Span *v)
{
    v->s = c->p;
    if (!digits(c, 4, 4) || !LIT(c, "-") || !digits(c, 2, 2) || !LIT(c, "-") || !digits(c, 2, 2))
        return 0;
    v->n = c->p - v->s;
    return 1;
}

static int clock_part(Cur *c, Span *v)
{
    v->s = c->p;
    if (!digits(c, 2, 2) || !LIT(c, ":") || !digits(c, 2, 2) || !LIT(c, ":") || !digits(c, 2, 2))
        return 0;
    if (c->p < c->e && *c->p == '.') {
        c->p++;
        if (!digits(c, 1, 9))
            return 0;
    }
    v->n = c->p - v->s;
    return 1;
}

/* ---- output ---- */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

static int reserve(Out *o, Py_ssize_t need)
{
    if (o->len + need <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 1 << 20;
    while (cap < o->len + need)
        cap *= 2;
    char *b = PyMem_Realloc(o->buf, (size_t)cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

static void put(Out *o, const char *s, Py_ssize_t n)
{
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
}
#define PUT(o, s) put((o), (s), (Py_ssize_t)sizeof(s) - 1)
static void put_span(Out *o, Span v) { put(o, v.s, v.n); }

static void put_head(Out *o, long long line, const char *kind, Py_ssize_t kind_n)
{
    o->len += sprintf(o->buf + o->len, "{\"line\":%lld,\"kind\":\"", line);
    put(o, kind, kind_n);
    PUT(o, "\",");
}

static void put_prefix(Out *o, Span d, Span clk, Span rank)
{
    PUT(o, "\"ts\":\"");
    if (d.s != NULL) {
        put_span(o, d);
        PUT(o, "T");
    }
    put_span(o, clk);
    if (rank.s != NULL) {
        PUT(o, "\",\"rank\":\"");
        put_span(o, rank);
        PUT(o, "\",\"text\":\"");
    } else {
        PUT(o, "\",\"rank\":null,\"text\":\"");
    }
}

static void put_escaped(Out *o, const char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\\' || ch == '"') {
            o->buf[o->len++] = '\\';
            o->buf[o->len++] = (char)ch;
        } else if (ch == '\t') {
            PUT(o, "\\t");
        } else if (ch < 0x20) {
            PUT(o, "\\u00");
            o->buf[o->len++] = hex[ch >> 4];
            o->buf[o->len++] = hex[ch & 15];
        } else {
            o->buf[o->len++] = (char)ch;
        }
    }
}

#define SPEC_NULLS ",\"threshold\":null,\"mode\":null,\"batch\":null}\n"

/* "[" [date (" " | "T")] clock [" " ranks] "]" [" "]: SGLang's bracket prefix at the start */
static int line_head(Cur *c, Span *d, Span *clk, Span *rank)
{
    d->s = NULL;
    if (!LIT(c, "["))
        return 0;
    Cur at_date = *c;
    if (!(date_part(c, d) && (LIT(c, " ") || LIT(c, "T")))) {
        *c = at_date;
        d->s = NULL;
    }
    if (!clock_part(c, clk))
        return 0;
    ranks(c, rank);
    if (!LIT(c, "]"))
        return 0;
    LIT(c, " ");
    return 1;
}

/* ---- stats lines, key by key (record.parse_stat_pairs's rules) ---- */

enum { T_INT, T_FLOAT, T_BOOL };
enum { N_FIELDS = 12 };
/* record.STAT_FIELDS, in the contract's order, each as written before its value */
#define FIELD(name) {",\"" name "\":", (Py_ssize_t)sizeof(",\"" name "\":") - 1}
static const struct {
    const char *s;
    Py_ssize_t n;
} FIELD[N_FIELDS] = {
    FIELD("running_req"), FIELD("queue_req"),   FIELD("token_usage"), FIELD("num_tokens"),
    FIELD("gen_throughput"), FIELD("accept_len"), FIELD("accept_rate"), FIELD("cuda_graph"),
    FIELD("new_seq"), FIELD("new_token"),   FIELD("cached_token"), FIELD("input_throughput"),
};
/* record.STAT_KEYS (tests/logs/test_native_json.py takes a line of each and compares) */
#define KEY(s, f, t) {s, (Py_ssize_t)sizeof(s) - 1, f, t}
static const struct {
    const char *key;
    Py_ssize_t n;
    int field, type;
} STAT_KEY[] = {
    KEY("#running-req", 0, T_INT),
    KEY("#queue-req", 1, T_INT),
    KEY("token usage", 2, T_FLOAT),
    KEY("full token usage", 2, T_FLOAT),
    KEY("#token", 3, T_INT),
    KEY("#full token", 3, T_INT),
    KEY("gen throughput (token/s)", 4, T_FLOAT),
    KEY("accept len", 5, T_FLOAT),
    KEY("accept rate", 6, T_FLOAT),
    KEY("cuda graph", 7, T_BOOL),
    KEY("cpu graph", 7, T_BOOL),
    KEY("npu graph", 7, T_BOOL),
    KEY("#new-seq", 8, T_INT),
    KEY("#new-token", 9, T_INT),
    KEY("#cached-token", 10, T_INT),
    KEY("input throughput (token/s)", 11, T_FLOAT),
};
enum { N_KEYS = (int)(sizeof(STAT_KEY) / sizeof(STAT_KEY[0])) };

static int key_index(const char *s, const char *e)
{
    Py_ssize_t n = e - s;
    for (int i = 0; i < N_KEYS; i++)
        if (STAT_KEY[i].n == n && memcmp(STAT_KEY[i].key, s, (size_t)n) == 0)
            return i;
    return -1;
}

/* where the last two characters "ab" start in [s, e), or NULL (str.rpartition's search) */
static const char *last_of(const char *s, const char *e, char a, char b)
{
    for (Py_ssize_t i = (e - s) - 2; i >= 0; i--)
        if (s[i] == a && s[i + 1] == b)
            return s + i;
    return NULL;
}

/* a clean value: an int "0" or 1-18 digits without a leading zero; a float that int, "."
   and 1+ digits; a bool True/False. Anything else leaves the line to the Record way. */
static int clean(int type, const char *s, const char *e)
{
    Cur c = {s, e};
    if (type == T_BOOL)
        return (e - s == 4 && memcmp(s, "True", 4) == 0) || (e - s == 5 && memcmp(s, "False", 5) == 0);
    if (c.p < c.e && *c.p == '0')
        c.p++;
    else if (!digits(&c, 1, 18) || *s == '0')
        return 0;
    if (type == T_FLOAT && (!LIT(&c, ".") || !digits(&c, 1, PY_SSIZE_T_MAX)))
        return 0;
    return c.p == c.e;
}

static int stats_line(Out *o, Cur c)
{
    Span d, clk, rank, val[N_FIELDS];
    int type[N_FIELDS];
    if (!line_head(&c, &d, &clk, &rank))
        return 0;
    for (const char *q = c.p; q < c.e; q++)
        if ((unsigned char)*q < 0x20) /* str.strip() would strip \x1c-\x1f and tabs too */
            return 0;
    memset(val, 0, sizeof(val));
    const char *ps = c.p;
    for (;;) {
        const char *pe = ps;
        while (pe + 1 < c.e && !(pe[0] == ',' && pe[1] == ' '))
            pe++;
        if (pe + 1 >= c.e)
            pe = c.e;
        const char *sep = last_of(ps, pe, ':', ' ');
        if (sep != NULL) {
            int k = key_index(ps, sep);
            if (k < 0) {
                const char *dot = last_of(ps, sep, '.', ' ');
                const char *ks = dot ? dot + 2 : ps, *ke = sep;
                while (ks < ke && *ks == ' ')
                    ks++;
                while (ke > ks && ke[-1] == ' ')
                    ke--;
                k = key_index(ks, ke);
            }
            if (k >= 0) {
                const char *vs = sep + 2, *ve = pe;
                while (vs < ve && *vs == ' ')
                    vs++;
                while (ve > vs && ve[-1] == ' ')
                    ve--;
                while (ve > vs && ve[-1] == ',')
                    ve--;
                if (!clean(STAT_KEY[k].type, vs, ve))
                    return 0;
                int f = STAT_KEY[k].field;
                val[f].s = vs;
                val[f].n = ve - vs;
                type[f] = STAT_KEY[k].type;
            }
        }
        if (pe == c.e)
            break;
        ps = pe + 2;
    }
    put_prefix(o, d, clk, rank);
    put_escaped(o, c.p, c.e - c.p);
    PUT(o, "\"");
    for (int f = 0; f < N_FIELDS; f++) {
        put(o, FIELD[f].s, FIELD[f].n);
        if (val[f].s == NULL)
            PUT(o, "null");
        else if (type[f] == T_BOOL && val[f].n == 4)
            PUT(o, "true");
        else if (type[f] == T_BOOL)
            PUT(o, "false");
        else
            put_span(o, val[f]);
    }
    PUT(o, SPEC_NULLS);
    return 1;
}

static int plain_line(Out *o, Cur c)
{
    Span d, clk, rank;
    if (!line_head(&c, &d, &clk, &rank))
        return 0;
    put_prefix(o, d, clk, rank);
    put_escaped(o, c.p, c.e - c.p);
    PUT(o, "\"");
    for (int f = 0; f < N_FIELDS; f++) {
        put(o, FIELD[f].s, FIELD[f].n);
        PUT(o, "null");
    }
    PUT(o, SPEC_NULLS);
    return 1;
}

enum { K_NONE, K_STATS, K_PLAIN };

static int kind_of(const char *k, Py_ssize_t n)
{
#define IS(s) (n == (Py_ssize_t)sizeof(s) - 1 && memcmp(k, s, sizeof(s) - 1) == 0)
    if (IS("decode") || IS("prefill"))
        return K_STATS;
    if (IS("http") || IS("other") || IS("warning") || IS("error") || IS("ready"))
        return K_PLAIN;
    return K_NONE;
#undef IS
}

static PyObject *json_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *nums_in, *kinds_in, *raws_in;
    if (!PyArg_ParseTuple(args, "OOO:json_batch", &nums_in, &kinds_in, &raws_in))
        return NULL;
    PyObject *nums = NULL, *kinds = NULL, *raws = NULL, *left = NULL, *at = NULL, *data = NULL, *result = NULL;
    Out o = {NULL, 0, 0};
    nums = PySequence_Fast(nums_in, "nums must be a sequence");
    kinds = PySequence_Fast(kinds_in, "kinds must be a sequence");
    raws = PySequence_Fast(raws_in, "raws must be a sequence");
    left = PyList_New(0);
    at = PyList_New(0);
    if (!nums || !kinds || !raws || !left || !at)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nums);
    if (PySequence_Fast_GET_SIZE(kinds) != n || PySequence_Fast_GET_SIZE(raws) != n) {
        PyErr_SetString(PyExc_ValueError, "nums, kinds and raws must have one length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *num = PySequence_Fast_GET_ITEM(nums, i);
        PyObject *kind = PySequence_Fast_GET_ITEM(kinds, i);
        PyObject *raw = PySequence_Fast_GET_ITEM(raws, i);
        int taken = 0;
        if (PyUnicode_Check(kind) && PyUnicode_Check(raw) && PyUnicode_IS_ASCII(kind) && PyUnicode_IS_ASCII(raw) &&
            PyLong_Check(num)) {
            const char *k = (const char *)PyUnicode_DATA(kind);
            Py_ssize_t kn = PyUnicode_GET_LENGTH(kind);
            const char *s = (const char *)PyUnicode_DATA(raw);
            Py_ssize_t sn = PyUnicode_GET_LENGTH(raw);
            int which = kind_of(k, kn);
            int overflow = 0;
            long long line = PyLong_AsLongLongAndOverflow(num, &overflow);
            if (line == -1 && PyErr_Occurred())
                goto done;
            if (which != K_NONE && !overflow && memchr(s, '\n', (size_t)sn) == NULL) {
                /* head <= 44 + kind, the fixed keys < 600, the raw's parts <= 3x, escapes 6x */
                if (reserve(&o, 1024 + kn + 6 * sn) < 0)
                    goto done;
                Py_ssize_t mark = o.len;
                put_head(&o, line, k, kn);
                Cur c = {s, s + sn};
                if (which == K_STATS)
                    taken = stats_line(&o, c);
                else
                    taken = plain_line(&o, c);
                if (!taken)
                    o.len = mark;
            }
        }
        if (!taken) {
            PyObject *ix = PyLong_FromSsize_t(i), *off = PyLong_FromSsize_t(o.len);
            int bad = ix == NULL || off == NULL || PyList_Append(left, ix) < 0 || PyList_Append(at, off) < 0;
            Py_XDECREF(ix);
            Py_XDECREF(off);
            if (bad)
                goto done;
        }
    }
    data = PyBytes_FromStringAndSize(o.buf ? o.buf : "", o.len);
    if (data != NULL)
        result = PyTuple_Pack(3, data, left, at);
done:
    PyMem_Free(o.buf);
    Py_XDECREF(nums);
    Py_XDECREF(kinds);
    Py_XDECREF(raws);
    Py_XDECREF(left);
    Py_XDECREF(at);
    Py_XDECREF(data);
    return result;
}

static PyMethodDef methods[] = {
    {"json_batch", json_batch, METH_VARARGS,
     "json_batch(nums, kinds, raws) -> (data, left, at): the JSON lines of the records it takes, "
     "the indices of those it leaves and the byte offsets where they belong"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_json", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native_json(void) { return PyModule_Create(&module); }
