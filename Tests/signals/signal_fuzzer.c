/* signal_fuzzer — any process on the session bus, sending what a watch must survive.
 *
 *   signal_fuzzer COUNT SEED
 *
 * Sends COUNT signals on the session bus ($DBUS_SESSION_BUS_ADDRESS) from a connection of its
 * own: every signal name of the Secret Service API and of the bus daemon (NameOwnerChanged
 * among them) and some others, on their interfaces and on the wrong ones, with argument tuples
 * of random signatures — none, the right one with spoofed values ("(sss)" naming
 * org.freedesktop.secrets, "(o)" naming a collection), and wrong ones ("(i)", "(ss)", "(av)",
 * "(sa{sv}as)" with a non-collection interface). Each goes either as a broadcast or addressed
 * to one of the unique names on the bus (a signal with a destination reaches that connection
 * whatever its match rules). Prints "sent N signals (B broadcast, U unicast, K kinds)" and
 * exits 0 once the bus has them all (a final round trip). Deterministic for a SEED.
 */
#include <gio/gio.h>
#include <stdio.h>
#include <stdlib.h>

static const char *interfaces[] = {
    "org.freedesktop.Secret.Service", "org.freedesktop.Secret.Collection", "org.freedesktop.Secret.Item",
    "org.freedesktop.Secret.Prompt",  "org.freedesktop.DBus",              "org.freedesktop.DBus.Properties",
    "org.example.Other",
};
static const char *members[] = {
    "NameOwnerChanged",  "NameAcquired",      "NameLost",          "ItemCreated",      "ItemDeleted",
    "ItemChanged",       "CollectionCreated", "CollectionDeleted", "CollectionChanged", "PropertiesChanged",
    "Completed",         "Frobnicated",
};
static const char *paths[] = {
    "/x", "/org/freedesktop/DBus", "/org/freedesktop/secrets", "/org/freedesktop/secrets/collection/login",
    "/org/freedesktop/secrets/aliases/default", "/org/freedesktop/secrets/prompt/p1",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *pick(const char **list, size_t n) { return list[g_random_int_range(0, (gint32)n)]; }

/* A random argument tuple (floating), or NULL for none. */
static GVariant *arguments(void) {
    static const char *names[] = {"org.freedesktop.secrets", ":1.999", "", "org.example.x"};
    switch (g_random_int_range(0, 13)) {
    case 0: return NULL;
    case 1: return g_variant_new("(sss)", "org.freedesktop.secrets", "", ":1.4242");
    case 2: return g_variant_new("(sss)", pick(names, COUNT(names)), pick(names, COUNT(names)), pick(names, COUNT(names)));
    case 3: return g_variant_new("(s)", "org.freedesktop.secrets");
    case 4: return g_variant_new("(ss)", "org.freedesktop.secrets", ":1.1");
    case 5: return g_variant_new("(i)", g_random_int());
    case 6: return g_variant_new("(o)", pick(paths, COUNT(paths)));
    case 7: return g_variant_new("(u)", g_random_int());
    case 8: return g_variant_new("(ssss)", "a", "b", "c", "d");
    case 9: return g_variant_new_parsed("([<1>, <'x'>],)");
    case 10: return g_variant_new_parsed("('org.freedesktop.Secret.Collection', {'Items': <[objectpath '/x']>}, ['Locked'])");
    case 11: return g_variant_new_parsed("('org.example.Other', @a{sv} {}, @as [])");
    default: return g_variant_new_parsed("(false, <objectpath '/'>)");
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: signal_fuzzer COUNT SEED\n");
        return 2;
    }
    long count = strtol(argv[1], NULL, 10);
    g_random_set_seed((guint32)strtoul(argv[2], NULL, 10));
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (bus == NULL) {
        fprintf(stderr, "signal_fuzzer: no session bus: %s\n", error->message);
        return 1;
    }
    GVariant *listed = g_dbus_connection_call_sync(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                   "org.freedesktop.DBus", "ListNames", NULL, G_VARIANT_TYPE("(as)"),
                                                   G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
    if (listed == NULL) {
        fprintf(stderr, "signal_fuzzer: ListNames: %s\n", error->message);
        return 1;
    }
    GPtrArray *targets = g_ptr_array_new_with_free_func(g_free);
    const char *self = g_dbus_connection_get_unique_name(bus);
    GVariantIter *iter;
    const char *name;
    g_variant_get(listed, "(as)", &iter);
    while (g_variant_iter_next(iter, "&s", &name))
        if (name[0] == ':' && g_strcmp0(name, self) != 0) g_ptr_array_add(targets, g_strdup(name));
    g_variant_iter_free(iter);
    g_variant_unref(listed);

    long broadcast = 0, unicast = 0;
    for (long i = 0; i < count; i++) {
        const char *destination = NULL;
        if (targets->len > 0 && g_random_boolean()) destination = g_ptr_array_index(targets, g_random_int_range(0, (gint32)targets->len));
        if (!g_dbus_connection_emit_signal(bus, destination, pick(paths, COUNT(paths)), pick(interfaces, COUNT(interfaces)),
                                           pick(members, COUNT(members)), arguments(), &error)) {
            fprintf(stderr, "signal_fuzzer: emit: %s\n", error->message);
            return 1;
        }
        if (destination) unicast++; else broadcast++;
        if (i % 500 == 499) g_dbus_connection_flush_sync(bus, NULL, NULL);
    }
    /* A round trip: every signal above has reached the bus daemon. */
    GVariant *id = g_dbus_connection_call_sync(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                               "GetId", NULL, NULL, G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
    if (id == NULL) {
        fprintf(stderr, "signal_fuzzer: GetId: %s\n", error->message);
        return 1;
    }
    g_variant_unref(id);
    printf("sent %ld signals (%ld broadcast, %ld unicast to %u connections, %zu interfaces x %zu members x 13 argument shapes)\n",
           count, broadcast, unicast, targets->len, COUNT(interfaces), COUNT(members));
    g_ptr_array_unref(targets);
    g_object_unref(bus);
    return 0;
}
