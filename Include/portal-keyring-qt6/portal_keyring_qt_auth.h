/*
 * portal_keyring_qt_auth.h — PortalKeyring::QtAuth: the session of one Portal auth environment
 * for a Qt 6 app (libportal-keyring-qt6.so; docs/qt.md).
 *
 * Every call returns at once; its outcome arrives later as a signal, emitted on the thread this
 * object lives on (its event loop runs the C library's pollable completion queue through a
 * QSocketNotifier), never before the call returned. The keyring and network work runs on the
 * library's worker threads, so the Qt loop is never blocked. Use the object from its own thread.
 */
#ifndef PORTAL_KEYRING_QT_AUTH_H
#define PORTAL_KEYRING_QT_AUTH_H

#include <portal_keyring.h> // portal_status: the status of failed()

#include <QByteArray>
#include <QObject>
#include <QString>

#include <memory>

namespace portal_keyring {
class session;
struct sign_in;
}

namespace PortalKeyring {

class QtAuth : public QObject {
    Q_OBJECT
    Q_PROPERTY(bool signedIn READ isSignedIn NOTIFY signedInChanged)
    Q_PROPERTY(QString endUserId READ endUserId NOTIFY signedInChanged)

public:
    /** Which call a failed() signal is about. */
    enum class Operation { Restore, Persist, Clear, SendMagicLink, HandleRedirect, VerifyTotp, SignInWithGoogle, SignInWithApple };
    Q_ENUM(Operation)

    /** What sessionChanged() reports (the C ABI's portal_watch_event). */
    enum class SessionChange {
        Started = 5,    ///< the watch is live: every later change is reported
        SignedIn = 1,   ///< a sign-in was stored by some process: endUserId names its end user
        SignedOut = 2,  ///< the stored session was cleared or invalidated: show sign-in
        Locked = 3,     ///< the keyring is locked: NOT signed out; restore to learn the state
        Resync = 4,     ///< the keyring provider restarted: restore to learn the state
        WatchFailed = 6, ///< the watch could not start (the text says why); nothing follows
        Available = 7    ///< the keyring answers again after this process's calls failed for want
                         ///< of it (a stalled provider resumed): restore to learn the state
    };
    Q_ENUM(SessionChange)

    /** Who made the change sessionChanged() reports (the C ABI's portal_watch_origin). */
    enum class ChangeOrigin {
        Unknown = 0,     ///< not a change of the stored session (Started, Locked, Resync, …)
        ThisProcess = 1, ///< this process: its own sign-in, sign-out, or a 401 it reported
        OtherProcess = 2 ///< another process: another window, a URL handler, a keyring tool
    };
    Q_ENUM(ChangeOrigin)

    /**
     * No I/O. apiHost: "host" or "host:port", empty for Portal's. Bad arguments (blank id) make
     * an invalid object: isValid() false, every call then fails with PORTAL_ERR_INVALID_ARGUMENT.
     */
    explicit QtAuth(const QString &authEnvironmentId, const QString &redirectUrl, const QString &apiHost = {},
                    QObject *parent = nullptr);
    ~QtAuth() override;

    bool isValid() const;
    /** The magic link's sender and email template (both required by Portal). No I/O. */
    bool setMagicLink(const QString &fromEmail, const QString &templateId);

    /** Keyring deadlines of later calls, in ms (1 … 600000 each; defaults 5000 and 30000). */
    bool setKeyringTimeouts(int callTimeoutMs, int promptTimeoutMs);

    /** Restores the stored session (no network): restored() or nothingStored(), or failed(). */
    void restoreSession();
    /** Stores a Client Session Token that the app's backend issued: persisted(), or failed(). */
    void persistSession(const QString &endUserId, const QByteArray &clientSessionToken);
    /** Deletes the stored sessions (sign-out): cleared(), or failed(). */
    void clearPersistedSession();
    /** Emails a magic link to email: magicLinkSent(), or failed(). */
    void sendMagicLink(const QString &email);
    /** Completes a sign-in from the redirect URL the app was opened with: signedIn(),
     *  totpRequired() (then verifyTotp()), or failed(). */
    void handleRedirect(const QString &url);
    /**
     * Signs in with Google in the end user's browser (docs/sign-in.md#desktop-sign-in): opens
     * Portal's page with the desktop's URL handler and waits up to timeoutMs (0: the library's
     * default; at most 900000) for the redirect — from handleRedirect() in this process, or
     * from the URL handler's process (`portal-session handle-redirect`), which stores the
     * session: signedIn(), totpRequired() (then verifyTotp()), or failed(). When this process
     * delivers the redirect with handleRedirect(), that call reports its own outcome too.
     */
    void signInWithGoogle(int timeoutMs = 0);
    /** signInWithGoogle() with Apple. */
    void signInWithApple(int timeoutMs = 0);
    /** Completes a sign-in that asked for a TOTP code: signedIn(), or failed(). */
    void verifyTotp(const QString &code);
    /** Cancels every running call: each fails with PORTAL_ERR_CANCELLED. */
    void cancel();

    /** Starts watching the stored session for changes by any process: sessionChanged(), whose
     *  origin tells this app's own sign-out or 401 from another process's. */
    void startWatching();
    void stopWatching();

    /** Whether this object holds a session (after restored(), persisted() or signedIn()). */
    bool isSignedIn() const;
    QString endUserId() const;
    /** A copy of the held session's Client Session Token (a credential: wipe it when done);
     *  empty when signed out or invalidated. */
    QByteArray token() const;
    QString apiHost() const;

Q_SIGNALS:
    void restored(const QString &endUserId);
    /** restoreSession(): nothing is stored, the end user is signed out. */
    void nothingStored();
    void persisted(const QString &endUserId);
    void cleared();
    void magicLinkSent(const QString &email);
    void signedIn(const QString &endUserId);
    void totpRequired();
    /** status: the C ABI's portal_status (PORTAL_ERR_SESSION_STORAGE: NOT signed out). */
    void failed(PortalKeyring::QtAuth::Operation operation, int status, const QString &message);
    /** A slot may take the first two arguments only (Qt passes fewer to a slot that wants fewer). */
    void sessionChanged(PortalKeyring::QtAuth::SessionChange change, const QString &endUserId,
                        PortalKeyring::QtAuth::ChangeOrigin origin);
    void signedInChanged();

private:
    friend class QtPortal; // makes its client from the held session
    /** The held session, borrowed; nullptr when signed out. */
    portal_session *nativeSession() const;

    /** Starts one call (defined and used in qt_auth.cpp only). */
    template <typename T, typename Call, typename Success> void run(Operation operation, Call call, Success success);

    void holdAndEmit(portal_keyring::session session, void (QtAuth::*signal)(const QString &));
    /** What a redirect or a desktop sign-in completed with: signedIn(), totpRequired() or failed(). */
    void signInCompleted(Operation operation, portal_keyring::sign_in &signIn);
    /** signInWithGoogle() / signInWithApple(). */
    void signInWith(Operation operation, int timeoutMs);

    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace PortalKeyring

#endif
