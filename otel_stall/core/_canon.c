/*
 * otel_stall.core._canon: the signer's compiled canonicaliser.
 *
 * canonical(raw, volatile) reads JSON text (UTF-8 bytes from str.encode) and
 * writes the bytes that the Python reference (Normaliser in signing.py) hashes
 * for it: volatile keys dropped at any depth, whitespace runs in strings
 * collapsed, temp roots and temp names rewritten, keys sorted, compact. It also
 * says whether the value is structurally empty and, asked with a hasher, where
 * a list result's items lie in those bytes (noted while they are written, so
 * no second pass parses them) and hands each item's bytes to the hasher. Why
 * C: it builds no Python
 * objects on the way, which is where the reference spends its time. Measured
 * with callgrind on 1.2 KB payloads: a call signs in a tenth of the
 * instructions it takes the Python reference.
 *
 * It is an accelerator, not a second definition: wherever the Python rules
 * would do more than this file knows (a temp path in non-ASCII text, a \u
 * escape, a non-ASCII space, a float that orjson writes with an exponent, a big
 * integer, a duplicate key, deep nesting, text that is not JSON), it returns
 * None and the caller takes the Python reference. The output depends on the
 * payload alone: no locale, no clock, no host temp dir.
 * tests/test_signature_native.py checks both against each other.
 *
 * The file reads top-down: byte classes and temp-dir rewriting for strings,
 * then one function per JSON value kind (string, object, array, number,
 * literal), then the pass over a whole text and the Python entry point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

#define MAX_DEPTH 128   /* deeper values take the Python reference */
#define MAX_VOLATILE 128 /* more volatile key names than this: the Python reference */
#define MAX_NUMBER 64   /* longer number texts: the Python reference */

typedef enum { OK = 0, BAIL = 1, FAIL = -1 } Outcome;

typedef struct {
    Py_ssize_t key;   /* offset of the key's first byte, after the quote */
    Py_ssize_t klen;  /* key length in bytes */
    Py_ssize_t start; /* offset of the member text: "key":value */
    Py_ssize_t len;
} Member;

typedef struct {
    Py_ssize_t start; /* offset of an item's canonical bytes in the output */
    Py_ssize_t len;
} Span;

#define STACK_OUT 4096   /* output bytes kept on the C stack: most payloads need no malloc */
#define STACK_MEMBERS 64 /* open object members kept on the C stack */
#define STACK_ITEMS 64   /* item spans kept on the C stack */
#define NO_LIST 4        /* no item list found (ITEM_NAMES has 4 names, in priority order) */

typedef struct {
    const unsigned char *p;
    const unsigned char *end; /* *end is NUL: Python's bytes always end in one */
    char *out;
    Py_ssize_t len, cap;
    Member *members; /* a stack: each open object owns the entries from its base */
    Py_ssize_t nmembers, capmembers;
    Member *sorted; /* merge-sort scratch */
    Py_ssize_t capsorted;
    char *scratch; /* an object's member text while it is written back in order */
    Py_ssize_t capscratch;
    const char *volatile_names[MAX_VOLATILE];
    Py_ssize_t volatile_lens[MAX_VOLATILE];
    int nvolatile;
    uint64_t volatile_lengths; /* bit k: a name of k bytes (bit 63: 63 or more) */
    int run_folders;           /* fold per-run temp folder names too (results) */
    /* The names by length (63: 63 or more), so a key is compared with its own
     * length's few: results have some fifty names (callgrind: 12k instructions
     * a 1 KB result when every key went through all of them). */
    unsigned char by_length[MAX_VOLATILE];
    unsigned char first_byte[256]; /* a name starts with it (a key's, lowered, after '_' '-') */
    unsigned char length_first[64], length_count[64];
    /* Item spans: where a list result's items lie in the output (see collect_items). */
    int want_items;  /* the caller asked for them */
    int collect;     /* the array about to be read is a candidate item list */
    int best;        /* the ITEM_NAMES index of the list collected so far, or NO_LIST */
    Py_ssize_t list_member; /* where the collected list's member started, before sorting */
    Span *items;
    Py_ssize_t nitems, capitems;
    Span items_stack[STACK_ITEMS];
    char out_stack[STACK_OUT];
    char scratch_stack[STACK_OUT];
    Member members_stack[STACK_MEMBERS];
    Member sorted_stack[STACK_MEMBERS];
} State;

static Outcome value(State *st, int depth, int *empty);

/* Grows a buffer that starts on the C stack (``stack``) and moves to the heap. */
static Outcome
grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item, void *stack)
{
    if (need <= *cap) {
        return OK;
    }
    Py_ssize_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) {
        cap2 *= 2;
    }
    void *more;
    if (*buf == stack) {
        more = PyMem_Malloc((size_t)cap2 * item);
        if (more != NULL) {
            memcpy(more, stack, (size_t)*cap * item);
        }
    }
    else {
        more = PyMem_Realloc(*buf, (size_t)cap2 * item);
    }
    if (more == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    *buf = more;
    *cap = cap2;
    return OK;
}

static inline Outcome
reserve(State *st, Py_ssize_t extra)
{
    if (st->len + extra <= st->cap) {
        return OK;
    }
    void *buf = st->out;
    Outcome r = grow(&buf, &st->cap, st->len + extra, 1, st->out_stack);
    st->out = buf;
    return r;
}

static inline void
skip_space(State *st)
{
    if (*st->p > ' ') {
        return; /* compact JSON: the usual case */
    }
    while (st->p < st->end &&
           (*st->p == ' ' || *st->p == '\n' || *st->p == '\r' || *st->p == '\t')) {
        st->p++;
    }
}

static inline unsigned char
lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Bytes that str.split() reads as whitespace, outside ASCII: U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static inline int
unicode_space(const unsigned char *p, const unsigned char *end)
{
    Py_ssize_t left = end - p;
    if (p[0] == 0xC2) {
        return left >= 2 && (p[1] == 0x85 || p[1] == 0xA0);
    }
    if (left < 3) {
        return 0;
    }
    if (p[0] == 0xE1) {
        return p[1] == 0x9A && p[2] == 0x80;
    }
    if (p[0] == 0xE2) {
        if (p[1] == 0x80) {
            return p[2] <= 0x8A || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF;
        }
        return p[1] == 0x81 && p[2] == 0x9F;
    }
    if (p[0] == 0xE3) {
        return p[1] == 0x80 && p[2] == 0x80;
    }
    return 0;
}

/* Whether canonical text may hold a temp dir or temp name: the markers that
 * Python's _TEMP_MARK looks for, /t(mp|emp|/|end) and $tmpdir/, ignoring case. */
static int
temp_marker(const char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '/' && i + 1 < n && lower((unsigned char)s[i + 1]) == 't') {
            Py_ssize_t j = i + 2;
            if (j == n || s[j] == '/') {
                return 1;
            }
            if (j + 1 < n && lower((unsigned char)s[j]) == 'm' &&
                lower((unsigned char)s[j + 1]) == 'p') {
                return 1;
            }
            if (j + 2 < n && lower((unsigned char)s[j]) == 'e' &&
                lower((unsigned char)s[j + 1]) == 'm' && lower((unsigned char)s[j + 2]) == 'p') {
                return 1;
            }
        }
        else if (s[i] == '$' && n - i >= 8) {
            static const char mark[] = "$tmpdir/";
            Py_ssize_t k = 1;
            while (k < 8 && lower((unsigned char)s[i + k]) == (unsigned char)mark[k]) {
                k++;
            }
            if (k == 8) {
                return 1;
            }
        }
    }
    return 0;
}

/* Byte classes. Python's bytes end in a NUL byte, which is a STOP, so the
 * scanning loops need no bounds test: they stop there and check the end. */
enum { PLAIN = 0, STOP, SPACE, QUOTE, ESCAPE, SLASH, DOLLAR, LEAD };
static unsigned char string_class[256];
static unsigned char key_class[256];

static void
init_classes(void)
{
    for (int c = 0; c < 0x20; c++) {
        string_class[c] = key_class[c] = STOP;
    }
    string_class[' '] = SPACE;
    string_class['"'] = key_class['"'] = QUOTE;
    string_class['\\'] = key_class['\\'] = ESCAPE;
    string_class['/'] = SLASH;
    string_class['$'] = DOLLAR;
    /* Lead bytes of the non-ASCII spaces (strings) and of U+0130 and U+212A
     * (keys), which lower-case to ASCII: a volatile name in disguise. */
    string_class[0xC2] = string_class[0xE1] = string_class[0xE2] = string_class[0xE3] = LEAD;
    key_class[0xC4] = key_class[0xE2] = LEAD;
}

/* -- temp dirs: Python's _TMP_DIR and _TMP_NAME substitutions, for ASCII text -- */

/* Whether s[i:] starts with the ASCII word ``w``, ignoring case. */
static inline int
starts_ci(const char *s, Py_ssize_t n, Py_ssize_t i, const char *w)
{
    for (; *w; w++, i++) {
        if (i >= n || lower((unsigned char)s[i]) != (unsigned char)*w) {
            return 0;
        }
    }
    return 1;
}

/* The end of a path segment ([^/]+) starting at i, or -1 if it is empty. */
static inline Py_ssize_t
segment(const char *s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = i;
    while (j < n && s[j] != '/') {
        j++;
    }
    return j > i ? j : -1;
}

/* (?=/|$) after position j: the match ends at j, or it fails (-1). */
static inline Py_ssize_t
root_end(const char *s, Py_ssize_t n, Py_ssize_t j)
{
    return (j == n || s[j] == '/') ? j : -1;
}

/* /var/folders/X/Y/T from i, as in (?:/private)?/var/folders/[^/]+/[^/]+/T. */
static Py_ssize_t
macos_root(const char *s, Py_ssize_t n, Py_ssize_t i)
{
    if (!starts_ci(s, n, i, "/var/folders/")) {
        return -1;
    }
    Py_ssize_t j = segment(s, n, i + 13);
    if (j < 0 || j >= n) {
        return -1;
    }
    j = segment(s, n, j + 1);
    if (j < 0 || !starts_ci(s, n, j, "/t")) {
        return -1;
    }
    return root_end(s, n, j + 2);
}

/* The end of a temp root that starts at i, tried in the regex's order, or -1. */
static Py_ssize_t
temp_root(const char *s, Py_ssize_t n, Py_ssize_t i)
{
    unsigned char before = i ? (unsigned char)s[i - 1] : ' ';
    if ((before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
        (before >= '0' && before <= '9') || before == '_' || before == '.' || before == '$') {
        return -1; /* (?<![\w.$]) */
    }
    Py_ssize_t j;
    if (starts_ci(s, n, i, "/private") && (j = macos_root(s, n, i + 8)) >= 0) {
        return j;
    }
    if ((j = macos_root(s, n, i)) >= 0) {
        return j;
    }
    unsigned char c = (unsigned char)lower((unsigned char)s[i]);
    if (c >= 'a' && c <= 'z' && starts_ci(s, n, i + 1, ":/users/")) {
        j = segment(s, n, i + 9);
        if (j >= 0 && starts_ci(s, n, j, "/appdata/local/temp") &&
            (j = root_end(s, n, j + 19)) >= 0) {
            return j;
        }
    }
    if (starts_ci(s, n, i, "/var/tmp") && (j = root_end(s, n, i + 8)) >= 0) {
        return j;
    }
    if (starts_ci(s, n, i, "/tmp")) {
        return root_end(s, n, i + 4);
    }
    return -1;
}

/* $TMPDIR/tmpXXXXXXXX or $TMPDIR/pytest-of-U/pytest-N from i: the end, or -1. */
static Py_ssize_t
temp_name(const char *s, Py_ssize_t n, Py_ssize_t i)
{
    if (n - i < 8 || memcmp(s + i, "$TMPDIR/", 8) != 0) {
        return -1;
    }
    Py_ssize_t j = i + 8;
    if (n - j >= 11 && memcmp(s + j, "tmp", 3) == 0) {
        Py_ssize_t k = 3;
        while (k < 11 && ((s[j + k] >= 'a' && s[j + k] <= 'z') ||
                          (s[j + k] >= '0' && s[j + k] <= '9') || s[j + k] == '_')) {
            k++;
        }
        if (k == 11 && root_end(s, n, j + 11) >= 0) {
            return j + 11;
        }
    }
    if (n - j >= 10 && memcmp(s + j, "pytest-of-", 10) == 0) {
        Py_ssize_t k = segment(s, n, j + 10);
        if (k >= 0 && n - k >= 8 && memcmp(s + k, "/pytest-", 8) == 0) {
            Py_ssize_t d = k + 8;
            while (d < n && s[d] >= '0' && s[d] <= '9') {
                d++;
            }
            if (d > k + 8) {
                return root_end(s, n, d);
            }
        }
    }
    return -1;
}

static inline int
is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* In results, Python's _RUN_NAME: a temp name as above, or a folder name of
 * [A-Za-z0-9._-] whose last run of letters and digits (after its last '.',
 * '_' or '-') is 6 or more long and holds a digit, ending at '/', ' ' or the
 * end: the end, or -1. */
static Py_ssize_t
run_name(const char *s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = temp_name(s, n, i);
    if (j >= 0 || n - i < 8 || memcmp(s + i, "$TMPDIR/", 8) != 0) {
        return j;
    }
    Py_ssize_t word = i + 8, end = i + 8;
    while (end < n && (is_alnum(s[end]) || s[end] == '.' || s[end] == '_' || s[end] == '-')) {
        if (!is_alnum(s[end])) {
            word = end + 1;
        }
        end++;
    }
    if (end < n && s[end] != '/' && s[end] != ' ') {
        return -1;
    }
    int digit = 0;
    for (Py_ssize_t k = word; k < end; k++) {
        digit |= s[k] >= '0' && s[k] <= '9';
    }
    return end - word >= 6 && digit ? end : -1;
}

/* One re.sub: every match of ``find`` in src[0:n] becomes ``with``. */
typedef Py_ssize_t (*Finder)(const char *, Py_ssize_t, Py_ssize_t);

static Py_ssize_t
substitute(const char *src, Py_ssize_t n, char *dst, Finder find, const char *with, char first)
{
    Py_ssize_t w = 0, with_len = (Py_ssize_t)strlen(with);
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t end = -1;
        if (src[i] == first || (first == '/' && i + 1 < n && src[i + 1] == ':')) {
            end = find(src, n, i);
        }
        if (end > i) {
            memcpy(dst + w, with, (size_t)with_len);
            w += with_len;
            i = end;
        }
        else {
            dst[w++] = src[i++];
        }
    }
    return w;
}

/* Python's gate before each pass (_may_hold_temp_dir): a "/t", and one of the
 * temp markers. Without both, the pass changes nothing, even for a
 * "$TMPDIR/pytest-of-..." name with no "/t" in it: part of the definition. */
static int
temp_gate(const char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if (s[i] == '/' && lower((unsigned char)s[i + 1]) == 't') {
            return temp_marker(s, n);
        }
    }
    return 0;
}

/* Rewrites the string content at out[at:at+*n] as Python's temp steps would,
 * repeated to a fixed point (at most MAX_TEXT_PASSES). BAIL where only the
 * Python rules know the answer: non-ASCII text (Unicode \w and case folds) or
 * a backslash (an escaped quote). */
#define MAX_TEXT_PASSES 4
static Outcome
temp_rewrite(State *st, Py_ssize_t at, Py_ssize_t *n)
{
    Py_ssize_t len = *n;
    for (int pass = 0; pass < MAX_TEXT_PASSES; pass++) {
        if (!temp_gate(st->out + at, len)) {
            break; /* Python's _may_hold_temp_dir: this pass changes nothing */
        }
        if (pass == 0) {
            const char *s = st->out + at;
            for (Py_ssize_t i = 0; i < len; i++) {
                if ((unsigned char)s[i] >= 0x80 || s[i] == '\\') {
                    return BAIL;
                }
            }
        }
        /* "/tmp" (4 bytes) becomes "$TMPDIR" (7): a pass at most doubles the text. */
        Py_ssize_t cap = 2 * len + 16;
        char *a = PyMem_Malloc((size_t)cap), *b = PyMem_Malloc((size_t)cap);
        if (a == NULL || b == NULL) {
            PyMem_Free(a);
            PyMem_Free(b);
            PyErr_NoMemory();
            return FAIL;
        }
        Py_ssize_t m = substitute(st->out + at, len, a, temp_root, "$TMPDIR", '/');
        m = substitute(a, m, b, st->run_folders ? run_name : temp_name, "$TMPDIR/*", '$');
        int same = m == len && memcmp(b, st->out + at, (size_t)m) == 0;
        Outcome r = same ? OK : reserve(st, at + m - st->len + 1);
        if (r == OK && !same) {
            memcpy(st->out + at, b, (size_t)m);
            len = m;
        }
        PyMem_Free(a);
        PyMem_Free(b);
        if (r != OK) {
            return r;
        }
        if (same) {
            break;
        }
    }
    *n = len;
    return OK;
}

/* Skips the bytes that a canonical string keeps as they are. It stops at a
 * quote, a backslash, a slash, a dollar, a control or non-ASCII byte, and (16
 * bytes at a time, with SSE2) at the first of two spaces in a row; a single
 * space goes on. The scalar tail stops at every space. */
static inline const unsigned char *
skip_plain(const unsigned char *p, const unsigned char *end)
{
#ifdef HAVE_SSE2
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    const __m128i slash = _mm_set1_epi8('/'), dollar = _mm_set1_epi8('$');
    const __m128i space = _mm_set1_epi8(' ');
    while (end - p >= 16) { /* p + 16 <= end: the second load ends on the NUL at most */
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i next = _mm_loadu_si128((const __m128i *)(p + 1));
        __m128i stop = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
        stop = _mm_or_si128(stop, _mm_or_si128(_mm_cmpeq_epi8(v, slash), _mm_cmpeq_epi8(v, dollar)));
        stop = _mm_or_si128(stop, _mm_cmplt_epi8(v, space)); /* signed: below 0x20, or 0x80 up */
        stop = _mm_or_si128(stop, _mm_and_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(next, space)));
        int mask = _mm_movemask_epi8(stop);
        if (mask) {
            return p + __builtin_ctz((unsigned)mask);
        }
        p += 16;
    }
#else
    (void)end;
#endif
    while (string_class[*p] == PLAIN) {
        p++;
    }
    return p;
}

/* A string whose whitespace needs collapsing or that holds an escape, written
 * as " ".join(s.split()) would leave it. */
static Outcome
string_rewritten(State *st, int *empty)
{
    const unsigned char *p = st->p + 1; /* after the opening quote */
    const unsigned char *end = st->end;
    if (reserve(st, (end - p) + 2) != OK) { /* never longer than the input */
        return FAIL;
    }
    char *out = st->out;
    Py_ssize_t start = st->len;
    Py_ssize_t n = start;
    int pending = 0; /* whitespace seen since the last word */
    int slash = 0;
    out[n++] = '"';
    for (;;) {
        while (*p == ' ') { /* spaces before a word: one separator, however many */
            pending = 1;
            p++;
        }
        /* A word, and the single spaces inside it, in one scan: skip_plain stops
         * at the first of two spaces, so only a space just before what stopped
         * it can end the run; that one is a separator, not part of the word. */
        const unsigned char *run = p;
        p = skip_plain(p, end);
        Py_ssize_t take = p - run;
        int trailing = take > 0 && p[-1] == ' ';
        take -= trailing;
        if (take) {
            if (pending && n > start + 1) {
                out[n++] = ' ';
            }
            pending = 0;
            memcpy(out + n, run, (size_t)take);
            n += take;
        }
        pending |= trailing;
        unsigned char c = *p;
        unsigned char cls = string_class[c];
        if (cls == SPACE) {
            continue;
        }
        if (cls == QUOTE) {
            p++;
            break;
        }
        if (cls == STOP) {
            return BAIL; /* the end of the input, or a raw control character: not JSON */
        }
        if (cls == ESCAPE) {
            unsigned char e = p + 1 < end ? p[1] : 0;
            if (e == 'n' || e == 't' || e == 'r' || e == 'f') {
                pending = 1;
                p += 2;
                continue;
            }
            if (e != '"' && e != '/') {
                return BAIL; /* \\, \b and \uXXXX: the Python rules decide */
            }
            if (pending && n > start + 1) {
                out[n++] = ' ';
            }
            pending = 0;
            if (e == '"') {
                out[n++] = '\\';
                out[n++] = '"';
            }
            else {
                out[n++] = '/';
                slash = 1;
            }
            p += 2;
            continue;
        }
        /* A byte written as it is: a slash, a dollar, or a non-ASCII byte that
         * stopped the 16-byte scan (a possible Unicode space is checked first). */
        if (cls == LEAD && unicode_space(p, end)) {
            return BAIL;
        }
        slash |= cls == SLASH;
        if (pending && n > start + 1) {
            out[n++] = ' ';
        }
        pending = 0;
        out[n++] = (char)c;
        p++;
    }
    Py_ssize_t size = n - start - 1;
    if (slash) { /* temp_rewrite's own gate decides whether there is anything to do */
        Outcome r = temp_rewrite(st, start + 1, &size);
        if (r != OK) {
            return r;
        }
        out = st->out; /* it may have moved */
        n = start + 1 + size;
        if (reserve(st, n + 1 - st->len) != OK) {
            return FAIL;
        }
        out = st->out;
    }
    *empty = n == start + 1;
    out[n++] = '"';
    st->len = n;
    st->p = p;
    return OK;
}

/* A string value. Most are already canonical (no escapes, single spaces
 * between words): one scan finds the closing quote and one copy writes them. */
static Outcome
string_value(State *st, int *empty)
{
    const unsigned char *begin = st->p + 1;
    const unsigned char *p = begin;
    int maybe_temp = 0; /* a "/t" or a "$": the temp markers need a closer look */
    if (*begin == ' ') {
        return string_rewritten(st, empty); /* a leading space */
    }
    for (;;) {
        p = skip_plain(p, st->end);
        switch (string_class[*p]) {
        case QUOTE:
            if (p > begin && p[-1] == ' ') {
                return string_rewritten(st, empty); /* a trailing space */
            }
            goto done;
        case SPACE:
            if (p == begin || p[1] == ' ' || p[1] == '"' || p[1] == '\\') {
                return string_rewritten(st, empty); /* leading, doubled or trailing */
            }
            break;
        case SLASH:
            maybe_temp |= (p[1] | 0x20) == 't';
            break;
        case DOLLAR:
            maybe_temp = 1;
            break;
        case LEAD:
            if (unicode_space(p, st->end)) {
                return BAIL;
            }
            break;
        case PLAIN: /* any other non-ASCII byte, where the 16-byte scan stopped */
            break;
        default: /* an escape, a control character or the end of the input */
            return string_rewritten(st, empty);
        }
        p++;
    }
done:;
    Py_ssize_t n = p - begin;
    if (reserve(st, n + 2) != OK) {
        return FAIL;
    }
    Py_ssize_t at = st->len + 1;
    st->out[at - 1] = '"';
    memcpy(st->out + at, begin, (size_t)n);
    if (maybe_temp) {
        Outcome r = temp_rewrite(st, at, &n);
        if (r != OK) {
            return r;
        }
        if (reserve(st, at + n + 1 - st->len) != OK) {
            return FAIL;
        }
    }
    st->out[at + n] = '"';
    st->len = at + n + 1;
    st->p = p + 1;
    *empty = n == 0;
    return OK;
}

/* Whether a key is one of the volatile names, which come lower-case and
 * without '_' and '-': the key is compared ignoring case, '_' and '-', as
 * Python's _squash and str.lower do for ASCII. */
static int
is_volatile(State *st, const unsigned char *key, Py_ssize_t klen)
{
    Py_ssize_t slen = klen;
    for (Py_ssize_t k = 0; k < klen; k++) {
        slen -= key[k] == '_' || key[k] == '-';
    }
    int bucket = slen < 63 ? (int)slen : 63;
    if (!(st->volatile_lengths >> bucket & 1)) {
        return 0; /* the usual case: no name that long */
    }
    const unsigned char *which = st->by_length + st->length_first[bucket];
    for (int n = 0; n < st->length_count[bucket]; n++) {
        int i = which[n];
        if (st->volatile_lens[i] != slen) {
            continue;
        }
        const char *name = st->volatile_names[i];
        Py_ssize_t k = 0, j = 0;
        for (; k < klen; k++) {
            if (key[k] == '_' || key[k] == '-') {
                continue;
            }
            if (lower(key[k]) != (unsigned char)name[j]) {
                break;
            }
            j++;
        }
        if (k == klen) {
            return 1;
        }
    }
    return 0;
}

/* A key, copied as it is: keys are never rewritten, only compared. */
static Outcome
key_text(State *st, const unsigned char **key, Py_ssize_t *klen)
{
    const unsigned char *start = st->p + 1;
    const unsigned char *p = start;
    for (;;) {
        while (key_class[*p] == PLAIN) {
            p++;
        }
        unsigned char cls = key_class[*p];
        if (cls == QUOTE) {
            break;
        }
        if (cls != LEAD || p + 2 >= st->end) {
            return BAIL; /* an escape, a control character or the end */
        }
        if ((p[0] == 0xC4 && p[1] == 0xB0) || (p[0] == 0xE2 && p[1] == 0x84 && p[2] == 0xAA)) {
            return BAIL;
        }
        p++;
    }
    *key = start;
    *klen = p - start;
    st->p = p + 1;
    return OK;
}

static int
key_less_or_equal(const char *out, const Member *a, const Member *b)
{
    Py_ssize_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(out + a->key, out + b->key, (size_t)n);
    return c < 0 || (c == 0 && a->klen <= b->klen);
}

/* Stable merge sort of an object's members by key bytes (code point order). */
static void
sort_members(const char *out, Member *m, Member *tmp, Py_ssize_t n)
{
    if (n < 2) {
        return;
    }
    if (n <= 8) { /* insertion sort: most objects are small */
        for (Py_ssize_t i = 1; i < n; i++) {
            Member x = m[i];
            Py_ssize_t j = i;
            while (j > 0 && !key_less_or_equal(out, &m[j - 1], &x)) {
                m[j] = m[j - 1];
                j--;
            }
            m[j] = x;
        }
        return;
    }
    Py_ssize_t half = n / 2;
    sort_members(out, m, tmp, half);
    sort_members(out, m + half, tmp, n - half);
    Py_ssize_t i = 0, j = half, k = 0;
    while (i < half && j < n) {
        tmp[k++] = key_less_or_equal(out, &m[i], &m[j]) ? m[i++] : m[j++];
    }
    while (i < half) {
        tmp[k++] = m[i++];
    }
    while (j < n) {
        tmp[k++] = m[j++];
    }
    memcpy(m, tmp, (size_t)n * sizeof(Member));
}

static Outcome
push_member(State *st, Member m)
{
    if (st->nmembers == st->capmembers) {
        void *buf = st->members;
        Outcome r = grow(&buf, &st->capmembers, st->nmembers + 1, sizeof(Member),
                         st->members_stack);
        st->members = buf;
        if (r != OK) {
            return r;
        }
    }
    st->members[st->nmembers++] = m;
    return OK;
}

/* Writes an object's kept members back in key order, comma-separated. If
 * ``track`` holds a member's old start, it gets that member's new start. */
static Outcome
write_sorted(State *st, Py_ssize_t base, Py_ssize_t body, Py_ssize_t *track)
{
    Member *m = st->members + base;
    Py_ssize_t n = st->nmembers - base;
    void *buf = st->sorted;
    Outcome r = grow(&buf, &st->capsorted, n, sizeof(Member), st->sorted_stack);
    st->sorted = buf;
    if (r != OK) {
        return r;
    }
    sort_members(st->out, m, st->sorted, n);
    for (Py_ssize_t i = 1; i < n; i++) {
        if (m[i].klen == m[i - 1].klen &&
            memcmp(st->out + m[i].key, st->out + m[i - 1].key, (size_t)m[i].klen) == 0) {
            return BAIL; /* a duplicate key: the last one wins in Python */
        }
    }
    Py_ssize_t size = st->len - body;
    buf = st->scratch;
    r = grow(&buf, &st->capscratch, size, 1, st->scratch_stack);
    st->scratch = buf;
    if (r != OK || reserve(st, n) != OK) {
        return FAIL;
    }
    memcpy(st->scratch, st->out + body, (size_t)size);
    Py_ssize_t w = body, tracked = track != NULL ? *track : -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) {
            st->out[w++] = ',';
        }
        if (m[i].start == tracked) {
            *track = w;
        }
        memcpy(st->out + w, st->scratch + (m[i].start - body), (size_t)m[i].len);
        w += m[i].len;
    }
    st->len = w;
    return OK;
}

/* Which of ITEM_NAMES (items, results, hits, documents: Python's ITEM_KEYS, in
 * its order) a key is, or NO_LIST. */
static int
item_name(const unsigned char *key, Py_ssize_t klen)
{
    static const char *const names[NO_LIST] = {"items", "results", "hits", "documents"};
    for (int i = 0; i < NO_LIST; i++) {
        if ((Py_ssize_t)strlen(names[i]) == klen && memcmp(key, names[i], (size_t)klen) == 0) {
            return i;
        }
    }
    return NO_LIST;
}

static Outcome
push_item(State *st, Py_ssize_t start, Py_ssize_t len)
{
    if (st->nitems == st->capitems) {
        void *buf = st->items;
        Outcome r = grow(&buf, &st->capitems, st->nitems + 1, sizeof(Span), st->items_stack);
        st->items = buf;
        if (r != OK) {
            return r;
        }
    }
    st->items[st->nitems].start = start;
    st->items[st->nitems++].len = len;
    return OK;
}

static Outcome
object_value(State *st, int depth, int *empty)
{
    Py_ssize_t base = st->nmembers;
    Outcome r;
    if (reserve(st, 1) != OK) {
        return FAIL;
    }
    st->out[st->len++] = '{';
    Py_ssize_t body = st->len;
    int all_empty = 1;
    st->p++;
    skip_space(st);
    if (st->p < st->end && *st->p == '}') {
        st->p++;
    }
    else {
        for (;;) {
            if (st->p >= st->end || *st->p != '"') {
                return BAIL;
            }
            const unsigned char *key;
            Py_ssize_t klen;
            if ((r = key_text(st, &key, &klen)) != OK) {
                return r;
            }
            skip_space(st);
            if (st->p >= st->end || *st->p != ':') {
                return BAIL;
            }
            st->p++;
            Py_ssize_t start = st->len;
            if (reserve(st, klen + 3) != OK) {
                return FAIL;
            }
            st->out[st->len++] = '"';
            memcpy(st->out + st->len, key, (size_t)klen);
            st->len += klen;
            st->out[st->len++] = '"';
            st->out[st->len++] = ':';
            int member_empty = 1;
            /* One look-up first: most keys start with no name's first letter. */
            int dropped = st->first_byte[lower(key[0])] && is_volatile(st, key, klen);
            int name = NO_LIST;
            if (depth == 0 && st->want_items && !dropped) {
                name = item_name(key, klen);
                st->collect = name < st->best; /* a list here outranks the one collected */
            }
            if ((r = value(st, depth + 1, &member_empty)) != OK) {
                return r;
            }
            if (name < NO_LIST) {
                if (st->collect == 2) { /* array_value took it */
                    st->best = name;
                    st->list_member = start;
                }
                st->collect = 0;
            }
            if (dropped) {
                st->len = start; /* parsed, then dropped */
            }
            else {
                Member m = {start + 1, klen, start, st->len - start};
                if (push_member(st, m) != OK) {
                    return FAIL;
                }
                all_empty &= member_empty;
            }
            skip_space(st);
            if (st->p < st->end && *st->p == ',') {
                st->p++;
                skip_space(st);
                continue;
            }
            if (st->p < st->end && *st->p == '}') {
                st->p++;
                break;
            }
            return BAIL;
        }
    }
    if (st->nmembers - base > 1) {
        int listed = depth == 0 && st->best < NO_LIST;
        Py_ssize_t moved = st->list_member;
        if ((r = write_sorted(st, base, body, listed ? &moved : NULL)) != OK) {
            return r;
        }
        for (Py_ssize_t i = 0; listed && i < st->nitems; i++) {
            st->items[i].start += moved - st->list_member; /* the list's member moved */
        }
    }
    st->nmembers = base;
    if (reserve(st, 1) != OK) {
        return FAIL;
    }
    st->out[st->len++] = '}';
    *empty = all_empty;
    return OK;
}

/* An array. The result itself (depth 0), or the top-level object's member that
 * object_value marked (st->collect), is a list result: its items' spans are
 * collected as they are written, so no second pass finds them. */
static Outcome
array_value(State *st, int depth, int *empty)
{
    Outcome r;
    int gather = depth == 0 ? st->want_items : depth == 1 && st->collect == 1;
    if (gather) {
        st->nitems = 0; /* it outranks any list collected before */
        if (depth == 0) {
            st->best = 0;
        }
        else {
            st->collect = 2; /* taken: object_value records which list this is */
        }
    }
    if (reserve(st, 1) != OK) {
        return FAIL;
    }
    st->out[st->len++] = '[';
    int all_empty = 1;
    st->p++;
    skip_space(st);
    if (st->p < st->end && *st->p == ']') {
        st->p++;
    }
    else {
        for (;;) {
            int item_empty = 1;
            Py_ssize_t at = st->len;
            if ((r = value(st, depth + 1, &item_empty)) != OK) {
                return r;
            }
            if (gather && push_item(st, at, st->len - at) != OK) {
                return FAIL;
            }
            all_empty &= item_empty;
            skip_space(st);
            if (st->p < st->end && *st->p == ',') {
                st->p++;
                if (reserve(st, 1) != OK) {
                    return FAIL;
                }
                st->out[st->len++] = ',';
                continue;
            }
            if (st->p < st->end && *st->p == ']') {
                st->p++;
                break;
            }
            return BAIL;
        }
    }
    if (reserve(st, 1) != OK) {
        return FAIL;
    }
    st->out[st->len++] = ']';
    *empty = all_empty;
    return OK;
}

static inline int
is_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* A float that repr would write with an exponent or as inf: orjson's own
 * spelling differs, so the Python reference writes it. Otherwise, its shortest repr. */
static Outcome
float_by_repr(State *st, const unsigned char *start, Py_ssize_t n, int *empty)
{
    char text[MAX_NUMBER];
    memcpy(text, start, (size_t)n);
    text[n] = '\0';
    char *stop = NULL;
    double d = PyOS_string_to_double(text, &stop, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    if (stop != text + n) {
        return BAIL;
    }
    char *repr = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) {
        return FAIL;
    }
    Outcome r = OK;
    if (strpbrk(repr, "eEnN") != NULL) {
        r = BAIL;
    }
    else {
        Py_ssize_t len = (Py_ssize_t)strlen(repr);
        if (reserve(st, len) != OK) {
            r = FAIL;
        }
        else {
            memcpy(st->out + st->len, repr, (size_t)len);
            st->len += len;
            *empty = d == 0.0;
        }
    }
    PyMem_Free(repr);
    return r;
}

/* A number as orjson writes it back. Integers stay as they are. A float is
 * written as its shortest repr; with at most 15 digits (DBL_DIG) and no
 * exponent, that is its own text less trailing zeros, since no two such
 * decimals share a double. Anything else goes through dtoa. */
static Outcome
number_value(State *st, int *empty)
{
    const unsigned char *start = st->p, *p = st->p, *end = st->end;
    const unsigned char *dot = NULL;
    int exponent = 0;
    if (*p == '-') {
        p++;
    }
    const unsigned char *digits = p;
    if (!is_digit(p, end)) {
        return BAIL;
    }
    if (*p == '0') {
        p++;
        if (is_digit(p, end)) {
            return BAIL; /* a leading zero: not JSON */
        }
    }
    else {
        while (is_digit(p, end)) {
            p++;
        }
    }
    if (p < end && *p == '.') {
        dot = p++;
        if (!is_digit(p, end)) {
            return BAIL;
        }
        while (is_digit(p, end)) {
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        exponent = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        if (!is_digit(p, end)) {
            return BAIL;
        }
        while (is_digit(p, end)) {
            p++;
        }
    }
    Py_ssize_t n = p - start;
    if (n >= MAX_NUMBER) {
        return BAIL;
    }
    st->p = p;
    if (dot == NULL && !exponent) {
        if (p - digits > 18) {
            return BAIL; /* near or past 64 bits: orjson's range rules decide */
        }
        if (n == 2 && start[0] == '-' && start[1] == '0') {
            start++; /* -0 is the integer 0 */
            n = 1;
        }
        if (reserve(st, n) != OK) {
            return FAIL;
        }
        memcpy(st->out + st->len, start, (size_t)n);
        st->len += n;
        *empty = n == 1 && *start == '0';
        return OK;
    }
    /* 0.0000x and smaller: repr switches to an exponent below 1e-4. */
    int tiny = dot != NULL && dot - digits == 1 && *digits == '0' && p - dot > 4 &&
               dot[1] == '0' && dot[2] == '0' && dot[3] == '0' && dot[4] == '0';
    if (exponent || tiny || (p - digits) - 1 > 15) {
        return float_by_repr(st, start, n, empty);
    }
    const unsigned char *last = p - 1;
    while (last > dot + 1 && *last == '0') {
        last--; /* 1.50 is written 1.5, 2.000 is 2.0 */
    }
    n = last + 1 - start;
    if (reserve(st, n) != OK) {
        return FAIL;
    }
    memcpy(st->out + st->len, start, (size_t)n);
    st->len += n;
    int zero = 1;
    for (const unsigned char *q = digits; q <= last; q++) {
        zero &= *q == '0' || *q == '.';
    }
    *empty = zero;
    return OK;
}

static Outcome
literal(State *st, const char *word, Py_ssize_t n, int is_empty, int *empty)
{
    if (st->end - st->p < n || memcmp(st->p, word, (size_t)n) != 0) {
        return BAIL;
    }
    if (reserve(st, n) != OK) {
        return FAIL;
    }
    memcpy(st->out + st->len, word, (size_t)n);
    st->len += n;
    st->p += n;
    *empty = is_empty;
    return OK;
}

static Outcome
value(State *st, int depth, int *empty)
{
    if (depth > MAX_DEPTH) {
        return BAIL;
    }
    skip_space(st);
    if (st->p >= st->end) {
        return BAIL;
    }
    switch (*st->p) {
    case '{':
        return object_value(st, depth, empty);
    case '[':
        return array_value(st, depth, empty);
    case '"':
        return string_value(st, empty);
    case 't':
        return literal(st, "true", 4, 0, empty);
    case 'f':
        return literal(st, "false", 5, 1, empty);
    case 'n':
        return literal(st, "null", 4, 1, empty);
    default:
        if (*st->p == '-' || (*st->p >= '0' && *st->p <= '9')) {
            return number_value(st, empty);
        }
        return BAIL;
    }
}

/* -- one pass over a whole text, and the entry point ------------------------- */

/* Points the buffers at the C stack and reads the volatile names (borrowed
 * from the caller's tuple, which outlives the call). BAIL: more names than
 * MAX_VOLATILE. State_free is safe after any outcome. */
static Outcome
state_init(State *st, PyObject *volatile_names)
{
    st->len = st->nmembers = 0;
    st->out = st->out_stack;
    st->scratch = st->scratch_stack;
    st->cap = st->capscratch = STACK_OUT;
    st->members = st->members_stack;
    st->sorted = st->sorted_stack;
    st->capmembers = st->capsorted = STACK_MEMBERS;
    st->volatile_lengths = 0;
    st->nvolatile = 0;
    st->want_items = st->collect = st->run_folders = 0;
    st->best = NO_LIST;
    st->list_member = -1;
    st->items = st->items_stack;
    st->nitems = 0;
    st->capitems = STACK_ITEMS;
    if (!PyTuple_Check(volatile_names)) {
        PyErr_SetString(PyExc_TypeError, "volatile key names must be a tuple of bytes");
        return FAIL;
    }
    Py_ssize_t nvolatile = PyTuple_GET_SIZE(volatile_names);
    if (nvolatile > MAX_VOLATILE) {
        return BAIL;
    }
    for (Py_ssize_t i = 0; i < nvolatile; i++) {
        PyObject *name = PyTuple_GET_ITEM(volatile_names, i);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "volatile key names must be bytes");
            return FAIL;
        }
        st->volatile_names[i] = PyBytes_AS_STRING(name);
        st->volatile_lens[i] = PyBytes_GET_SIZE(name);
        st->volatile_lengths |= (uint64_t)1
                                << (st->volatile_lens[i] < 63 ? st->volatile_lens[i] : 63);
    }
    st->nvolatile = (int)nvolatile;
    memset(st->length_count, 0, sizeof st->length_count);
    memset(st->first_byte, 0, sizeof st->first_byte);
    st->first_byte['_'] = st->first_byte['-'] = st->nvolatile > 0; /* skipped in keys */
    for (int i = 0; i < st->nvolatile; i++) {
        if (st->volatile_lens[i] == 0) { /* matches "", "_", "--": only the full test knows */
            memset(st->first_byte, 1, sizeof st->first_byte);
            break;
        }
        st->first_byte[(unsigned char)st->volatile_names[i][0]] = 1;
    }
    for (int i = 0; i < st->nvolatile; i++) {
        st->length_count[st->volatile_lens[i] < 63 ? st->volatile_lens[i] : 63]++;
    }
    unsigned char placed[64];
    for (int k = 0, at = 0; k < 64; k++) {
        st->length_first[k] = placed[k] = (unsigned char)at;
        at += st->length_count[k];
    }
    for (int i = 0; i < st->nvolatile; i++) {
        st->by_length[placed[st->volatile_lens[i] < 63 ? st->volatile_lens[i] : 63]++] =
            (unsigned char)i;
    }
    return OK;
}

/* Canonical bytes of the JSON text raw[0:n] (raw[n] must be NUL), written to
 * st->out. */
static Outcome
state_run(State *st, const char *raw, Py_ssize_t n, int *empty)
{
    st->len = 0;
    st->nmembers = 0;
    st->p = (const unsigned char *)raw;
    st->end = st->p + n;
    *empty = 1;
    Outcome r = value(st, 0, empty);
    if (r == OK) {
        skip_space(st);
        if (st->p != st->end) {
            r = BAIL; /* trailing text: not JSON */
        }
    }
    return r;
}

static void
state_free(State *st)
{
    if (st->out != st->out_stack) {
        PyMem_Free(st->out);
    }
    if (st->scratch != st->scratch_stack) {
        PyMem_Free(st->scratch);
    }
    if (st->members != st->members_stack) {
        PyMem_Free(st->members);
    }
    if (st->sorted != st->sorted_stack) {
        PyMem_Free(st->sorted);
    }
    if (st->items != st->items_stack) {
        PyMem_Free(st->items);
    }
}

/* The list result's items, each its canonical bytes given to ``hasher``: a
 * tuple of what it returns, or None where the result holds no item list. */
static PyObject *
item_digests(State *st, PyObject *hasher)
{
    if (!st->want_items || st->best == NO_LIST) {
        return Py_NewRef(Py_None);
    }
    PyObject *digests = PyTuple_New(st->nitems);
    for (Py_ssize_t i = 0; digests != NULL && i < st->nitems; i++) {
        PyObject *item = PyBytes_FromStringAndSize(st->out + st->items[i].start, st->items[i].len);
        PyObject *digest = item == NULL ? NULL : PyObject_CallOneArg(hasher, item);
        Py_XDECREF(item);
        if (digest == NULL) {
            Py_CLEAR(digests);
            break;
        }
        PyTuple_SET_ITEM(digests, i, digest);
    }
    return digests;
}

PyDoc_STRVAR(canonical_doc,
             "canonical(raw, volatile, hasher, run_folders, /)\n--\n\n"
             "Canonical bytes of the JSON text ``raw``, whether it is empty, and its items;\n"
             "or None.\n\n"
             "``raw`` is UTF-8 from ``str.encode``; ``volatile`` is a tuple of lower-case\n"
             "ASCII key names (no '_' or '-') to drop; run_folders: fold per-run temp\n"
             "folder names too. None means: take the Python reference. The items:\n"
             "``hasher`` called on each item of a list result, as a tuple; None where\n"
             "``hasher`` is None or the value is not a list result.");

static PyObject *
canonical(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "canonical() takes exactly 4 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "canonical() takes bytes and a tuple of bytes");
        return NULL;
    }
    PyObject *hasher = args[2];
    if (hasher != Py_None && !PyCallable_Check(hasher)) {
        PyErr_SetString(PyExc_TypeError, "canonical()'s hasher must be callable or None");
        return NULL;
    }
    State st;
    int empty = 1;
    Outcome r = state_init(&st, args[1]);
    st.want_items = hasher != Py_None;
    st.run_folders = PyObject_IsTrue(args[3]) == 1;
    if (r == OK) {
        r = state_run(&st, PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), &empty);
    }
    PyObject *result = NULL;
    if (r == OK) {
        PyObject *blob = PyBytes_FromStringAndSize(st.out, st.len);
        PyObject *items = blob == NULL ? NULL : item_digests(&st, hasher);
        if (items != NULL) {
            result = PyTuple_Pack(3, blob, empty ? Py_True : Py_False, items);
        }
        Py_XDECREF(items);
        Py_XDECREF(blob);
    }
    else if (r == BAIL) {
        result = Py_NewRef(Py_None);
    }
    state_free(&st);
    return result;
}


static PyMethodDef methods[] = {
    {"canonical", (PyCFunction)(void (*)(void))canonical, METH_FASTCALL, canonical_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "otel_stall.core._canon",
    .m_doc = "The signer's compiled canonicaliser: JSON text to canonical bytes in one pass.",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__canon(void)
{
    init_classes();
    return PyModuleDef_Init(&module_def);
}
