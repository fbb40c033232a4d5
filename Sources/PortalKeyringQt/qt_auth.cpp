// qt_auth.cpp — PortalKeyring::QtAuth over portal_keyring_async.hpp (see the public header).
#include "portal_keyring_qt_auth.h"

#include "completion_notifier.h"

#include <optional>

namespace PortalKeyring {

struct QtAuth::Private {
    std::optional<pk::auth> auth;
    QString apiHost;
    QString invalidReason;
    std::optional<pk::session> session;
    pk::secret userJwt; // between totpRequired() and verifyTotp()
    pk::watch watch;
    CompletionNotifier *notifier = nullptr; // a child: deleted after these members
};

namespace {
QByteArray utf8(const QString &s) { return s.toUtf8(); }
QString text(std::string_view v) { return QString::fromUtf8(v.data(), static_cast<qsizetype>(v.size())); }
} // namespace

QtAuth::QtAuth(const QString &authEnvironmentId, const QString &redirectUrl, const QString &apiHost, QObject *parent)
    : QObject(parent), d(std::make_unique<Private>()) {
    d->apiHost = apiHost;
    d->notifier = new CompletionNotifier(this);
    try {
        d->auth.emplace(utf8(authEnvironmentId).toStdString(), utf8(redirectUrl).toStdString(),
                        apiHost.isEmpty() ? std::nullopt : std::optional<std::string>(utf8(apiHost).toStdString()));
    } catch (const pk::error &e) {
        d->invalidReason = QString::fromStdString(e.message());
    }
}

QtAuth::~QtAuth() {
    d->watch.reset();          // on the queue's thread: no event after this
    d->notifier->cancelAll();  // their completions are dropped with the queue
}

bool QtAuth::isValid() const { return d->auth.has_value(); }

bool QtAuth::setMagicLink(const QString &fromEmail, const QString &templateId) {
    return d->auth && portal_auth_set_magic_link(d->auth->native_handle(), utf8(fromEmail).constData(),
                                                 utf8(templateId).constData()) == PORTAL_OK;
}

bool QtAuth::setKeyringTimeouts(int callTimeoutMs, int promptTimeoutMs) {
    return d->auth && callTimeoutMs > 0 && promptTimeoutMs > 0 &&
           portal_auth_set_keyring_timeouts(d->auth->native_handle(), static_cast<std::uint32_t>(callTimeoutMs),
                                            static_cast<std::uint32_t>(promptTimeoutMs)) == PORTAL_OK;
}

/* Starts call(async, queue, callback) on the notifier: success(result) with the value, or
 * failed(operation, …) for a refusal or a failed completion. */
template <typename T, typename Call, typename Success> void QtAuth::run(Operation operation, Call call, Success success) {
    auto fail = [this, operation](int status, const QString &message) { Q_EMIT failed(operation, status, message); };
    if (!d->auth) return d->notifier->refuseLater(fail, PORTAL_ERR_INVALID_ARGUMENT, d->invalidReason);
    pk::auth_async async = pk::async(*d->auth);
    d->notifier->start<T>([&](const pk::completion_queue &q, auto cb) { return call(async, q, std::move(cb)); },
                          [fail, success](pk::result<T> r) {
                              if (!r) return fail(r.status(), QString::fromStdString(r.message()));
                              success(r);
                          },
                          fail);
}

void QtAuth::restoreSession() {
    run<std::optional<pk::session>>(
        Operation::Restore, [](pk::auth_async &a, auto &q, auto cb) { return a.restore_session(q, std::move(cb)); },
        [this](auto &r) {
            d->session = std::move(*r);
            Q_EMIT signedInChanged();
            if (d->session) Q_EMIT restored(endUserId());
            else Q_EMIT nothingStored();
        });
}

void QtAuth::persistSession(const QString &endUserId, const QByteArray &clientSessionToken) {
    const std::string user = utf8(endUserId).toStdString();
    run<pk::session>(
        Operation::Persist,
        [&](pk::auth_async &a, auto &q, auto cb) { return a.persist_session(user, clientSessionToken.constData(), q, std::move(cb)); },
        [this](auto &r) { holdAndEmit(std::move(*r), &QtAuth::persisted); });
}

void QtAuth::clearPersistedSession() {
    run<void>(
        Operation::Clear, [](pk::auth_async &a, auto &q, auto cb) { return a.clear_persisted_session(q, std::move(cb)); },
        [this](auto &) {
            d->session.reset();
            Q_EMIT signedInChanged();
            Q_EMIT cleared();
        });
}

void QtAuth::sendMagicLink(const QString &email) {
    const std::string address = utf8(email).toStdString();
    run<void>(
        Operation::SendMagicLink, [&](pk::auth_async &a, auto &q, auto cb) { return a.send_magic_link(address, q, std::move(cb)); },
        [this, email](auto &) { Q_EMIT magicLinkSent(email); });
}

void QtAuth::handleRedirect(const QString &url) {
    const std::string link = utf8(url).toStdString();
    run<pk::sign_in>(
        Operation::HandleRedirect,
        [&](pk::auth_async &a, auto &q, auto cb) { return a.handle_redirect(link, PORTAL_REDIRECT_FLAGS_NONE, q, std::move(cb)); },
        [this](auto &r) { signInCompleted(Operation::HandleRedirect, *r); });
}

void QtAuth::signInWithGoogle(int timeoutMs) { signInWith(Operation::SignInWithGoogle, timeoutMs); }

void QtAuth::signInWithApple(int timeoutMs) { signInWith(Operation::SignInWithApple, timeoutMs); }

void QtAuth::signInWith(Operation operation, int timeoutMs) {
    const std::chrono::milliseconds timeout(timeoutMs); // a negative one is refused by the C++ API
    const bool google = operation == Operation::SignInWithGoogle;
    run<pk::sign_in>(
        operation,
        [&](pk::auth_async &a, auto &q, auto cb) {
            return google ? a.sign_in_with_google(timeout, q, std::move(cb)) : a.sign_in_with_apple(timeout, q, std::move(cb));
        },
        [this, operation](auto &r) { signInCompleted(operation, *r); });
}

void QtAuth::signInCompleted(Operation operation, pk::sign_in &s) {
    if (s.kind == PORTAL_REDIRECT_TOTP_REQUIRED) {
        d->userJwt = std::move(s.user_jwt);
        Q_EMIT totpRequired();
    } else if (s.kind == PORTAL_REDIRECT_AUTHENTICATED && s.signed_in) {
        holdAndEmit(std::move(*s.signed_in), &QtAuth::signedIn);
    } else {
        Q_EMIT failed(operation, PORTAL_ERR_UNSOLICITED_REDIRECT, QStringLiteral("not a sign-in redirect of this app"));
    }
}

void QtAuth::verifyTotp(const QString &code) {
    const std::string digits = utf8(code).toStdString();
    const char *jwt = d->userJwt.empty() ? nullptr : d->userJwt.c_str();
    run<pk::session>(
        Operation::VerifyTotp, [&](pk::auth_async &a, auto &q, auto cb) { return a.verify_totp(digits, jwt, q, std::move(cb)); },
        [this](auto &r) {
            d->userJwt.reset();
            holdAndEmit(std::move(*r), &QtAuth::signedIn);
        });
}

void QtAuth::holdAndEmit(pk::session session, void (QtAuth::*signal)(const QString &)) {
    d->session.emplace(std::move(session));
    Q_EMIT signedInChanged();
    Q_EMIT(this->*signal)(endUserId());
}

void QtAuth::cancel() { d->notifier->cancelAll(); }

void QtAuth::startWatching() {
    if (!d->auth || d->watch) return;
    try {
        d->watch = pk::async(*d->auth).watch_session(d->notifier->queue(), [this](portal_watch_event event, std::string_view v) {
            const auto change = static_cast<SessionChange>(event);
            // Read in the callback, as the C ABI asks; a value added later counts as unknown.
            const portal_watch_origin from = portal_watch_current_origin();
            const auto origin = from == PORTAL_WATCH_ORIGIN_THIS_PROCESS || from == PORTAL_WATCH_ORIGIN_OTHER_PROCESS
                                    ? static_cast<ChangeOrigin>(from)
                                    : ChangeOrigin::Unknown;
            if (change == SessionChange::SignedOut) {
                d->session.reset();
                Q_EMIT signedInChanged();
            }
            Q_EMIT sessionChanged(change, text(v), origin);
        });
    } catch (const pk::error &e) {
        const QString message = QString::fromStdString(e.message());
        d->notifier->refuseLater(
            [this](int, const QString &m) { Q_EMIT sessionChanged(SessionChange::WatchFailed, m, ChangeOrigin::Unknown); },
                                 e.code(), message);
    }
}

void QtAuth::stopWatching() { d->watch.reset(); }

bool QtAuth::isSignedIn() const { return d->session.has_value(); }

QString QtAuth::endUserId() const { return d->session ? text(d->session->end_user_id()) : QString(); }

QByteArray QtAuth::token() const {
    if (!d->session) return {};
    try {
        pk::secret t = d->session->copy_token();
        return QByteArray(t.c_str(), static_cast<qsizetype>(t.size()));
    } catch (const pk::error &) {
        return {};
    }
}

portal_session *QtAuth::nativeSession() const { return d->session ? d->session->native_handle() : nullptr; }

QString QtAuth::apiHost() const { return d->apiHost; }

} // namespace PortalKeyring
