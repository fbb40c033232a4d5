/* async_test: the keyring does not answer: a stopped provider, an unanswered unlock prompt. */
#include "async_test.h"
#include "../provider_pid.h"

/* (b) the provider stopped: the call deadline ends the restore; the loop keeps running. */
void test_provider_stopped(void) {
    pid_t pid = test_provider_pid();
    if (pid <= 0) {
        CHECK(!"neither PORTAL_TEST_KEYRING_DIR/keyring.pid nor PORTAL_TEST_KEYRING_PID names the daemon");
        return;
    }
    portal_auth *auth = new_auth(1000, 1500);
    probe restored;
    probe_init(&restored);
    CHECK(kill(pid, SIGSTOP) == 0);
    gap_reset();
    gint64 start = g_get_monotonic_time();
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &restored, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&restored.destroyed, 1, 10000));
    kill(pid, SIGCONT);
    printf("restore with the provider stopped completed after %.0f ms: %s\n", (restored.at - start) / 1000.0,
           restored.message);
    expect_once(&restored, PORTAL_ERR_SESSION_STORAGE, "did not answer", "restore with the provider stopped");
    gap_report("provider SIGSTOPped");
    portal_auth_free(auth);
}

/* (a) an unlock prompt nobody answers: the prompt deadline, and cancellation in the middle. */
void test_unanswered_prompt(void) {
    char command[1024];
    portal_auth *auth = new_auth(5000, 1500);
    portal_session *kept = NULL;
    CHECK(portal_auth_persist_session(auth, "user-before", "token-before", &kept) == PORTAL_OK);
    portal_session_free(kept);
    snprintf(command, sizeof command, "%s stuck-prompter >/dev/null 2>&1 & echo $! > prompter.pid", kctl);
    char dir[] = "/tmp/async-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(chdir(dir) == 0);
    CHECK(sh(command) == 0);
    usleep(500000); /* the prompter owns its name */
    snprintf(command, sizeof command, "%s lock", kctl);
    CHECK(sh(command) == 0);

    probe restored;
    probe_init(&restored);
    gap_reset();
    gint64 start = g_get_monotonic_time();
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &restored, on_destroy, NULL) == PORTAL_OK);
    CHECK(run_until(&restored.destroyed, 1, 15000));
    printf("restore behind an unanswered unlock prompt completed after %.0f ms: %s\n", (restored.at - start) / 1000.0,
           restored.message);
    expect_once(&restored, PORTAL_ERR_SESSION_STORAGE, "not answered within 1500 ms", "restore behind a prompt");
    gap_report("unanswered unlock prompt");

    /* Cancel in the middle of the (same, still open) prompt: CANCELLED at once, exactly once. */
    probe cancelled;
    probe_init(&cancelled);
    uint64_t op = 0;
    gap_reset();
    CHECK(portal_auth_restore_session_async(auth, NULL, on_done, &cancelled, on_destroy, &op) == PORTAL_OK);
    run_for(400);
    CHECK(cancelled.calls == 0); /* still waiting on the prompt */
    gint64 cancel_at = g_get_monotonic_time();
    CHECK(portal_operation_cancel(op) == PORTAL_OK);
    CHECK(portal_operation_cancel(op) == PORTAL_OK); /* a second cancel is ignored */
    CHECK(run_until(&cancelled.destroyed, 1, 5000));
    printf("cancelled restore completed %.1f ms after the cancel\n", (cancelled.at - cancel_at) / 1000.0);
    CHECK(cancelled.at - cancel_at < 200 * 1000);
    run_for(2500); /* past the prompt deadline: the worker's own end must not complete it again */
    expect_once(&cancelled, PORTAL_ERR_CANCELLED, "cancelled", "restore cancelled during the prompt");
    CHECK(cancelled.session == NULL);
    gap_report("cancel during a prompt");

    /* A persist cancelled during the prompt leaves the previous session intact. */
    probe persist;
    probe_init(&persist);
    CHECK(portal_auth_persist_session_async(auth, "user-after", "token-after", NULL, on_done, &persist, on_destroy, &op) ==
          PORTAL_OK);
    run_for(300);
    CHECK(portal_operation_cancel(op) == PORTAL_OK);
    CHECK(run_until(&persist.destroyed, 1, 5000));
    run_for(2000);
    expect_once(&persist, PORTAL_ERR_CANCELLED, "cancelled", "persist cancelled during the prompt");

    CHECK(sh("kill $(cat prompter.pid)") == 0);
    snprintf(command, sizeof command, "%s unlock", kctl);
    CHECK(sh(command) == 0);
    portal_session *after = NULL;
    CHECK(portal_auth_restore_session(auth, &after) == PORTAL_OK);
    CHECK(after && strcmp(portal_session_get_end_user_id(after), "user-before") == 0);
    portal_session_free(after);
    CHECK(portal_auth_clear_persisted_session(auth) == PORTAL_OK);
    unlink("prompter.pid");
    CHECK(chdir("/") == 0);
    rmdir(dir);
    portal_auth_free(auth);
}
