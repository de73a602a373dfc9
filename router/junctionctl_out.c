/* router/junctionctl_out.c: junctionctl's output - JSON written as the router meant it
 * (integral numbers as integers) and aligned tables (a header, a rule, rows; numeric columns
 * right-aligned) with the cell text of every kind of value a stat or an attribute can have.
 *
 * Threads: one (junctionctl's).
 */
#include "router/junctionctl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A number as text: integers exactly (as far as a double holds them), others short. */
static void num_text(double d, char *buf, size_t n)
{
    if (!isfinite(d))
        snprintf(buf, n, "null");
    else if (d == floor(d) && fabs(d) < 1.8e19)
        snprintf(buf, n, "%.0f", d);
    else
        snprintf(buf, n, "%.6g", d);
}

/* A JSON string (the text came from valid JSON, so it is UTF-8 already). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void ctl_json_print(FILE *f, const cJSON *j, int indent, int depth)
{
    char num[64];
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        bool         obj = cJSON_IsObject(j);
        const cJSON *e;
        int          i = 0;
        fputc(obj ? '{' : '[', f);
        cJSON_ArrayForEach(e, j)
        {
            if (i++)
                fputc(',', f);
            if (indent)
                fprintf(f, "\n%*s", indent * (depth + 1), "");
            if (obj) {
                json_string(f, e->string);
                fputs(indent ? ": " : ":", f);
            }
            ctl_json_print(f, e, indent, depth + 1);
        }
        if (indent && i)
            fprintf(f, "\n%*s", indent * depth, "");
        fputc(obj ? '}' : ']', f);
    } else if (cJSON_IsNumber(j)) {
        num_text(j->valuedouble, num, sizeof(num));
        fputs(num, f);
    } else if (cJSON_IsString(j)) {
        json_string(f, j->valuestring);
    } else {
        char *t = cJSON_PrintUnformatted(j);
        fputs(t, f);
        free(t);
    }
}

void ctl_json_out(const cJSON *j)
{
    ctl_json_print(stdout, j, 2, 0);
    fputc('\n', stdout);
}

char *ctl_cell_text(const cJSON *v)
{
    char buf[256];
    if (!v || cJSON_IsNull(v)) {
        snprintf(buf, sizeof(buf), "-");
    } else if (cJSON_IsNumber(v)) {
        num_text(v->valuedouble, buf, sizeof(buf));
    } else if (cJSON_IsString(v)) {
        return strdup(v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, sizeof(buf), "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "count")) {
        /* a histogram */
        char c[32], s[32], p50[32], p99[32];
        num_text(cJSON_GetObjectItemCaseSensitive(v, "count")->valuedouble, c, sizeof(c));
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(v, "sum");
        const cJSON *q50 = cJSON_GetObjectItemCaseSensitive(v, "p50");
        const cJSON *q99 = cJSON_GetObjectItemCaseSensitive(v, "p99");
        num_text(cJSON_IsNumber(sum) ? sum->valuedouble : 0, s, sizeof(s));
        num_text(cJSON_IsNumber(q50) ? q50->valuedouble : 0, p50, sizeof(p50));
        num_text(cJSON_IsNumber(q99) ? q99->valuedouble : 0, p99, sizeof(p99));
        snprintf(buf, sizeof(buf), "count=%s sum=%s p50=%s p99=%s", c, s, p50, p99);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        return t;
    }
    return strdup(buf);
}

void ctl_table_init(ctl_table_t *t, size_t ncols, const char *const *header)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
    t->cap = 16;
    t->cells = ctl_xrealloc(NULL, t->cap * ncols * sizeof(char *));
    for (size_t i = 0; i < ncols; i++)
        t->cells[i] = strdup(header[i]);
    t->nrows = 1;
}

void ctl_table_row(ctl_table_t *t, char **cells)
{
    if (t->nrows == t->cap) {
        t->cap *= 2;
        t->cells = ctl_xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
    }
    memcpy(&t->cells[t->nrows * t->ncols], cells, t->ncols * sizeof(char *));
    t->nrows++;
}

static bool is_numeric(const char *s)
{
    if (strcmp(s, "-") == 0)
        return true;
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == '+'))
            return false;
    return true;
}

/* Display width of UTF-8 text: code points (good enough for labels). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

void ctl_table_print(FILE *f, ctl_table_t *t)
{
    size_t *w = calloc(t->ncols, sizeof(size_t));
    bool   *right = calloc(t->ncols, sizeof(bool));
    for (size_t c = 0; c < t->ncols; c++) {
        right[c] = t->nrows > 1;
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = t->cells[r * t->ncols + c];
            if (text_width(s) > w[c])
                w[c] = text_width(s);
            if (r > 0 && !is_numeric(s))
                right[c] = false;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t      pad = w[c] - text_width(s);
            bool        last = c + 1 == t->ncols;
            if (right[c])
                fprintf(f, "%*s%s", (int)pad, "", s);
            else
                fprintf(f, "%s%*s", s, last ? 0 : (int)pad, "");
            if (!last)
                fputs("  ", f);
        }
        fputc('\n', f);
        if (r == 0) {
            size_t total = 0;
            for (size_t c = 0; c < t->ncols; c++)
                total += w[c] + (c + 1 < t->ncols ? 2 : 0);
            for (size_t i = 0; i < total; i++)
                fputc('=', f);
            fputc('\n', f);
        }
    }
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(w);
    free(right);
}
