/*
 * main.cpp — a Qt Widgets app over PortalKeyring::QtAuth / QtPortal (docs/qt.md): it restores the
 * session on launch and shows "Signed in as …" with Sign out, or the sign-in screen (a magic link,
 * then a TOTP code when asked); a 401 or another process's sign-out brings the sign-in screen back.
 *
 *   PORTAL_AUTH_ENVIRONMENT_ID=… PORTAL_MAGIC_LINK_FROM=… PORTAL_MAGIC_LINK_TEMPLATE=… portal-keyring-qt-example [URL]
 *
 * URL: the emailed link (the desktop opens the app's redirect URL with it). Lines on stdin drive
 * it as a user would (Tests/qt/qt_example_test.sh): "email ADDRESS", "open URL", "code DIGITS",
 * "check", "sign-out", "screenshot FILE.png", "quit"; it reports each new state as "state: …".
 */
#include "sign_in_window.h"

#include <QApplication>
#include <QSocketNotifier>
#include <QTextStream>

#include <unistd.h>

int main(int argc, char **argv) {
    QApplication app(argc, argv);
    SignInWindow window;
    window.resize(360, 240);
    window.show();
    if (app.arguments().size() > 1) window.openRedirect(app.arguments().at(1));

    QSocketNotifier input(STDIN_FILENO, QSocketNotifier::Read);
    QObject::connect(&input, &QSocketNotifier::activated, &app, [&] {
        char buffer[8192];
        const ssize_t n = read(STDIN_FILENO, buffer, sizeof buffer - 1);
        if (n <= 0) return input.setEnabled(false);
        for (const QString &line : QString::fromUtf8(buffer, n).split('\n', Qt::SkipEmptyParts)) {
            const QString word = line.section(' ', 0, 0), arg = line.section(' ', 1);
            if (word == "email") window.sendLink(arg);
            else if (word == "open") window.openRedirect(arg);
            else if (word == "code") window.enterCode(arg);
            else if (word == "check") window.check();
            else if (word == "sign-out") window.signOut();
            else if (word == "screenshot") std::printf("state: screenshot %s\n", window.grab().save(arg) ? "saved" : "failed");
            else if (word == "quit") app.quit();
            std::fflush(stdout);
        }
    });
    return app.exec();
}
