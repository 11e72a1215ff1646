/* Tokenising corpus text for `embedlab prepare` (bindings: embedlab.data.native_tokenise).
 *
 * The specification is the Python reader, embedlab.data.corpus: tokens are runs of characters
 * that are not whitespace in the sense of Python's str.isspace(), a '\n' ends a line, invalid
 * UTF-8 is replaced by U+FFFD exactly as Python's decoder with errors="replace" does (one
 * replacement per maximal invalid subpart), and --lowercase is Python's str.lower() of each
 * whole token.
 *
 * tk_tokenise() works on one piece of a file that ends at an ASCII whitespace byte or at the
 * file's end, so no token and no UTF-8 sequence crosses pieces, and pieces are tokenised
 * independently (in parallel). It gives each distinct token of the piece a local type id, in
 * order of first appearance. ASCII letters are lowercased in place; a token that still needs
 * Python (non-ASCII with --lowercase, or holding invalid UTF-8) is flagged, and Python computes
 * its word once per distinct token.
 *
 * A table (tk_table_*) maps the bytes of words to ids in order of insertion and sums their
 * counts; tk_merge() folds a piece's types into the corpus's tables, in piece order, so the ids
 * and counts do not depend on how many threads tokenised the pieces.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- hashing ------------------------------------------------------------------------------ */
static inline uint64_t tk_hash(const uint8_t *p, uint32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 32;
    return h;
}

/* ---- UTF-8 --------------------------------------------------------------------------------- */
/* The sequence at p: its length (> 0) when valid, with its code point in *cp; otherwise minus
 * the length of the maximal invalid subpart, which Python replaces by one U+FFFD. */
static inline int tk_utf8(const uint8_t *p, const uint8_t *end, uint32_t *cp) {
    uint8_t b0 = p[0];
    if (b0 < 0xC2) return -1;
    if (b0 < 0xE0) {
        if (p + 1 >= end || (p[1] & 0xC0) != 0x80) return -1;
        *cp = ((uint32_t)(b0 & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (b0 < 0xF0) {
        uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        if (p + 1 >= end || p[1] < lo || p[1] > hi) return -1;
        if (p + 2 >= end || (p[2] & 0xC0) != 0x80) return -2;
        *cp = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        return 3;
    }
    if (b0 < 0xF5) {
        uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        if (p + 1 >= end || p[1] < lo || p[1] > hi) return -1;
        if (p + 2 >= end || (p[2] & 0xC0) != 0x80) return -2;
        if (p + 3 >= end || (p[3] & 0xC0) != 0x80) return -3;
        *cp = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
              ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        return 4;
    }
    return -1;
}

/* Python's str.isspace() beyond ASCII (the same set since Unicode 6.3; a test compares it). */
static inline int tk_wide_space(uint32_t c) {
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* byte classes: 0 token byte, 1 whitespace, 2 newline, 3 upper-case letter, 4 not ASCII */
static const uint8_t *tk_classes(void) {
    static uint8_t cls[256];
    static int ready = 0;
    if (!ready) {
        for (int b = 0; b < 256; b++) {
            uint8_t c = 0;
            if (b >= 0x80) c = 4;
            else if (b == '\n') c = 2;
            else if ((b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x20)) c = 1;
            else if (b >= 'A' && b <= 'Z') c = 3;
            cls[b] = c;
        }
        ready = 1;  /* idempotent: threads that race here write the same bytes */
    }
    return cls;
}

/* ---- a piece's distinct tokens --------------------------------------------------------------- */
typedef struct {
    uint32_t *slots; /* type id + 1, 0 = empty */
    uint32_t mask;
} tk_local;

static int tk_local_grow(tk_local *t, const uint64_t *hashes, uint32_t ntypes) {
    uint32_t cap = (t->mask + 1) * 2, mask = cap - 1;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < ntypes; i++) {
        uint32_t s = (uint32_t)hashes[i] & mask;
        while (slots[s]) s = (s + 1) & mask;
        slots[s] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* out[]: 0 tokens, 1 types, 2 sentence ends, 3 invalid UTF-8 sequences, 4 longest token (bytes),
 * 5 tokens before the first '\n' (all when there is none), 6 whether there is a '\n',
 * 7 tokens after the last '\n' (all when there is none).
 * ids[ntokens]: local type ids; ends[]: token counts at each '\n' closing a line with tokens;
 * type_off/type_len: where each type's bytes are in buf (after lowercasing); type_count: its
 * occurrences; type_flag: 1 when Python must compute its word; hashes: the hash of its bytes.
 * Arrays hold n / 2 + 1 entries.
 * Returns 0, or -1 when memory ran out. */
int tk_tokenise(uint8_t *buf, int64_t n, int lowercase, int skip_bom, uint32_t *ids,
                uint32_t *ends, uint32_t *type_off, uint32_t *type_len, uint32_t *type_count,
                uint8_t *type_flag, uint64_t *hashes, int64_t *out) {
    const uint8_t *cls = tk_classes();
    const uint8_t *end = buf + n;
    tk_local table = {NULL, 0};
    table.mask = 4095;
    table.slots = calloc(4096, sizeof *table.slots);
    if (!table.slots) return -1;
    uint32_t ntok = 0, ntypes = 0, nends = 0, line_start = 0, lead = 0, has_nl = 0;
    int64_t invalid = 0, longest = 0;
    const uint8_t *p = buf;
    if (skip_bom && n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) p += 3;
    /* a whole file that is the start of a BOM reads as empty: Python's utf-8-sig decoder waits
     * for the third byte and, at the end, drops what it holds */
    if (skip_bom && n < 3 && n > 0 && p[0] == 0xEF && (n == 1 || p[1] == 0xBB)) p = end;
    while (p < end) {
        /* skip whitespace */
        uint8_t c = cls[*p];
        if (c == 1) { p++; continue; }
        if (c == 2) {
            if (ntok > line_start) ends[nends++] = ntok;
            if (!has_nl) { has_nl = 1; lead = ntok; }
            line_start = ntok;
            p++;
            continue;
        }
        if (c == 4) {
            uint32_t cp = 0;
            int len = tk_utf8(p, end, &cp);
            if (len > 0 && tk_wide_space(cp)) { p += len; continue; }
        }
        /* a token starts at p */
        uint8_t *start = (uint8_t *)p;
        int wide = 0, bad = 0;
        while (p < end) {
            c = cls[*p];
            if (c == 0) { p++; continue; }
            if (c == 3) { if (lowercase) *(uint8_t *)p |= 0x20; p++; continue; }
            if (c != 4) break;
            uint32_t cp = 0;
            int len = tk_utf8(p, end, &cp);
            if (len > 0) {
                if (tk_wide_space(cp)) break;
                p += len;
            } else {
                bad = 1;
                invalid++;
                p += -len;
            }
            wide = 1;
        }
        uint32_t len = (uint32_t)(p - start);
        if (len > longest) longest = len;
        uint64_t h = tk_hash(start, len);
        uint32_t s = (uint32_t)h & table.mask, id;
        for (;;) {
            uint32_t e = table.slots[s];
            if (!e) {
                id = ntypes++;
                hashes[id] = h;
                type_off[id] = (uint32_t)(start - buf);
                type_len[id] = len;
                type_count[id] = 0;
                type_flag[id] = (uint8_t)(bad || (wide && lowercase));
                table.slots[s] = id + 1;
                if ((uint64_t)ntypes * 2 > table.mask + 1 &&
                    tk_local_grow(&table, hashes, ntypes)) {
                    free(table.slots);
                    return -1;
                }
                break;
            }
            e--;
            if (hashes[e] == h && type_len[e] == len && !memcmp(buf + type_off[e], start, len)) {
                id = e;
                break;
            }
            s = (s + 1) & table.mask;
        }
        type_count[id]++;
        ids[ntok++] = id;
    }
    free(table.slots);
    out[0] = ntok;
    out[1] = ntypes;
    out[2] = nends;
    out[3] = invalid;
    out[4] = longest;
    out[5] = has_nl ? lead : ntok;
    out[6] = has_nl;
    out[7] = ntok - line_start;
    return 0;
}

/* ---- the corpus's tables ---------------------------------------------------------------------- */
/* One entry per word, the slots holding part of its hash beside its id: a lookup touches a slot,
 * an entry and the word's bytes (three cache lines), however large the table. */
typedef struct {
    int64_t offset; /* into bytes */
    int64_t count;
    uint32_t len;
    uint32_t value; /* what the word maps to (tk_merge's aliases: a word id) */
} tk_entry;

typedef struct {
    uint8_t *bytes;   /* the words' bytes, back to back */
    tk_entry *entry;
    uint64_t *slots;  /* hash's high 32 bits << 32 | (id + 1); 0 = empty */
    int64_t n, cap, nbytes, capbytes;
    uint64_t mask;
} tk_table;

void tk_table_free(tk_table *t) {
    if (!t) return;
    free(t->bytes);
    free(t->entry);
    free(t->slots);
    free(t);
}

tk_table *tk_table_new(void) {
    tk_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cap = 1 << 12;
    t->capbytes = 1 << 16;
    t->mask = (1u << 13) - 1;
    t->bytes = malloc((size_t)t->capbytes);
    t->entry = malloc((size_t)t->cap * sizeof *t->entry);
    t->slots = calloc((size_t)t->mask + 1, sizeof *t->slots);
    if (!t->bytes || !t->entry || !t->slots) {
        tk_table_free(t);
        return NULL;
    }
    return t;
}

int64_t tk_table_size(const tk_table *t) { return t->n; }
int64_t tk_table_bytes(const tk_table *t) { return t->nbytes; }

/* the words, each followed by '\n' (no word holds one: it is whitespace), and their counts,
 * into arrays the caller sized (tk_table_bytes + tk_table_size bytes) */
void tk_table_export(const tk_table *t, uint8_t *lines, int64_t *count) {
    for (int64_t i = 0; i < t->n; i++) {
        const tk_entry *e = &t->entry[i];
        memcpy(lines, t->bytes + e->offset, e->len);
        lines[e->len] = '\n';
        lines += e->len + 1;
        count[i] = e->count;
    }
}

static inline uint64_t tk_slot(uint64_t h, int64_t id) {
    return (h & 0xFFFFFFFF00000000ull) | (uint64_t)(id + 1);
}

static int tk_table_reserve(tk_table *t, uint32_t more_bytes) {
    if (t->nbytes + more_bytes > t->capbytes) {
        int64_t cap = t->capbytes * 2;
        while (cap < t->nbytes + more_bytes) cap *= 2;
        uint8_t *b = realloc(t->bytes, (size_t)cap);
        if (!b) return -1;
        t->bytes = b;
        t->capbytes = cap;
    }
    if (t->n == t->cap) {
        tk_entry *e = realloc(t->entry, (size_t)t->cap * 2 * sizeof *e);
        if (!e) return -1;
        t->entry = e;
        t->cap *= 2;
    }
    if ((uint64_t)(t->n + 1) * 2 > t->mask + 1) {
        uint64_t mask = t->mask * 2 + 1;
        uint64_t *slots = calloc((size_t)mask + 1, sizeof *slots);
        if (!slots) return -1;
        for (int64_t i = 0; i < t->n; i++) {
            const tk_entry *e = &t->entry[i];
            uint64_t h = tk_hash(t->bytes + e->offset, e->len);
            uint64_t s = h & mask;
            while (slots[s]) s = (s + 1) & mask;
            slots[s] = tk_slot(h, i);
        }
        free(t->slots);
        t->slots = slots;
        t->mask = mask;
    }
    return 0;
}

/* The id of the word p[0:len], -1 when absent; or inserted (with *added = 1) when insert.
 * Returns -2 when memory ran out. */
static int64_t tk_table_find_h(tk_table *t, const uint8_t *p, uint32_t len, uint64_t h,
                               int insert, int *added) {
    uint64_t tag = h & 0xFFFFFFFF00000000ull;
    uint64_t s = h & t->mask;
    for (;;) {
        uint64_t slot = t->slots[s];
        if (!slot) break;
        if ((slot & 0xFFFFFFFF00000000ull) == tag) {
            int64_t id = (int64_t)(slot & 0xFFFFFFFFull) - 1;
            const tk_entry *e = &t->entry[id];
            if (e->len == len && !memcmp(t->bytes + e->offset, p, len)) return id;
        }
        s = (s + 1) & t->mask;
    }
    if (!insert) return -1;
    if (tk_table_reserve(t, len)) return -2;
    s = h & t->mask; /* the reserve may have rehashed: find the free slot again */
    while (t->slots[s]) s = (s + 1) & t->mask;
    int64_t id = t->n++;
    memcpy(t->bytes + t->nbytes, p, len);
    t->entry[id] = (tk_entry){t->nbytes, 0, len, 0};
    t->nbytes += len;
    t->slots[s] = tk_slot(h, id);
    *added = 1;
    return id;
}

static int64_t tk_table_find(tk_table *t, const uint8_t *p, uint32_t len, int insert,
                             int *added) {
    return tk_table_find_h(t, p, len, tk_hash(p, len), insert, added);
}

/* Start loading the slot of the type AHEAD places on, and the entry of the one half as far:
 * a large table's lookups are cache misses, and this overlaps them. */
#define TK_AHEAD 16
static inline void tk_prefetch(const tk_table *t, const uint64_t *hashes, int64_t i, int64_t n) {
    if (i + TK_AHEAD < n) __builtin_prefetch(&t->slots[hashes[i + TK_AHEAD] & t->mask]);
    if (i + TK_AHEAD / 2 < n) {
        uint64_t slot = t->slots[hashes[i + TK_AHEAD / 2] & t->mask];
        if (slot) {
            const tk_entry *e = &t->entry[(slot & 0xFFFFFFFFull) - 1];
            __builtin_prefetch(e);
            __builtin_prefetch(t->bytes + e->offset);
        }
    }
}

/* Flagged types already seen in an earlier piece: word[i] = their word id; the others get
 * UINT32_MAX (Python computes their words). Returns how many are left to Python. */
int64_t tk_known_aliases(tk_table *aliases, const uint8_t *buf, const uint32_t *type_off,
                         const uint32_t *type_len, const uint8_t *type_flag, int64_t ntypes,
                         uint32_t *word) {
    int64_t left = 0;
    for (int64_t i = 0; i < ntypes; i++) {
        word[i] = UINT32_MAX;
        if (!type_flag[i]) continue;
        int added = 0;
        int64_t a = tk_table_find(aliases, buf + type_off[i], type_len[i], 0, &added);
        if (a >= 0) word[i] = aliases->entry[a].value;
        else left++;
    }
    return left;
}

/* Fold a piece's types into the tables, in type order: word[i] becomes the word id of type i
 * (hashes: tk_tokenise's).
 * An unflagged type is its own word; a flagged one not yet known (word[i] == UINT32_MAX) has
 * its word at canon[canon_off[i]:canon_off[i + 1]] and is remembered in aliases. Returns 0; 1
 * when the words table grew beyond limit (the remaining types are not folded); -1 when memory
 * ran out. */
int tk_merge(tk_table *words, tk_table *aliases, const uint8_t *buf, const uint32_t *type_off,
             const uint32_t *type_len, const uint8_t *type_flag, const uint32_t *type_count,
             const uint64_t *hashes, int64_t ntypes, const uint8_t *canon,
             const int64_t *canon_off, int64_t limit, uint32_t *word) {
    int rc = 0;
    for (int64_t i = 0; i < ntypes; i++) {
        tk_prefetch(words, hashes, i, ntypes);
        int added = 0;
        int64_t w;
        if (!type_flag[i]) {
            w = tk_table_find_h(words, buf + type_off[i], type_len[i], hashes[i], 1, &added);
        } else if (word[i] != UINT32_MAX) {
            w = word[i];
        } else {
            w = tk_table_find(words, canon + canon_off[i],
                              (uint32_t)(canon_off[i + 1] - canon_off[i]), 1, &added);
            if (w >= 0) {
                int a_added = 0;
                int64_t a = tk_table_find(aliases, buf + type_off[i], type_len[i], 1, &a_added);
                if (a < 0) { rc = -1; break; }
                aliases->entry[a].value = (uint32_t)w;
            }
        }
        if (w < 0) { rc = -1; break; }
        if (added && words->n > limit) { rc = 1; break; }
        words->entry[w].count += type_count[i];
        word[i] = (uint32_t)w;
    }
    return rc;
}
