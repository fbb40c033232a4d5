/*
 * lying_prompt_provider.c — a small Secret Service provider whose prompts lie: they complete
 * with dismissed = false without doing what they were for (libsecret's mock service models the
 * same state: a prompt another client dismissed, answered "done"). It owns
 * org.freedesktop.secrets on the session bus and implements what a persist, a restore and a clear
 * use: OpenSession with dh-ietf1024-sha256-aes128-cbc-pkcs7 (secrets cross the bus encrypted, as
 * the library requires), ReadAlias, SearchItems, GetSecrets, Unlock (nothing is locked),
 * Collection.CreateItem, Item.Delete, Session.Close and the items' properties.
 *
 *   lying_prompt_provider [--lie delete] [--lie create] [--lie create-phantom] [--lie unlock]
 *
 * --lie delete          Item.Delete returns a prompt; Prompt.Prompt completes (false, "") and the
 *                       item stays.
 * --lie create          CreateItem stores nothing and returns a prompt that completes (false, "/").
 * --lie create-phantom  the same, but the prompt's result names an item that does not exist.
 * --lie unlock          every stored item is locked; Unlock returns a prompt that completes
 *                       (false, []) and unlocks nothing.
 * Without --lie it deletes and creates at once, as gnome-keyring does. Every method call is logged
 * on stdout as "CALL <method>"; "ready" once it owns the name. Runs until killed.
 * Used by Tests/providers/lying_prompts.sh.
 *
 * Build: gcc -Wall -Wextra -Werror -o build/lying_prompt_provider Tests/tools/lying_prompt_provider.c \
 *            $(pkg-config --cflags --libs gio-2.0) -lgcrypt
 */
#include <gcrypt.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#define SERVICE "/org/freedesktop/secrets"
#define COLLECTION "/org/freedesktop/secrets/collection/login"
#define ALGORITHM "dh-ietf1024-sha256-aes128-cbc-pkcs7"

static const char introspection[] =
    "<node>"
    " <interface name='org.freedesktop.Secret.Service'>"
    "  <method name='OpenSession'><arg type='s' direction='in'/><arg type='v' direction='in'/>"
    "   <arg type='v' direction='out'/><arg type='o' direction='out'/></method>"
    "  <method name='SearchItems'><arg type='a{ss}' direction='in'/><arg type='ao' direction='out'/>"
    "   <arg type='ao' direction='out'/></method>"
    "  <method name='ReadAlias'><arg type='s' direction='in'/><arg type='o' direction='out'/></method>"
    "  <method name='Unlock'><arg type='ao' direction='in'/><arg type='ao' direction='out'/>"
    "   <arg type='o' direction='out'/></method>"
    "  <method name='GetSecrets'><arg type='ao' direction='in'/><arg type='o' direction='in'/>"
    "   <arg type='a{o(oayays)}' direction='out'/></method>"
    " </interface>"
    " <interface name='org.freedesktop.Secret.Collection'>"
    "  <method name='CreateItem'><arg type='a{sv}' direction='in'/><arg type='(oayays)' direction='in'/>"
    "   <arg type='b' direction='in'/><arg type='o' direction='out'/><arg type='o' direction='out'/></method>"
    "  <property name='Locked' type='b' access='read'/>"
    "  <property name='Label' type='s' access='read'/>"
    " </interface>"
    " <interface name='org.freedesktop.Secret.Item'>"
    "  <method name='Delete'><arg type='o' direction='out'/></method>"
    "  <property name='Locked' type='b' access='read'/>"
    "  <property name='Attributes' type='a{ss}' access='read'/>"
    "  <property name='Label' type='s' access='read'/>"
    "  <property name='Created' type='t' access='read'/>"
    "  <property name='Modified' type='t' access='read'/>"
    " </interface>"
    " <interface name='org.freedesktop.Secret.Session'>"
    "  <method name='Close'/>"
    " </interface>"
    " <interface name='org.freedesktop.Secret.Prompt'>"
    "  <method name='Prompt'><arg type='s' direction='in'/></method>"
    "  <method name='Dismiss'/>"
    "  <signal name='Completed'><arg type='b'/><arg type='v'/></signal>"
    " </interface>"
    "</node>";

static const char prime_hex[] =
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF";

typedef struct {
    char *path;
    GVariant *attributes; /* a{ss} */
    char *label;
    GBytes *secret;
    char *content_type;
    guint registration;
} Item;

static GDBusConnection *bus;
static GDBusNodeInfo *node;
static GHashTable *items;    /* path -> Item* */
static GHashTable *sessions; /* path -> 16-byte key (GBytes) */
static gboolean lie_delete, lie_create, lie_create_phantom, lie_unlock;
static unsigned next_item, next_session, next_prompt;
static const GDBusInterfaceVTable *vtable_ref;

static void fail(const char *what) {
    fprintf(stderr, "lying_prompt_provider: %s\n", what);
    exit(1);
}

static void write_padded(gcry_mpi_t value, unsigned char out[128]) {
    size_t written = 0;
    unsigned char buffer[128];
    if (gcry_mpi_print(GCRYMPI_FMT_USG, buffer, sizeof buffer, &written, value) || written > 128) fail("mpi print");
    memset(out, 0, 128);
    memcpy(out + (128 - written), buffer, written);
}

static void hmac_sha256(const unsigned char *key, size_t key_len, const unsigned char *data, size_t len,
                        unsigned char out[32]) {
    gcry_md_hd_t md;
    if (gcry_md_open(&md, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC) || gcry_md_setkey(md, key, key_len)) fail("hmac");
    gcry_md_write(md, data, len);
    memcpy(out, gcry_md_read(md, GCRY_MD_SHA256), 32);
    gcry_md_close(md);
}

/* OpenSession: our half of the key exchange and the session key (HKDF-SHA256, no salt, no info). */
static GBytes *open_session(GVariant *client, unsigned char server_public[128]) {
    gsize length = 0;
    const unsigned char *peer = g_variant_get_fixed_array(client, &length, 1);
    gcry_mpi_t p = NULL, y = NULL;
    if (gcry_mpi_scan(&p, GCRYMPI_FMT_HEX, prime_hex, 0, NULL) || gcry_mpi_scan(&y, GCRYMPI_FMT_USG, peer, length, NULL))
        fail("mpi scan");
    gcry_mpi_t x = gcry_mpi_new(1024), g = gcry_mpi_set_ui(NULL, 2), pub = gcry_mpi_new(1024), shared = gcry_mpi_new(1024);
    gcry_mpi_randomize(x, 1023, GCRY_STRONG_RANDOM);
    gcry_mpi_powm(pub, g, x, p);
    gcry_mpi_powm(shared, y, x, p);
    write_padded(pub, server_public);
    unsigned char shared_bytes[128], zeros[32] = {0}, prk[32], okm[32], one = 1;
    write_padded(shared, shared_bytes);
    hmac_sha256(zeros, sizeof zeros, shared_bytes, sizeof shared_bytes, prk);
    hmac_sha256(prk, sizeof prk, &one, 1, okm);
    gcry_mpi_release(p), gcry_mpi_release(y), gcry_mpi_release(x), gcry_mpi_release(g);
    gcry_mpi_release(pub), gcry_mpi_release(shared);
    return g_bytes_new(okm, 16);
}

static gcry_cipher_hd_t cipher(GBytes *key, const unsigned char *iv) {
    gcry_cipher_hd_t handle;
    if (gcry_cipher_open(&handle, GCRY_CIPHER_AES128, GCRY_CIPHER_MODE_CBC, 0) ||
        gcry_cipher_setkey(handle, g_bytes_get_data(key, NULL), 16) || gcry_cipher_setiv(handle, iv, 16))
        fail("cipher");
    return handle;
}

/* The plaintext of a (oayays) secret, or NULL when it does not decrypt. */
static GBytes *decrypt(GVariant *secret) {
    const char *session = NULL;
    g_variant_get_child(secret, 0, "&o", &session);
    GBytes *key = g_hash_table_lookup(sessions, session);
    GVariant *iv_v = g_variant_get_child_value(secret, 1), *value_v = g_variant_get_child_value(secret, 2);
    gsize iv_len = 0, len = 0;
    const unsigned char *iv = g_variant_get_fixed_array(iv_v, &iv_len, 1), *value = g_variant_get_fixed_array(value_v, &len, 1);
    GBytes *result = NULL;
    if (key && iv_len == 16 && len > 0 && len % 16 == 0) {
        unsigned char *plain = g_malloc(len);
        gcry_cipher_hd_t handle = cipher(key, iv);
        gcry_cipher_decrypt(handle, plain, len, value, len);
        gcry_cipher_close(handle);
        unsigned pad = plain[len - 1];
        if (pad >= 1 && pad <= 16) result = g_bytes_new(plain, len - pad);
        g_free(plain);
    }
    g_variant_unref(iv_v), g_variant_unref(value_v);
    return result;
}

static GVariant *encrypt(const char *session, GBytes *key, Item *item) {
    unsigned char iv[16];
    gcry_randomize(iv, sizeof iv, GCRY_STRONG_RANDOM);
    gsize len = 0;
    const unsigned char *plain = g_bytes_get_data(item->secret, &len);
    size_t padded = (len / 16 + 1) * 16;
    unsigned char *buffer = g_malloc(padded);
    memcpy(buffer, plain, len);
    memset(buffer + len, (int)(padded - len), padded - len);
    gcry_cipher_hd_t handle = cipher(key, iv);
    gcry_cipher_encrypt(handle, buffer, padded, NULL, 0);
    gcry_cipher_close(handle);
    GVariant *result = g_variant_new("(o@ay@ays)", session,
                                     g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, iv, sizeof iv, 1),
                                     g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, buffer, padded, 1),
                                     item->content_type);
    g_free(buffer);
    return result;
}

static gboolean matches(Item *item, GVariant *query) {
    GVariantIter iter;
    const char *name, *value;
    g_variant_iter_init(&iter, query);
    while (g_variant_iter_next(&iter, "{&s&s}", &name, &value)) {
        const char *have = NULL;
        if (!g_variant_lookup(item->attributes, name, "&s", &have) || strcmp(have, value) != 0) return FALSE;
    }
    return TRUE;
}

static void remove_item(Item *item) {
    g_dbus_connection_unregister_object(bus, item->registration);
    g_hash_table_remove(items, item->path);
}

static void free_item(gpointer data) {
    Item *item = data;
    g_free(item->path), g_free(item->label), g_free(item->content_type);
    g_variant_unref(item->attributes);
    g_bytes_unref(item->secret);
    g_free(item);
}

/* A prompt whose Prompt call completes (false, RESULT) and does nothing else. */
static char *lying_prompt(GVariant *result);

static void on_call(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                    const char *method, GVariant *parameters, GDBusMethodInvocation *invocation, gpointer data) {
    (void)connection, (void)sender, (void)interface;
    printf("CALL %s\n", method);
    fflush(stdout);
    if (g_str_equal(method, "OpenSession")) {
        const char *algorithm = NULL;
        GVariant *input = NULL;
        g_variant_get(parameters, "(&sv)", &algorithm, &input);
        if (!g_str_equal(algorithm, ALGORITHM) || !g_variant_is_of_type(input, G_VARIANT_TYPE_BYTESTRING)) {
            g_variant_unref(input);
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.NotSupported", algorithm);
            return;
        }
        unsigned char server_public[128];
        GBytes *key = open_session(input, server_public);
        g_variant_unref(input);
        char *session = g_strdup_printf(SERVICE "/session/s%u", ++next_session);
        GError *error = NULL;
        g_dbus_connection_register_object(bus, session, node->interfaces[3], vtable_ref, NULL, NULL, &error);
        g_clear_error(&error);
        g_hash_table_insert(sessions, session, key);
        g_dbus_method_invocation_return_value(
            invocation, g_variant_new("(vo)", g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, server_public, 128, 1), session));
    } else if (g_str_equal(method, "ReadAlias")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(o)", COLLECTION));
    } else if (g_str_equal(method, "SearchItems")) {
        GVariant *query = g_variant_get_child_value(parameters, 0);
        GVariantBuilder found, locked;
        g_variant_builder_init(&found, G_VARIANT_TYPE("ao"));
        g_variant_builder_init(&locked, G_VARIANT_TYPE("ao"));
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, items);
        while (g_hash_table_iter_next(&iter, &key, &value))
            if (matches(value, query)) g_variant_builder_add(lie_unlock ? &locked : &found, "o", key);
        g_variant_unref(query);
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(aoao)", &found, &locked));
    } else if (g_str_equal(method, "Unlock") && lie_unlock) {
        char *prompt = lying_prompt(g_variant_new_array(G_VARIANT_TYPE_OBJECT_PATH, NULL, 0));
        g_dbus_method_invocation_return_value(invocation,
                                              g_variant_new("(@aoo)", g_variant_new_array(G_VARIANT_TYPE_OBJECT_PATH, NULL, 0), prompt));
        g_free(prompt);
    } else if (g_str_equal(method, "Unlock")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(@aoo)", g_variant_get_child_value(parameters, 0), "/"));
    } else if (g_str_equal(method, "GetSecrets")) {
        GVariant *paths = g_variant_get_child_value(parameters, 0);
        const char *session = NULL;
        g_variant_get_child(parameters, 1, "&o", &session);
        GBytes *key = g_hash_table_lookup(sessions, session);
        if (!key) {
            g_variant_unref(paths);
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.Secret.Error.NoSession", "no such session");
            return;
        }
        GVariantBuilder secrets;
        g_variant_builder_init(&secrets, G_VARIANT_TYPE("a{o(oayays)}"));
        GVariantIter iter;
        const char *item_path;
        g_variant_iter_init(&iter, paths);
        while (g_variant_iter_next(&iter, "&o", &item_path)) {
            Item *item = g_hash_table_lookup(items, item_path);
            if (item && !lie_unlock) g_variant_builder_add(&secrets, "{o@(oayays)}", item_path, encrypt(session, key, item));
        }
        g_variant_unref(paths);
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(a{o(oayays)})", &secrets));
    } else if (g_str_equal(method, "CreateItem")) {
        if (lie_create || lie_create_phantom) {
            char *phantom = g_strdup_printf(COLLECTION "/phantom%u", next_item + 1000);
            char *prompt = lying_prompt(g_variant_new_object_path(lie_create_phantom ? phantom : "/"));
            g_dbus_method_invocation_return_value(invocation, g_variant_new("(oo)", "/", prompt));
            g_free(prompt), g_free(phantom);
            return;
        }
        GVariant *properties = g_variant_get_child_value(parameters, 0), *secret = g_variant_get_child_value(parameters, 1);
        GBytes *plain = decrypt(secret);
        GVariant *attributes = g_variant_lookup_value(properties, "org.freedesktop.Secret.Item.Attributes", G_VARIANT_TYPE("a{ss}"));
        const char *label = "";
        g_variant_lookup(properties, "org.freedesktop.Secret.Item.Label", "&s", &label);
        if (!plain || !attributes) {
            if (plain) g_bytes_unref(plain);
            if (attributes) g_variant_unref(attributes);
            g_variant_unref(properties), g_variant_unref(secret);
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.InvalidArgs", "bad item");
            return;
        }
        Item *item = g_new0(Item, 1);
        item->path = g_strdup_printf(COLLECTION "/%u", ++next_item);
        item->attributes = attributes;
        item->label = g_strdup(label);
        item->secret = plain;
        g_variant_get_child(secret, 3, "s", &item->content_type);
        g_variant_unref(properties), g_variant_unref(secret);
        GError *error = NULL;
        item->registration = g_dbus_connection_register_object(bus, item->path, node->interfaces[2], vtable_ref, item, NULL, &error);
        if (!item->registration) fail(error->message);
        g_hash_table_insert(items, item->path, item);
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(oo)", item->path, "/"));
    } else if (g_str_equal(method, "Delete")) {
        Item *item = data;
        if (lie_delete) {
            char *prompt = lying_prompt(g_variant_new_string(""));
            g_dbus_method_invocation_return_value(invocation, g_variant_new("(o)", prompt));
            g_free(prompt);
            return;
        }
        remove_item(item);
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(o)", "/"));
    } else if (g_str_equal(method, "Prompt")) {
        /* Done, it says: and nothing was done. */
        GVariant *result = data;
        g_dbus_method_invocation_return_value(invocation, NULL);
        g_dbus_connection_emit_signal(bus, NULL, path, "org.freedesktop.Secret.Prompt", "Completed",
                                      g_variant_new("(bv)", FALSE, result), NULL);
    } else if (g_str_equal(method, "Dismiss") || g_str_equal(method, "Close")) {
        g_dbus_method_invocation_return_value(invocation, NULL);
    } else {
        g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.UnknownMethod", method);
    }
}

static GVariant *on_get(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                        const char *property, GError **error, gpointer data) {
    (void)connection, (void)sender, (void)path;
    if (g_str_equal(property, "Locked"))
        return g_variant_new_boolean(lie_unlock && g_str_equal(interface, "org.freedesktop.Secret.Item"));
    if (g_str_equal(interface, "org.freedesktop.Secret.Item") && data) {
        Item *item = data;
        if (g_str_equal(property, "Attributes")) return g_variant_ref(item->attributes);
        if (g_str_equal(property, "Label")) return g_variant_new_string(item->label);
        if (g_str_equal(property, "Created") || g_str_equal(property, "Modified")) return g_variant_new_uint64(0);
    }
    if (g_str_equal(property, "Label")) return g_variant_new_string("Login");
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", property);
    return NULL;
}

static const GDBusInterfaceVTable vtable = {on_call, on_get, NULL, {0}};

static char *lying_prompt(GVariant *result) {
    char *path = g_strdup_printf(SERVICE "/prompt/p%u", ++next_prompt);
    GError *error = NULL;
    /* The result is kept for the life of the process (a few prompts per test). */
    if (!g_dbus_connection_register_object(bus, path, node->interfaces[4], &vtable, g_variant_ref_sink(result), NULL, &error))
        fail(error->message);
    return path;
}

static void on_name(GDBusConnection *connection, const char *name, gpointer data) {
    (void)connection, (void)name, (void)data;
    printf("ready\n");
    fflush(stdout);
}

static void on_lost(GDBusConnection *connection, const char *name, gpointer data) {
    (void)connection, (void)data;
    fprintf(stderr, "lying_prompt_provider: could not own %s\n", name);
    exit(1);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (g_str_equal(argv[i], "--lie") && i + 1 < argc) {
            const char *what = argv[++i];
            if (g_str_equal(what, "delete")) lie_delete = TRUE;
            else if (g_str_equal(what, "create")) lie_create = TRUE;
            else if (g_str_equal(what, "create-phantom")) lie_create_phantom = TRUE;
            else if (g_str_equal(what, "unlock")) lie_unlock = TRUE;
            else fail("--lie takes delete, create, create-phantom or unlock");
        } else {
            fail("usage: lying_prompt_provider [--lie delete|create|create-phantom|unlock]...");
        }
    }
    if (!gcry_check_version(NULL)) fail("libgcrypt");
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    vtable_ref = &vtable;
    items = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, free_item);
    sessions = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_bytes_unref);
    GError *error = NULL;
    bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!bus) fail(error->message);
    node = g_dbus_node_info_new_for_xml(introspection, &error);
    if (!node) fail(error->message);
    if (!g_dbus_connection_register_object(bus, SERVICE, node->interfaces[0], &vtable, NULL, NULL, &error) ||
        !g_dbus_connection_register_object(bus, COLLECTION, node->interfaces[1], &vtable, NULL, NULL, &error) ||
        !g_dbus_connection_register_object(bus, SERVICE "/aliases/default", node->interfaces[1], &vtable, NULL, NULL, &error))
        fail(error->message);
    g_bus_own_name_on_connection(bus, "org.freedesktop.secrets", G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, on_name, on_lost,
                                 NULL, NULL);
    g_main_loop_run(g_main_loop_new(NULL, FALSE));
    return 0;
}
