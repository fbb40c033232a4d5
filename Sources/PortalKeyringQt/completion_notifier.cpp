// completion_notifier.cpp — see completion_notifier.h.
#include "completion_notifier.h"

#include <QMetaObject>
#include <QPointer>

namespace PortalKeyring {

CompletionNotifier::CompletionNotifier(QObject *parent)
    : QObject(parent), queue_(pk::completion_queue::pollable()), notifier_(queue_.fd(), QSocketNotifier::Read) {
    connect(&notifier_, &QSocketNotifier::activated, this, &CompletionNotifier::dispatch);
}

CompletionNotifier::~CompletionNotifier() {
    // Cancel first (their completions are then dropped with the queue), stop watching the fd
    // before the queue closes it.
    running_.clear();
    notifier_.setEnabled(false);
}

void CompletionNotifier::dispatch() {
    // A completion's slot may delete the owner (and so this object): touch nothing after that.
    QPointer<CompletionNotifier> alive(this);
    notifier_.setEnabled(false);
    queue_.dispatch();
    if (alive) notifier_.setEnabled(true);
}

void CompletionNotifier::refuseLater(std::function<void(int, const QString &)> f, int status, const QString &message) {
    QMetaObject::invokeMethod(this, [f = std::move(f), status, message] { f(status, message); }, Qt::QueuedConnection);
}

void CompletionNotifier::cancelAll() {
    for (auto &entry : running_) entry.second.cancel();
}

} // namespace PortalKeyring
