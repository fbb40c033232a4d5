// sign_in_window.h — the example's one window: the sign-in screen (a magic link, then a TOTP code
// when the end user has one) or "Signed in as …" with Check and Sign out. No Q_OBJECT: it only
// connects lambdas, so the app needs no moc of its own.
#ifndef SIGN_IN_WINDOW_H
#define SIGN_IN_WINDOW_H

#include <portal_keyring_qt_auth.h>
#include <portal_keyring_qt_portal.h>

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QStackedWidget>
#include <QWidget>

class SignInWindow : public QWidget {
public:
    explicit SignInWindow(QWidget *parent = nullptr);

    /** The redirect URL the app was opened with (the emailed link). */
    void openRedirect(const QString &url);
    // What the test driver presses (the same as a click).
    void sendLink(const QString &email);
    void enterCode(const QString &code);
    void check();
    void signOut();

private:
    void showSignIn(const QString &reason);
    void showSignedIn(const QString &endUserId);
    void say(const QString &state);

    PortalKeyring::QtAuth *auth_;
    PortalKeyring::QtPortal *portal_ = nullptr;
    QStackedWidget *pages_;
    QLabel *status_, *user_;
    QLineEdit *email_, *code_;
    QPushButton *send_, *verify_, *check_, *signOut_;
};

#endif
