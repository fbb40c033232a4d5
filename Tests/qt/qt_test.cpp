/*
 * qt_test.cpp — PortalKeyring::QtAuth and QtPortal (libportal-keyring-qt6.so) on a
 * QCoreApplication, against the private keyring and the fake Portal API. Tests/qt/run.sh runs it
 * twice: with Qt's default event dispatcher (GLib's) and with QT_NO_GLIB=1 (Qt's own).
 *
 *   1. restore / persist / clear, and a magic-link sign-in, to the session a restore finds
 *      and a desktop sign-in (signInWithGoogle/Apple): GIO opens Tests/tools/fake_browser.sh,
 *      whose URL handler process (portal-session handle-redirect) stores the session; a cancel
 *      while the page is open; timeouts out of range refused
 *   2. a 401 (the token revoked by the API) reaching QtPortal::invalidated() exactly once
 *   3. another process's sign-in and sign-out reaching QtAuth::sessionChanged()
 *   4. the provider stopped (SIGSTOP): a 10 ms QTimer never gaps over 50 ms (less the scheduler's
 *      run-queue delay of the GUI thread, which a loaded machine adds) while operations
 *      wait out their deadline, are cancelled, and watches start and stop
 * Every signal is received with a direct connection and must come on the GUI thread.
 *
 *   qt_test --persist USER TOKEN | --clear    the "other process" of 3 (blocking C++ calls; the
 *                                             auth environment $PORTAL_AUTH_ENVIRONMENT_ID if set)
 */
// GIO (the fake browser's registration) before Qt: its structs have members named `signals`.
#include "fake_browser.h"
#include "provider_pid.h"

#include <portal_keyring_qt_auth.h>
#include <portal_keyring_qt_portal.h>

#include <portal_keyring.hpp>

#include "check.h"
#include "fake_api.h"

#include <QAbstractEventDispatcher>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QElapsedTimer>
#include <QProcess>
#include <QThread>
#include <QTimer>

#include <csignal>
#include <fstream>
#include <functional>

using PortalKeyring::QtAuth;
using PortalKeyring::QtPortal;

// The other process of 3 also serves Tests/qt/qt_example_test.sh, with the example's environment.
static const char *const kEnv = getenv("PORTAL_AUTH_ENVIRONMENT_ID") ? getenv("PORTAL_AUTH_ENVIRONMENT_ID") : "qt-test-env";
static const char *const kRedirect = "org.example.QtTest://auth";
static constexpr int kGapMs = 50;

static QString host() { return QString::fromUtf8(getenv("PORTAL_TEST_API_HOST")); }

/* Connects f to signal with a direct connection: it runs on the emitting thread, which must be
 * the GUI thread. */
template <typename Obj, typename Signal, typename F> static void on(Obj *o, Signal s, F f) {
    QObject::connect(
        o, s, o,
        [f](auto... args) {
            CHECK_MSG(QThread::currentThread() == QCoreApplication::instance()->thread(), "a signal off the GUI thread");
            f(args...);
        },
        Qt::DirectConnection);
}

/* Runs the event loop until done() or ms elapsed; whether done() held. */
static bool spinUntil(const std::function<bool()> &done, int ms) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 10);
    return done();
}
static void spinFor(int ms) { spinUntil([] { return false; }, ms); }

static std::string admin(const char *method, const char *path, const char *json, const char *pick) {
    char out[4096];
    CHECK_MSG(fake_api_admin(method, path, json, pick, out, sizeof out) == 0, "admin %s %s", method, path);
    return out;
}

/* What one QtAuth emitted. */
struct Seen {
    QString restored, persisted, signedIn, changedUser;
    int nothing = 0, cleared = 0, failed = 0, lastStatus = 0, totp = 0, sent = 0;
    QList<QtAuth::SessionChange> changes;
    QList<QtAuth::ChangeOrigin> origins; // one per change
    int total() const { return nothing + cleared + failed + totp + sent + (restored + persisted + signedIn).size(); }
};

static QtAuth *makeAuth(Seen &seen) {
    auto *auth = new QtAuth(kEnv, kRedirect, host());
    CHECK(auth->isValid());
    CHECK(auth->setKeyringTimeouts(1500, 1500));
    on(auth, &QtAuth::restored, [&seen](const QString &u) { seen.restored = u; });
    on(auth, &QtAuth::nothingStored, [&seen] { seen.nothing++; });
    on(auth, &QtAuth::persisted, [&seen](const QString &u) { seen.persisted = u; });
    on(auth, &QtAuth::cleared, [&seen] { seen.cleared++; });
    on(auth, &QtAuth::signedIn, [&seen](const QString &u) { seen.signedIn = u; });
    on(auth, &QtAuth::totpRequired, [&seen] { seen.totp++; });
    on(auth, &QtAuth::magicLinkSent, [&seen](const QString &) { seen.sent++; });
    on(auth, &QtAuth::failed, [&seen](QtAuth::Operation, int status, const QString &message) {
        seen.failed++;
        seen.lastStatus = status;
        printf("failed: %d %s\n", status, qPrintable(message));
    });
    on(auth, &QtAuth::sessionChanged, [&seen](QtAuth::SessionChange c, const QString &u, QtAuth::ChangeOrigin o) {
        seen.changes.append(c);
        seen.origins.append(o);
        seen.changedUser = u;
    });
    return auth;
}

static void testRestorePersistClear() {
    check_context = "restore / persist / clear";
    Seen seen;
    QtAuth *auth = makeAuth(seen);
    auth->clearPersistedSession();
    CHECK(seen.cleared == 0); // never before the call returned
    CHECK(spinUntil([&] { return seen.cleared == 1; }, 5000));
    auth->restoreSession();
    CHECK(spinUntil([&] { return seen.nothing == 1; }, 5000));
    CHECK(!auth->isSignedIn());

    const std::string token = admin("POST", "/_admin/sessions", "{\"endUserId\":\"qt-user-1\"}", "d[\"data\"][\"token\"]");
    auth->persistSession("qt-user-1", QByteArray::fromStdString(token));
    CHECK(spinUntil([&] { return !seen.persisted.isEmpty(); }, 5000));
    CHECK(seen.persisted == "qt-user-1" && auth->isSignedIn());
    CHECK(auth->token() == QByteArray::fromStdString(token));

    QtAuth *second = makeAuth(seen);
    second->restoreSession();
    CHECK(spinUntil([&] { return !seen.restored.isEmpty(); }, 5000));
    CHECK_MSG(seen.restored == "qt-user-1", "restored %s", qPrintable(seen.restored));
    CHECK(second->token() == QByteArray::fromStdString(token));

    second->clearPersistedSession();
    CHECK(spinUntil([&] { return seen.cleared == 2; }, 5000));
    CHECK(!second->isSignedIn() && second->token().isEmpty());
    auth->restoreSession();
    CHECK(spinUntil([&] { return seen.nothing == 2; }, 5000));

    // A refused argument is reported as failed(), from the loop.
    auth->persistSession("", "x");
    CHECK(seen.failed == 0);
    CHECK(spinUntil([&] { return seen.failed == 1; }, 1000) && seen.lastStatus == PORTAL_ERR_INVALID_ARGUMENT);
    delete second;
    delete auth;
}

static void testMagicLink() {
    check_context = "magic link";
    Seen seen;
    QtAuth *auth = makeAuth(seen);
    CHECK(auth->setMagicLink("login@example.com", "template-1"));
    auth->sendMagicLink("qt@example.com");
    CHECK(spinUntil([&] { return seen.sent == 1 || seen.failed; }, 5000) && seen.sent == 1);
    const std::string link = admin("GET", "/_admin/magic-links", nullptr, "d[\"data\"][\"links\"][-1][\"link\"]");
    const std::string user = admin("GET", "/_admin/magic-links", nullptr, "d[\"data\"][\"links\"][-1][\"endUserId\"]");
    auth->handleRedirect(QString::fromStdString(link));
    CHECK(spinUntil([&] { return !seen.signedIn.isEmpty() || seen.failed; }, 5000));
    CHECK_MSG(seen.signedIn == QString::fromStdString(user), "signed in as '%s', link for '%s'", qPrintable(seen.signedIn),
              user.c_str());
    delete auth;
}

/* Writes the fake browser's file `name` in dir. */
static void putFile(const QString &dir, const char *name, const QByteArray &text) {
    QFile file(dir + "/" + name);
    CHECK(file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(text) == text.size());
}

/* The fake browser as GIO's http(s) handler in mode ("handler": it runs the URL handler's
 * process, portal-session handle-redirect, which stores a sign-in of `user`; "ignore": nothing). */
static QString browser(const char *mode, const char *user) {
    const QString dir = QString::fromUtf8(g_get_user_data_dir()) + "/portal-test-browser-qt";
    QDir().mkpath(dir);
    for (const char *name : {"opened", "redirect", "handler-status"}) QFile::remove(dir + "/" + name);
    putFile(dir, "mode", mode);
    putFile(dir, "env",
            QString("PORTAL_AUTH_ENVIRONMENT_ID='%1'\nPORTAL_REDIRECT_URL='%2'\nPORTAL_API_HOST='%3'\n"
                    "PORTAL_TEST_END_USER='%4'\nPORTAL_TEST_CLI='%5'\n"
                    "export PORTAL_AUTH_ENVIRONMENT_ID PORTAL_REDIRECT_URL PORTAL_API_HOST\n")
                .arg(kEnv, kRedirect, host(), user, getenv("PORTAL_TEST_CLI"))
                .toUtf8());
    fake_browser_register("portal-test-browser-qt.desktop", "Portal test browser (Qt)", dir.toUtf8().constData());
    return dir;
}

static void testDesktopSignIn() {
    check_context = "desktop sign-in";
    Seen seen;
    QtAuth *auth = makeAuth(seen);
    int failedOperation = -1;
    on(auth, &QtAuth::failed, [&failedOperation](QtAuth::Operation o, int, const QString &) { failedOperation = int(o); });
    // Signed out first: the URL handler's process refuses a sign-in of another end user over a
    // stored one (the replace-end-user confirmation).
    auth->clearPersistedSession();
    CHECK(spinUntil([&] { return seen.cleared == 1; }, 5000));

    auth->signInWithGoogle(900001); // over the C ABI's 15 minutes
    CHECK(spinUntil([&] { return seen.failed == 1; }, 5000));
    CHECK(seen.lastStatus == PORTAL_ERR_INVALID_ARGUMENT && failedOperation == int(QtAuth::Operation::SignInWithGoogle));
    auth->signInWithApple(-1);
    CHECK(spinUntil([&] { return seen.failed == 2; }, 5000));
    CHECK(seen.lastStatus == PORTAL_ERR_INVALID_ARGUMENT && failedOperation == int(QtAuth::Operation::SignInWithApple));

    // Completed by the URL handler's process: signedIn() with its end user, on the GUI thread.
    browser("handler", "qt-desktop-user");
    auth->signInWithGoogle(30000);
    CHECK(spinUntil([&] { return !seen.signedIn.isEmpty() || seen.failed > 2; }, 20000));
    CHECK_MSG(seen.signedIn == "qt-desktop-user", "signed in as '%s'", qPrintable(seen.signedIn));
    CHECK(auth->isSignedIn() && auth->endUserId() == "qt-desktop-user");
    auth->cancel(); // what is still waiting after a failed check

    // Cancelled while the page is open (the default timeout, 0): failed(CANCELLED) at once.
    const QString dir = browser("ignore", "qt-desktop-user");
    auth->signInWithApple();
    auto opened = [&dir] { // the URLs the browser was opened with, as far as written yet
        QFile file(dir + "/opened");
        return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
    };
    CHECK_MSG(spinUntil([&] { return opened().contains("apple"); }, 20000), "opened: '%s'", opened().constData());
    QElapsedTimer t;
    t.start();
    auth->cancel();
    CHECK(spinUntil([&] { return seen.failed == 3; }, 5000));
    CHECK_MSG(seen.lastStatus == PORTAL_ERR_CANCELLED && t.elapsed() < 1000, "status %d after %lld ms", seen.lastStatus,
              static_cast<long long>(t.elapsed()));
    auth->clearPersistedSession();
    CHECK(spinUntil([&] { return seen.cleared == 2; }, 5000));
    delete auth;
}

static void testInvalidated() {
    check_context = "401";
    Seen seen;
    QtAuth *auth = makeAuth(seen);
    const std::string token = admin("POST", "/_admin/sessions", "{\"endUserId\":\"qt-user-401\"}", "d[\"data\"][\"token\"]");
    auth->persistSession("qt-user-401", QByteArray::fromStdString(token));
    CHECK(spinUntil([&] { return !seen.persisted.isEmpty(); }, 5000));
    admin("POST", "/_admin/revoke", ("{\"token\":\"" + token + "\"}").c_str(), "d");

    auto *portal = new QtPortal(*auth);
    CHECK(portal->isValid());
    int invalidated = 0, finished = 0, failed = 0;
    on(portal, &QtPortal::invalidated, [&] { invalidated++; });
    on(portal, &QtPortal::finished, [&](int, const QByteArray &) { finished++; });
    on(portal, &QtPortal::failed, [&](int, const QString &) { failed++; });
    portal->request("GET", "/api/v3/clients/me");
    CHECK(spinUntil([&] { return invalidated >= 1 && finished + failed >= 1; }, 5000));
    portal->request("GET", "/api/v3/clients/me"); // the token is gone: fails, no second signal
    CHECK(spinUntil([&] { return finished + failed >= 2; }, 5000));
    spinFor(300);
    CHECK_MSG(invalidated == 1, "invalidated() emitted %d times", invalidated);
    auth->restoreSession();
    CHECK(spinUntil([&] { return seen.nothing == 1; }, 5000)); // the stored session was deleted
    delete portal;
    delete auth;
}

/* Runs this program as another process: --persist USER TOKEN or --clear. */
static void otherProcess(const QStringList &args) {
    QProcess p;
    p.start(QCoreApplication::applicationFilePath(), args);
    CHECK(spinUntil([&] { return p.state() == QProcess::NotRunning; }, 10000));
    CHECK_MSG(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, "%s: %s", qPrintable(args.join(' ')),
              p.readAllStandardError().constData());
}

static void testSessionChanged() {
    check_context = "sessionChanged";
    Seen seen;
    QtAuth *auth = makeAuth(seen);
    auth->startWatching();
    CHECK(spinUntil([&] { return !seen.changes.isEmpty(); }, 5000));
    CHECK(seen.changes.value(0) == QtAuth::SessionChange::Started);
    const std::string token = admin("POST", "/_admin/sessions", "{\"endUserId\":\"qt-other\"}", "d[\"data\"][\"token\"]");
    otherProcess({"--persist", "qt-other", QString::fromStdString(token)});
    CHECK(spinUntil([&] { return seen.changes.contains(QtAuth::SessionChange::SignedIn); }, 5000));
    CHECK_MSG(seen.changedUser == "qt-other", "signed in: '%s'", qPrintable(seen.changedUser));
    CHECK(seen.origins.value(seen.changes.indexOf(QtAuth::SessionChange::SignedIn)) == QtAuth::ChangeOrigin::OtherProcess);
    otherProcess({"--clear"});
    CHECK(spinUntil([&] { return seen.changes.contains(QtAuth::SessionChange::SignedOut); }, 5000));
    CHECK(seen.origins.value(seen.changes.indexOf(QtAuth::SessionChange::SignedOut)) == QtAuth::ChangeOrigin::OtherProcess);

    // This app's own sign-in and sign-out: the same events, with their origin this process (a UI
    // that shows "signed out in another window" checks it).
    seen.changes.clear();
    seen.origins.clear();
    const std::string own = admin("POST", "/_admin/sessions", "{\"endUserId\":\"qt-own\"}", "d[\"data\"][\"token\"]");
    auth->persistSession("qt-own", QByteArray::fromStdString(own));
    CHECK(spinUntil([&] { return seen.changes.contains(QtAuth::SessionChange::SignedIn); }, 5000));
    CHECK(seen.origins.value(seen.changes.indexOf(QtAuth::SessionChange::SignedIn)) == QtAuth::ChangeOrigin::ThisProcess);
    auth->clearPersistedSession();
    CHECK(spinUntil([&] { return seen.changes.contains(QtAuth::SessionChange::SignedOut); }, 5000));
    CHECK(seen.origins.value(seen.changes.indexOf(QtAuth::SessionChange::SignedOut)) == QtAuth::ChangeOrigin::ThisProcess);
    delete auth;
}

/* The calling thread's time spent runnable but not running, in ms (0 without schedstats). */
static qint64 runQueueDelayMs() {
    std::ifstream file("/proc/thread-self/schedstat");
    unsigned long long cpu = 0, delay = 0;
    return file >> cpu >> delay ? static_cast<qint64>(delay / 1000000) : 0;
}

static void testStoppedProvider() {
    check_context = "provider stopped";
    const pid_t provider = test_provider_pid();
    CHECK_MSG(provider > 0, "PORTAL_TEST_KEYRING_PID unset: run inside scripts/with-keyring.sh");
    if (provider <= 0) return;
    Seen seen, watched;
    QtAuth *auth = makeAuth(seen);
    // Each gap is judged less the time the GUI thread spent runnable but waiting for a CPU (the
    // scheduler's run-queue delay, /proc/thread-self/schedstat): on a loaded machine that delay is
    // the scheduler's, not this code's; a wait inside the loop (poll, a lock, a sleep) counts whole.
    QElapsedTimer clock;
    qint64 last = 0, lastDelay = 0, maxGap = 0, maxOwnGap = 0;
    const char *phase = "start", *maxPhase = "";
    QTimer timer;
    timer.setTimerType(Qt::PreciseTimer);
    QObject::connect(&timer, &QTimer::timeout, [&] {
        const qint64 now = clock.elapsed(), delay = runQueueDelayMs();
        const qint64 own = now - last - (delay - lastDelay);
        maxGap = std::max(maxGap, now - last);
        if (own > maxOwnGap) maxOwnGap = own, maxPhase = phase;
        last = now, lastDelay = delay;
    });
    timer.start(10);
    clock.start();
    spinFor(50);
    maxGap = maxOwnGap = 0;
    CHECK(kill(provider, SIGSTOP) == 0);
    phase = "restore";
    auth->restoreSession(); // waits out its 1500 ms call deadline on a worker
    QElapsedTimer took;
    took.start();
    CHECK(spinUntil([&] { return seen.failed == 1; }, 6000));
    CHECK_MSG(seen.lastStatus == PORTAL_ERR_SESSION_STORAGE, "status %d, wanted a storage failure (NOT signed out)", seen.lastStatus);
    printf("restore with the provider stopped: failed after %lld ms\n", static_cast<long long>(took.elapsed()));
    phase = "persist, cancel";
    auth->persistSession("qt-stopped", "token-stopped");
    spinFor(100);
    auth->cancel();
    took.restart();
    CHECK(spinUntil([&] { return seen.failed == 2; }, 1000) && seen.lastStatus == PORTAL_ERR_CANCELLED);
    printf("cancelled persist completed after %lld ms\n", static_cast<long long>(took.elapsed()));
    // A watch made, left on the hung baseline read, and destroyed; another kept until resumed.
    phase = "watches";
    QtAuth *dropped = makeAuth(watched);
    dropped->startWatching();
    spinFor(200);
    delete dropped;
    QtAuth *kept = makeAuth(watched);
    kept->startWatching();
    spinFor(300);
    CHECK(watched.changes.isEmpty());

    CHECK(kill(provider, SIGCONT) == 0);
    timer.stop();
    printf("largest timer gap with the provider stopped: %lld ms less run-queue delay (%s); %lld ms wall\n",
           static_cast<long long>(maxOwnGap), maxPhase, static_cast<long long>(maxGap));
    CHECK_MSG(maxOwnGap <= kGapMs, "the Qt loop stalled for %lld ms (bound %d ms)", static_cast<long long>(maxOwnGap), kGapMs);
    CHECK(spinUntil([&] { return watched.changes.contains(QtAuth::SessionChange::Started); }, 8000));
    CHECK_MSG(watched.changes.count() == 1, "the dropped watch emitted too (%lld events)",
              static_cast<long long>(watched.changes.count()));
    delete kept;
    delete auth;
}

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    if (args.size() > 1) { // the other process
        portal_keyring::auth auth(kEnv, kRedirect, host().toStdString());
        if (args[1] == "--persist" && args.size() == 4) auth.persist_session(args[2].toStdString(), args[3].toStdString());
        else if (args[1] == "--clear") auth.clear_persisted_session();
        else return 2;
        return 0;
    }
    printf("event dispatcher: %s\n", QCoreApplication::eventDispatcher()->metaObject()->className());
    testRestorePersistClear();
    testMagicLink();
    testDesktopSignIn();
    testInvalidated();
    testSessionChanged();
    testStoppedProvider();
    printf("%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
