/* The hash chain's hot loop, compiled: links a batch of signal rows as
 * reactor._recording.chain.Heads.link does in Python, byte for byte.
 *
 * For each row (run id, seq, id, name, payload, time, source, caused_by, depth, hash)
 * it writes the entry's canonical JSON (keys sorted, no spaces, UTF-8, strings escaped
 * as json.dumps(ensure_ascii=False) escapes them, floats as float.__repr__) and sets
 * the row's hash to H(previous hash || entry), with OpenSSL's SHA-256 (HMAC-SHA-256
 * with a key).
 *
 * It handles the rows reactor writes: text or None, int, finite float. Anything else
 * (a lone surrogate, an int beyond 64 bits, an infinite time, another type, a stored
 * head that is not ASCII) raises ValueError or TypeError; the Python caller then links
 * the whole batch again the pure way, which is the reference, from its own copy of the
 * heads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
/* SHA256_Init and kin: deprecated in OpenSSL 3 for EVP, kept for their speed here */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buffer;

static inline int
reserve(Buffer *buf, Py_ssize_t more)
{
    if (buf->len + more <= buf->cap) {
        return 0;
    }
    Py_ssize_t cap = buf->cap ? buf->cap : 1024;
    while (cap < buf->len + more) {
        cap *= 2;
    }
    char *data = PyMem_Realloc(buf->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buf->data = data;
    buf->cap = cap;
    return 0;
}

static inline int
put(Buffer *buf, const char *text, Py_ssize_t n)
{
    if (reserve(buf, n) < 0) {
        return -1;
    }
    memcpy(buf->data + buf->len, text, (size_t)n);
    buf->len += n;
    return 0;
}

#define PUT_LITERAL(buf, text) put((buf), (text), (Py_ssize_t)(sizeof(text) - 1))

static const char HEX[] = "0123456789abcdef";

/* the bytes json.dumps(ensure_ascii=False) escapes: control characters, '"', '\\' */
static unsigned char ESCAPED[256];

/* Whether any of the 8 bytes of v needs escaping: below 0x20, '"' or '\\' (exact when
 * none does; the loop after it looks byte by byte). */
static inline int
any_escaped(uint64_t v)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = v ^ (ones * '"'), backslash = v ^ (ones * '\\');
    uint64_t below = (v - ones * 0x20) & ~v;
    uint64_t quotes = (quote - ones) & ~quote, backslashes = (backslash - ones) & ~backslash;
    return ((below | quotes | backslashes) & highs) != 0;
}

/* A JSON string as json.dumps(ensure_ascii=False) writes it. */
static int
put_string(Buffer *buf, PyObject *value)
{
    Py_ssize_t n;
    const char *text;
    if (PyUnicode_IS_COMPACT_ASCII(value)) {
        text = (const char *)PyUnicode_DATA(value);
        n = PyUnicode_GET_LENGTH(value);
    }
    else if ((text = PyUnicode_AsUTF8AndSize(value, &n)) == NULL) {
        return -1;
    }
    /* at most 6 bytes out per byte in, plus the quotes */
    if (reserve(buf, n * 6 + 2) < 0) {
        return -1;
    }
    char *out = buf->data + buf->len;
    *out++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t start = i;
        uint64_t block;
        while (i + 8 <= n && (memcpy(&block, text + i, 8), !any_escaped(block))) {
            i += 8;
        }
        while (i < n && !ESCAPED[(unsigned char)text[i]]) {
            i++;
        }
        memcpy(out, text + start, (size_t)(i - start));
        out += i - start;
        if (i == n) {
            break;
        }
        unsigned char c = (unsigned char)text[i++];
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        default:
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = HEX[c >> 4];
            *out++ = HEX[c & 0xf];
        }
    }
    *out++ = '"';
    buf->len = out - buf->data;
    return 0;
}

/* the decimal digits of number, at the end of text[32]; returns where they start */
static char *
digits(unsigned long long number, char *end)
{
    do {
        *--end = (char)('0' + number % 10);
        number /= 10;
    } while (number);
    return end;
}

static int
put_int(Buffer *buf, PyObject *value)
{
    int overflow;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        PyErr_SetString(PyExc_ValueError, "an int beyond 64 bits");
        return -1;
    }
    if (number == -1 && PyErr_Occurred()) {
        return -1;
    }
    char text[32], *end = text + sizeof(text);
    char *start = digits(number < 0 ? 0ULL - (unsigned long long)number : (unsigned long long)number, end);
    if (number < 0) {
        *--start = '-';
    }
    return put(buf, start, end - start);
}

/* float.__repr__ of 1 <= x < 2**53 (a UNIX time), exactly, without dtoa's big numbers:
 * the fewest decimals k whose nearest multiple of 10**-k rounds back to x. The
 * values that take care (a tie, a candidate on the rounding interval's edge, a power
 * of two, whose interval is lopsided) go to PyOS_double_to_string. Returns the length
 * written to out (at least 40 bytes), or -1 for those. */
static int
short_repr(double x, char *out)
{
    if (!(x >= 1.0 && x < 9007199254740992.0)) {
        return -1;
    }
    int exponent;
    double fraction = frexp(x, &exponent);
    unsigned long long m = (unsigned long long)ldexp(fraction, 53);
    int shift = 53 - exponent + 1; /* x = m / 2**(shift - 1), shift in 1..53 */
    if (m == 1ULL << 52) {
        return -1;
    }
    typedef unsigned __int128 u128;
    u128 unit = (u128)1 << shift;
    u128 power = 1; /* 10**k: also the rounding interval's half-width, in 1 / 2**shift */
    for (int k = 0; k <= 17; k++) {
        u128 center = (u128)m * power * 2; /* x * 10**k, in 1 / 2**shift */
        u128 nearest = (center + unit / 2) >> shift;
        u128 at = nearest << shift;
        u128 distance = at > center ? at - center : center - at;
        if (distance * 2 == unit || distance == power) {
            return -1;
        }
        if (distance < power) {
            if (nearest >= 1000000000000000000ULL) {
                return -1;
            }
            char text[32], *end = text + sizeof(text);
            char *start = digits((unsigned long long)nearest, end);
            int whole = (int)(end - start) - k, n = 0;
            if (whole < 1) {
                return -1;
            }
            memcpy(out, start, (size_t)whole);
            n = whole;
            out[n++] = '.';
            if (k == 0) {
                out[n++] = '0';
            }
            else {
                memcpy(out + n, start + whole, (size_t)k);
                n += k;
            }
            return n;
        }
        power *= 10;
    }
    return -1;
}

static int
put_float(Buffer *buf, double number)
{
    if (!isfinite(number)) {
        PyErr_SetString(PyExc_ValueError, "a time that is not finite");
        return -1;
    }
    char text[40];
    int n = short_repr(number, text);
    if (n >= 0) {
        return put(buf, text, n);
    }
    char *slow = PyOS_double_to_string(number, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (slow == NULL) {
        return -1;
    }
    int failed = put(buf, slow, (Py_ssize_t)strlen(slow));
    PyMem_Free(slow);
    return failed;
}

/* text, None (null) or an int: the fields reactor stores */
static int
put_value(Buffer *buf, PyObject *value)
{
    if (value == Py_None) {
        return PUT_LITERAL(buf, "null");
    }
    if (PyUnicode_CheckExact(value)) {
        return put_string(buf, value);
    }
    if (PyLong_CheckExact(value)) {
        return put_int(buf, value);
    }
    PyErr_Format(PyExc_TypeError, "a %s field", Py_TYPE(value)->tp_name);
    return -1;
}

/* the entry of one row, keys in sorted order */
static int
put_entry(Buffer *buf, PyObject **field)
{
    /* row: 0 run_id, 1 seq, 2 id, 3 name, 4 payload, 5 time, 6 source, 7 caused_by, 8 depth */
    double time;
    if (PyFloat_CheckExact(field[5])) {
        time = PyFloat_AS_DOUBLE(field[5]);
    }
    else if (PyLong_CheckExact(field[5])) {
        time = PyLong_AsDouble(field[5]);
        if (time == -1.0 && PyErr_Occurred()) {
            return -1;
        }
    }
    else {
        PyErr_Format(PyExc_TypeError, "a %s time", Py_TYPE(field[5])->tp_name);
        return -1;
    }
    if (PUT_LITERAL(buf, "{\"caused_by\":") < 0 || put_value(buf, field[7]) < 0
        || PUT_LITERAL(buf, ",\"depth\":") < 0 || put_value(buf, field[8]) < 0
        || PUT_LITERAL(buf, ",\"id\":") < 0 || put_value(buf, field[2]) < 0
        || PUT_LITERAL(buf, ",\"name\":") < 0 || put_value(buf, field[3]) < 0
        || PUT_LITERAL(buf, ",\"payload\":") < 0 || put_value(buf, field[4]) < 0
        || PUT_LITERAL(buf, ",\"run_id\":") < 0 || put_value(buf, field[0]) < 0
        || PUT_LITERAL(buf, ",\"seq\":") < 0 || put_value(buf, field[1]) < 0
        || PUT_LITERAL(buf, ",\"source\":") < 0 || put_value(buf, field[6]) < 0
        || PUT_LITERAL(buf, ",\"time\":") < 0 || put_float(buf, time) < 0
        || PUT_LITERAL(buf, "}") < 0) {
        return -1;
    }
    return 0;
}

/* How a batch hashes: plain SHA-256, or HMAC-SHA-256 as two SHA-256 passes over the
 * key's padded blocks (RFC 2104), their states made once per batch and copied per row.
 * OpenSSL's SHA256_* calls (its assembly, SHA extensions where the CPU has them)
 * cost a third less than an EVP digest per row, which sets up a provider context. */
typedef struct {
    int keyed;
    SHA256_CTX inner;
    SHA256_CTX outer;
} Hasher;

static void
hasher_init(Hasher *h, const unsigned char *key, Py_ssize_t key_len)
{
    h->keyed = key != NULL;
    if (!h->keyed) {
        return;
    }
    unsigned char block[SHA256_CBLOCK], pad[SHA256_CBLOCK];
    memset(block, 0, sizeof(block));
    if (key_len > SHA256_CBLOCK) {
        SHA256(key, (size_t)key_len, block);
    }
    else {
        memcpy(block, key, (size_t)key_len);
    }
    for (int i = 0; i < SHA256_CBLOCK; i++) {
        pad[i] = block[i] ^ 0x36;
    }
    SHA256_Init(&h->inner);
    SHA256_Update(&h->inner, pad, SHA256_CBLOCK);
    for (int i = 0; i < SHA256_CBLOCK; i++) {
        pad[i] = block[i] ^ 0x5c;
    }
    SHA256_Init(&h->outer);
    SHA256_Update(&h->outer, pad, SHA256_CBLOCK);
}

/* "sha256:<hex>" or "hmac-sha256:<hex>" of buf (whose start holds the previous hash) */
static PyObject *
digest(const Hasher *h, const Buffer *buf)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    char text[12 + 2 * SHA256_DIGEST_LENGTH];
    Py_ssize_t n;
    SHA256_CTX ctx;
    if (!h->keyed) {
        SHA256_Init(&ctx);
        SHA256_Update(&ctx, buf->data, (size_t)buf->len);
        SHA256_Final(md, &ctx);
        memcpy(text, "sha256:", 7);
        n = 7;
    }
    else {
        ctx = h->inner;
        SHA256_Update(&ctx, buf->data, (size_t)buf->len);
        SHA256_Final(md, &ctx);
        ctx = h->outer;
        SHA256_Update(&ctx, md, SHA256_DIGEST_LENGTH);
        SHA256_Final(md, &ctx);
        memcpy(text, "hmac-sha256:", 12);
        n = 12;
    }
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        text[n++] = HEX[md[i] >> 4];
        text[n++] = HEX[md[i] & 0xf];
    }
    PyObject *hash = PyUnicode_New(n, 127);
    if (hash != NULL) {
        memcpy(PyUnicode_1BYTE_DATA(hash), text, (size_t)n);
    }
    return hash;
}

/* link(rows, heads, key) -> None
 *
 * rows: a list of lists of 10 items, grouped by run, in seq order within a run.
 * heads: {run id: (seq, hash)}, each run's head before the batch; updated in place to
 *        its head after it (the run's last row linked here, or left as it was).
 * key: the HMAC key (bytes), or None for SHA-256.
 */
static PyObject *
chainlink_link(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "link(rows, heads, key) takes 3 arguments");
        return NULL;
    }
    PyObject *rows = args[0], *heads = args[1], *key_object = args[2];
    if (!PyList_CheckExact(rows) || !PyDict_CheckExact(heads)) {
        PyErr_SetString(PyExc_TypeError, "link() takes a list of rows and a dict of heads");
        return NULL;
    }
    char *key = NULL;
    Py_ssize_t key_len = 0;
    if (key_object != Py_None && PyBytes_AsStringAndSize(key_object, &key, &key_len) < 0) {
        return NULL;
    }
    Hasher hasher;
    hasher_init(&hasher, (const unsigned char *)key, key_len);
    Buffer buf = {NULL, 0, 0};
    PyObject *current = NULL;  /* borrowed: the run being linked */
    PyObject *previous = NULL; /* owned: its latest hash (NULL: none) */
    long long head = 0;
    PyObject *head_object = NULL; /* owned: head as an int, for the heads dict */
    int failed = 0;

    Py_ssize_t count = PyList_GET_SIZE(rows);
    for (Py_ssize_t i = 0; i < count && !failed; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyList_CheckExact(row) || PyList_GET_SIZE(row) != 10) {
            PyErr_SetString(PyExc_TypeError, "a row is a list of 10 items");
            failed = 1;
            break;
        }
        PyObject **field = ((PyListObject *)row)->ob_item;
        PyObject *run_id = field[0];
        if (current == NULL
            || (run_id != current && PyObject_RichCompareBool(run_id, current, Py_NE) != 0)) {
            if (PyErr_Occurred()) {
                failed = 1;
                break;
            }
            if (current != NULL) {
                PyObject *pair = PyTuple_Pack(2, head_object, previous ? previous : Py_None);
                if (pair == NULL || PyDict_SetItem(heads, current, pair) < 0) {
                    Py_XDECREF(pair);
                    failed = 1;
                    break;
                }
                Py_DECREF(pair);
            }
            PyObject *pair = PyDict_GetItemWithError(heads, run_id);
            if (pair == NULL || !PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_KeyError, "a run without a head");
                }
                failed = 1;
                break;
            }
            current = run_id;
            Py_XSETREF(head_object, Py_NewRef(PyTuple_GET_ITEM(pair, 0)));
            PyObject *hash = PyTuple_GET_ITEM(pair, 1);
            Py_XSETREF(previous, hash == Py_None ? NULL : Py_NewRef(hash));
            head = PyLong_AsLongLong(head_object);
            if (head == -1 && PyErr_Occurred()) {
                failed = 1;
                break;
            }
        }
        if (!PyLong_CheckExact(field[1])) {
            PyErr_SetString(PyExc_TypeError, "a seq that is not an int");
            failed = 1;
            break;
        }
        long long seq = PyLong_AsLongLong(field[1]);
        if (seq == -1 && PyErr_Occurred()) {
            failed = 1;
            break;
        }
        if (seq <= head) { /* written already, by a batch written again */
            Py_SETREF(field[9], Py_NewRef(Py_None));
            continue;
        }
        buf.len = 0;
        if (previous != NULL) { /* a hash: ASCII text */
            if (!PyUnicode_Check(previous) || !PyUnicode_IS_COMPACT_ASCII(previous)) {
                PyErr_SetString(PyExc_TypeError, "a head that is not a hash");
                failed = 1;
                break;
            }
            if (put(&buf, (const char *)PyUnicode_DATA(previous), PyUnicode_GET_LENGTH(previous)) < 0) {
                failed = 1;
                break;
            }
        }
        if (put_entry(&buf, field) < 0) {
            failed = 1;
            break;
        }
        PyObject *hash = digest(&hasher, &buf);
        if (hash == NULL) {
            failed = 1;
            break;
        }
        Py_SETREF(field[9], Py_NewRef(hash));
        Py_XSETREF(previous, hash);
        head = seq;
        Py_XSETREF(head_object, Py_NewRef(field[1]));
    }
    if (!failed && current != NULL) {
        PyObject *pair = PyTuple_Pack(2, head_object, previous ? previous : Py_None);
        if (pair == NULL || PyDict_SetItem(heads, current, pair) < 0) {
            failed = 1;
        }
        Py_XDECREF(pair);
    }
    Py_XDECREF(previous);
    Py_XDECREF(head_object);
    PyMem_Free(buf.data);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* entry(row) -> bytes: the canonical JSON of one row (the first 9 items), for tests */
static PyObject *
chainlink_entry(PyObject *module, PyObject *row)
{
    if (!PySequence_Check(row) || PySequence_Size(row) < 9) {
        PyErr_SetString(PyExc_TypeError, "entry() takes a row of at least 9 items");
        return NULL;
    }
    PyObject *items = PySequence_Fast(row, "entry() takes a row");
    if (items == NULL) {
        return NULL;
    }
    Buffer buf = {NULL, 0, 0};
    PyObject *result = NULL;
    if (put_entry(&buf, PySequence_Fast_ITEMS(items)) == 0) {
        result = PyBytes_FromStringAndSize(buf.data, buf.len);
    }
    PyMem_Free(buf.data);
    Py_DECREF(items);
    return result;
}

static PyMethodDef methods[] = {
    {"link", (PyCFunction)(void (*)(void))chainlink_link, METH_FASTCALL,
     "link(rows, heads, key): set each row's hash and the runs' heads after them."},
    {"entry", chainlink_entry, METH_O, "entry(row): the canonical JSON of a signal's row."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_chainlink",
    "The hash chain's hot loop, compiled (reactor._recording.chain is the reference).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__chainlink(void)
{
    for (int c = 0; c < 0x20; c++) {
        ESCAPED[c] = 1;
    }
    ESCAPED['"'] = ESCAPED['\\'] = 1;
    return PyModule_Create(&module);
}
