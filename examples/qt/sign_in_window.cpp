// sign_in_window.cpp — see sign_in_window.h.
#include "sign_in_window.h"

#include <QVBoxLayout>

#include <cstdio>

using PortalKeyring::QtAuth;
using PortalKeyring::QtPortal;

static QString env(const char *name, const char *fallback = "") {
    return QString::fromUtf8(qEnvironmentVariableIsSet(name) ? qgetenv(name) : QByteArray(fallback));
}

SignInWindow::SignInWindow(QWidget *parent)
    : QWidget(parent),
      auth_(new QtAuth(env("PORTAL_AUTH_ENVIRONMENT_ID"), "org.example.PortalKeyringQt://auth", env("PORTAL_API_HOST"), this)),
      pages_(new QStackedWidget), status_(new QLabel), user_(new QLabel), email_(new QLineEdit), code_(new QLineEdit),
      send_(new QPushButton("Email me a sign-in link")), verify_(new QPushButton("Verify")),
      check_(new QPushButton("Check with Portal")), signOut_(new QPushButton("Sign out")) {
    setWindowTitle("Portal Keyring (Qt)");
    auto *signIn = new QWidget, *totp = new QWidget, *signedIn = new QWidget;
    auto *a = new QVBoxLayout(signIn);
    a->addWidget(new QLabel("<h2>Sign in</h2>"));
    email_->setPlaceholderText("you@example.com");
    a->addWidget(email_);
    a->addWidget(send_);
    auto *b = new QVBoxLayout(totp);
    b->addWidget(new QLabel("<h2>Two-factor code</h2>"));
    b->addWidget(code_);
    b->addWidget(verify_);
    auto *c = new QVBoxLayout(signedIn);
    c->addWidget(user_);
    c->addWidget(check_);
    c->addWidget(signOut_);
    for (QWidget *page : {signIn, totp, signedIn}) pages_->addWidget(page);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(pages_);
    status_->setWordWrap(true);
    layout->addWidget(status_);

    if (!env("PORTAL_MAGIC_LINK_FROM").isEmpty())
        auth_->setMagicLink(env("PORTAL_MAGIC_LINK_FROM"), env("PORTAL_MAGIC_LINK_TEMPLATE"));
    connect(send_, &QPushButton::clicked, this, [this] { auth_->sendMagicLink(email_->text().trimmed()); });
    connect(verify_, &QPushButton::clicked, this, [this] { auth_->verifyTotp(code_->text().trimmed()); });
    connect(check_, &QPushButton::clicked, this, [this] { if (portal_) portal_->request("GET", "/api/v3/clients/me"); });
    connect(signOut_, &QPushButton::clicked, auth_, &QtAuth::clearPersistedSession);

    connect(auth_, &QtAuth::restored, this, &SignInWindow::showSignedIn);
    connect(auth_, &QtAuth::signedIn, this, &SignInWindow::showSignedIn);
    connect(auth_, &QtAuth::nothingStored, this, [this] { showSignIn({}); });
    connect(auth_, &QtAuth::cleared, this, [this] { showSignIn("Signed out."); });
    connect(auth_, &QtAuth::magicLinkSent, this, [this](const QString &email) {
        status_->setText("We emailed a sign-in link to " + email + ".");
        say("sent " + email);
    });
    connect(auth_, &QtAuth::totpRequired, this, [this] {
        pages_->setCurrentIndex(1);
        say("totp");
    });
    connect(auth_, &QtAuth::failed, this, [this](QtAuth::Operation op, int status, const QString &message) {
        // A storage failure is not "signed out": the keyring could not be read this time.
        status_->setText(status == PORTAL_ERR_SESSION_STORAGE ? "The keyring is not available: " + message : message);
        say(QString("failed %1 %2").arg(int(op)).arg(status));
    });
    connect(auth_, &QtAuth::sessionChanged, this, [this](QtAuth::SessionChange change, const QString &, QtAuth::ChangeOrigin origin) {
        if (change == QtAuth::SessionChange::SignedOut && origin == QtAuth::ChangeOrigin::OtherProcess)
            showSignIn("Signed out in another window.");
        if (change == QtAuth::SessionChange::SignedIn && pages_->currentIndex() != 2) auth_->restoreSession();
        // The keyring answers again after a stall: learn the state without a Reload press.
        if (change == QtAuth::SessionChange::Available) auth_->restoreSession();
    });
    auth_->startWatching();
    auth_->restoreSession();
}

void SignInWindow::openRedirect(const QString &url) { auth_->handleRedirect(url); }
void SignInWindow::sendLink(const QString &email) { email_->setText(email), send_->click(); }
void SignInWindow::enterCode(const QString &code) { code_->setText(code), verify_->click(); }
void SignInWindow::check() { check_->click(); }
void SignInWindow::signOut() { signOut_->click(); }

void SignInWindow::showSignIn(const QString &reason) {
    delete portal_;
    portal_ = nullptr;
    pages_->setCurrentIndex(0);
    status_->setText(reason);
    say("sign-in " + reason);
}

void SignInWindow::showSignedIn(const QString &endUserId) {
    user_->setText("<h2>Signed in as " + endUserId.toHtmlEscaped() + "</h2>");
    pages_->setCurrentIndex(2);
    status_->clear();
    delete portal_;
    // Validates the session in the background; a 401 (here or on Check) ends it.
    portal_ = new QtPortal(*auth_, this);
    connect(portal_, &QtPortal::invalidated, this, [this] { showSignIn("Your session ended. Please sign in again."); });
    connect(portal_, &QtPortal::finished, this, [this](int http, const QByteArray &) {
        status_->setText(QString("Portal answered %1.").arg(http));
        say(QString("checked %1").arg(http));
    });
    say("signed-in " + endUserId);
}

void SignInWindow::say(const QString &state) {
    std::printf("state: %s\n", qPrintable(state.trimmed()));
    std::fflush(stdout);
}
