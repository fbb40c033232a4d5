/*
 * portal-keyring-gobject.h — the GNOME API of portal-keyring (libportal-keyring-gobject-1.so):
 * GObject types over the C ABI of portal_keyring.h, for C programs on GLib and, through
 * GObject Introspection (PortalKeyring-1), for GJS, PyGObject, Vala and gtk-rs.
 *
 * Include this header only; the others of this folder are its parts.
 */
#ifndef PORTAL_KEYRING_GOBJECT_H
#define PORTAL_KEYRING_GOBJECT_H

#define PORTAL_KEYRING_GOBJECT_INSIDE
#include "portal-keyring-error.h"
#include "portal-keyring-session.h"
#include "portal-keyring-sign-in-result.h"
#include "portal-keyring-totp.h"
#include "portal-keyring-auth.h"
#include "portal-keyring-watch.h"
#include "portal-keyring-portal.h"
#undef PORTAL_KEYRING_GOBJECT_INSIDE

#endif /* PORTAL_KEYRING_GOBJECT_H */
