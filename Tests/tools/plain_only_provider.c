/*
 * plain_only_provider.c — a minimal Secret Service provider for one test: it owns
 * org.freedesktop.secrets on the session bus, refuses every transfer algorithm except "plain"
 * (NotSupported, as the Secret Service API specifies), and otherwise answers just enough for a
 * persist and a restore to go through: ReadAlias("default"), an unlocked collection, empty
 * searches, CreateItem. Every method call is logged to stdout as "CALL <method>", so the test
 * sees whether a secret was ever sent (Tests/providers/plain_refused.sh).
 *
 * Build: gcc -Wall -Wextra -Werror -o build/plain_only_provider Tests/tools/plain_only_provider.c \
 *            $(pkg-config --cflags --libs gio-2.0)
 * Prints "ready" once it owns the name; runs until killed.
 */
#include <gio/gio.h>
#include <stdio.h>

#define COLLECTION "/org/freedesktop/secrets/collection/login"

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
    " </interface>"
    "</node>";

static void on_call(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                    const char *method, GVariant *parameters, GDBusMethodInvocation *invocation, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)data;
    printf("CALL %s\n", method);
    fflush(stdout);
    if (g_str_equal(method, "OpenSession")) {
        const char *algorithm = NULL;
        g_variant_get_child(parameters, 0, "&s", &algorithm);
        if (!g_str_equal(algorithm, "plain")) {
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.NotSupported",
                                                       "only the plain algorithm is supported");
            return;
        }
        g_dbus_method_invocation_return_value(
            invocation, g_variant_new("(vo)", g_variant_new_string(""), "/org/freedesktop/secrets/session/1"));
    } else if (g_str_equal(method, "ReadAlias")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(o)", COLLECTION));
    } else if (g_str_equal(method, "SearchItems")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(@ao@ao)", g_variant_new_array(G_VARIANT_TYPE_OBJECT_PATH, NULL, 0),
                                                                        g_variant_new_array(G_VARIANT_TYPE_OBJECT_PATH, NULL, 0)));
    } else if (g_str_equal(method, "Unlock")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(@aoo)", g_variant_get_child_value(parameters, 0), "/"));
    } else if (g_str_equal(method, "GetSecrets")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(@a{o(oayays)})",
                                                                        g_variant_new_array(G_VARIANT_TYPE("{o(oayays)}"), NULL, 0)));
    } else if (g_str_equal(method, "CreateItem")) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(oo)", COLLECTION "/1", "/"));
    } else {
        g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.UnknownMethod", method);
    }
}

static GVariant *on_get(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                        const char *property, GError **error, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)data;
    if (g_str_equal(property, "Locked")) return g_variant_new_boolean(FALSE);
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", property);
    return NULL;
}

static void on_name(GDBusConnection *connection, const char *name, gpointer data) {
    (void)connection, (void)name, (void)data;
    printf("ready\n");
    fflush(stdout);
}

static void on_lost(GDBusConnection *connection, const char *name, gpointer data) {
    (void)connection, (void)data;
    fprintf(stderr, "plain_only_provider: could not own %s\n", name);
    exit(1);
}

int main(void) {
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!bus) {
        fprintf(stderr, "plain_only_provider: %s\n", error->message);
        return 1;
    }
    GDBusNodeInfo *node = g_dbus_node_info_new_for_xml(introspection, &error);
    if (!node) {
        fprintf(stderr, "plain_only_provider: %s\n", error->message);
        return 1;
    }
    static const GDBusInterfaceVTable vtable = {on_call, on_get, NULL, {0}};
    if (!g_dbus_connection_register_object(bus, "/org/freedesktop/secrets", node->interfaces[0], &vtable, NULL, NULL, &error) ||
        !g_dbus_connection_register_object(bus, COLLECTION, node->interfaces[1], &vtable, NULL, NULL, &error) ||
        !g_dbus_connection_register_object(bus, "/org/freedesktop/secrets/aliases/default", node->interfaces[1], &vtable,
                                           NULL, NULL, &error)) {
        fprintf(stderr, "plain_only_provider: %s\n", error->message);
        return 1;
    }
    g_bus_own_name_on_connection(bus, "org.freedesktop.secrets", G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, on_name, on_lost,
                                 NULL, NULL);
    g_main_loop_run(g_main_loop_new(NULL, FALSE));
    return 0;
}
