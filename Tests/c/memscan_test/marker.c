/* memscan_test: the marker, a token this program holds only masked, and its stored form. */
#include "memscan_test.h"

void make_marker_of(struct marker *m, const char *label, size_t len) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    size_t prefix = strlen(label);
    m->len = len;
    for (size_t i = 0; i < m->len; i++) {
        char c = i < prefix ? label[i] : alphabet[random() % 64];
        m->masked[i] = (unsigned char)c ^ MASK;
    }
}

void make_marker(struct marker *m, const char *label) { make_marker_of(m, label, 160); }

/* Takes over a clear token (masking it) and wipes the clear bytes. */
void adopt_marker(struct marker *m, char *clear, size_t len) {
    m->len = len < MAX_TOKEN ? len : MAX_TOKEN;
    for (size_t i = 0; i < m->len; i++) m->masked[i] = (unsigned char)clear[i] ^ MASK;
    explicit_bzero(clear, len);
}

char *marker_copy(const struct marker *m) {
    char *plain = malloc(m->len + 1);
    if (!plain) abort();
    for (size_t i = 0; i < m->len; i++) plain[i] = (char)(m->masked[i] ^ MASK);
    plain[m->len] = '\0';
    return plain;
}

void drop(char *plain) {
    explicit_bzero(plain, strlen(plain));
    free(plain);
}

/* The token as a keyring stores it: the session document holds it base64url-encoded (unpadded,
 * from the token's first byte: SessionDocument.encode), so a copy of a stored document (a
 * secret copied into GLib's heap on its way into a keyring file) holds these bytes and
 * none of the token's own. Masked like the marker; the clear bytes are wiped at once. */
void stored_form(const struct marker *m, struct marker *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char clear[MAX_TOKEN];
    for (size_t i = 0; i < m->len; i++) clear[i] = m->masked[i] ^ MASK;
    size_t o = 0, i = 0;
    for (; i + 3 <= m->len && o + 4 <= MAX_TOKEN; i += 3) {
        unsigned long n = (unsigned long)clear[i] << 16 | (unsigned long)clear[i + 1] << 8 | clear[i + 2];
        for (int shift = 18; shift >= 0; shift -= 6) out->masked[o++] = (unsigned char)alphabet[(n >> shift) & 63] ^ MASK;
    }
    size_t rest = m->len - i;
    if (rest > 0 && o + rest + 1 <= MAX_TOKEN) {
        unsigned long n = (unsigned long)clear[i] << 16 | (rest == 2 ? (unsigned long)clear[i + 1] << 8 : 0);
        for (size_t k = 0; k <= rest; k++) out->masked[o++] = (unsigned char)alphabet[(n >> (18 - 6 * k)) & 63] ^ MASK;
    }
    out->len = o;
    explicit_bzero(clear, sizeof clear);
}
