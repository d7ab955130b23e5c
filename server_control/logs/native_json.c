/* server_control.logs._native_json: the JSON lines of a batch of log records, in C.

   json_batch(nums, kinds, raws) -> (data, left, at)

   writes, for every record it takes, exactly the bytes that json_lines.py's fast groups
   write (head, body and "\n"), in order, into one bytes object `data`; the records it does
   not take are listed by index in `left`, with the byte offset in `data` where each belongs
   in `at` (the caller writes those the Python way and splices them in). It takes a record
   only where the Python fast path takes it too, and writes the same bytes (tests/logs/
   test_native_json.py compares both byte for byte); it leaves a record whenever in doubt:
   a raw that is not ASCII, holds a "\n", or is not of the exact shape below.

   Shapes (the regexes of json_lines.py, without backtracking: each part below is followed
   by a character its run cannot hold, so a greedy run of the allowed length is the match):
   - decode/prefill: "[" date " " clock [" " ranks] "] " then SGLang 0.5.23's Decode batch
     or Prefill batch text; numbers are runs of 1-18 ASCII digits (with "." and 1+ digits
     for a float), and the line holds no ": 0" followed by a digit (a leading zero);
   - http, other, warning, error, ready: "[" [date (" " | "T")] clock [" " ranks] "]" [" "]
     then any text, JSON-escaped ("\\", "\"", "\t", and \u00XX for the other control
     characters but "\n").
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

static int number(Cur *c, Span *v)
{
    v->s = c->p;
    if (!digits(c, 1, 18))
        return 0;
    v->n = c->p - v->s;
    return 1;
}

static int decimal(Cur *c, Span *v)
{
    v->s = c->p;
    if (!digits(c, 1, 18) || !LIT(c, ".") || !digits(c, 1, PY_SSIZE_T_MAX))
        return 0;
    v->n = c->p - v->s;
    return 1;
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

static int leading_zero(const char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i + 3 < n; i++)
        if (s[i] == ':' && s[i + 1] == ' ' && s[i + 2] == '0' && s[i + 3] >= '0' && s[i + 3] <= '9')
            return 1;
    return 0;
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

#define TAIL_AFTER_GRAPH "\"new_seq\":null,\"new_token\":null,\"cached_token\":null," \
    "\"input_throughput\":null,\"threshold\":null,\"mode\":null,\"batch\":null}\n"
#define TAIL_AFTER_CACHED "\"input_throughput\":null,\"threshold\":null,\"mode\":null,\"batch\":null}\n"

/* "[" date " " clock [" " ranks] "] " of a stats line */
static int stats_head(Cur *c, Span *d, Span *clk, Span *rank)
{
    if (!LIT(c, "[") || !date_part(c, d) || !LIT(c, " ") || !clock_part(c, clk))
        return 0;
    ranks(c, rank);
    return LIT(c, "] ");
}

/* the end of a stats line: nothing, or ", " and nothing */
static int stats_end(Cur *c) { return c->p == c->e || (LIT(c, ", ") && c->p == c->e); }

/* ts, rank, text and the three fields both stats kinds have, in the contract's order */
static void put_stats_start(Out *o, Span d, Span clk, Span rank, Span text, Span run, Span queue, Span use)
{
    put_prefix(o, d, clk, rank);
    put_span(o, text);
    PUT(o, "\",\"running_req\":");
    put_span(o, run);
    PUT(o, ",\"queue_req\":");
    put_span(o, queue);
    PUT(o, ",\"token_usage\":");
    put_span(o, use);
}

static int decode_line(Out *o, Cur c)
{
    Span d, clk, rank, text, run, tok, use, al = {NULL, 0}, ar = {NULL, 0}, gen, queue;
    int graph;
    if (!stats_head(&c, &d, &clk, &rank))
        return 0;
    text.s = c.p;
    if (!LIT(&c, "Decode batch") || !(LIT(&c, ".") || LIT(&c, ",")) || !LIT(&c, " #running-req: ") ||
        !number(&c, &run) || !LIT(&c, ", #"))
        return 0;
    LIT(&c, "full ");
    if (!LIT(&c, "token: ") || !number(&c, &tok) || !LIT(&c, ", "))
        return 0;
    LIT(&c, "full ");
    if (!LIT(&c, "token usage: ") || !decimal(&c, &use) || !LIT(&c, ", "))
        return 0;
    if (c.p < c.e && *c.p == 'a') {
        if (!LIT(&c, "accept len: ") || !decimal(&c, &al) || !LIT(&c, ", accept rate: ") || !decimal(&c, &ar) ||
            !LIT(&c, ", "))
            return 0;
    }
    if (!(LIT(&c, "cuda") || LIT(&c, "cpu") || LIT(&c, "npu")) || !LIT(&c, " graph: "))
        return 0;
    if (LIT(&c, "True"))
        graph = 1;
    else if (LIT(&c, "False"))
        graph = 0;
    else
        return 0;
    if (!LIT(&c, ", gen throughput (token/s): ") || !decimal(&c, &gen) || !LIT(&c, ", #queue-req: ") ||
        !number(&c, &queue))
        return 0;
    if (!stats_end(&c))
        return 0;
    text.n = c.e - text.s;
    put_stats_start(o, d, clk, rank, text, run, queue, use);
    PUT(o, ",\"num_tokens\":");
    put_span(o, tok);
    PUT(o, ",\"gen_throughput\":");
    put_span(o, gen);
    if (al.s != NULL) {
        PUT(o, ",\"accept_len\":");
        put_span(o, al);
        PUT(o, ",\"accept_rate\":");
        put_span(o, ar);
    } else {
        PUT(o, ",\"accept_len\":null,\"accept_rate\":null");
    }
    if (graph)
        PUT(o, ",\"cuda_graph\":true,");
    else
        PUT(o, ",\"cuda_graph\":false,");
    PUT(o, TAIL_AFTER_GRAPH);
    return 1;
}

static int prefill_line(Out *o, Cur c)
{
    Span d, clk, rank, text, seq, newtok, cached, use, run, queue;
    if (!stats_head(&c, &d, &clk, &rank))
        return 0;
    text.s = c.p;
    if (!LIT(&c, "Prefill batch") || !(LIT(&c, ".") || LIT(&c, ",")) || !LIT(&c, " #new-seq: ") ||
        !number(&c, &seq) || !LIT(&c, ", #new-token: ") || !number(&c, &newtok) || !LIT(&c, ", #cached-token: ") ||
        !number(&c, &cached) || !LIT(&c, ", "))
        return 0;
    LIT(&c, "full ");
    if (!LIT(&c, "token usage: ") || !decimal(&c, &use) || !LIT(&c, ", #running-req: ") || !number(&c, &run) ||
        !LIT(&c, ", #queue-req: ") || !number(&c, &queue))
        return 0;
    if (!stats_end(&c))
        return 0;
    text.n = c.e - text.s;
    put_stats_start(o, d, clk, rank, text, run, queue, use);
    PUT(o, ",\"num_tokens\":null,\"gen_throughput\":null,\"accept_len\":null,\"accept_rate\":null,"
           "\"cuda_graph\":null,\"new_seq\":");
    put_span(o, seq);
    PUT(o, ",\"new_token\":");
    put_span(o, newtok);
    PUT(o, ",\"cached_token\":");
    put_span(o, cached);
    PUT(o, ",");
    PUT(o, TAIL_AFTER_CACHED);
    return 1;
}

static int plain_line(Out *o, Cur c)
{
    Span d = {NULL, 0}, clk, rank;
    if (!LIT(&c, "["))
        return 0;
    Cur at_date = c;
    if (!(date_part(&c, &d) && (LIT(&c, " ") || LIT(&c, "T")))) {
        c = at_date;
        d.s = NULL;
    }
    if (!clock_part(&c, &clk))
        return 0;
    ranks(&c, &rank);
    if (!LIT(&c, "]"))
        return 0;
    LIT(&c, " ");
    put_prefix(o, d, clk, rank);
    put_escaped(o, c.p, c.e - c.p);
    PUT(o, "\",\"running_req\":null,\"queue_req\":null,\"token_usage\":null,\"num_tokens\":null,"
           "\"gen_throughput\":null,\"accept_len\":null,\"accept_rate\":null,\"cuda_graph\":null,");
    PUT(o, TAIL_AFTER_GRAPH);
    return 1;
}

enum { K_NONE, K_DECODE, K_PREFILL, K_PLAIN };

static int kind_of(const char *k, Py_ssize_t n)
{
#define IS(s) (n == (Py_ssize_t)sizeof(s) - 1 && memcmp(k, s, sizeof(s) - 1) == 0)
    if (IS("decode"))
        return K_DECODE;
    if (IS("prefill"))
        return K_PREFILL;
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
                if (which == K_DECODE)
                    taken = !leading_zero(s, sn) && decode_line(&o, c);
                else if (which == K_PREFILL)
                    taken = !leading_zero(s, sn) && prefill_line(&o, c);
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
