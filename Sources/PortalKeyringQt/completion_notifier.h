// completion_notifier.h — private: the one place where the C ABI's pollable completion queue meets
// Qt's event loop. Every QtAuth and QtPortal owns one, as a child, on its own thread.
#ifndef PORTAL_KEYRING_QT_COMPLETION_NOTIFIER_H
#define PORTAL_KEYRING_QT_COMPLETION_NOTIFIER_H

#include <portal_keyring_async.hpp>

#include <QObject>
#include <QSocketNotifier>
#include <QString>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

namespace PortalKeyring {

namespace pk = portal_keyring;

/**
 * A pollable portal_completion_queue watched by a QSocketNotifier on its fd: when completions are
 * ready the notifier fires on this object's thread and dispatch() runs them there. The notifier is
 * disabled while they run (a callback may start operations or run a nested loop) and enabled again
 * afterwards. Never waits: the blocking work runs on the library's worker threads.
 *
 * It also keeps the operations it started, so that cancelAll() (and destruction) cancels them; a
 * freed queue drops what still completes, so no callback runs after the owner is gone.
 */
class CompletionNotifier final : public QObject {
public:
    explicit CompletionNotifier(QObject *parent);
    ~CompletionNotifier() override;

    const pk::completion_queue &queue() const noexcept { return queue_; }

    /**
     * Starts one operation: call(queue, callback) is a portal_keyring_async.hpp call. done runs on
     * this thread with the result; refused arguments (pk::error thrown by the call) reach refused
     * from the event loop, never before the caller's call returned.
     */
    template <typename T, typename Call>
    void start(Call call, std::function<void(pk::result<T>)> done, std::function<void(int, const QString &)> refused) {
        auto id = std::make_shared<std::uint64_t>(0);
        try {
            pk::operation op = call(queue_, [this, id, done = std::move(done)](pk::result<T> r) {
                running_.erase(*id);
                done(std::move(r));
            });
            *id = op.id();
            running_.emplace(*id, std::move(op));
        } catch (const pk::error &e) {
            refuseLater(std::move(refused), e.code(), QString::fromStdString(e.message()));
        }
    }

    /** Runs f(status, message) from the event loop (a refusal is reported like a completion). */
    void refuseLater(std::function<void(int, const QString &)> f, int status, const QString &message);

    /** Cancels every running operation: each completes with PORTAL_ERR_CANCELLED, later. */
    void cancelAll();

private:
    void dispatch();

    pk::completion_queue queue_;   // freed last: the notifier below watches its fd
    QSocketNotifier notifier_;
    std::unordered_map<std::uint64_t, pk::operation> running_;
};

} // namespace PortalKeyring

#endif
