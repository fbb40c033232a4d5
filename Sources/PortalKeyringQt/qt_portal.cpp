// qt_portal.cpp — PortalKeyring::QtPortal over portal_keyring_async.hpp (see the public header).
#include "portal_keyring_qt_portal.h"

#include "completion_notifier.h"

#include <optional>

namespace PortalKeyring {

struct QtPortal::Private {
    std::optional<pk::portal> portal;
    QString invalidReason;
    CompletionNotifier *notifier = nullptr; // a child: deleted after these members
};

QtPortal::QtPortal(const QtAuth &auth, QObject *parent) : QObject(parent), d(std::make_unique<Private>()) {
    d->notifier = new CompletionNotifier(this);
    try {
        // The portal takes its own reference to the session: it outlives a later sign-out of auth.
        pk::session borrowed(auth.nativeSession());
        const QByteArray host = auth.apiHost().toUtf8();
        try {
            d->portal.emplace(borrowed, host.isEmpty() ? std::nullopt : std::optional<std::string>(host.toStdString()));
        } catch (...) {
            (void)borrowed.release();
            throw;
        }
        (void)borrowed.release();
        pk::async(*d->portal).on_session_invalidated(d->notifier->queue(), [this] { Q_EMIT invalidated(); });
    } catch (const pk::error &e) {
        d->portal.reset();
        d->invalidReason = QString::fromStdString(e.message());
    }
}

QtPortal::~QtPortal() {
    d->notifier->cancelAll();
    // Frees without waiting; the listener is cancelled before this returns, so invalidated() is
    // not emitted after the object is gone.
    if (d->portal) pk::async(*d->portal).close(d->notifier->queue());
}

bool QtPortal::isValid() const { return d->portal.has_value(); }

/* Starts call(async, queue, callback) on the notifier: success(result), or failed(…). */
template <typename T, typename Call, typename Success> void QtPortal::run(Call call, Success success) {
    auto fail = [this](int status, const QString &message) { Q_EMIT failed(status, message); };
    if (!d->portal) return d->notifier->refuseLater(fail, PORTAL_ERR_INVALID_ARGUMENT, d->invalidReason);
    pk::portal_async async = pk::async(*d->portal);
    d->notifier->start<T>([&](const pk::completion_queue &q, auto cb) { return call(async, q, std::move(cb)); },
                          [fail, success](pk::result<T> r) {
                              if (!r) return fail(r.status(), QString::fromStdString(r.message()));
                              success(r);
                          },
                          fail);
}

void QtPortal::request(const QString &method, const QString &target, const QByteArray &body) {
    const std::string m = method.toStdString(), t = target.toStdString();
    const std::optional<std::string> b = body.isEmpty() ? std::nullopt : std::optional<std::string>(body.toStdString());
    run<pk::response>([&](pk::portal_async &a, auto &q, auto cb) { return a.request(m, t, b, q, std::move(cb)); },
                      [this](auto &r) {
                          Q_EMIT finished(static_cast<int>(r->status),
                                          QByteArray(r->body.data(), static_cast<qsizetype>(r->body.size())));
                      });
}

void QtPortal::reportUnauthorized(const QByteArray &rejectedToken) {
    const QByteArray token = rejectedToken; // NUL-terminated for the C call
    run<bool>([&](pk::portal_async &a, auto &q, auto cb) { return a.report_unauthorized(token.constData(), q, std::move(cb)); },
              [this](auto &r) { Q_EMIT unauthorizedReported(*r); });
}

void QtPortal::clearSession() {
    run<void>([](pk::portal_async &a, auto &q, auto cb) { return a.clear_session(q, std::move(cb)); },
              [this](auto &) { Q_EMIT sessionCleared(); });
}

} // namespace PortalKeyring
