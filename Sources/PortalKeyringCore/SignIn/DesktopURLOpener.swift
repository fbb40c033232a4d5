import CGLib

/// The desktop's URL opener, as GIO offers it (`g_app_info_launch_default_for_uri`): the
/// application the user chose for the URL's scheme (XDG `mimeapps.list`, `x-scheme-handler/https`;
/// what `gio open` and `xdg-open` use on GNOME and most other desktops), and inside a Flatpak
/// sandbox the OpenURI portal, which GIO falls back to there by itself. The opened application runs
/// as a process of its own; nothing here waits for it.
///
/// GIO may connect the process's shared session-bus connection (`g_bus_get_sync`) to announce the
/// launch, as it does for any app that opens a URL with it; the library's own keyring connection
/// is a separate one. The announcement (`org.gtk.gio.DesktopAppInfo.Launched`) is a broadcast
/// signal carrying the launched URL — the authorize URL with its single-use `state` — to every
/// client of the session bus that listens; GIO offers no launch without it, and the OpenURI
/// portal launches through GIO too (docs/security.md, "The authorize URL is broadcast").
enum DesktopURLOpener {
    /// Opens `url` (an absolute URL from the Portal API) in the desktop's handler for its scheme.
    /// Blocks briefly: the handler's process is spawned, or the portal asked, and not waited for.
    /// - Throws: `signInUnavailable(message:)` when no application could be started for it: no
    ///   handler is registered for the scheme (and no portal), or the handler failed to start.
    ///   The message gives GIO's reason and the scheme, never the URL (it carries the sign-in's
    ///   single-use `state`).
    static func open(_ url: String) throws(PortalAuthError) {
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_default_for_uri(url, nil, &error) != 0 { return }
        let reason = error.map { String(cString: $0.pointee.message) } ?? "unknown reason"
        if let error { g_error_free(error) }
        let scheme = Self.scheme(of: url)
        let handler = defaultHandler(scheme: scheme).map { "its handler is \($0)" }
            ?? "no application is registered for x-scheme-handler/\(scheme)"
        throw .signInUnavailable(message: "no application could open the \(scheme):// sign-in page ("
            + DisplayText.sanitized(reason, limit: 200) + "; \(handler)); set a default web browser, "
            + "e.g. xdg-settings set default-web-browser firefox.desktop")
    }

    /// The desktop file id of the application GIO would open `scheme` URLs with (`firefox.desktop`),
    /// or nil when none is registered. Reads GIO's cache of the XDG application directories, which
    /// GIO refreshes when it sees them change.
    static func defaultHandler(scheme: String) -> String? {
        guard let info = g_app_info_get_default_for_uri_scheme(scheme) else { return nil }
        defer { g_object_unref(UnsafeMutableRawPointer(info)) }
        return g_app_info_get_id(info).map { String(cString: $0) }
    }

    /// The URL's scheme, lower-cased ("https"); "" when it has none.
    static func scheme(of url: String) -> String {
        guard let colon = url.firstIndex(of: ":") else { return "" }
        let scheme = url[..<colon]
        guard scheme.isASCII(alphanumericOr: "+-.") else { return "" }
        return scheme.lowercased()
    }
}
