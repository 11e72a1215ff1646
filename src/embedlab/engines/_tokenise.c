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
 * counts. tk_words_fold() folds a piece's types into the corpus's words, a table in shards that
 * all threads fold into at once; tk_select() and tk_tsv_write() sort and write the vocabulary;
 * tk_encode() maps token ids to vocabulary ids; tk_count() counts with word2vec's pruning.
 */
#include <pthread.h>
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

/* Whether a[0:n] == b[0:n]: inlined, as words are short and a call to memcmp per token costs
 * more than the comparison. */
static inline int tk_same(const uint8_t *a, const uint8_t *b, uint32_t n) {
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
    }
    while (n--)
        if (*a++ != *b++) return 0;
    return 1;
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

/* ---- a piece's tokens ------------------------------------------------------------------------- */
/* Where each token is: a first sweep over the bytes finds the tokens (streaming), a second
 * gives them type ids; knowing every token's hash ahead lets the second sweep prefetch the
 * table slots and types it is about to need, as its lookups are otherwise cache misses. */
typedef struct {
    uint64_t *hash;
    uint32_t *start, *len;
    uint8_t *flag; /* 1: Python must compute the word */
} tk_tokens;

typedef struct {
    uint64_t hash;
    uint32_t off, len, count;
} tk_type;

/* A thread's scratch memory of at least size bytes, kept for its next piece (fresh memory
 * each time would cost a page fault per page); freed when the thread ends. NULL when memory
 * ran out. */
typedef struct {
    uint8_t *p;
    size_t size;
} tk_block;

static pthread_key_t tk_scratch_key;
static pthread_once_t tk_scratch_once = PTHREAD_ONCE_INIT;

static void tk_scratch_free(void *b) {
    free(((tk_block *)b)->p);
    free(b);
}

static void tk_scratch_init(void) { pthread_key_create(&tk_scratch_key, tk_scratch_free); }

static uint8_t *tk_scratch(size_t size) {
    pthread_once(&tk_scratch_once, tk_scratch_init);
    tk_block *b = pthread_getspecific(tk_scratch_key);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b || pthread_setspecific(tk_scratch_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->size < size) {
        free(b->p);
        b->p = malloc(size);
        b->size = b->p ? size : 0;
    }
    return b->p;
}

/* out[] as tk_tokenise's; ends[] too. Returns the number of tokens. */
static uint32_t tk_split(uint8_t *buf, int64_t n, int lowercase, int skip_bom, tk_tokens *tok,
                         uint32_t *ends, int64_t *out) {
    const uint8_t *cls = tk_classes();
    const uint8_t *end = buf + n;
    uint32_t ntok = 0, nends = 0, line_start = 0, lead = 0, has_nl = 0;
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
        tok->hash[ntok] = tk_hash(start, len);
        tok->start[ntok] = (uint32_t)(start - buf);
        tok->len[ntok] = len;
        tok->flag[ntok] = (uint8_t)(bad || (wide && lowercase));
        ntok++;
    }
    out[0] = ntok;
    out[2] = nends;
    out[3] = invalid;
    out[4] = longest;
    out[5] = has_nl ? lead : ntok;
    out[6] = has_nl;
    out[7] = ntok - line_start;
    return ntok;
}

#define TK_AHEAD 16 /* lookups ahead whose slot is prefetched (half as far: the entry's) */

/* Type ids of tokens, in order of first appearance, in types[]. Returns their number, or -1
 * when memory ran out. */
static int64_t tk_types(const uint8_t *buf, const tk_tokens *tok, uint32_t ntok, uint32_t *ids,
                        tk_type *types) {
    uint32_t mask = 4095, ntypes = 0;
    uint32_t *slots = calloc(mask + 1, sizeof *slots); /* type id + 1, 0 = empty */
    if (!slots) return -1;
    for (uint32_t k = 0; k < ntok; k++) {
        if (k + TK_AHEAD < ntok) __builtin_prefetch(&slots[tok->hash[k + TK_AHEAD] & mask]);
        if (k + TK_AHEAD / 2 < ntok) {
            uint32_t e = slots[tok->hash[k + TK_AHEAD / 2] & mask];
            if (e) {
                __builtin_prefetch(&types[e - 1]);
                __builtin_prefetch(buf + types[e - 1].off);
            }
        }
        uint64_t h = tok->hash[k];
        uint32_t len = tok->len[k], s = (uint32_t)h & mask, id;
        const uint8_t *start = buf + tok->start[k];
        for (;;) {
            uint32_t e = slots[s];
            if (!e) {
                id = ntypes++;
                types[id] = (tk_type){h, tok->start[k], len, 0};
                slots[s] = id + 1;
                if ((uint64_t)ntypes * 2 > mask + 1) { /* grow */
                    uint32_t cap = (mask + 1) * 2;
                    uint32_t *grown = calloc(cap, sizeof *grown);
                    if (!grown) {
                        free(slots);
                        return -1;
                    }
                    mask = cap - 1;
                    for (uint32_t i = 0; i < ntypes; i++) {
                        uint32_t g = (uint32_t)types[i].hash & mask;
                        while (grown[g]) g = (g + 1) & mask;
                        grown[g] = i + 1;
                    }
                    free(slots);
                    slots = grown;
                }
                break;
            }
            const tk_type *t = &types[e - 1];
            if (t->hash == h && t->len == len && tk_same(buf + t->off, start, len)) {
                id = e - 1;
                break;
            }
            s = (s + 1) & mask;
        }
        types[id].count++;
        ids[k] = id;
    }
    free(slots);
    return ntypes;
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
    size_t cap = (size_t)(n / 2 + 1);
    uint8_t *scratch = tk_scratch(cap * (sizeof(tk_type) + 8 + 4 + 4 + 1));
    if (!scratch) return -1;
    tk_type *types = (tk_type *)scratch;
    tk_tokens tok = {(uint64_t *)(scratch + cap * sizeof(tk_type)), NULL, NULL, NULL};
    tok.start = (uint32_t *)(tok.hash + cap);
    tok.len = tok.start + cap;
    tok.flag = (uint8_t *)(tok.len + cap);
    uint32_t ntok = tk_split(buf, n, lowercase, skip_bom, &tok, ends, out);
    int64_t ntypes = tk_types(buf, &tok, ntok, ids, types);
    if (ntypes < 0) return -1;
    for (int64_t i = 0; i < ntypes; i++) {
        hashes[i] = types[i].hash;
        type_off[i] = types[i].off;
        type_len[i] = types[i].len;
        type_count[i] = types[i].count;
    }
    /* a type's flag is its first token's: the same bytes give the same flag */
    for (uint32_t k = 0, next = 0; k < ntok && (int64_t)next < ntypes; k++)
        if (ids[k] == next) type_flag[next++] = tok.flag[k];
    out[1] = ntypes;
    return 0;
}

/* ---- the corpus's tables ---------------------------------------------------------------------- */
/* One entry per word, the slots holding part of its hash beside its id: a lookup touches a slot,
 * an entry and the word's bytes (three cache lines), however large the table. */
typedef struct {
    int64_t offset; /* into bytes */
    int64_t count;
    uint32_t len;
    uint32_t value; /* what the word maps to: a word id (aliases), a vocabulary id (lookups) */
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
            if (e->len == len && tk_same(t->bytes + e->offset, p, len)) return id;
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

/* Flagged types already seen in an earlier piece: word[i] = their word id; the others get
 * UINT32_MAX (Python computes their words). Returns how many are left to Python. */
static int64_t tk_known_aliases(tk_table *aliases, const uint8_t *buf,
                                const uint32_t *type_off, const uint32_t *type_len,
                                const uint8_t *type_flag, int64_t ntypes, uint32_t *word) {
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

/* ---- the corpus's words, folded by every thread at once ----------------------------------- */
/* TK_SHARDS tables, a word's shard picked by its hash's top bits, each behind its own lock, so
 * threads fold their pieces' types at the same time. A word's id is its index in its shard
 * times TK_SHARDS plus the shard: ids never move once given. Which thread gives a word its id
 * first depends on timing, so the ids (scratch values) may differ between runs; the counts and
 * the word each token maps to do not, and everything written is derived from those. */
#define TK_SHARD_BITS 6
#define TK_SHARDS (1 << TK_SHARD_BITS)

typedef struct {
    tk_table *shard[TK_SHARDS];
    pthread_mutex_t lock[TK_SHARDS];
    tk_table *aliases; /* flagged tokens' bytes -> word id */
    pthread_mutex_t alias_lock;
    int64_t size; /* words in all shards (atomic) */
    uint32_t turn; /* where the next fold starts (atomic), so threads start on other shards */
} tk_words;

void tk_words_free(tk_words *w) {
    if (!w) return;
    for (int s = 0; s < TK_SHARDS; s++) {
        tk_table_free(w->shard[s]);
        pthread_mutex_destroy(&w->lock[s]);
    }
    tk_table_free(w->aliases);
    pthread_mutex_destroy(&w->alias_lock);
    free(w);
}

tk_words *tk_words_new(void) {
    tk_words *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    int ok = 1;
    for (int s = 0; s < TK_SHARDS; s++) {
        pthread_mutex_init(&w->lock[s], NULL);
        ok &= (w->shard[s] = tk_table_new()) != NULL;
    }
    pthread_mutex_init(&w->alias_lock, NULL);
    ok &= (w->aliases = tk_table_new()) != NULL;
    if (!ok) {
        tk_words_free(w);
        return NULL;
    }
    return w;
}

int64_t tk_words_size(const tk_words *w) { return __atomic_load_n(&w->size, __ATOMIC_SEQ_CST); }
int tk_words_shards(void) { return TK_SHARDS; }
tk_table **tk_words_tables(tk_words *w) { return w->shard; }

static inline int tk_shard(uint64_t h) { return (int)(h >> (64 - TK_SHARD_BITS)); }

/* tk_known_aliases for a table that other threads fold into at the same time */
int64_t tk_words_known(tk_words *w, const uint8_t *buf, const uint32_t *type_off,
                       const uint32_t *type_len, const uint8_t *type_flag, int64_t ntypes,
                       uint32_t *word) {
    pthread_mutex_lock(&w->alias_lock);
    int64_t left = tk_known_aliases(w->aliases, buf, type_off, type_len, type_flag, ntypes, word);
    pthread_mutex_unlock(&w->alias_lock);
    return left;
}

/* The bytes of type i's word (see tk_words_fold for canon). */
static inline const uint8_t *tk_type_word(const uint8_t *buf, const uint32_t *type_off,
                                          const uint32_t *type_len, const uint8_t *type_flag,
                                          const uint8_t *canon, const int64_t *canon_off,
                                          int64_t i, uint32_t *len) {
    if (!type_flag[i]) {
        *len = type_len[i];
        return buf + type_off[i];
    }
    *len = (uint32_t)(canon_off[i + 1] - canon_off[i]);
    return canon + canon_off[i];
}

/* Fold the types order[0:n], all of shard s, into its table t (held locked). */
static int tk_fold_shard(tk_table *t, int s, const uint32_t *order, int64_t n,
                         const uint8_t *buf, const uint32_t *type_off, const uint32_t *type_len,
                         const uint8_t *type_flag, const uint32_t *type_count,
                         const uint64_t *hash, const uint8_t *canon, const int64_t *canon_off,
                         uint32_t *word, int64_t *added_words) {
    for (int64_t k = 0; k < n; k++) {
        if (k + TK_AHEAD < n) __builtin_prefetch(&t->slots[hash[order[k + TK_AHEAD]] & t->mask]);
        int64_t i = order[k], id;
        if (type_flag[i] && word[i] != UINT32_MAX) {
            id = word[i] / TK_SHARDS;
        } else {
            uint32_t len;
            const uint8_t *p = tk_type_word(buf, type_off, type_len, type_flag, canon, canon_off,
                                            i, &len);
            int added = 0;
            id = tk_table_find_h(t, p, len, hash[i], 1, &added);
            if (id < 0) return -1;
            *added_words += added;
        }
        t->entry[id].count += type_count[i];
        word[i] = (uint32_t)(id * TK_SHARDS + s);
    }
    return 0;
}

/* Fold a piece's types into the shared tables, a shard at a time under its lock (any thread
 * may call it): word[i] becomes the word id of type i (hashes: tk_tokenise's). An unflagged
 * type is its own word; a flagged one has its word id in word[i] when tk_words_known found it,
 * else (word[i] == UINT32_MAX) its word at canon[canon_off[i]:canon_off[i + 1]], and it is
 * remembered in the aliases.
 * Returns 0; 1 when the tables hold more than limit words (the piece is then not fully
 * folded); -1 when memory ran out. */
int tk_words_fold(tk_words *w, const uint8_t *buf, const uint32_t *type_off,
                  const uint32_t *type_len, const uint8_t *type_flag, const uint32_t *type_count,
                  const uint64_t *hashes, int64_t ntypes, const uint8_t *canon,
                  const int64_t *canon_off, int64_t limit, uint32_t *word) {
    uint32_t *order = malloc((size_t)(ntypes + 1) * sizeof *order);
    uint8_t *shard = malloc((size_t)ntypes + 1);
    uint64_t *hash = malloc((size_t)(ntypes + 1) * sizeof *hash);
    int64_t start[TK_SHARDS + 1] = {0};
    int rc = 0, aliases = 0;
    if (!order || !shard || !hash) rc = -1;
    for (int64_t i = 0; !rc && i < ntypes; i++) { /* bucket the types by shard */
        uint32_t len;
        const uint8_t *p = tk_type_word(buf, type_off, type_len, type_flag, canon, canon_off, i,
                                        &len);
        if (type_flag[i] && word[i] != UINT32_MAX) {
            shard[i] = (uint8_t)(word[i] % TK_SHARDS);
            hash[i] = 0;
        } else {
            hash[i] = type_flag[i] ? tk_hash(p, len) : hashes[i];
            shard[i] = (uint8_t)tk_shard(hash[i]);
            aliases += type_flag[i];
        }
        start[shard[i] + 1]++;
        if (type_flag[i] && word[i] == UINT32_MAX) shard[i] |= 0x80; /* a new alias */
    }
    for (int s = 0; s < TK_SHARDS; s++) start[s + 1] += start[s];
    int64_t fill[TK_SHARDS];
    memcpy(fill, start, sizeof fill);
    for (int64_t i = 0; !rc && i < ntypes; i++) order[fill[shard[i] & 0x7F]++] = (uint32_t)i;
    /* a shard at a time, first those no other thread holds: threads seldom wait */
    uint8_t done[TK_SHARDS] = {0};
    int left = 0;
    for (int s = 0; s < TK_SHARDS; s++) {
        done[s] = start[s] == start[s + 1];
        left += !done[s];
    }
    int first = (int)(__atomic_fetch_add(&w->turn, 23, __ATOMIC_RELAXED) % TK_SHARDS);
    for (int round = 0; !rc && left; round++) {
        for (int k = 0; !rc && k < TK_SHARDS; k++) {
            int s = (first + k) % TK_SHARDS;
            if (done[s]) continue;
            if (round == 0 ? pthread_mutex_trylock(&w->lock[s]) : pthread_mutex_lock(&w->lock[s]))
                continue;
            int64_t added = 0;
            rc = tk_fold_shard(w->shard[s], s, order + start[s], start[s + 1] - start[s], buf,
                               type_off, type_len, type_flag, type_count, hash, canon, canon_off,
                               word, &added);
            pthread_mutex_unlock(&w->lock[s]);
            done[s] = 1;
            left--;
            if (__atomic_add_fetch(&w->size, added, __ATOMIC_SEQ_CST) > limit && !rc) rc = 1;
        }
    }
    if (!rc && aliases) { /* flagged types met for the first time: remember their words */
        pthread_mutex_lock(&w->alias_lock);
        for (int64_t i = 0; i < ntypes && !rc; i++) {
            if (!(shard[i] & 0x80)) continue;
            int added = 0;
            int64_t a = tk_table_find(w->aliases, buf + type_off[i], type_len[i], 1, &added);
            if (a < 0) rc = -1;
            else w->aliases->entry[a].value = word[i];
        }
        pthread_mutex_unlock(&w->alias_lock);
    }
    free(order);
    free(shard);
    free(hash);
    return rc;
}

/* ---- the vocabulary ------------------------------------------------------------------------ */
/* Tables are read as one: ntables tables, word id = index in its table * ntables + table. */
typedef struct {
    int64_t count;
    uint64_t head; /* the word's first 8 bytes, big-endian (zeros after a shorter word) */
    const uint8_t *p;
    uint32_t len;
    uint32_t id;
} tk_ranked;

/* count descending, then the word's bytes ascending: UTF-8's byte order is code-point order,
 * the order of Python's str (embedlab.data.vocab.build) */
static int tk_rank_cmp(const void *a, const void *b) {
    const tk_ranked *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static uint64_t tk_head(const uint8_t *p, uint32_t len) {
    uint8_t b[8] = {0};
    memcpy(b, p, len < 8 ? len : 8);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h = h << 8 | b[i];
    return h;
}

/* The ids of r[0:n] in tk_rank_cmp's order: its halves sorted on two threads, then merged
 * straight into ids (no second array of r's size). */
static void tk_rank_sort(tk_ranked *r, int64_t n, int threads, int64_t *ids) {
    int64_t half = threads > 1 && n > (1 << 16) ? n / 2 : n;
#pragma omp parallel for num_threads(2) if (half < n)
    for (int part = 0; part < 2; part++) {
        int64_t lo = part ? half : 0, hi = part ? n : half;
        qsort(r + lo, (size_t)(hi - lo), sizeof *r, tk_rank_cmp);
    }
    int64_t i = 0, j = half, k = 0;
    while (i < half && j < n) ids[k++] = tk_rank_cmp(&r[j], &r[i]) < 0 ? r[j++].id : r[i++].id;
    while (i < half) ids[k++] = r[i++].id;
    while (j < n) ids[k++] = r[j++].id;
}

/* The ids of the words counted at least min_count times, other than unk (unk_len < 0: none),
 * in vocabulary order, into ids (sized to the tables' words). Returns how many, or -1 when
 * memory ran out. */
int64_t tk_select(tk_table **tables, int ntables, int64_t min_count, const uint8_t *unk,
                  int64_t unk_len, int threads, int64_t *ids) {
    int64_t total = 0, n = 0;
    for (int s = 0; s < ntables; s++) total += tables[s]->n;
    tk_ranked *r = malloc((size_t)(total + 1) * sizeof *r);
    if (!r) return -1;
    for (int s = 0; s < ntables; s++) {
        const tk_table *t = tables[s];
        for (int64_t i = 0; i < t->n; i++) {
            const tk_entry *e = &t->entry[i];
            if (e->count < min_count) continue;
            const uint8_t *p = t->bytes + e->offset;
            if (unk_len == e->len && !memcmp(p, unk, e->len)) continue;
            r[n++] = (tk_ranked){e->count, tk_head(p, e->len), p, e->len,
                                 (uint32_t)(i * ntables + s)};
        }
    }
    tk_rank_sort(r, n, threads, ids);
    free(r);
    return n;
}

static inline const tk_entry *tk_entry_of(tk_table **tables, int ntables, int64_t id) {
    return &tables[id % ntables]->entry[id / ntables];
}

/* Bytes of the vocab.tsv lines of the words ids[0:n] ("word\tcount\n"). */
int64_t tk_tsv_size(tk_table **tables, int ntables, const int64_t *ids, int64_t n) {
    int64_t size = 0;
    for (int64_t i = 0; i < n; i++) {
        const tk_entry *e = tk_entry_of(tables, ntables, ids[i]);
        int digits = 1;
        for (int64_t c = e->count; c >= 10; c /= 10) digits++;
        size += e->len + digits + 2;
    }
    return size;
}

/* Those lines into out (tk_tsv_size bytes); counts[i] = word i's count. */
void tk_tsv_write(tk_table **tables, int ntables, const int64_t *ids, int64_t n, uint8_t *out,
                  int64_t *counts) {
    for (int64_t i = 0; i < n; i++) {
        const tk_table *t = tables[ids[i] % ntables];
        const tk_entry *e = &t->entry[ids[i] / ntables];
        memcpy(out, t->bytes + e->offset, e->len);
        out += e->len;
        *out++ = '\t';
        char digits[24];
        int k = 0;
        int64_t c = e->count;
        do { digits[k++] = (char)('0' + c % 10); c /= 10; } while (c);
        while (k) *out++ = (uint8_t)digits[--k];
        *out++ = '\n';
        counts[i] = e->count;
    }
}

/* The largest word id + 1 */
int64_t tk_id_bound(tk_table **tables, int ntables) {
    int64_t bound = 0;
    for (int s = 0; s < ntables; s++)
        if (tables[s]->n && (tables[s]->n - 1) * ntables + s + 1 > bound)
            bound = (tables[s]->n - 1) * ntables + s + 1;
    return bound;
}

/* A table of the words ids[0:n] whose values are first, first + 1, ...; NULL when memory ran
 * out. */
tk_table *tk_lookup_new(tk_table **tables, int ntables, const int64_t *ids, int64_t n,
                        uint32_t first) {
    tk_table *v = tk_table_new();
    for (int64_t i = 0; v && i < n; i++) {
        const tk_table *t = tables[ids[i] % ntables];
        const tk_entry *e = &t->entry[ids[i] / ntables];
        int added = 0;
        int64_t id = tk_table_find(v, t->bytes + e->offset, e->len, 1, &added);
        if (id < 0) {
            tk_table_free(v);
            return NULL;
        }
        v->entry[id].value = first + (uint32_t)i;
    }
    return v;
}

/* map[i] = the value of type i's word in v (read only: threads may share it), else missing. */
void tk_lookup(const tk_table *v, const uint8_t *buf, const uint32_t *type_off,
               const uint32_t *type_len, const uint8_t *type_flag, const uint64_t *hashes,
               int64_t ntypes, const uint8_t *canon, const int64_t *canon_off, int32_t missing,
               int32_t *map) {
    for (int64_t i = 0; i < ntypes; i++) {
        if (i + TK_AHEAD < ntypes && !type_flag[i + TK_AHEAD])
            __builtin_prefetch(&v->slots[hashes[i + TK_AHEAD] & v->mask]);
        uint32_t len;
        const uint8_t *p = tk_type_word(buf, type_off, type_len, type_flag, canon, canon_off, i,
                                        &len);
        int added = 0;
        int64_t id = tk_table_find_h((tk_table *)v, p, len,
                                     type_flag[i] ? tk_hash(p, len) : hashes[i], 0, &added);
        map[i] = id < 0 ? missing : (int32_t)v->entry[id].value;
    }
}

/* ---- token ids to vocabulary ids ------------------------------------------------------------ */
/* out gets map[ids[i]] for the tokens whose value is >= 0 (the others are dropped);
 * kept_at[j] = how many were kept before position ends[j] (ascending, 0 <= ends[j] <= n).
 * res[0] = tokens kept, res[1] = kept tokens with id 0. */
void tk_encode(const uint32_t *ids, int64_t n, const int32_t *map, const int64_t *ends,
               int64_t nends, uint32_t *out, int64_t *kept_at, int64_t *res) {
    int64_t kept = 0, zeros = 0, j = 0;
    for (int64_t i = 0; i < n; i++) {
        while (j < nends && ends[j] <= i) kept_at[j++] = kept;
        int32_t v = map[ids[i]];
        if (v >= 0) {
            out[kept++] = (uint32_t)v;
            zeros += v == 0;
        }
    }
    while (j < nends) kept_at[j++] = kept;
    res[0] = kept;
    res[1] = zeros;
}

/* ---- counting with pruning (word2vec's ReduceVocab) ------------------------------------------ */
/* The specification is embedlab.data.vocab.WordCounter: after each token, when the table holds
 * more than limit words, every word counted at most `reduce` times is dropped and `reduce`
 * grows by one. Tokens are counted in corpus order, one piece after the other. */
typedef struct {
    tk_table *t;
    int64_t limit, reduce, gen;
    int64_t times, threshold, dropped_types, dropped_tokens, total;
} tk_counter;

tk_counter *tk_counter_new(int64_t limit) {
    tk_counter *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->t = tk_table_new();
    if (!c->t) {
        free(c);
        return NULL;
    }
    c->limit = limit;
    c->reduce = 1;
    return c;
}

void tk_counter_free(tk_counter *c) {
    if (!c) return;
    tk_table_free(c->t);
    free(c);
}

tk_table **tk_counter_tables(tk_counter *c) { return &c->t; }

/* out[]: times, threshold, dropped types, dropped tokens, tokens counted */
void tk_counter_stats(const tk_counter *c, int64_t *out) {
    out[0] = c->times;
    out[1] = c->threshold;
    out[2] = c->dropped_types;
    out[3] = c->dropped_tokens;
    out[4] = c->total;
}

/* Drop the words counted at most c->reduce times; the rest keep their order. */
static int tk_prune(tk_counter *c) {
    tk_table *t = c->t;
    int64_t kept = 0, nbytes = 0, tokens = 0;
    for (int64_t i = 0; i < t->n; i++) {
        tk_entry e = t->entry[i];
        if (e.count <= c->reduce) {
            tokens += e.count;
            continue;
        }
        memmove(t->bytes + nbytes, t->bytes + e.offset, e.len);
        e.offset = nbytes;
        nbytes += e.len;
        t->entry[kept++] = e;
    }
    uint64_t mask = 15;
    while ((uint64_t)(kept + 1) * 2 > mask + 1) mask = mask * 2 + 1;
    uint64_t *slots = calloc((size_t)mask + 1, sizeof *slots);
    if (!slots) return -1;
    for (int64_t i = 0; i < kept; i++) {
        const tk_entry *e = &t->entry[i];
        uint64_t h = tk_hash(t->bytes + e->offset, e->len), s = h & mask;
        while (slots[s]) s = (s + 1) & mask;
        slots[s] = tk_slot(h, i);
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    c->times++;
    c->threshold = c->reduce;
    c->dropped_types += t->n - kept;
    c->dropped_tokens += tokens;
    t->n = kept;
    t->nbytes = nbytes;
    c->reduce++;
    c->gen++; /* the word ids the callers hold are stale */
    return 0;
}

/* Count a piece's tokens (ids: its local type ids; the types' words as for tk_lookup).
 * Returns 0, or -1 when memory ran out. */
/* The counts gathered per type into the table (tk_count). */
static void tk_flush(tk_counter *c, const int64_t *word, int64_t *pending, const uint32_t *dirty,
                     int64_t ndirty) {
    for (int64_t i = 0; i < ndirty; i++) {
        c->t->entry[word[dirty[i]]].count += pending[dirty[i]];
        pending[dirty[i]] = 0;
    }
}

int tk_count(tk_counter *c, const uint32_t *ids, int64_t n, const uint8_t *buf,
             const uint32_t *type_off, const uint32_t *type_len, const uint8_t *type_flag,
             const uint64_t *hashes, int64_t ntypes, const uint8_t *canon,
             const int64_t *canon_off) {
    /* A type's word id holds while gen[type] == c->gen. Counts gather per type (pending, an
     * array as small as the piece) and go into the table before each pruning and at the end:
     * the table's entries are touched once per type, not once per token. */
    int64_t *word = malloc((size_t)(ntypes + 1) * sizeof *word);
    int64_t *gen = malloc((size_t)(ntypes + 1) * sizeof *gen);
    int64_t *pending = calloc((size_t)ntypes + 1, sizeof *pending);
    uint32_t *dirty = malloc((size_t)(ntypes + 1) * sizeof *dirty); /* types with pending > 0 */
    int64_t ndirty = 0;
    int rc = word && gen && pending && dirty ? 0 : -1;
    /* the words already in the table, looked up in one sweep that prefetches ahead (until a
     * pruning moves them); a type not found yet is looked up again at its first token, as
     * another type may have added its word (two flagged types can share one) */
    tk_table *t = c->t;
    for (int64_t i = 0; !rc && i < ntypes; i++) {
        if (i + TK_AHEAD < ntypes && !type_flag[i + TK_AHEAD])
            __builtin_prefetch(&t->slots[hashes[i + TK_AHEAD] & t->mask]);
        uint32_t len;
        const uint8_t *p = tk_type_word(buf, type_off, type_len, type_flag, canon, canon_off, i,
                                        &len);
        int added = 0;
        word[i] = tk_table_find_h(t, p, len, type_flag[i] ? tk_hash(p, len) : hashes[i], 0,
                                  &added);
        gen[i] = word[i] >= 0 ? c->gen : -1;
    }
    for (int64_t k = 0; !rc && k < n; k++) {
        uint32_t type = ids[k];
        int added = 0;
        if (gen[type] != c->gen) {
            uint32_t len;
            const uint8_t *p = tk_type_word(buf, type_off, type_len, type_flag, canon,
                                            canon_off, type, &len);
            int64_t id = tk_table_find_h(c->t, p, len,
                                         type_flag[type] ? tk_hash(p, len) : hashes[type], 1,
                                         &added);
            if (id < 0) { rc = -1; break; }
            word[type] = id;
            gen[type] = c->gen;
        }
        if (!pending[type]++) dirty[ndirty++] = type;
        if (added && c->t->n > c->limit) {
            tk_flush(c, word, pending, dirty, ndirty);
            ndirty = 0;
            if (tk_prune(c)) rc = -1;
        }
    }
    if (!rc) tk_flush(c, word, pending, dirty, ndirty);
    c->total += n;
    free(word);
    free(gen);
    free(pending);
    free(dirty);
    return rc;
}

/* ---- reading vocab.tsv (embedlab.data.vocab_tsv.parse_columns) ----------------------------
 * data[0 .. n) holds lines "word<TAB>count\n", the last newline possibly missing; cap is at
 * least the number of lines. Writes each line's count to counts[] and returns the number of
 * lines, or −1 when a line is not of that shape — no tab, more than one, a tab at its start,
 * a count not of 1 to 18 ASCII digits, or an ASCII whitespace byte other than its tab and
 * newline — or when there are more than cap lines (Python then names the bad line). flags:
 * bit 0 the bytes are what Vocab.save_tsv writes (a final newline, no leading zero), bit 1 the
 * text holds a byte that starts one of Unicode's other spaces in UTF-8 (0xC2, 0xE1, 0xE2, 0xE3:
 * Python searches the text then), bit 2 two lines hold the same word; *joined: the bytes
 * written to words[] (room for n): the words, each followed by a newline (Python's str.split
 * then makes only the words' strings, and their sha256 needs no "\n".join).
 * table: slots (a power of two, more than the lines) zeroed uint64, for each line its word's
 * hash in the high 32 bits and its start + 1 in the low ones (n < 2^32 − 1). */
#define VOCAB_AHEAD 32 /* words hashed (and their slots fetched) before they are looked up */

typedef struct {
    uint64_t hash;
    int64_t start;
    uint32_t len;
} vocab_word;

/* Whether the word is in the table already; if not, puts it there. */
static int vocab_seen(const uint8_t *data, int64_t n, uint64_t *table, int64_t slots,
                      vocab_word w) {
    const uint64_t mark = w.hash >> 32 << 32;
    int64_t slot = (int64_t)(w.hash & (uint64_t)(slots - 1));
    for (; table[slot]; slot = (slot + 1) & (slots - 1)) {
        if ((table[slot] & ~0xFFFFFFFFull) != mark) continue; /* another hash */
        const uint8_t *other = data + (table[slot] & 0xFFFFFFFFull) - 1;
        const uint8_t *end = memchr(other, '\t', (size_t)(data + n - other));
        if (end - other == w.len && tk_same(other, data + w.start, w.len)) return 1;
    }
    table[slot] = mark | (uint64_t)(w.start + 1);
    return 0;
}

int64_t tk_vocab_columns(const uint8_t *data, int64_t n, int64_t cap, int64_t *counts,
                         uint64_t *table, int64_t slots, int64_t *flags, uint8_t *words,
                         int64_t *joined) {
    static const uint8_t space[256] = {[9] = 1, [10] = 1, [11] = 1, [12] = 1, [13] = 1,
                                       [28] = 1, [29] = 1, [30] = 1, [31] = 1, [32] = 1};
    /* the table is far larger than the caches: each word's slot is fetched VOCAB_AHEAD words
     * before it is looked up, or every lookup would wait for memory (3 times as long) */
    vocab_word ahead[VOCAB_AHEAD];
    int64_t lines = 0, pos = 0, out = 0;
    int canonical = n > 0 && data[n - 1] == '\n', lead = 0, twice = 0;
    while (pos < n) {
        if (lines == cap) return -1;
        const int64_t start = pos;
        while (pos < n && !space[data[pos]]) {
            const uint8_t b = data[pos++];
            lead |= b == 0xC2 || b == 0xE1 || b == 0xE2 || b == 0xE3;
        }
        if (pos == n || data[pos] != '\t' || pos == start) return -1;
        const int64_t tab = pos++;
        int64_t value = 0, digits = 0;
        for (; pos < n && data[pos] >= '0' && data[pos] <= '9'; pos++, digits++)
            if (digits < 18) value = value * 10 + (data[pos] - '0'); /* more is refused */
        if (digits < 1 || digits > 18 || (pos < n && data[pos] != '\n')) return -1;
        if (digits > 1 && data[tab + 1] == '0') canonical = 0;
        pos++; /* past the newline (or the end) */
        counts[lines] = value;
        memcpy(words + out, data + start, (size_t)(tab - start));
        out += tab - start;
        words[out++] = '\n';
        vocab_word *w = &ahead[lines % VOCAB_AHEAD];
        if (lines >= VOCAB_AHEAD) twice |= vocab_seen(data, n, table, slots, *w);
        w->start = start;
        w->len = (uint32_t)(tab - start);
        w->hash = tk_hash(data + start, w->len);
        __builtin_prefetch(table + (w->hash & (uint64_t)(slots - 1)), 1);
        lines++;
    }
    for (int64_t i = lines > VOCAB_AHEAD ? lines - VOCAB_AHEAD : 0; i < lines; i++)
        twice |= vocab_seen(data, n, table, slots, ahead[i % VOCAB_AHEAD]);
    *flags = canonical | lead << 1 | twice << 2;
    *joined = out;
    return lines;
}
