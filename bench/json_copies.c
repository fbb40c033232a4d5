/*
 * json_copies.c — does a JSON library leave a copy of a parsed secret in freed memory?
 * (the evaluation of json-glib as the replacement of Foundation's JSONDecoder)
 *
 *   (needs libjson-glib-dev, which scripts/deps.sh does not install: the library does not use it)
 *   cc -O1 -Wall -Wextra -Werror -o build/bench/json_copies bench/json_copies.c \
 *       $(pkg-config --cflags --libs json-glib-1.0) -ldl
 *   build/bench/json_copies [TOKEN_BYTES ...]          (default: 160 300 4096 65536)
 *
 *   The same for jansson instead (libjansson-dev; the two libraries share symbol names), with
 *   and without a wipe-on-free allocator (json_set_alloc_funcs):
 *   cc -O1 -Wall -Wextra -Werror -DWITH_JANSSON -o build/bench/json_copies_jansson \
 *       bench/json_copies.c -Wl,-Bstatic -ljansson -Wl,-Bdynamic -ldl
 *
 * Each run parses a Portal exchange response {"data":{"endUserId":"u","clientSessionToken":T}},
 * takes the token the way the library would (then wipes the library's own string in place, as
 * SecretBytes.wipeStorage does today: for json-glib the brief's remedy, memset of
 * json_node_get_string's buffer before g_object_unref of the parser), frees everything and
 * wipes the input. The criterion is Tests/c/memscan_test/'s: a freed block that still holds the
 * token's bytes 16..end is a copy (malloc's list links overwrite a freed block's first 16
 * bytes). This program defines free() and realloc(), so every block the JSON library releases
 * passes through them (realloc's moved-from block included) and is checked before it is freed.
 * Prints one line per library and size; then how each library treats inputs JSONDecoder rejects
 * or reads differently. Exit 0 always (it reports; it does not judge).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef WITH_JANSSON
#include <jansson.h>
#else
#include <json-glib/json-glib.h>
#endif

#define MAX_TOKEN 65536

static char token[MAX_TOKEN];
static size_t token_len;
static int armed;
static int copies;

static int holds_token(void *block) {
    size_t usable = malloc_usable_size(block);
    return usable >= token_len && memmem(block, usable, token + 16, token_len - 16) != NULL;
}

void free(void *block) {
    static void (*real_free)(void *);
    if (!real_free) real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    if (armed && block && holds_token(block)) copies++;
    real_free(block);
}

void *realloc(void *block, size_t size) {
    static void *(*real_realloc)(void *, size_t);
    if (!real_realloc) real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    int held = armed && block && holds_token(block);
    void *moved = real_realloc(block, size);
    if (held && moved && moved != block) copies++;
    return moved;
}

/* The response, in a buffer the caller wipes (as PortalResponse's body is). */
static char *response(void) {
    size_t cap = token_len + 128;
    char *doc = malloc(cap);
    snprintf(doc, cap, "{\"data\":{\"endUserId\":\"u\",\"clientSessionToken\":\"%.*s\"}}", (int)token_len, token);
    return doc;
}

#ifndef WITH_JANSSON
static int json_glib_copies(void) {
    char *doc = response();
    copies = 0;
    armed = 1;
    JsonParser *parser = json_parser_new();
    if (json_parser_load_from_data(parser, doc, (gssize)strlen(doc), NULL)) {
        JsonObject *data = json_object_get_object_member(json_node_get_object(json_parser_get_root(parser)), "data");
        char *value = (char *)json_object_get_string_member(data, "clientSessionToken");
        explicit_bzero(value, strlen(value));
    }
    g_object_unref(parser);
    explicit_bzero(doc, strlen(doc));
    free(doc);
    armed = 0;
    return copies;
}

#else
/* Wipe-on-free: a size header in front of each block. */
static void *wiping_malloc(size_t size) {
    size_t *block = malloc(size + 16);
    if (!block) return NULL;
    block[0] = size;
    return (char *)block + 16;
}

static void wiping_free(void *ptr) {
    if (!ptr) return;
    size_t *block = (size_t *)((char *)ptr - 16);
    explicit_bzero(ptr, block[0]);
    free(block);
}

static int jansson_copies(void) {
    char *doc = response();
    copies = 0;
    armed = 1;
    json_t *root = json_loadb(doc, strlen(doc), JSON_REJECT_DUPLICATES, NULL);
    json_t *value = json_object_get(json_object_get(root, "data"), "clientSessionToken");
    if (value) explicit_bzero((char *)json_string_value(value), json_string_length(value));
    json_decref(root);
    explicit_bzero(doc, strlen(doc));
    free(doc);
    armed = 0;
    return copies;
}
#endif

static const char *const odd_inputs[] = {
    "{\"a\":\"x\\u0000y\"}",           /* JSONDecoder: a String with a NUL (checkToken refuses it) */
    "{\"a\":\"x\\ud800\"}",            /* lone surrogate: JSONDecoder rejects */
    "{'a':\"x\"}",                     /* not JSON: JSONDecoder rejects */
    "/* c */ {\"a\":\"x\"}",           /* not JSON: JSONDecoder rejects */
    "{\"a\":18446744073709551616}",    /* above UInt64: JSONDecoder rejects for an integer field */
    "{\"a\":18446744073709551615}",    /* UInt64.max: JSONDecoder reads it for a UInt64 field */
    "{\"a\":\"x\",\"a\":1}",           /* duplicate key */
};

#ifndef WITH_JANSSON
static void json_glib_odd(const char *input) {
    JsonParser *parser = json_parser_new();
    GError *error = NULL;
    if (!json_parser_load_from_data(parser, input, -1, &error)) {
        printf("  json-glib %-32s rejected (%s)\n", input, error->message);
        g_error_free(error);
    } else {
        JsonNode *a = json_object_get_member(json_node_get_object(json_parser_get_root(parser)), "a");
        if (json_node_get_value_type(a) == G_TYPE_STRING)
            printf("  json-glib %-32s accepted: \"%s\" (%zu bytes)\n", input, json_node_get_string(a), strlen(json_node_get_string(a)));
        else
            printf("  json-glib %-32s accepted: %s %lld\n", input, g_type_name(json_node_get_value_type(a)), (long long)json_node_get_int(a));
    }
    g_object_unref(parser);
}
#endif

int main(int argc, char **argv) {
    static const size_t defaults[] = {160, 300, 4096, 65536};
    size_t count = argc > 1 ? (size_t)argc - 1 : sizeof defaults / sizeof defaults[0];
    for (size_t i = 0; i < MAX_TOKEN; i++) token[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[(i * 37 + i / 64) % 64];
    for (size_t i = 0; i < count; i++) {
        token_len = argc > 1 ? strtoul(argv[i + 1], NULL, 10) : defaults[i];
        if (token_len < 32 || token_len > MAX_TOKEN) { fprintf(stderr, "TOKEN_BYTES: 32..%d\n", MAX_TOKEN); return 2; }
#ifdef WITH_JANSSON
        printf("token %5zu bytes: jansson %s: %d freed unwiped copies", token_len, JANSSON_VERSION, jansson_copies());
        json_set_alloc_funcs(wiping_malloc, wiping_free);
        printf(", with a wipe-on-free allocator: %d", jansson_copies());
        json_set_alloc_funcs(malloc, free);
#else
        printf("token %5zu bytes: json-glib %s: %d freed unwiped copies", token_len, JSON_VERSION_S, json_glib_copies());
#endif
        printf("\n");
    }
    printf("inputs JSONDecoder rejects or reads differently:\n");
    for (size_t i = 0; i < sizeof odd_inputs / sizeof odd_inputs[0]; i++) {
#ifndef WITH_JANSSON
        json_glib_odd(odd_inputs[i]);
#else
        json_error_t error;
        json_t *root = json_loads(odd_inputs[i], JSON_REJECT_DUPLICATES, &error);
        printf("  jansson   %-32s %s%s\n", odd_inputs[i], root ? "accepted" : "rejected: ", root ? "" : error.text);
        json_decref(root);
#endif
    }
    return 0;
}
