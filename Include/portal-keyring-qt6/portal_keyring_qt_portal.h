/*
 * portal_keyring_qt_portal.h — PortalKeyring::QtPortal: the Portal client for a QtAuth's session,
 * for a Qt 6 app (libportal-keyring-qt6.so; docs/qt.md).
 *
 * Creating one validates the session in the background (GET /api/v3/clients/me). When the Portal
 * API rejects the session's token (HTTP 401, on that check, on request(), or reported with
 * reportUnauthorized()) the library drops the token and deletes the stored session, and
 * invalidated() is emitted, once, on this object's thread. Every call returns at once; outcomes
 * are signals on this object's thread, never before the call returned.
 */
#ifndef PORTAL_KEYRING_QT_PORTAL_H
#define PORTAL_KEYRING_QT_PORTAL_H

#include "portal_keyring_qt_auth.h"

#include <QByteArray>
#include <QObject>
#include <QString>

#include <memory>

namespace PortalKeyring {

class QtPortal : public QObject {
    Q_OBJECT

public:
    /** For auth's current session (auth.isSignedIn() must be true, else isValid() is false and
     *  every call fails with PORTAL_ERR_INVALID_ARGUMENT). No waiting: the check runs in the background. */
    explicit QtPortal(const QtAuth &auth, QObject *parent = nullptr);
    /** Frees the client without waiting (requests in flight are aborted). */
    ~QtPortal() override;

    bool isValid() const;
    /** An authenticated request: finished(), or failed(). body empty: none. */
    void request(const QString &method, const QString &target, const QByteArray &body = {});
    /** The app's own request with rejectedToken as bearer got HTTP 401: unauthorizedReported(). */
    void reportUnauthorized(const QByteArray &rejectedToken);
    /** Sign-out by the app: drops the token, deletes the stored session; sessionCleared(). */
    void clearSession();

Q_SIGNALS:
    /** The session was rejected by the Portal API: its token is gone. Emitted at most once. */
    void invalidated();
    void finished(int httpStatus, const QByteArray &body);
    void unauthorizedReported(bool invalidatedNow);
    void sessionCleared();
    void failed(int status, const QString &message);

private:
    template <typename T, typename Call, typename Success> void run(Call call, Success success);

    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace PortalKeyring

#endif
