/* word-freq: the most frequent words of a text, case-folded (ASCII letters,
 * digits and apostrophes make a word). Reports its progress with gb_log. */
#include "glovebox.h"

typedef struct {
    char *word;
    size_t len;
    unsigned count;
} entry;

static uint32_t hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'';
}

/* Insert or count a word; the table has `cap` slots (a power of two). */
static entry *bump(entry *table, size_t cap, char *word, size_t len) {
    for (size_t i = hash(word, len) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (table[i].word == NULL) {
            table[i] = (entry){word, len, 1};
            return &table[i];
        }
        if (table[i].len == len && memcmp(table[i].word, word, len) == 0) {
            table[i].count++;
            return &table[i];
        }
    }
}

static int by_count(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->word, y->word, n);
    return c ? c : (int)x->len - (int)y->len;
}

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    double top = 5;
    gb_buf text = {0};
    if (gb_json_get(input, input_len, "text", &val, &val_len) != 0 || gb_json_string(val, val_len, &text) != 0)
        return gb_error(out, "input must be an object with a string field \"text\"");
    if (gb_json_get(input, input_len, "top", &val, &val_len) == 0) gb_json_number(val, val_len, &top);
    for (size_t i = 0; i < text.len; i++)
        if (text.data[i] >= 'A' && text.data[i] <= 'Z') text.data[i] += 'a' - 'A';

    size_t cap = 64;
    while (cap < text.len) cap *= 2;
    entry *table = calloc(cap, sizeof(entry));
    if (!table) return gb_error(out, "text too large for this tool's memory");
    size_t total = 0, distinct = 0;
    for (size_t i = 0; i < text.len;) {
        while (i < text.len && !is_word_char(text.data[i])) i++;
        size_t start = i;
        while (i < text.len && is_word_char(text.data[i])) i++;
        if (i > start) {
            total++;
            if (bump(table, cap, text.data + start, i - start)->count == 1) distinct++;
        }
    }
    gb_log(GB_INFO, "counted %zu words, %zu distinct", total, distinct);

    size_t used = 0;
    for (size_t i = 0; i < cap; i++)
        if (table[i].word) table[used++] = table[i];
    qsort(table, used, sizeof(entry), by_count);
    if (top < used) used = (size_t)top;
    gb_buf_printf(out, "{\"words\": %zu, \"distinct\": %zu, \"top\": [", total, distinct);
    for (size_t i = 0; i < used; i++) {
        gb_buf_puts(out, i ? ", {\"word\": " : "{\"word\": ");
        gb_buf_json_string(out, table[i].word, table[i].len);
        gb_buf_printf(out, ", \"count\": %u}", table[i].count);
    }
    gb_buf_puts(out, "]}");
    if (used > 0) gb_log(GB_DEBUG, "most frequent: %.*s", (int)table[0].len, table[0].word);
    free(table);
    gb_buf_free(&text);
    return GB_OK;
}
